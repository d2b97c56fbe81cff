"""A timeline on disk: one Parquet row per (step, scheme), read back as the ``previous`` rows of the next update.

``update_timeline(run, schemes, out)`` reads ``out`` when it exists (its rows are reused where their source stamp
and scheme key are unchanged), computes the rest (``engine.timeline.compute``) and writes ``out`` again,
atomically. The command line's ``timeline --out`` and the dashboard's disk cache are both this file.

Columns: ``step``, ``scheme``, ``scheme_key``, ``source`` (the step's first file, relative to the run folder),
``stamp`` (name:mtime_ns:size of each of its files), ``error``, ``notes``, ``trajectories``, ``tokens``, every
statistic of ``engine.timeline.stats`` (float64; NaN where the step cannot say), ``turn_credit_share``
(list<double>) and one ``lint_<check>`` column (int64, 0 where the check flags nothing) per check that flagged
something in some step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config import CreditConfig
from engine.timeline.compute import KEY_COLUMNS, Progress, Timeline, timeline_rows
from engine.timeline.stats import QUANTILE_COLUMNS, STATISTICS

TEXT_COLUMNS = ("scheme", "scheme_key", "source", "stamp", "error", "notes")
COUNT_COLUMNS = ("step", "trajectories", "tokens")
FLOAT_COLUMNS = (*STATISTICS, *QUANTILE_COLUMNS)
COLUMNS = (*KEY_COLUMNS, "error", "notes", "trajectories", "tokens", *FLOAT_COLUMNS, "turn_credit_share")


def lint_columns(rows: list[dict]) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("lint_")})


def to_table(rows: list[dict]) -> pa.Table:
    """The rows as an Arrow table with the columns of the module docstring."""
    arrays = {}
    for name in COLUMNS:
        values = [r.get(name) for r in rows]
        if name in TEXT_COLUMNS:
            arrays[name] = pa.array([v or "" for v in values], type=pa.string())
        elif name in COUNT_COLUMNS:
            arrays[name] = pa.array([int(v or 0) for v in values], type=pa.int64())
        elif name == "turn_credit_share":
            arrays[name] = pa.array([list(v or []) for v in values], type=pa.list_(pa.float64()))
        else:
            arrays[name] = pa.array([float("nan") if v is None else float(v) for v in values], type=pa.float64())
    for name in lint_columns(rows):
        arrays[name] = pa.array([int(r.get(name, 0)) for r in rows], type=pa.int64())
    return pa.table(arrays)


def write_timeline(rows: list[dict], path: str | Path) -> None:
    """Write ``rows`` to ``path`` (Parquet), atomically: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(to_table(rows), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_timeline(path: str | Path) -> list[dict]:
    """The rows of a timeline file ([] when there is none or it is not one: it is then recomputed whole)."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException):
        return []
    if not set(COLUMNS) <= set(table.column_names):  # an older layout: recomputed
        return []
    return table.to_pylist()


def update_timeline(
    run: str | Path,
    schemes: Mapping[str, CreditConfig],
    out: str | Path,
    progress: Progress | None = None,
    **kwargs,
) -> Timeline:
    """The timeline of ``run`` under ``schemes``, reusing what ``out`` holds, written back to ``out``."""
    previous = read_timeline(out)
    timeline = timeline_rows(run, schemes, previous, progress, **kwargs)
    if timeline.computed or not previous or len(timeline.rows) != len(previous):  # new, changed or gone steps
        write_timeline(timeline.rows, out)
    return timeline
