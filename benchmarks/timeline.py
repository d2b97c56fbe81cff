"""Whole-run timeline benchmark: ``python -m benchmarks.timeline [--steps 100] [--trajectories 256] [--tokens 1000]``.

Writes (or reuses, ``--dir``) a seeded run folder of ``--steps`` native Parquet step files (``step_0001.parquet``,
``--trajectories`` × up to ``--tokens`` tokens each, with log-probs and values), then, each in a fresh process
(its wall time and peak RSS taken from the operating system):

* baseline: one step alone, the work no timeline can skip: load its file, build its batch, compute GRPO (no lints,
  no statistics); the batch's tensor bytes are "the step's batch";
* the whole timeline cold (``update_timeline``, no cache): every step loaded, computed, linted and summarised,
  one step at a time;
* one new step: a step file added, the timeline updated from its cache;
* the Timeline page's first paint on that run (its main chart on screen): a first visit, which computes the
  timeline; a new browser with the timeline cache warm; a reload in that browser (``streamlit run app.py`` on the
  folder as a data directory, Debian's Chromium; skipped with ``--no-page``), against a bare Streamlit page with a
  six-panel Plotly chart of 100 points, opened the same two ways in the same run.

Prints each against its target (≤ 60 s cold, ≤ 3 s a new step, peak ≤ 2× the step's, first paint ≤ 2 s) and the
cold timeline against the baseline × steps. Memory is the process's resident size sampled every 5 ms, over what it
held after a warm-up (one step of ``sample_runs/search_steps`` through the whole pipeline: every lazy import and
allocator pool in place). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARM = ROOT / "sample_runs" / "search_steps" / "step_0001.parquet"
CHILD_PRELUDE = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.timeline.store import update_timeline
import pyarrow.parquet
import resource as _r
def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _r.getpagesize() // 1024
# warm-up: every lazy import and allocator pool the work below touches, on a small step of the bundled sample
from engine.timeline.compute import step_rows
_warm = load_run({warm!r})
list(step_rows(_warm.run, {{"w": CreditConfig(profile="verl", estimator="grpo")}}))
del _warm
import gc, threading
from engine.perf import release_free_memory
gc.collect()
release_free_memory()
base = rss_kib()
peak_box = [base]
def _watch():
    while True:
        peak_box[0] = max(peak_box[0], rss_kib())
        time.sleep(0.005)
threading.Thread(target=_watch, daemon=True).start()
batch_bytes = 0
start = time.perf_counter()
"""
BASELINE = """
res = load_run({file!r})
release_free_memory()  # as the dashboard loads a run (dashboard/loading.py)
batch = res.run.to_batch(share_memory=True)
batch_bytes = sum(v.untyped_storage().nbytes() for v in vars(batch).values() if isinstance(v, torch.Tensor))
compute_credit(batch, CreditConfig(profile="verl", estimator="grpo"), token_extras=False).materialize()
"""
TIMELINE = """
tl = update_timeline({folder!r}, {{"grpo": CreditConfig(profile="verl", estimator="grpo")}}, {out!r}, settle_s=0)
"""
CHILD_END = """
took = time.perf_counter() - start
time.sleep(0.02)
peak = peak_box[0]
print(json.dumps({{"seconds": took, "import_mib": base / 1024, "peak_mib": peak / 1024,
                   "batch_mib": batch_bytes / 2**20, "computed": getattr(globals().get("tl"), "computed", None)}}))
"""


def write_run(folder: Path, steps: int, trajectories: int, tokens: int, first: int = 1) -> None:
    import numpy as np

    from engine.io.load import save_trajectories
    from engine.io.synth.augment import synthesize_per_token
    from engine.io.synth.generic import iter_synth

    folder.mkdir(parents=True, exist_ok=True)
    for step in range(first, first + steps):
        path = folder / f"step_{step:04d}.parquet"
        if path.exists():
            continue
        rng = np.random.default_rng(step)

        def items(step=step, rng=rng):
            for t in iter_synth(trajectories, tokens, seed=step, group_size=8):
                t.step = step
                synthesize_per_token(t, rng)
                yield t

        save_trajectories(items(), path, f"bench-step-{step}")


def child(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE.format(root=str(ROOT), warm=str(WARM)) + code + CHILD_END.format()],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


BASELINE_APP = """import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

st.set_page_config(page_title="baseline", layout="wide")
with st.sidebar:
    st.selectbox("Run", ["run"])
    st.select_slider("Step", list(range(1, 101)), value=100)
    st.selectbox("Estimator", ["grpo"])
st.title("Timeline")
fig = make_subplots(rows=6, cols=1, shared_xaxes=True)
for r in range(1, 7):
    fig.add_trace(go.Scatter(x=np.arange(1, 101), y=np.random.rand(100), mode="lines+markers"), row=r, col=1)
st.plotly_chart(fig, key="timeline.main")
"""


