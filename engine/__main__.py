"""``python -m engine {compute,convert,synth,lint,timeline}``; ``--help`` on each documents it."""

from __future__ import annotations

import argparse
import sys

from engine.cli_compute import add_compute_parser
from engine.perf import tune_allocator


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine",
        description="CreditLens engine: per-token credit assignment of RL trainers, from the command line.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_compute_parser(sub)
    try:
        from engine.cli import add_convert_parser, add_synth_parser
    except ImportError:
        pass
    else:
        add_convert_parser(sub)
        add_synth_parser(sub)
    try:
        from engine.lint.cli import add_lint_parser
    except ImportError:
        pass
    else:
        add_lint_parser(sub)
    try:
        from engine.timeline.cli import add_timeline_parser
    except ImportError:
        pass
    else:
        add_timeline_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_allocator()
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError, NotImplementedError, ImportError) as err:  # bad input, scheme or setup
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
