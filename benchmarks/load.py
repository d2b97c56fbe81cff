"""Load benchmark: ``python -m benchmarks.load [--trajectories 10000] [--tokens 2000]``.

Writes a seeded synthetic run (token ids, behaviour/reference log-probs and values on every token) as native
JSONL and Parquet into a temporary directory, then times ``load_run`` on each and ``Run.to_batch``. Prints
its figures; nothing here is asserted (the target is <= 15 s for 10,000 x 2,000 tokens on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from engine.io.load import load_run, save_run
from engine.io.synth.generic import synth_run


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.splitlines()[0])
    p.add_argument("--trajectories", type=int, default=10_000)
    p.add_argument("--tokens", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", default=None, help="keep the generated files here instead of a temporary directory")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        run, t_gen = _timed(lambda: synth_run(args.trajectories, args.tokens, seed=args.seed))
        n_tok = sum(t.num_tokens for t in run.trajectories)
        print(f"generated {len(run):,} trajectories, {n_tok:,} tokens in {t_gen:.1f}s (cpus: {os.cpu_count()})")
        for suffix in (".jsonl", ".parquet"):
            path = folder / f"bench{suffix}"
            _, t_save = _timed(lambda p=path: save_run(run, p))
            res, t_load = _timed(lambda p=path: load_run(p))
            size = path.stat().st_size / 2**20
            print(
                f"{suffix[1:]:>8}: {size:8.1f} MiB  save {t_save:6.2f}s  load {t_load:6.2f}s "
                f"({n_tok / t_load / 1e6:5.2f} M tokens/s, {len(res.run):,} trajectories, {len(res.problems)} problems)"
            )
        batch, t_batch = _timed(res.run.to_batch)
        print(f"to_batch: {t_batch:.2f}s -> [B, T] = {list(batch.token_ids.shape)}")
        _, t_hash = _timed(lambda: res.run.content_hash)
        print(f"content_hash: {t_hash:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
