"""A whole run on Ray against one process: ``python -m benchmarks.ray_run [--dir D] [--steps 100] [--only compute]``.

The 100-step run of ``benchmarks.timeline`` (256 trajectories × ≤ 1,000 tokens per step, native Parquet; written
or reused with ``--dir``), through both whole-run jobs, each in a fresh process:

* the timeline (``python -m engine timeline``'s work: every step loaded, computed under GRPO, linted, summarised);
* the per-token credit dataset (``python -m engine compute RUN --out DIR``: every token of every step, with its
  text, written partitioned by step);

each once in one process and once with ``--ray local`` (a Ray started on this machine's cores, the same
functions in its workers). Prints wall time, the Ray/one-process ratio (Ray's overhead where the cores are the
same), tokens per second per worker (a worker: one core, the one process counting as one), and the driver's peak
resident memory over its idle size: the process after its imports, Ray's start and a one-step warm-up job (every
lazy import and Ray Data's own machinery in place), sampled every 5 ms. Checks that both paths wrote the same
output. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.timeline import write_run

ROOT = Path(__file__).resolve().parent.parent
WARM = ROOT / "sample_runs" / "search_steps"
CHILD = """
import json, resource, shutil, sys, tempfile, threading, time
from pathlib import Path
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from engine import CreditConfig
from engine.perf import release_free_memory, tune_allocator
from engine.timeline import tokens
from engine.timeline.store import update_timeline
tune_allocator()
ray = {ray!r}
cfg = CreditConfig(profile="verl", estimator="grpo")
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
writer = runner = None
if ray:
    from engine.timeline import raydata
    raydata.connect("local")
    writer, runner = raydata.write_with_ray, raydata.timeline_runner()
workers = int(__import__("ray").cluster_resources()["CPU"]) if ray else 1
# warm-up: one step of the bundled sample through the same job (imports, Ray Data's machinery, worker processes)
warm = Path(tempfile.mkdtemp())
shutil.copy({warm!r} + "/step_0001.parquet", warm)
update_timeline(warm, {{"w": cfg}}, warm / "t.parquet", settle_s=0, runner=runner, seeds=[])
tokens.compute_dataset(warm, cfg, warm / "out", writer=writer)
shutil.rmtree(warm)
import gc
gc.collect()
release_free_memory()
idle = rss_mib()
peak = [idle]
def watch():
    while True:
        peak[0] = max(peak[0], rss_mib())
        time.sleep(0.005)
threading.Thread(target=watch, daemon=True).start()
start = time.perf_counter()
if {job!r} == "timeline":
    tl = update_timeline({run!r}, {{"grpo": cfg}}, {out!r}, settle_s=0, runner=runner)
    n_tokens = sum(r["tokens"] for r in tl.rows)
else:
    manifest = tokens.compute_dataset({run!r}, cfg, {out!r}, writer=writer)
    n_tokens = sum(manifest["tokens"].values())
took = time.perf_counter() - start
time.sleep(0.02)
print(json.dumps({{"seconds": took, "idle_mib": idle, "peak_mib": peak[0], "tokens": n_tokens, "workers": workers}}))
"""


def child(job: str, run: Path, out: Path, ray: bool) -> dict:
    code = CHILD.format(root=str(ROOT), warm=str(WARM), ray=ray, job=job, run=str(run), out=str(out))
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    if res.returncode:
        raise SystemExit(f"{job} ({'ray' if ray else 'one process'}) failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def same_output(job: str, a: Path, b: Path) -> bool:
    import pandas as pd
    import pyarrow.parquet as pq

    from engine.timeline import tokens

    if job == "timeline":
        x, y = pq.read_table(a).to_pandas(), pq.read_table(b).to_pandas()
    else:
        x, y = tokens.read_credit(a).to_pandas(), tokens.read_credit(b).to_pandas()
    try:
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    except AssertionError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ray_run", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--trajectories", type=int, default=256)
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--dir", default=None, help="keep the generated run here (reused when it is there)")
    p.add_argument("--only", choices=["timeline", "compute"], default=None, help="run one of the two jobs")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.dir or tmp) / f"bench-{args.steps}x{args.trajectories}x{args.tokens}"
        write_run(run, args.steps, args.trajectories, args.tokens)
        size = sum(f.stat().st_size for f in run.glob("*.parquet")) / 2**20
        print(f"run: {args.steps} steps × {args.trajectories} × ≤{args.tokens} tokens, {size:,.0f} MiB of Parquet; "
              f"{os.cpu_count()} cpus, one torch thread per process")  # fmt: skip
        print(f"{'job':<10}{'runner':<14}{'wall':>9}{'vs one process':>16}{'tokens/s/worker':>17}"
              f"{'driver idle':>13}{'driver peak':>13}{'peak/idle':>11}")  # fmt: skip
        for job in [args.only] if args.only else ["timeline", "compute"]:
            outs, results = {}, {}
            for ray in (False, True):
                out = Path(tmp) / f"{job}-{'ray' if ray else 'here'}" / ("t.parquet" if job == "timeline" else "ds")
                out.parent.mkdir(parents=True, exist_ok=True)
                outs[ray], results[ray] = out, child(job, run, out, ray)
            for ray in (False, True):
                r = results[ray]
                ratio = r["seconds"] / results[False]["seconds"]
                rate = r["tokens"] / r["seconds"] / r["workers"]
                name = f"ray local ×{r['workers']}" if ray else "one process"
                idle, peak = r["idle_mib"], r["peak_mib"]
                print(f"{job:<10}{name:<14}{r['seconds']:>8.1f}s{ratio:>15.2f}×{rate:>17,.0f}"
                      f"{idle:>10,.0f} MiB{peak:>9,.0f} MiB{peak / idle:>10.2f}×")  # fmt: skip
            print(f"{job:<10}same output: {same_output(job, outs[False], outs[True])}; "
                  f"{results[False]['tokens']:,} tokens")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
