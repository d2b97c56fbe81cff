"""``python -m engine compute``: per-token credit for every trajectory of a run, written as Parquet (or CSV).

Scheme options are generated from ``CreditConfig``'s fields (``--estimator gae --gamma 0.99 …``, help from
``FIELD_HELP``); ``--scheme FILE.json`` reads a scheme exported by the dashboard, and options given on the
command line override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path

from engine.config import FIELD_HELP, CreditConfig


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _parse_weights(text: str) -> tuple[tuple[str, float], ...]:
    """'a=0.1,b=0.2' → (('a', 0.1), ('b', 0.2)); '' → ()."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, w = part.partition("=")
        if not _:
            raise argparse.ArgumentTypeError(f"weights are name=value pairs, got {part!r}")
        out.append((name.strip(), float(w)))
    return tuple(out)


def add_scheme_options(parser: argparse.ArgumentParser) -> None:
    """One option per CreditConfig field (device excluded), all defaulting to 'not given'."""
    group = parser.add_argument_group("credit scheme (CreditConfig fields; unset = profile/default)")
    group.add_argument("--scheme", type=Path, help="JSON scheme (the dashboard's export); options override it")
    hints = typing.get_type_hints(CreditConfig)
    for f in dataclasses.fields(CreditConfig):
        if f.name == "device":
            continue
        flag = "--" + f.name.replace("_", "-")
        hint = str(hints[f.name])
        if f.name in ("turn_weights", "global_weights"):
            kind, meta = _parse_weights, "NAME=W,…"
        elif f.name == "global_exclude_prefixes":
            kind, meta = (lambda s: tuple(p for p in s.split(",") if p)), "P1,P2"
        elif "bool" in hint:
            kind, meta = _parse_bool, "BOOL"
        elif "int" in hint and "float" not in hint:
            kind, meta = int, "INT"
        elif "float" in hint:
            kind, meta = float, "X"
        else:
            kind, meta = str, "NAME"
        group.add_argument(flag, dest=f.name, type=kind, metavar=meta, default=None, help=FIELD_HELP.get(f.name))


def scheme_from_args(args: argparse.Namespace) -> CreditConfig:
    base: dict = {}
    if getattr(args, "scheme", None):
        base = json.loads(Path(args.scheme).read_text())
        base.pop("device", None)
    for f in dataclasses.fields(CreditConfig):
        if f.name == "device":
            continue
        v = getattr(args, f.name, None)
        if v is not None:
            base[f.name] = v
    return CreditConfig.from_dict(base)


def add_compute_parser(sub) -> None:
    p = sub.add_parser(
        "compute",
        help="per-token credit of every trajectory → Parquet/CSV",
        description="Load RUN (any supported format), run the credit scheme, write one row per token.",
    )
    p.add_argument("run", type=Path, help="run file (native JSONL/Parquet or any supported adapter input)")
    p.add_argument("--out", type=Path, required=True, help="output .parquet or .csv")
    p.add_argument("--format", dest="fmt", default=None, help="force an input adapter (default: detect)")
    p.add_argument("--tokenizer", default=None, help="Hugging Face tokenizer name or path (default: Qwen2.5)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: CUDA when available)")
    add_scheme_options(p)
    p.set_defaults(handler=run_compute)


def run_compute(args: argparse.Namespace) -> int:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from engine.credit import compute_credit
    from engine.export import token_table
    from engine.io import load_run

    cfg = scheme_from_args(args)
    res = load_run(args.run, fmt=args.fmt, tokenizer=args.tokenizer)
    for problem in res.problems:
        print(f"problem: {problem}", file=sys.stderr)
    run = res.run
    if not run.trajectories:
        print("error: no trajectory could be loaded", file=sys.stderr)
        return 2
    batch = run.to_batch()
    result = compute_credit(batch, cfg, device=args.device)
    texts = [run.token_texts(i) for i in range(len(run.trajectories))]
    groups = [str(t.group_id) for t in run.trajectories]
    table = token_table(batch, result, texts, groups)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".csv":
        pacsv.write_csv(table, args.out)
    else:
        pq.write_table(table, args.out)
    print(
        f"wrote {table.num_rows} tokens of {batch.batch_size} trajectories to {args.out} "
        f"({cfg.estimator}, profile {cfg.profile}, {result.device}, {result.seconds * 1000:.1f} ms; "
        f"{len(res.problems)} problem(s))"
    )
    return 0
