"""``python -m engine timeline RUN [--out timeline.parquet] [--scheme S.json …] [--<field> …] [--ray ADDRESS]``: one
row per step and scheme (``engine.timeline.store``), incremental: with ``--out`` already there, only new or changed
steps are computed. ``--ray`` computes the steps on a Ray cluster (``engine.timeline.raydata``); the file is the
same. Without ``--out``, a folder run's timeline goes to ``RUN/.creditlens/timeline.parquet``, where the dashboard
finds it: it opens that run's timeline from it, computing only what it lacks."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.cli_compute import add_ray_options, add_scheme_options, ray_runner_note
from engine.config import FIELDS, CreditConfig


def add_timeline_parser(sub) -> None:
    p = sub.add_parser(
        "timeline",
        help="per-step credit statistics of a whole run → Parquet (incremental)",
        description="Index RUN (a folder of step files or step folders, or one file), compute each step alone under "
        "each scheme, write one row per step and scheme. An existing --out is reused: only new or changed steps "
        "are computed.",
    )
    p.add_argument("run", type=Path, help="run folder (step files / step folders) or one file")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output .parquet, read first when it exists (default for a run folder: RUN/.creditlens/timeline.parquet, "
        "which the dashboard reads)",
    )
    p.add_argument("--format", dest="fmt", default=None, help="force an input adapter (default: detect)")
    add_ray_options(p)
    add_scheme_options(p, many=True)  # one row per step and scheme
    p.set_defaults(handler=run_timeline)


def schemes_from_args(args: argparse.Namespace) -> dict[str, CreditConfig]:
    """{name: scheme}: each ``--scheme`` file (named by its stem) with the field options over it, or the field
    options alone (named ``profile/estimator``)."""
    fields = {name: getattr(args, name) for name in FIELDS if getattr(args, name, None) is not None}
    bases = {Path(f).stem: json.loads(Path(f).read_text()) for f in args.scheme or []} or {"": {}}
    out = {}
    for name, base in bases.items():
        cfg = CreditConfig.from_dict(base | fields)
        out[name or f"{cfg.profile}/{cfg.estimator}"] = cfg
    return out


def run_timeline(args: argparse.Namespace) -> int:
    from engine.timeline.store import job_timeline_file, update_timeline

    schemes = schemes_from_args(args)
    out = args.out
    if out is None:
        if not args.run.is_dir():
            raise ValueError("--out is needed for a run that is one file (a run folder's default is in the folder)")
        out = job_timeline_file(args.run)
    start = time.perf_counter()
    runner = None
    if args.ray:
        from engine.timeline.raydata import connect, timeline_runner

        print(connect(args.ray), file=sys.stderr)
        runner = timeline_runner(args.gpus_per_step)

    def progress(fraction: float, message: str) -> None:
        print(f"\r{fraction:6.1%} {message}", end="", file=sys.stderr, flush=True)

    tl = update_timeline(args.run, schemes, out, progress, fmt=args.fmt, runner=runner)
    print(file=sys.stderr)
    for problem in tl.problems:
        print(f"problem: {problem}", file=sys.stderr)
    for file, why in tl.index.pending:
        print(f"pending: {file}: {why}; read once it is complete", file=sys.stderr)
    steps = sorted({r["step"] for r in tl.rows})
    print(
        f"wrote {len(tl.rows)} rows ({len(steps)} steps × {len(schemes)} scheme(s)) to {out}: "
        f"{tl.computed} step source(s) computed{ray_runner_note(args)}, {tl.reused} reused, "
        f"{len(tl.problems)} problem(s), {time.perf_counter() - start:.1f}s"
    )
    return 0 if tl.rows else 1
