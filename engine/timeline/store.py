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

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config import CreditConfig
from engine.io.reading.problems import Problem
from engine.timeline.compute import KEY_COLUMNS, Progress, Timeline, rows_by_key, scheme_key, timeline_rows
from engine.timeline.stats import QUANTILE_COLUMNS, STATISTICS

TEXT_COLUMNS = ("scheme", "scheme_key", "source", "stamp", "error", "notes")
COUNT_COLUMNS = ("step", "trajectories", "tokens")
FLOAT_COLUMNS = (*STATISTICS, *QUANTILE_COLUMNS)
COLUMNS = (*KEY_COLUMNS, "error", "notes", "trajectories", "tokens", *FLOAT_COLUMNS, "turn_credit_share")


def lint_columns(rows: list[dict]) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("lint_")})


PROBLEMS_KEY = b"creditlens.problems"  # the file's metadata: the problems of the steps its rows came from
SCHEMES_KEY = b"creditlens.schemes"  # and each scheme's fields, by scheme key


def to_table(
    rows: list[dict],
    problems: Mapping[tuple[str, str], list[Problem]] | None = None,
    schemes: Mapping[str, CreditConfig] | None = None,
) -> pa.Table:
    """The rows as an Arrow table with the columns of the module docstring; ``problems`` ((source, stamp) → its
    problems; ("", "") for the files the run's index could not read) and ``schemes`` (each scheme's fields, by its
    key) in its metadata, as JSON."""
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
    listed = [{"source": k[0], "stamp": k[1]} | asdict(p) for k in sorted(problems or {}) for p in problems[k]]
    fields = {scheme_key(cfg): cfg.to_dict() for cfg in (schemes or {}).values()}
    meta = {PROBLEMS_KEY: json.dumps(listed), SCHEMES_KEY: json.dumps(fields, default=str)}
    return pa.table(arrays).replace_schema_metadata(meta)


def write_timeline(
    rows: list[dict],
    path: str | Path,
    problems: Mapping[tuple[str, str], list[Problem]] | None = None,
    schemes: Mapping[str, CreditConfig] | None = None,
) -> None:
    """Write ``rows`` (with ``problems`` and ``schemes``, ``to_table``) to ``path`` (Parquet), atomically: a reader
    never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(to_table(rows, problems, schemes), tmp)
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
    want = to_table([]).schema
    if not set(COLUMNS) <= set(table.column_names):  # an older layout: recomputed
        return []
    if any(table.schema.field(f.name).type != f.type for f in want) or any(
        table.schema.field(n).type != pa.int64() for n in table.column_names if n.startswith("lint_")
    ):  # not a timeline this package wrote: recomputed
        return []
    return table.to_pylist()


def _metadata(path: str | Path, key: bytes, empty: str):
    try:
        return json.loads((pq.read_schema(path).metadata or {}).get(key, empty))
    except (OSError, pa.ArrowException, ValueError):
        return json.loads(empty)


def read_timeline_problems(path: str | Path) -> dict[tuple[str, str], list[Problem]]:
    """The problems a timeline file keeps, by (source, stamp) ({} when it keeps none or cannot be read)."""
    out: dict[tuple[str, str], list[Problem]] = {}
    try:
        for p in _metadata(path, PROBLEMS_KEY, "[]"):
            key = (p.pop("source"), p.pop("stamp"))
            out.setdefault(key, []).append(Problem(**p))
    except (TypeError, KeyError, AttributeError):  # not what this package writes: no problems kept
        return {}
    return out


def read_timeline_schemes(path: str | Path) -> dict[str, CreditConfig]:
    """The schemes a timeline file was computed under, by scheme key ({} when it does not say, or says what is not
    a scheme)."""
    out = {}
    fields = _metadata(path, SCHEMES_KEY, "{}")
    for key, d in fields.items() if isinstance(fields, dict) else []:
        try:
            out[key] = CreditConfig.from_dict(d)
        except (ValueError, TypeError):
            continue
    return out


JOB_FOLDER = ".creditlens"  # a run folder's own timelines (hidden: a folder load does not read it)
SEED_MAX_BYTES = 256 << 20  # a job's timeline larger than this, decoded, is not read (2,000 steps: a few MB)


def job_timeline_file(run: str | Path) -> Path:
    """Where ``python -m engine timeline RUN`` writes a folder run's timeline when ``--out`` is not given."""
    return Path(run) / JOB_FOLDER / "timeline.parquet"


def job_timelines(run: str | Path) -> list[Path]:
    """The timeline files a job wrote into the run folder's ``.creditlens/`` (regular files, no links)."""
    folder = Path(run) / JOB_FOLDER
    if not folder.is_dir() or folder.is_symlink():
        return []
    return [f for f in sorted(folder.glob("*.parquet")) if f.is_file() and not f.is_symlink()]


def seed_rows(files: list[Path]) -> tuple[list[dict], dict]:
    """Rows (and their problems) of other timeline files of the same run, a (source, stamp, scheme key) from the
    first file that has it: a timeline a job computed (on Ray, elsewhere) is reused, not recomputed. A file that is
    not a timeline, or too large, is passed over."""
    known: set[tuple[str, str, str]] = set()
    rows, problems = [], {}
    for file in files:
        if _decoded_bytes(file) > SEED_MAX_BYTES:
            continue
        new = [r for k, rs in rows_by_key(read_timeline(file)).items() if k not in known for r in rs]
        known |= rows_by_key(new).keys()
        rows += new
        problems = read_timeline_problems(file) | problems
    return rows, problems


def _decoded_bytes(file: Path) -> float:
    """The size of ``file``'s columns once decoded, from its footer (inf when it has none: not read)."""
    try:
        meta = pq.ParquetFile(file).metadata
        return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    except (OSError, pa.ArrowException):
        return float("inf")


def update_timeline(
    run: str | Path,
    schemes: Mapping[str, CreditConfig],
    out: str | Path,
    progress: Progress | None = None,
    seeds: list[Path] = (),
    **kwargs,
) -> Timeline:
    """The timeline of ``run`` under ``schemes``, reusing what ``out`` holds, written back to ``out``. ``seeds``:
    other timeline files of the run (``job_timelines``) whose rows are reused where ``out`` has none."""
    previous = read_timeline(out)
    kept = read_timeline_problems(out) if previous else {}
    others = [f for f in seeds if Path(f) != Path(out)]
    timeline = timeline_rows(
        run, schemes, previous, progress, previous_problems=kept, seeds=lambda: seed_rows(others), **kwargs
    )
    described = {scheme_key(c) for c in schemes.values()} <= set(read_timeline_schemes(out)) if previous else False
    changed = timeline.computed or timeline.seeded or len(timeline.rows) != len(previous)  # new, changed, gone
    if changed or not described:
        write_timeline(timeline.rows, out, timeline.source_problems, schemes)
    return timeline
