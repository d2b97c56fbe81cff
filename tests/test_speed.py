"""Cheap checks of the speed work: the token HTML cache, the server's torch thread setting, and the pure helpers
of benchmarks/dashboard_speed.py (the benchmark itself runs a browser and is not a test; it asserts nothing)."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks import dashboard_speed as bench_dashboard
from dashboard import loading, services, tokens_html


def _table(adv: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "position": [0, 1, 2],
            "turn": [1, 1, 2],
            "role": ["model", "tool", "model"],
            "token": ["a\n", "<b>", "'"],
            "attention": [1, 1, 1],
            "action": [1, 0, 1],
            "info": [0, 1, 0],
            "loss": [1, 0, 1],
            "advantage_mask": [1, 0, 1],
            "advantage": [adv, -0.5, 0.25],
        }
    )


def test_token_html_is_cached_by_table_values_and_arguments() -> None:
    from dashboard.figcache import cached

    t = _table(0.5)
    first = cached(tokens_html.token_html, t, "advantage", 1.0)
    assert cached(tokens_html.token_html, t.copy(), "advantage", 1.0) is first  # equal table and arguments: reused
    assert first == tokens_html.token_html(t, "advantage", 1.0)  # and equal to a fresh build
    assert cached(tokens_html.token_html, t, "advantage", 2.0) != first  # another scale
    assert "cl-hl" in cached(tokens_html.token_html, t, "advantage", 1.0, highlight=[1])
    other = _table(-0.75)  # equal shape, other values: never served the first table's markup
    assert cached(tokens_html.token_html, other, "advantage", 1.0) == tokens_html.token_html(other, "advantage", 1.0)
    assert "-0.75" in cached(tokens_html.token_html, other, "advantage", 1.0)
    # one line per turn block at most: title newlines are character references
    assert "&#10;advantage: +0.5&#10;" in first and first.count("\n") == tokens_html.TOKEN_CSS.count("\n")
    assert "&lt;b&gt;" in first and "<b>" not in first


def test_engine_threads(monkeypatch) -> None:
    monkeypatch.delenv(services.TORCH_THREADS_ENV, raising=False)
    assert services.engine_threads() == 1
    for raw, want in (("3", 3), ("0", 1), ("x", 1), (" 2 ", 2)):
        monkeypatch.setenv(services.TORCH_THREADS_ENV, raw)
        assert services.engine_threads() == want


def test_bench_helpers() -> None:
    assert bench_dashboard.summary([3.0, 1.0, 2.0]) == (2.0, 3.0)
    table = bench_dashboard.interaction_table({"λ slider": [0.5, 0.9], "page": [1.5]}, {"λ slider": [0.4]}, 1.0)
    lines = table.splitlines()
    assert lines[1].startswith("λ slider") and lines[1].endswith("ok") and "0.70s" in lines[1]
    assert lines[2].endswith("MISSED")
    line = bench_dashboard.ratio_line("Token view", [1.0, 1.2], [2.0, 2.6, 3.0], 2.0)
    assert "ratio 2.36x" in line and line.endswith("MISSED")
    assert bench_dashboard.cpu_seconds(-1) == 0.0
    # browser part 0.8 - 0.2 = 0.6 s; alone 0.6 + 0.15 = 0.75 s; 8 at once 0.6 + 8 x 0.1 = 1.4 s
    proj = bench_dashboard.projection_line([0.7, 0.8, 0.9], [0.2, 0.2], 0.15, 0.1)
    assert "alone 0.75 s" in proj and "8 at once 1.40 s" in proj and "ratio 1.87x" in proj
    assert "not the measured target" in proj


def test_warmup_preloads_the_default_tokenizer_through_the_services_lock(monkeypatch) -> None:
    from dashboard import warmup
    from engine.io.text import tokenize

    calls = []
    monkeypatch.setattr(tokenize, "get_tokenizer", lambda name=None: calls.append(("tokenizer", name)))
    monkeypatch.setattr(tokenize, "get_backend", lambda name=None: calls.append(("backend", name)))
    real = loading.tokenizer_safe

    def safe(fn, *args):
        calls.append(("lock", fn.__name__ if hasattr(fn, "__name__") else fn))
        return real(fn, *args)

    monkeypatch.setattr(loading, "tokenizer_safe", safe)
    assert warmup.preload_tokenizer(idle=0) >= 0
    assert calls == [("lock", "<lambda>"), ("backend", None), ("lock", "<lambda>"), ("tokenizer", None)]


def test_tokenizer_preload_waits_until_no_page_run_has_ended_for_a_while(monkeypatch) -> None:
    import time

    from dashboard import warmup
    from engine.io.text import tokenize

    loaded = []
    monkeypatch.setattr(tokenize, "get_tokenizer", lambda name=None: loaded.append(time.monotonic()))
    monkeypatch.setattr(tokenize, "get_backend", lambda name=None: None)
    warmup.page_run_ended()
    t0 = time.monotonic()
    warmup.preload_tokenizer(idle=0.3)
    assert loaded and loaded[0] - t0 >= 0.25  # waited for 0.3 s without a page run
    loaded.clear()
    warmup.page_run_ended()
    warmup.preload_tokenizer(idle=5, max_wait=0.2)  # never idle: loads at the deadline
    assert loaded and loaded[0] - t0 < 4


def test_tokenizer_backend_loads_after_a_short_pause_and_transformers_after_a_long_one(monkeypatch) -> None:
    """The Diagnostics page needs only the backend (~0.5 s to build): it loads after ``backend_idle`` seconds
    without a page run; the transformers tokenizer (seconds of import) still waits for ``idle``."""
    import time

    from dashboard import warmup
    from engine.io.text import tokenize

    loaded = {}
    monkeypatch.setattr(tokenize, "get_backend", lambda name=None: loaded.setdefault("backend", time.monotonic()))
    monkeypatch.setattr(tokenize, "get_tokenizer", lambda name=None: loaded.setdefault("tok", time.monotonic()))
    warmup.page_run_ended()
    t0 = time.monotonic()
    warmup.preload_tokenizer(idle=0.6, max_wait=10, backend_idle=0.15)
    assert 0.12 <= loaded["backend"] - t0 < 0.5
    assert loaded["tok"] - t0 >= 0.55


def test_memory_release_looks_the_c_library_up_once(monkeypatch) -> None:
    """find_library runs `ldconfig -p` in a subprocess: the end of every page run must not pay for it again."""
    import ctypes.util

    from engine import perf

    real, calls = ctypes.util.find_library, []
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: calls.append(name) or real(name))
    perf._libc.cache_clear()
    try:
        for _ in range(5):
            perf.release_free_memory()
        assert perf.tune_allocator() in (True, False)
        assert calls == ["c"]
    finally:
        perf._libc.cache_clear()


def test_warmup_freezes_what_it_imported_before_the_tokenizer_load(monkeypatch) -> None:
    """After the warm-up, the libraries' objects are out of the garbage collector's full walks: frozen once,
    after warm() and before the idle collector starts and the tokenizer's own load."""
    import gc

    from dashboard import warmup

    order = []
    monkeypatch.setattr(warmup, "warm", lambda: order.append("warm") or 0.0)
    monkeypatch.setattr(warmup, "preload_tokenizer", lambda: order.append("tokenizer") or 0.0)
    real = warmup.freeze_imports
    monkeypatch.setattr(warmup, "freeze_imports", lambda: order.append("freeze") or 0)
    from dashboard import collector

    monkeypatch.setattr(collector, "start", lambda: order.append("idle collector"))
    warmup._run()
    assert order == ["warm", "freeze", "idle collector", "tokenizer"]  # collections walk less once frozen
    try:
        frozen = real()
        assert frozen == gc.get_freeze_count() > 10_000  # torch, pandas, plotly, streamlit are imported here
        assert len(gc.get_objects()) < frozen  # what the collector still walks: what came after
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


