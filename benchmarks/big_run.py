"""Big-run benchmark: ``python -m benchmarks.big_run [--trajectories 50000] [--tokens 1000] [--format parquet]``.

Streams a seeded synthetic run (``iter_synth``: token ids, log-probs, reference log-probs and values on every
token) to a temporary file, then, in a fresh Python process (so that the peak RSS is the work's own), does
what the dashboard server does with it: ``load_run`` with a progress callback, ``content_hash``,
``Run.to_batch`` and ``compute_credit`` under the dashboard's default scheme, then under a second scheme (GRPO)
while the first result is still held. After each stage it prints the stage's time, the RSS now and the peak
RSS so far (``VmHWM``). A run a tenth the size is measured the same way as the baseline. Nothing is
asserted. ``--server`` measures the real dashboard instead (``benchmarks/big_server.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from engine.config import CreditConfig
from engine.perf import release_free_memory

ROOT = Path(__file__).resolve().parents[1]  # the repository: the child processes run from it

# The dashboard's default scheme (dashboard/state.py DEFAULT_SCHEME, made runnable by services.effective_config:
# the synthetic run has critic values and log-probs, so nothing changes); a test keeps the two equal.
DEFAULT_SCHEME = CreditConfig(estimator="gae", value_source=None)
SECOND_SCHEME = CreditConfig(estimator="grpo")


def _status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MiB, or NaN where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak_rss_mib() -> float:
    """This process's peak resident set size. ``VmHWM`` belongs to the process's own memory map; ``ru_maxrss``
    (the fallback) also keeps the peak of the process that spawned this one (Linux folds the replaced memory
    map's peak into it at ``exec``), so it can read far higher than this process ever was."""
    hwm = _status_mib("VmHWM")
    return hwm if hwm == hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mib() -> float:
    """This process's resident set size now."""
    return _status_mib("VmRSS")


def write_run(path: Path, trajectories: int, tokens: int, seed: int) -> float:
    """Stream ``synth_run(trajectories, tokens, seed)`` into ``path`` (never held whole); seconds taken."""
    from engine.io.load import save_trajectories
    from engine.io.synth.generic import iter_synth, synth_name

    start = time.perf_counter()
    save_trajectories(iter_synth(trajectories, tokens, seed), path, synth_name(trajectories, tokens, seed))
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------- one process
def measure(path: Path) -> dict:
    """Load ``path`` and compute its credit the way the dashboard does, printing each stage; the figures."""
    from engine import compute_credit
    from engine.io import load_run

    stages: dict[str, dict] = {}

    def stage(name: str, seconds: float, detail: str = "") -> None:
        stages[name] = {"seconds": seconds, "rss_mib": rss_mib(), "peak_mib": peak_rss_mib()}
        row = stages[name]
        print(
            f"  {name:<16} {seconds:7.2f} s   RSS {row['rss_mib']:7.0f} MiB   peak {row['peak_mib']:7.0f} MiB"
            + (f"   {detail}" if detail else ""),
            flush=True,
        )

    stage("start (imports)", 0.0)
    ticks: list[float] = []

    def progress(fraction: float, message: str) -> None:
        if not ticks or fraction >= ticks[-1] + 0.25 or fraction >= 1.0:
            ticks.append(fraction)
            print(f"    progress {fraction:5.0%}  {message}", flush=True)

    t0 = time.perf_counter()
    res = load_run(path, max_bytes=None, progress=progress)  # the dashboard reads files without a record cap
    run = res.run
    n_tokens = sum(t.num_tokens for t in run.trajectories)
    stage("load_run", time.perf_counter() - t0, f"{len(run):,} trajectories, {n_tokens:,} tokens")
    t0 = time.perf_counter()
    release_free_memory()
    stage("release", time.perf_counter() - t0, "freed decode buffers back to the OS")
    t0 = time.perf_counter()
    key = run.content_hash
    stage("content_hash", time.perf_counter() - t0, key[:12])
    t0 = time.perf_counter()
    batch = run.to_batch(share_memory=True)  # as the dashboard does: the run's arrays become views of the batch
    release_free_memory()
    held = own_bytes(batch, ())
    stage("to_batch", time.perf_counter() - t0, f"[B, T] = {list(batch.token_ids.shape)}, {held / 2**20:,.0f} MiB")
    results = []
    for name, cfg in (("compute (gae)", DEFAULT_SCHEME), ("compute (grpo)", SECOND_SCHEME)):
        t0 = time.perf_counter()
        results.append(compute_credit(batch, cfg, token_extras=False).materialize())  # what the dashboard keeps
        stage(name, time.perf_counter() - t0, f"result {own_bytes(results[-1], (batch,)) / 2**20:,.0f} MiB")
    return {"trajectories": len(run), "tokens": n_tokens, "shape": list(batch.token_ids.shape), "stages": stages}


def own_bytes(obj, others: tuple) -> int:
    """Bytes of the tensors in ``obj`` (a dataclass or dict of tensors), each storage once, leaving out storages
    that ``others`` already hold."""

    def tensors(o) -> list[torch.Tensor]:
        if hasattr(o, "quantities"):  # a CreditResult: its fields and its views
            o = o.quantities()
        values = o.values() if isinstance(o, dict) else [getattr(o, f.name) for f in dataclasses.fields(o)]
        out = []
        for v in values:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, dict):
                out += tensors(v)
        return out

    seen = {t.untyped_storage().data_ptr() for o in others for t in tensors(o)}
    total = 0
    for t in tensors(obj):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in seen:
            seen.add(ptr)
            total += t.untyped_storage().nbytes()
    return total


