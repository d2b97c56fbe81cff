"""Shared test set-up: which tests are slow, a fresh garbage collector policy for each test, and pytest's header.

Two commands (``pyproject.toml`` registers the ``slow`` marker):

* ``python -m pytest -q`` runs every test (the README's command and ``.ci/run``);
* ``python -m pytest -q -m "not slow"`` is the fast loop: the engine, loader, lint and AppTest layers, with every
  golden case.

A test is slow when it takes seconds for a reason outside those layers. It starts another program (a ``streamlit
run`` server, Chromium, a local Ray cluster, a child Python process that imports the engine). Or it feeds many
corrupted or hostile inputs (fuzzing, the red team, the hostile-input modules below). Or it builds a run far
bigger than the samples (6,000 trajectories). The step sweep (``tests/test_steps.py``) keeps every estimator in
the fast loop but only the default profile.

Whole modules are listed once, here (``SLOW_MODULES``), with why and what they cost. A module that is mostly fast
marks its few slow tests itself (``@pytest.mark.slow  # why (seconds)``). Seconds are from a full run on the
2-core machine.

No test depends on the order it runs in: ``--random-order`` (pytest-random-order) shuffles them. State the process
keeps across tests is reset before each one here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_utils import GOLDEN_DIR, extra_golden_dirs

from dashboard import collector

# The modules the fast loop leaves out, with why (seconds: the module's total in a full run on the 2-core machine).
SLOW_MODULES = {
    "test_browser": "Chromium against a streamlit server, every page (170 s)",
    "test_browser_compare": "Chromium against a streamlit server (30 s)",
    "test_browser_markdown": "Chromium against a streamlit server, every page (40 s)",
    "test_multiuser": "eight Chromium sessions on one server (90 s)",
    "test_ray": "a local Ray cluster, workers killed on purpose (55 s)",
    "test_fuzz_loaders": "thousands of corrupted files through every loader (120 s)",
    "test_fuzz_readers": "thousands of corrupted files through every trainer reader (35 s)",
    "test_redteam": "every hostile input family in memory-limited worker processes, hangs included (50 s)",
    "test_hostile_tokenizer": "each test builds the real tokenizer from its vocabulary, some in child processes (41 s)",
    "test_hostile_bombs": "decompression bombs and 50 MB records, one in a memory-limited child (6 s)",
    "test_hostile_structure_traces_text": "traces of 10,000-100,000 nodes and long hostile texts (12 s)",
}
TESTS = Path(__file__).resolve().parent


def pytest_report_header(config) -> list[str]:
    """Which golden directories this run reads (the bundled one, and any extra ones)."""
    extra = extra_golden_dirs()
    return [f"golden files: {GOLDEN_DIR}" + (f" + extra: {', '.join(map(str, extra))}" if extra else "")]


def pytest_configure(config) -> None:
    """A renamed module must not leave the fast loop's exclusions silently."""
    missing = [name for name in SLOW_MODULES if not (TESTS / f"{name}.py").is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py: SLOW_MODULES names no file: {', '.join(missing)}")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test of a module in ``SLOW_MODULES`` as slow."""
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def fresh_collector() -> None:
    """Each test starts with the garbage collector policy of a server that has just started (no idle collector
    thread, no page run counted): the every-16th-run collection and the idle one fall where the test itself puts
    them, never where earlier tests left the count or a thread they started."""
    collector.reset()