@pytest.mark.slow  # starts a streamlit server (5 s)
def test_wire_session_gets_the_pages_a_browser_gets(tmp_path) -> None:
    """The benchmark's browserless sessions (benchmarks/wire_session.py) against a real `streamlit run app.py`: the
    first run opens the linked run, a navigation request runs the page it names, and what comes back is that
    page's content (no exception); an unknown page is refused before anything is sent."""
    import asyncio

    from browser_support import start_server, stop_server

    import app
    from benchmarks.wire_session import WireSession
    from engine.io import save_run
    from engine.io.synth import synth_run

    save_run(synth_run(8, 64, seed=3), tmp_path / "wire.parquet")
    server = start_server(env={"CREDITLENS_DATA_DIR": str(tmp_path)})

    async def scenario() -> None:
        s = await WireSession.open(server.url, "page=overview&run=data:wire.parquet")
        try:
            assert {url for *_, url, _ in app.PAGES} <= set(s.pages)
            assert any("Run overview" in t for t in s.texts) and not s.exceptions
            first = s.received_bytes
            for url, heading in (("compare", "Compare schemes"), ("tokens", "Token view"), ("group", "Group view")):
                seconds = await s.nav(url)
                assert 0 < seconds < 60
                assert any(heading in t for t in s.texts), (url, [t[:80] for t in s.texts])
            assert s.received_bytes > first and not s.exceptions
            assert len(s.started) >= 4 and len(s.finished) >= 4
            with pytest.raises(KeyError):
                await s.nav("no-such-page")
        finally:
            await s.close()

    try:
        asyncio.run(scenario())
    finally:
        stop_server(server)
