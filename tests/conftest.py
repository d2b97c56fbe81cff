"""Shared test set-up: a fresh garbage collector policy for each test, and pytest's header.

No test depends on the order it runs in. State the process keeps across tests is reset before each one here.
"""

from __future__ import annotations

import pytest
from golden_utils import GOLDEN_DIR, extra_golden_dirs

from dashboard import collector


def pytest_report_header(config) -> list[str]:
    """Which golden directories this run reads (the bundled one, and any extra ones)."""
    extra = extra_golden_dirs()
    return [f"golden files: {GOLDEN_DIR}" + (f" + extra: {', '.join(map(str, extra))}" if extra else "")]


@pytest.fixture(autouse=True)
def fresh_collector() -> None:
    """Each test starts with the garbage collector policy of a server that has just started (no idle collector
    thread, no page run counted): the every-16th-run collection and the idle one fall where the test itself puts
    them, never where earlier tests left the count or a thread they started."""
    collector.reset()
