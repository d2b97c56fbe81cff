"""``python -m engine lint RUN [scheme options] [--json]``: the credit lints of a run under a scheme.

Prints one line per finding (severity, check, trajectories and tokens affected, what is wrong) or, with
``--json``, ``{"run", "scheme", "trajectories", "problems", "findings"}``. Exit status: 1 when an error-level
finding exists, 0 otherwise, 2 when the input is unusable (missing file, nothing loadable, a scheme that cannot
run on this data).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from engine.cli_compute import add_scheme_options, scheme_from_args
from engine.config import CreditConfig
from engine.lint.model import SEVERITIES, Finding

EXIT_OK, EXIT_ERRORS, EXIT_UNUSABLE = 0, 1, 2


def add_lint_parser(sub) -> None:
    p = sub.add_parser(
        "lint",
        help="credit lints: where a scheme puts credit it should not",
        description="Load RUN, compute its credit under the scheme, and report what the credit lints find "
        "(exit 1 on an error-level finding, 2 on unusable input). --list-checks lists every check.",
    )
    p.add_argument("run", type=Path, nargs="?", help="run file or directory (any supported format)")
    p.add_argument("--json", dest="as_json", action="store_true", help="print the findings as JSON")
    p.add_argument("--explain", action="store_true", help="print each finding's explanation under it")
    p.add_argument("--checks", default=None, help="comma-separated subset of checks to run (default: all)")
    p.add_argument("--list-checks", action="store_true", help="list the registered checks and exit")
    p.add_argument("--format", dest="fmt", default=None, help="force an input adapter (default: detect)")
    p.add_argument("--tokenizer", default=None, help="Hugging Face tokenizer name or path (default: the run's)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: CUDA when available)")
    add_scheme_options(p)
    p.set_defaults(handler=run_lint)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return EXIT_UNUSABLE


def run_lint(args: argparse.Namespace) -> int:
    from engine.credit import compute_credit
    from engine.io import load_run
    from engine.lint import CHECKS, run_lints

    if args.list_checks:
        print(format_checks(CHECKS))
        return EXIT_OK
    if args.run is None:
        return _fail("RUN is required (or --list-checks)")
    checks = [c.strip() for c in args.checks.split(",") if c.strip()] if args.checks else None
    try:
        cfg = scheme_from_args(args)
        res = load_run(args.run, fmt=args.fmt, tokenizer=args.tokenizer)
    except (OSError, ValueError) as e:
        return _fail(str(e))
    for problem in res.problems:
        print(f"problem: {problem}", file=sys.stderr)
    run = res.run
    if not run.trajectories:
        return _fail(f"{args.run}: no trajectory could be loaded")
    try:
        batch = run.to_batch()
        result = compute_credit(batch, cfg, device=args.device)
        findings = run_lints(batch, cfg, result=result, run=run, checks=checks)
    except ValueError as e:
        return _fail(f"the scheme cannot run on {args.run}: {e}")
    if args.as_json:
        out = {
            "run": str(args.run),
            "scheme": cfg.to_dict(),
            "trajectories": batch.batch_size,
            "problems": [str(p) for p in res.problems],
            "findings": [f.to_dict() for f in findings],
        }
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(format_findings(findings, batch.batch_size, f"{args.run} ({scheme_label(cfg)})", args.explain))
    return EXIT_ERRORS if any(f.severity == "error" for f in findings) else EXIT_OK


def scheme_label(cfg) -> str:
    mode = "" if cfg.stepwise_mode == "trajectory" else f", {cfg.stepwise_mode}"
    return f"{cfg.estimator}, profile {cfg.profile}, {cfg.loss_agg_mode}{mode}"


def format_findings(findings: list[Finding], n_rows: int, title: str, explain: bool = False) -> str:
    """A plain-text table: severity, check, trajectories, tokens, message (and explanations if asked)."""
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
    lines = [f"{title}: {n_rows} trajectories; {summary}"]
    if not findings:
        return lines[0] + "\nno findings"
    width = max(len(f.check) for f in findings)
    lines.append(f"{'severity':8}  {'check':{width}}  {'traj':>7}  {'tokens':>6}  message")
    for f in findings:
        tok = str(f.num_tokens) if f.tokens else "-"
        lines.append(f"{f.severity:8}  {f.check:{width}}  {len(f.rows):>3}/{n_rows:<3}  {tok:>6}  {f.message}")
        if explain:
            lines += textwrap.wrap(f.explanation, 110, initial_indent=" " * 10, subsequent_indent=" " * 10)
    return "\n".join(lines)


def format_checks(checks) -> str:
    width = max(len(n) for n in checks)
    rows = [f"{'check':{width}}  {'severity':8}  description [reference]"]
    rows += [f"{c.name:{width}}  {c.severity:8}  {c.description} [{c.reference}]" for c in checks.values()]
    return "\n".join(rows)


def scheme_flags(cfg: CreditConfig) -> str:
    """CLI flags that reproduce ``cfg``: the profile plus every field that differs from the profile's default."""
    base = CreditConfig(profile=cfg.profile)
    flags = [] if cfg.profile == "verl" else [f"--profile {cfg.profile}"]
    for name, value in cfg.to_dict().items():
        if name == "profile" or value == base.to_dict()[name]:
            continue
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        flags.append(f"--{name.replace('_', '-')} {value}")
    return " ".join(flags) or "(defaults)"