def measure_in_child(path: Path, default_allocator: bool) -> dict:
    """``measure(path)`` in a fresh interpreter (its output passes through); the figures it returned."""
    cmd = [sys.executable, "-m", "benchmarks.big_run", "--measure", str(path)]
    if default_allocator:
        cmd.append("--default-allocator")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True, cwd=ROOT)
    *lines, last = proc.stdout.rstrip("\n").split("\n")
    print("\n".join(lines), flush=True)
    return json.loads(last)


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.big_run", description=__doc__.splitlines()[0])
    p.add_argument("--trajectories", type=int, default=50_000)
    p.add_argument("--tokens", type=int, default=1_000, help="response tokens per trajectory (at most)")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", default=None, help="write (and keep) the run files here instead of a temporary folder")
    p.add_argument("--no-baseline", action="store_true", help="skip the run a tenth the size")
    p.add_argument("--default-allocator", action="store_true", help="leave glibc's mmap threshold as it is")
    p.add_argument("--server", action="store_true", help="measure the real dashboard (benchmarks/big_server.py)")
    p.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # the child process's job
    args, rest = p.parse_known_args(argv)
    if args.server:
        cmd = [sys.executable, "-m", "benchmarks.big_server", *(argv if argv is not None else sys.argv[1:])]
        return subprocess.run(cmd, cwd=ROOT).returncode
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if not args.default_allocator:
        from engine.perf import tune_allocator

        tune_allocator()  # as the dashboard does (app.py)
    if args.measure:
        print(json.dumps(measure(Path(args.measure))))
        return 0
    sizes = [args.trajectories] + ([] if args.no_baseline else [max(args.trajectories // 10, 1)])
    figures = {}
    with tempfile.TemporaryDirectory(prefix="creditlens-bench-") as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            path = folder / f"synth_{n}x{args.tokens}.{args.format}"
            if path.exists():
                print(f"{path.name}: reusing the file ({path.stat().st_size / 2**20:,.0f} MiB)")
            else:
                seconds = write_run(path, n, args.tokens, args.seed)
                print(f"{path.name}: written in {seconds:.1f} s ({path.stat().st_size / 2**20:,.0f} MiB)")
            print(f"{n:,} trajectories x <= {args.tokens:,} tokens, {args.format} (cpus: {os.cpu_count()}):")
            figures[n] = measure_in_child(path, args.default_allocator)
    if len(sizes) == 2:
        big, small = (figures[n]["stages"] for n in sizes)
        print("peak RSS, full run / tenth:")
        for name in big:
            ratio = big[name]["peak_mib"] / max(small[name]["peak_mib"], 1e-9)
            print(f"  {name:<16} {big[name]['peak_mib']:7.0f} / {small[name]['peak_mib']:6.0f} MiB = {ratio:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
