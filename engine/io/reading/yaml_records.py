"""YAML documents that hold a list of records (OpenPipe ART's trajectory logs), read with ``yaml.safe_load`` only.

A YAML file is one document, parsed whole, so it is refused (as a problem) above ``ctx.max_bytes``. Detection
treats a file as YAML when its first non-blank line starts a block sequence (``- ``), which is how
``yaml.dump`` writes a list and which no JSON or JSONL file does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import yaml

from engine.io.reading.context import LoadContext
from engine.io.reading.problems import RecordError
from engine.io.reading.records import BOM

PEEK_BYTES = 4096
_SURROGATE = re.compile("[\ud800-\udfff]")
LONE_SURROGATE = "text with a lone UTF-16 surrogate (a \\udXXX escape without its pair)"


def _lone_surrogate(value: object) -> bool:
    """True if a string (or key) in ``value`` holds a lone surrogate, which YAML's ``\\u`` escapes can write and no
    tokenizer or encoder takes. Each object is visited once, so that aliases shared many times cost nothing."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return True
        elif isinstance(v, (dict, list)) and id(v) not in seen:
            seen.add(id(v))
            stack.extend([*v.keys(), *v.values()] if isinstance(v, dict) else v)
    return False


def looks_like_yaml_list(path: str) -> bool:
    """True if the first non-blank line of ``path`` starts a YAML block sequence (``- ...``)."""
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
    if head.startswith(BOM):
        head = head[len(BOM) :]
    first = next((line for line in head.splitlines() if line.strip()), b"")
    return first.startswith(b"- ") or first.rstrip() == b"-"


def iter_yaml_records(path: str, ctx: LoadContext) -> Iterator[tuple[int | None, str, object]]:
    """Yield ``(None, "[i].", item)`` for each item of the YAML list in ``path``; problems for what cannot be read."""
    size = os.path.getsize(path)
    if size > ctx.max_bytes:
        ctx.problem(None, None, f"YAML document of {size:,} bytes is over the {ctx.max_bytes:,}-byte limit (max_bytes)")
        return
    with open(path, "rb") as f:
        raw = f.read()
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        ctx.problem(line, None, f"invalid YAML: {getattr(err, 'problem', None) or err}")
        return
    except RecursionError:
        ctx.problem(None, None, "invalid YAML: nested too deeply")
        return
    if not isinstance(doc, list):
        ctx.problem(None, None, f"expected a YAML list of records, got {type(doc).__name__}")
        return
    for i, item in enumerate(doc):
        if _lone_surrogate(item):
            ctx.log.add_error(ctx.file, None, RecordError(None, LONE_SURROGATE), f"[{i}].")
            continue
        yield None, f"[{i}].", item
