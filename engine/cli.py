"""Command-line subcommands of the loading side: ``convert`` (any input -> native) and ``synth``.

``engine/__main__.py`` wires them in with ``add_convert_parser(subparsers)`` / ``add_synth_parser(subparsers)``;
each sets ``handler`` on its parser to a handler taking the parsed ``argparse.Namespace`` and returning an exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_convert_parser(subparsers) -> argparse.ArgumentParser:
    """``convert INPUT --out FILE [--format NAME] [--tokenizer NAME] [--strict] [--synthesize] [--seed S]``."""
    p = subparsers.add_parser("convert", help="load any supported rollout file and write it as native JSONL/Parquet")
    p.add_argument("input", help="input file or directory")
    p.add_argument("--out", required=True, help="output path (.jsonl or .parquet; a folder for --preset search_steps)")
    p.add_argument("--format", dest="fmt", default=None, help="input format (default: detected from content)")
    p.add_argument("--tokenizer", default=None, help="Hugging Face tokenizer name or path (default: offline Qwen2.5)")
    p.add_argument("--strict", action="store_true", help="fail on the first problem instead of skipping bad records")
    p.add_argument("--max-bytes", type=int, default=None, help="largest record (JSONL line) to read, in bytes")
    p.add_argument(
        "--response-length",
        type=int,
        default=None,
        help="the trainer's response length limit (verl data.max_response_length): flags rows cut at it as truncated",
    )
    p.add_argument("--name", default=None, help="run name to store in the output header")
    p.add_argument(
        "--synthesize",
        action="store_true",
        help="fill missing log-probs, reference log-probs and values with synthetic numbers (marked in metadata)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for --synthesize")
    p.set_defaults(handler=run_convert)
    return p


def run_convert(args: argparse.Namespace) -> int:
    """Handler of ``convert``: prints problems to stderr, a summary to stdout; exit 0 (1 if nothing loaded)."""
    import numpy as np

    from engine.io import load_run, save_run
    from engine.io.synth.augment import synthesize_per_token

    start = time.perf_counter()
    res = load_run(
        args.input,
        fmt=args.fmt,
        tokenizer=args.tokenizer,
        strict=args.strict,
        max_bytes=args.max_bytes,
        response_length=args.response_length,
    )
    for problem in res.problems:
        print(f"problem: {problem}", file=sys.stderr)
    run = res.run
    if args.name:
        run.name = args.name
    if args.synthesize:
        rng = np.random.default_rng(args.seed)
        for traj in run.trajectories:
            synthesize_per_token(traj, rng)
    save_run(run, args.out)
    took = time.perf_counter() - start
    print(f"{args.out}: {len(run)} trajectories from {run.source}, {len(res.problems)} problems, {took:.1f}s")
    return 0 if len(run) else 1


def add_synth_parser(subparsers) -> argparse.ArgumentParser:
    """``synth --trajectories N --tokens T --seed S --out FILE`` or ``synth --preset NAME --out FILE``."""
    from engine.io.synth import PRESETS

    p = subparsers.add_parser("synth", help="write a seeded synthetic run (any size) or one of the sample runs")
    p.add_argument("--trajectories", type=int, default=64, help="number of trajectories")
    p.add_argument("--tokens", type=int, default=512, help="response tokens per trajectory (max)")
    p.add_argument("--group-size", type=int, default=8, help="rollouts per prompt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preset", choices=PRESETS, default=None, help="write a shipped sample run instead")
    p.add_argument("--out", required=True, help="output path (.jsonl or .parquet; a folder for --preset search_steps)")
    p.set_defaults(handler=run_synth)
    return p


def run_synth(args: argparse.Namespace) -> int:
    """Handler of ``synth``."""
    from engine.io.load import save_trajectories
    from engine.io.synth import write_preset
    from engine.io.synth.generic import iter_synth, synth_name

    start = time.perf_counter()
    if args.preset:
        write_preset(args.preset, args.out, args.seed)
        print(f"{args.out}: sample run {args.preset} ({time.perf_counter() - start:.1f}s)")
        return 0
    trajs = iter_synth(args.trajectories, args.tokens, seed=args.seed, group_size=args.group_size)
    save_trajectories(trajs, Path(args.out), synth_name(args.trajectories, args.tokens, args.seed))  # streamed
    print(
        f"{args.out}: {args.trajectories} synthetic trajectories x <= {args.tokens} tokens "
        f"({time.perf_counter() - start:.1f}s)"
    )
    return 0
