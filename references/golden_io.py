"""What every reference harness shares (stdlib only, so each harness's own environment can import it): the
golden-file JSON encoding of the project's format (tests/golden/README.md), the pinned-version check, and the
write-or-``--check`` step that makes a rerun reproduce the committed files byte for byte."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parents[1] / "tests" / "golden"


def encode(x):
    """``x`` with non-finite floats as the strings "nan", "inf", "-inf" (nested lists and dicts)."""
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, list):
        return [encode(v) for v in x]
    if isinstance(x, dict):
        return {k: encode(v) for k, v in x.items()}
    return x


def decode(x):
    """The inverse of ``encode`` on nested lists of numbers."""
    if isinstance(x, str):
        return float(x)
    if isinstance(x, list):
        return [decode(v) for v in x]
    return x


def dump(data: dict) -> str:
    return json.dumps(encode(data), indent=1, allow_nan=False)


def parse_args(doc: str, add_arguments=None) -> argparse.Namespace:
    """``--check`` and ``--out-dir``, plus whatever ``add_arguments(parser)`` adds (a harness's own options)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the files in tests/golden, write nothing")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    if add_arguments is not None:
        add_arguments(parser)
    return parser.parse_args()


def pinned(versions: dict[str, tuple[str, str]], requirements: str) -> bool:
    """True when every package runs at its pinned version ({name: (found, pinned)}); else says what differs."""
    if all(found == pin for found, pin in versions.values()):
        return True
    need = " and ".join(f"{name} {pin}" for name, (_, pin) in versions.items())
    found = " and ".join(f"{name} {found}" for name, (found, _) in versions.items())
    print(f"need {need} ({requirements}), found {found}", file=sys.stderr)
    return False


def write_or_check(outputs: dict[str, str], out_dir: Path, check: bool) -> int:
    """Write each file's text (``check``: compare with the file instead, writing nothing); 1 if any differs."""
    status = 0
    for file_name, text in outputs.items():
        path = out_dir / file_name
        if check:
            same = path.exists() and path.read_text() == text
            print(f"{'same' if same else 'DIFFERENT'}: {path}")
            status |= 0 if same else 1
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(json.loads(text)['cases'])} cases)")
    return status


def verify_checkout(src: Path, files: dict[str, str], repo: str, commit: str) -> None:
    """Refuse a source checkout ``src`` whose pinned ``files`` ({relative path: sha256}) are missing or differ (the
    harness must run exactly the pinned code); note on stderr when its git HEAD is not ``commit`` (the files are what
    counts: they are the same in a tarball of the commit)."""
    bad = []
    for rel, want in files.items():
        path = src / rel
        if not path.is_file():
            bad.append(f"{rel}: missing")
        elif (got := hashlib.sha256(path.read_bytes()).hexdigest()) != want:
            bad.append(f"{rel}: sha256 {got} != pinned {want}")
    if bad:
        raise SystemExit(f"{src} is not {repo} at {commit}:\n  " + "\n  ".join(bad))
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "not a git checkout"
    if head != commit:
        print(f"note: {src} HEAD is {head}, not {commit}; its pinned files match", file=sys.stderr)
