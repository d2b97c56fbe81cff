"""When the server collects cyclic garbage: while nobody waits for a page, not at the end of every page run.

Streamlit runs a full collection (``gc.collect(2)``) after every script run (``runner.postScriptGC``). Its cost
grows with everything alive in the server: the warm-up freezes the libraries out of it
(``warmup.freeze_imports``), but the transformers tokenizer loaded later, the shared figure cache (Plotly figures
are large object graphs) and the sessions' state are walked on every page run. A warm token view render cost
34 ms of server CPU on a fresh server, 46 ms once the tokenizer was loaded and 59 ms once 16 trajectories had been
viewed (64 × 2,048 run, one browserless session), all of it holding the GIL while other sessions waited.

``.streamlit/config.toml`` turns Streamlit's per-run collection off and this module collects instead:

* when the server is idle: ``IDLE_S`` after the last page run ended, if a page run ended since the last
  collection (a background thread, ``start``);
* under sustained load, at the end of every ``EVERY_RUNS``-th page run, so garbage never piles up;
* before a big file is loaded and before a whole-run result of ``services.COLLECT_BEFORE_BYTES`` or more is
  computed (``services`` calls ``collect``): a page run's garbage can hold the last big result (its namespace
  refers to it) after the byte budget has dropped it, and collecting first keeps the two from being alive at once.

It is also where the server knows when the last page run ended (``idle_seconds``: the warm-up waits on it too).

A full collection walks every object alive: ~25 ms on the 64 × 2,048 run, 0.4 s with a 50,000-trajectory run
loaded (whose trajectories are Python objects), which Streamlit's per-run collection paid after every page run.

Python's own generational collection still runs as always; only the forced full walk per page run is gone.
"""

from __future__ import annotations

import gc
import os
import threading
import time

IDLE_S = 0.5
EVERY_RUNS = 16
ENV = "CREDITLENS_IDLE_GC"  # "0": no background thread (the every-N-runs and big-allocation collections stay)

_lock = threading.Lock()
_ended = threading.Condition(_lock)
_runs_since = 0  # page runs ended since the last collection
_last_end = time.monotonic()  # of the last page run's end (of the server's start before any)
_collections = 0
_idle_s = IDLE_S
_thread: threading.Thread | None = None


def collect() -> int:
    """A full collection now; returns the number of unreachable objects found."""
    global _runs_since, _collections
    found = gc.collect()
    with _lock:
        _runs_since = 0
        _collections += 1
    return found


def page_run_ended() -> None:
    """Called at the end of every page run: collects at once every ``EVERY_RUNS`` runs, else wakes the idle
    collector."""
    global _runs_since, _last_end
    with _lock:
        _runs_since += 1
        _last_end = time.monotonic()
        due = _runs_since >= EVERY_RUNS
        _ended.notify()
    if due:
        collect()


def idle_seconds() -> float:
    """Seconds since the last page run ended (since the server started, before any)."""
    return time.monotonic() - _last_end


def collections() -> int:
    """How many collections this module has run (for tests)."""
    return _collections


def reset() -> None:
    """Back to a server that has just started: no idle collector thread (one running is stopped, after the
    collection it may be in), no page run since the last collection, the last one ended now, none collected.
    The state is the process's, so tests start from here (``tests/conftest.py``): else the ``EVERY_RUNS``-th
    page run's collection, or an idle collection, falls on whichever test the earlier ones left it to."""
    global _runs_since, _last_end, _collections, _idle_s, _thread
    with _lock:
        thread, _thread = _thread, None
        _ended.notify_all()
    if thread is not None:
        thread.join()
    with _lock:
        _runs_since = 0
        _last_end = time.monotonic()
        _collections = 0
        _idle_s = IDLE_S


def _idle_loop() -> None:
    me = threading.current_thread()
    while True:
        with _lock:
            while _runs_since == 0 and _thread is me:
                _ended.wait()
            if _thread is not me:  # stopped by ``reset``
                return
            wait = _idle_s - idle_seconds()
            if wait > 0:  # a page run ended less than ``idle`` ago: look again when it may be idle
                _ended.wait(wait)
                continue
        collect()


def start(idle: float = IDLE_S) -> threading.Thread | None:
    """Start the idle collector (a daemon thread; one at a time, a later call only sets ``idle``); None when
    ``CREDITLENS_IDLE_GC=0``."""
    global _thread, _idle_s
    if os.environ.get(ENV, "1") == "0":
        return None
    with _lock:
        _idle_s = idle
        if _thread is None:
            _thread = threading.Thread(target=_idle_loop, name="creditlens-gc", daemon=True)
            _thread.start()
    return _thread
