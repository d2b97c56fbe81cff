"""pytest's header says which golden directories this run reads (the bundled one, and any extra ones)."""

from golden_utils import GOLDEN_DIR, extra_golden_dirs


def pytest_report_header(config) -> list[str]:
    extra = extra_golden_dirs()
    return [f"golden files: {GOLDEN_DIR}" + (f" + extra: {', '.join(map(str, extra))}" if extra else "")]