def page_paint(folder: Path, cache: Path, app: Path | None = None) -> tuple[float, float, float]:
    """Seconds to the Timeline page's main chart on screen: (a first visit, which computes the timeline into the
    page's cache; a new browser with that cache warm; a reload in that browser)."""
    sys.path[:0] = [str(ROOT / "tests")]
    from browser_support import CHROMIUM, CHROMIUM_ARGS, start_server, stop_server
    from playwright.sync_api import sync_playwright

    painted = """() => !!document.querySelector('.st-key-timeline-main .main-svg')"""
    env = {"CREDITLENS_DATA_DIR": str(folder.parent), "CREDITLENS_TIMELINE_CACHE": str(cache)}
    server = start_server(env=env, **({"app": app} if app else {}))
    url = f"{server.url}/timeline?run=data:{folder.name}&scheme=grpo" if app is None else server.url
    times = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(2):  # the first computes the timeline; the second is a new browser, nothing cached in it
                page = browser.new_context().new_page()
                start = time.perf_counter()
                page.goto(url)
                page.wait_for_function(painted, timeout=600_000)
                times.append(time.perf_counter() - start)
            start = time.perf_counter()  # the same browser again: its scripts cached
            page.reload()
            page.wait_for_function(painted, timeout=600_000)
            times.append(time.perf_counter() - start)
            browser.close()
    finally:
        stop_server(server)
    return times[0], times[1], times[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.timeline", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--trajectories", type=int, default=256)
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--dir", default=None, help="keep the generated run here (reused when it is there)")
    p.add_argument("--no-page", action="store_true", help="skip the browser's first paint")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir or tmp) / f"bench-{args.steps}x{args.trajectories}x{args.tokens}"
        start = time.perf_counter()
        write_run(folder, args.steps, args.trajectories, args.tokens)
        size = sum(f.stat().st_size for f in folder.glob("*.parquet")) / 2**20
        print(f"run: {args.steps} steps × {args.trajectories} × ≤{args.tokens} tokens, {size:,.0f} MiB of Parquet "
              f"(ready in {time.perf_counter() - start:.0f} s; cpus {os.cpu_count()}, one torch thread)")  # fmt: skip
        last = sorted(folder.glob("step_*.parquet"))[-1]
        base = child(BASELINE.format(file=str(last)))
        step_mib = base["peak_mib"] - base["import_mib"]
        batch_mib = base["batch_mib"]
        out = Path(tmp) / "timeline.parquet"
        out.unlink(missing_ok=True)
        cold = child(TIMELINE.format(folder=str(folder), out=str(out)))
        write_run(folder, 1, args.trajectories, args.tokens, first=args.steps + 1)
        new = child(TIMELINE.format(folder=str(folder), out=str(out)))
        (folder / f"step_{args.steps + 1:04d}.parquet").unlink()
        cold_mib = cold["peak_mib"] - cold["import_mib"]
        floor = base["seconds"] * args.steps
        print(f"{'measure':<34}{'value':>12}  {'baseline':>24}  {'ratio':>7}  target")
        rows = [
            ("one step (load, batch, GRPO)", f"{base['seconds']:.2f} s", "", "", ""),
            ("whole timeline, cold", f"{cold['seconds']:.1f} s", f"{floor:.1f} s (step × {args.steps})",
             f"{cold['seconds'] / floor:.2f}×", _verdict(cold["seconds"] <= 60, "≤ 60 s")),
            ("one new step", f"{new['seconds']:.2f} s", f"{base['seconds']:.2f} s (one step)",
             f"{new['seconds'] / base['seconds']:.2f}×", _verdict(new["seconds"] <= 3, "≤ 3 s")),
            ("the largest step's batch (tensors)", f"{batch_mib:,.0f} MiB", "", "", ""),
            ("peak memory: the largest step", f"{step_mib:,.0f} MiB", f"{batch_mib:,.0f} MiB (its tensors)",
             f"{step_mib / batch_mib:.2f}×", "(loaded as a batch, GRPO on it)"),
            ("peak memory: whole timeline", f"{cold_mib:,.0f} MiB", f"{step_mib:,.0f} MiB (that step)",
             f"{cold_mib / step_mib:.2f}×", _verdict(cold_mib <= 2 * step_mib, "≤ 2×")),
        ]  # fmt: skip
        if not args.no_page:
            app = Path(tmp) / "baseline_app.py"
            app.write_text(BASELINE_APP)
            _, base_new, base_reload = page_paint(folder, Path(tmp) / "unused", app)
            first, warm, reload = page_paint(folder, Path(tmp) / "page-cache")
            rows.append(("Timeline page, first visit", f"{first:.1f} s", "", "", "(computes the timeline)"))
            rows.append(
                (
                    "Timeline page, cache warm",
                    f"{warm:.2f} s",
                    f"{base_new:.2f} s (bare Streamlit page)",
                    f"{warm / base_new:.2f}×",
                    _verdict(warm <= 2, "≤ 2 s") + " (a new browser)",
                )
            )
            rows.append(("Timeline page, reloaded", f"{reload:.2f} s", f"{base_reload:.2f} s (bare page, reloaded)",
                         f"{reload / base_reload:.2f}×", _verdict(reload <= 2, "≤ 2 s")))  # fmt: skip
        for name, value, baseline, ratio, target in rows:
            print(f"{name:<34}{value:>12}  {baseline:>24}  {ratio:>7}  {target}")
        print(f"steps computed: cold {cold['computed']}, after the new step {new['computed']}")
    return 0


def _verdict(ok: bool, target: str) -> str:
    return f"{target} {'ok' if ok else 'MISSED'}"


if __name__ == "__main__":
    raise SystemExit(main())
