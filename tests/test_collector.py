"""The server's garbage collection policy (``dashboard/collector.py``): Streamlit's full collection after every
page run is off, and cyclic garbage is collected when the server is idle, every ``EVERY_RUNS`` page runs, and
before a big allocation."""

from __future__ import annotations

import gc
import time
import tomllib
import weakref
from pathlib import Path

import pytest

from dashboard import collector

ROOT = Path(__file__).resolve().parent.parent


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def garbage_cycle() -> weakref.ref:
    return weakref.ref(Node())


@pytest.fixture
def no_automatic_gc():
    """Python's own generational collection off, so only the policy under test can free the cycles."""
    was = gc.isenabled()
    gc.disable()
    collector.collect()  # start from a clean count
    yield
    if was:
        gc.enable()


def test_streamlit_does_not_collect_after_every_run() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False


def test_every_nth_page_run_collects(no_automatic_gc) -> None:
    ref = garbage_cycle()
    n = collector.collections()
    for _ in range(collector.EVERY_RUNS - 1):
        collector.page_run_ended()
    assert ref() is not None and collector.collections() == n  # not yet: fewer runs than EVERY_RUNS
    collector.page_run_ended()
    assert ref() is None and collector.collections() == n + 1


def test_the_idle_thread_collects_once_page_runs_stop(no_automatic_gc) -> None:
    assert collector.start(idle=0.2) is not None
    try:
        ref = garbage_cycle()
        n = collector.collections()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.5:  # page runs every 50 ms: never idle for 0.2 s
            collector.page_run_ended()
            time.sleep(0.05)
        assert ref() is not None and collector.collections() == n
        deadline = time.monotonic() + 5
        while collector.collections() == n and time.monotonic() < deadline:  # counted after the collection
            time.sleep(0.02)
        assert ref() is None and collector.collections() == n + 1
        time.sleep(0.5)
        assert collector.collections() == n + 1  # idle again, nothing ended since: no further collection
    finally:
        collector.reset()  # the thread ends with this test


def test_a_big_computation_collects_first(no_automatic_gc, monkeypatch) -> None:
    from dashboard import loading, services
    from dashboard.sources import RunRef
    from engine.config import CreditConfig

    handle = loading.open_run(RunRef("sample", "python_tool_two_rollouts"), {})
    services.batch(handle)  # built (and collected before) here, not in the computation below
    monkeypatch.setattr(services, "COLLECT_BEFORE_BYTES", 0)  # every result counts as big
    ref = garbage_cycle()
    n = collector.collections()
    services.compute(handle, CreditConfig(estimator="grpo", lam=0.123))  # a scheme no other test has cached
    assert ref() is None and collector.collections() == n + 1


def test_a_sample_run_is_opened_without_a_collection(no_automatic_gc) -> None:
    """Only big files and runs collect first: on a fresh server a collection before the default sample's load
    walked every imported library ahead of the first page."""
    from dashboard import loading, services
    from dashboard.sources import RunRef

    n = collector.collections()
    handle = loading.open_run(RunRef("sample", "kgqa_multiturn"), {})
    services.batch(handle)
    assert collector.collections() == n


def test_a_big_file_is_read_after_a_collection(no_automatic_gc) -> None:
    """The load's size decides: the same small sample file read as if it were 32 MB collects first."""
    from dashboard import loading, sources

    path = str(sources.sample_path("python_tool_two_rollouts"))
    n = collector.collections()
    loading.read_run(path, size=loading.COLLECT_BEFORE_LOAD_BYTES - 1)
    assert collector.collections() == n
    ref = garbage_cycle()
    loading.read_run(path, size=loading.COLLECT_BEFORE_LOAD_BYTES)
    assert ref() is None and collector.collections() == n + 1


def test_reset_is_a_server_that_has_just_started() -> None:
    """What tests start from (``tests/conftest.py``): the idle thread stopped, the page runs counted from zero."""
    thread = collector.start(idle=0.2)
    collector.page_run_ended()
    collector.collect()
    collector.reset()
    assert not thread.is_alive() and collector.collections() == 0
    for _ in range(collector.EVERY_RUNS - 1):
        collector.page_run_ended()
    assert collector.collections() == 0  # the runs before the reset do not count towards the next collection
    again = collector.start()
    try:
        assert again is not thread and again.is_alive()
    finally:
        collector.reset()
