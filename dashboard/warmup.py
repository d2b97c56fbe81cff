"""Warm the server up while it starts: import the engine and compute the landing view before anyone asks.

``streamlit run app.py`` finds ``app.py``'s ``st.App`` and serves it; its lifespan (``lifespan`` below) starts
one background thread that imports torch, pandas and plotly and fills the shared caches with exactly what a new
session's first page run reads: the default sample, its batch, the default scheme's result and the token view
of its first trajectory. The first browser session then finds them computed (or waits on the same cache entry
instead of computing it twice). Without the warm-up (AppTest, ``CREDITLENS_WARMUP=0``) nothing changes but the
first page run's time. Failures are logged and otherwise ignored: the session computes what it needs itself.

On the 2-core machine the server, its imports and the browser share, the first paint is CPU-bound, so the
warm-up does as little as it can before it: imports and the landing view run with the cyclic garbage collector
paused (torch and pandas allocate millions of objects: imports 1.5 s → 1.1 s, the view 0.3 s → 0.16 s), torch
does not search installed packages for out-of-tree device backends (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, unless
set), and Plotly's first figure is built only after the first page run has ended (the landing view draws none).
It starts when the server is about to listen, not when app.py is imported: started at the import it slowed the
server's own start-up by ~0.4 s, and the first paint with it (8 interleaved cold starts: median 4.2 s, not 3.7 s).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time

from streamlit.logger import get_logger

from dashboard import collector  # light (gc, threading): no engine import

LOG = get_logger("creditlens.warmup")  # Streamlit's handler and level: the server's log shows it
NAME = "creditlens-warmup"
ENV = "CREDITLENS_WARMUP"  # "0" turns the warm-up off
IMPORT_WAIT_S = 120
FIRST_PAGE_WAIT_S = 30  # Plotly's first figure waits this long at most for the first page run to end
# The default tokenizer is loaded in two steps, each once no page run has ended for a while (someone reading a
# page, not clicking), or after TOKENIZER_MAX_WAIT_S at the latest. First its ``tokenizers`` backend, all the
# Diagnostics page needs (~0.5 s, holding the GIL: a click during it waits at most that long), after
# BACKEND_IDLE_S; before, a Diagnostics visit in a server's first minute paid it (1.2-1.3 s instead of
# 0.3 s). Then the ``transformers`` tokenizer that loaders filling in ids or text use, after TOKENIZER_IDLE_S:
# its import holds the GIL for seconds (64 x 2,048 run, the benchmark clicking on: the first trajectory change
# took 2.9 s, not 0.8 s, with a 2 s threshold). Whatever is not loaded yet is loaded by the first page that
# needs it.
BACKEND_IDLE_S = 1.0
TOKENIZER_IDLE_S = 5.0
TOKENIZER_MAX_WAIT_S = 60.0
# Set once the warm-up thread has imported the engine and the dashboard. Until then a page run waits for it
# (``wait_for_imports``): importing the same modules from two threads at once can hand one of them a module
# still being filled in (the estimator registry seen empty: "CreditConfig.estimator: 'grpo' is not one of []").
_imported = threading.Event()
_first_page_done = threading.Event()
_thread: threading.Thread | None = None


def landing_view():
    """(run handle, scheme, trajectory index) of a new session's first page: the default sample under the
    sidebar's default scheme as the sidebar fits it to the run, trajectory 0."""
    from dashboard import loading, services, state
    from dashboard.sources import DEFAULT_SAMPLE, RunRef
    from engine.config import CreditConfig

    handle = loading.open_run(RunRef("sample", DEFAULT_SAMPLE), {})
    info = services.run_info(handle)
    values = {f: getattr(state.DEFAULT_SCHEME, f) for f in state.CFG_FIELDS}
    values.update(state.fit_scheme(values, info, [e.name for e in services.available_estimators(info)]))
    cfg = services.effective_config(info, CreditConfig(**values), values["value_source"])
    return handle, cfg, 0


@contextlib.contextmanager
def _gc_paused():
    """The cyclic garbage collector off for the block: imports and the first tables make millions of objects
    that live as long as the process, and each collection would walk them all again."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _import_all() -> None:
    """Everything a page run imports: the engine (torch), the loader, the dashboard (pandas, plotly)."""
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # CreditLens uses no out-of-tree backend
    import engine  # noqa: F401 - registers every estimator
    import engine.io  # noqa: F401
    from dashboard import services, sidebar, state, widgets  # noqa: F401
    from dashboard.figures import analytics, compare, designer, groups, overview, tokens  # noqa: F401


def importing() -> bool:
    """Whether a warm-up is still importing the engine (a page run that starts now will wait for it)."""
    return _thread is not None and _thread.is_alive() and not _imported.is_set()


def wait_for_imports() -> None:
    """Block until a running warm-up has done its imports (at once when there is none, or it failed)."""
    if importing() and not _imported.wait(IMPORT_WAIT_S):
        LOG.warning("warm-up imports still running after %d s; going on", IMPORT_WAIT_S)


def page_run_ended() -> None:
    """Called at the end of every page run: the first one lets the warm-up go on to Plotly; the garbage collector
    and the tokenizer's preload wait for page runs to stop (``collector.idle_seconds``)."""
    collector.page_run_ended()
    _first_page_done.set()


