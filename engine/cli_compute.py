"""``python -m engine compute``: per-token credit for every trajectory of a run, written as Parquet (or CSV).

``--out FILE.parquet`` / ``FILE.csv``: one table of the whole run (a run of several steps computes each alone).
``--out FOLDER`` (no such suffix), or any ``--ray``: a Parquet dataset partitioned by step, written one step
source at a time (``engine.timeline.tokens``), here or with ``--ray ADDRESS`` on a Ray cluster
(``engine.timeline.raydata``); both write the same dataset.

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


def add_ray_options(parser: argparse.ArgumentParser) -> None:
    """``--ray ADDRESS`` and ``--gpus-per-step F``, shared by ``compute`` and ``timeline``."""
    group = parser.add_argument_group("Ray (steps computed on a cluster; pip install 'ray[data]')")
    group.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="compute the steps with Ray Data on the cluster at ADDRESS (auto, ray://host:10001) or, with 'local', "
        "on a Ray started on this machine's cores; the output is the same as without it",
    )
    group.add_argument(
        "--gpus-per-step",
        type=float,
        default=0.0,
        metavar="F",
        help="GPUs each step's task asks for (e.g. 0.25); the engine then computes on CUDA. Untested: no GPU here",
    )


def ray_runner_note(args: argparse.Namespace) -> str:
    if not args.ray:
        return ""
    return f" on Ray ({args.ray}" + (f", {args.gpus_per_step:g} GPU per step)" if args.gpus_per_step else ")")


def add_compute_parser(sub) -> None:
    p = sub.add_parser(
        "compute",
        help="per-token credit of every trajectory → Parquet/CSV",
        description="Load RUN (any supported format), run the credit scheme, write one row per token.",
    )
    p.add_argument("run", type=Path, help="run file or folder (native JSONL/Parquet or any supported adapter input)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output .parquet or .csv (one table), or a folder: a Parquet dataset partitioned by step (step=N/)",
    )
    p.add_argument("--format", dest="fmt", default=None, help="force an input adapter (default: detect)")
    p.add_argument("--tokenizer", default=None, help="Hugging Face tokenizer name or path (default: Qwen2.5)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: CUDA when available)")
    add_ray_options(p)
    add_scheme_options(p)
    p.set_defaults(handler=run_compute)


def run_compute(args: argparse.Namespace) -> int:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from engine.credit import compute_credit
    from engine.export import token_table
    from engine.io import load_run

    cfg = scheme_from_args(args)
    if args.ray or args.out.suffix.lower() not in (".parquet", ".csv"):
        return compute_steps(args, cfg)
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


def compute_steps(args: argparse.Namespace, cfg: CreditConfig) -> int:
    """``compute`` into a dataset partitioned by step, here or on Ray; the manifest's problems to stderr."""
    import functools
    import time

    from engine.timeline import tokens

    if args.out.suffix.lower() == ".csv":
        raise ValueError("--ray writes a Parquet dataset: give --out a folder, not a .csv file")
    start = time.perf_counter()
    writer = functools.partial(tokens.write_here, device=args.device)
    if args.ray:
        from engine.timeline.raydata import connect, write_with_ray

        print(connect(args.ray), file=sys.stderr)
        writer = functools.partial(write_with_ray, gpus_per_step=args.gpus_per_step)
    runner = f"ray {args.ray}" if args.ray else "this process"
    manifest = tokens.compute_dataset(
        args.run, cfg, args.out, fmt=args.fmt, writer=writer, runner=runner, tokenizer=args.tokenizer
    )
    problems = tokens.problems_of(manifest)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    total = sum(manifest["tokens"].values())
    if not total:
        print(f"error: no step could be computed; {args.out / tokens.MANIFEST} lists why", file=sys.stderr)
        return 2
    print(
        f"wrote {total} tokens of {len(manifest['steps'])} step(s) to {args.out}/step=N/{ray_runner_note(args)} "
        f"({cfg.estimator}, profile {cfg.profile}; {len(problems)} problem(s), {time.perf_counter() - start:.1f}s)"
    )
    return 0
