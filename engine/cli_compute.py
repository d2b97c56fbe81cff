"""``python -m engine compute``: per-token credit for every trajectory of a run, written as Parquet (or CSV).

Scheme options are generated from ``CreditConfig``'s field declarations (``--estimator gae --gamma 0.99 …``,
with each field's help, choices and range); ``--scheme FILE.json`` reads a scheme exported by the dashboard, and
options given on the command line override it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import config
from engine.config import CreditConfig


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


def _parse_list(kind):
    return lambda text: tuple(kind(p.strip()) for p in text.split(",") if p.strip())


# A field's declared type (engine.config.HINTS, without '| None') → how its option reads text, and its metavar.
PARSERS = {
    "bool": (_parse_bool, "BOOL"),
    "int": (int, "INT"),
    "float": (float, "X"),
    "str": (str, "NAME"),
    "tuple[str, ...]": (_parse_list(str), "A,B"),
    "tuple[float, ...]": (_parse_list(float), "X,Y"),
    "tuple[tuple[str, float], ...]": (_parse_weights, "NAME=W,…"),
}


def option_help(name: str) -> str:
    """A field's help with what it accepts: its choices or range, and where an unset value comes from."""
    text = config.FIELD_HELP[name]
    allowed, within = config.choices(name), config.bounds(name)
    if allowed is not None:
        text += " One of: " + ", ".join(map(str, allowed)) + "."
    if each := config.FIELDS[name].metadata["each"]:
        text += " Each one of: " + ", ".join(each) + "."
    if within is not None:
        text += f" In {config.range_text(within)}."
    if name in config.CONVENTIONS:
        text += " Unset: the profile's."
    return text


def add_scheme_options(parser: argparse.ArgumentParser, many: bool = False) -> None:
    """One option per CreditConfig field, from its declaration, all defaulting to 'not given'; ``--scheme`` reads a
    JSON scheme, or with ``many`` one or more (the field options then apply to each)."""
    group = parser.add_argument_group("credit scheme (CreditConfig fields; unset = profile/default)")
    if many:
        group.add_argument(
            "--scheme",
            type=Path,
            nargs="+",
            help="JSON scheme files (the dashboard's export), one or more; the field options apply to each",
        )
    else:
        group.add_argument("--scheme", type=Path, help="JSON scheme (the dashboard's export); options override it")
    for name, hint in config.HINTS.items():
        kind, meta = PARSERS[hint.removesuffix(" | None")]
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, dest=name, type=kind, metavar=meta, default=None, help=option_help(name))


def scheme_from_args(args: argparse.Namespace) -> CreditConfig:
    base: dict = {}
    if getattr(args, "scheme", None):
        base = json.loads(Path(args.scheme).read_text())
    for name in config.FIELDS:
        v = getattr(args, name, None)
        if v is not None:
            base[name] = v
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