def warm() -> float:
    """Import everything, then compute the landing view into the caches; returns the seconds that took (Plotly's
    first figure, after the first page run, not counted)."""
    t0 = time.perf_counter()
    with _gc_paused():
        try:
            _import_all()
        finally:
            _imported.set()
        from dashboard import services
        from dashboard.figures.tokens import make_token_heatmap_figure
        from engine.perf import tune_allocator

        tune_allocator()
        handle, cfg, i = landing_view()
        services.compute(handle, cfg)
        services.trajectory_summary(handle, cfg)
        services.turn_table(handle, cfg, i)
        table = services.token_table(handle, cfg, i)
    seconds = time.perf_counter() - t0
    _first_page_done.wait(FIRST_PAGE_WAIT_S)  # no chart on the landing view: first paint first, then Plotly
    make_token_heatmap_figure(table, ["advantage"])  # plotly builds its validators on the first figure
    return seconds


def wait_until_idle(idle: float, deadline: float) -> None:
    """Until no page run has ended for ``idle`` seconds, or until ``deadline`` (``time.monotonic()``)."""
    while time.monotonic() < deadline and collector.idle_seconds() < idle:
        time.sleep(min(0.25, idle))


def preload_tokenizer(
    idle: float = TOKENIZER_IDLE_S, max_wait: float = TOKENIZER_MAX_WAIT_S, backend_idle: float = BACKEND_IDLE_S
) -> float:
    """Load the default tokenizer in two steps: once no page run has ended for ``backend_idle`` seconds, its
    ``tokenizers`` backend (~0.5 s: all the Diagnostics page's retokenization check needs, see
    ``engine.io.text.tokenize.get_backend``); once none has for ``idle`` seconds, the ``transformers`` tokenizer that
    loaders filling in ids or text use (its import, 2-4 s of CPU). Each step runs after ``max_wait`` seconds at
    the latest. Returns the seconds both took. Through the services' lock, so a session that needs a tokenizer
    meanwhile waits for this load instead of importing transformers beside it."""
    deadline = time.monotonic() + max_wait
    from dashboard import loading
    from engine.io.text.tokenize import get_backend, get_tokenizer

    wait_until_idle(min(backend_idle, idle), deadline)
    t0 = time.perf_counter()
    loading.tokenizer_safe(get_backend, None)
    seconds = time.perf_counter() - t0
    LOG.info("CreditLens warm-up: default tokenizer's backend loaded in %.2f s", seconds)
    wait_until_idle(idle, deadline)
    t0 = time.perf_counter()
    loading.tokenizer_safe(get_tokenizer, None)
    return seconds + time.perf_counter() - t0


class _QuietWarmup(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warnings that the warm-up's cache calls raise (they run in
    no page run on purpose); everything else, and every other thread's warnings, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName == NAME and "missing ScriptRunContext" in record.getMessage())


def freeze_imports() -> int:
    """Move every object alive now (the imported libraries: ~250,000 objects) out of the cyclic garbage
    collector's reach (``gc.freeze``); returns how many. Every full collection walked them (Streamlit's after
    every page run before ``dashboard/collector.py``): 105-125 ms of a ~0.27 s page render, with the GIL held.
    Called once, right after the warm-up, when what is alive is the libraries and the landing view's cached
    data."""
    gc.freeze()
    return gc.get_freeze_count()


def _run() -> None:
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_QuietWarmup())
    try:
        LOG.info("CreditLens warm-up: engine imported and the landing view computed in %.2f s", warm())
        LOG.info("CreditLens warm-up: %d objects frozen out of the garbage collector's walks", freeze_imports())
        collector.start()  # garbage collected while nobody waits (.streamlit/config.toml turns the per-run one off)
        LOG.info("CreditLens warm-up: default tokenizer loaded in %.2f s", preload_tokenizer())
    except Exception:  # noqa: BLE001 - a failed warm-up only costs the first session its time
        LOG.warning("warm-up failed; the first session computes its view itself", exc_info=True)
        collector.start()


def start() -> threading.Thread | None:
    """Start the warm-up in a daemon thread (unless ``CREDITLENS_WARMUP=0``)."""
    global _thread
    if os.environ.get(ENV, "1") == "0":
        return None
    _thread = threading.Thread(target=_run, name=NAME, daemon=True)
    _thread.start()
    return _thread


def clean_leftovers() -> list:
    """Remove upload copies that killed servers left in the temporary directory (``leftovers``); never a live
    server's. Logged; a failure only leaves the folders there."""
    from dashboard.leftovers import remove_stale_uploads

    try:
        removed = remove_stale_uploads()
    except Exception:  # noqa: BLE001 - a start must not fail over temporary files
        LOG.warning("could not look for stale upload folders", exc_info=True)
        return []
    if removed:
        LOG.info("removed %d upload folder(s) left by stopped servers: %s", len(removed), ", ".join(map(str, removed)))
    return removed


@contextlib.asynccontextmanager
async def lifespan(app):
    """``st.App`` lifespan: remove what killed servers left behind, start the warm-up (which starts the idle
    garbage collector once it has frozen the imports) and serve at once (the thread does not hold up startup)."""
    clean_leftovers()
    if start() is None:  # no warm-up: the idle garbage collector starts now (else once the warm-up has frozen)
        collector.start()
    yield
