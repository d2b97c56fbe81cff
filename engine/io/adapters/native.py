"""Adapter ``native``: our own format, JSONL or Parquet (see ``engine.io.store.native`` /
``engine.io.store.native_parquet``).

Steps: a record's ``step`` field; else a file named ``<N>.jsonl`` / ``step_<N>.parquet`` / ``…_step<N>.jsonl``
or a folder named ``step_<N>`` / ``step<N>`` (a word "step" or a bare number: ``part_1.jsonl`` is a shard, not a step).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from engine.io.data.model import Trajectory
from engine.io.reading.context import LoadContext
from engine.io.store.native import is_header, read_native_jsonl
from engine.io.store.native_parquet import is_native_parquet, read_native_parquet

NAME = "native"
STEP_FILE = re.compile(r"(?:(?:.*[_.-])?step[_-]?)?(\d+)\.(?:jsonl|json|parquet)", re.IGNORECASE)
STEP_FOLDER = re.compile(r"step[_-]?(\d+)", re.IGNORECASE)


def sniff(rec: object) -> bool:
    if is_header(rec):
        return True
    return isinstance(rec, Mapping) and isinstance(rec.get("segments"), list)


def sniff_columns(names: list[str]) -> bool:
    return is_native_parquet(names)


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        return read_native_parquet(path, ctx)
    return read_native_jsonl(path, ctx)
