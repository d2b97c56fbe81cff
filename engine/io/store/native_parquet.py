"""The native format, Parquet flavour: the fast path for big runs.

One row per trajectory: ``id``, ``group_id``, ``prompt`` (string), ``prompt_token_ids`` (list<int32>, null if
unknown), ``segments`` (list<struct<role, text, token_ids list<int32>, log_probs/ref_log_probs/values/scores
list<float32> (null when absent)>>), ``turn_rewards``, ``global_rewards``, ``metadata`` (JSON text, so floats and
nesting round-trip exactly). The run header sits in the schema metadata under ``creditlens``.
Reading goes batch by batch over row groups and slices numpy views out of the Arrow buffers: no per-token
Python work. A file whose footer cannot be read raises ``ValueError`` naming it; a row group that cannot be
decoded ends the read with one problem naming the rows skipped; a bad row is a problem ``row[i].<field>``.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from engine.io.data.model import FLOAT_DTYPE, PER_TOKEN_FIELDS, TOKEN_DTYPE, Trajectory
from engine.io.reading.context import LoadContext
from engine.io.reading.limits import check_parquet, decoded_bytes, decoded_over, text_columns
from engine.io.reading.problems import RecordError
from engine.io.store.native import HEADER_KEY, SCHEMA_ID, apply_header, trajectory_from_record

ROW_GROUP = 1024
JSON_COLUMNS = ("turn_rewards", "global_rewards", "metadata")


def _read_errors() -> tuple[type[Exception], ...]:
    """What pyarrow raises on a damaged file (``ArrowInvalid`` is a ``ValueError``, I/O errors ``OSError``)."""
    import pyarrow as pa

    return (pa.ArrowException, OSError, ValueError)


def open_parquet(path: Path):
    """``pq.ParquetFile`` of ``path``; ``ValueError`` naming the file if it is not readable Parquet."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except _read_errors() as e:
        raise ValueError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None


def with_dictionaries(pf, path: Path):
    """``pf`` reopened so that its string columns are read as dictionaries: what they decode to
    (``limits.decoded_bytes``) is then known before any value is materialised."""
    import pyarrow.parquet as pq

    names = text_columns(pf)
    if not names:
        return pf
    try:
        return pq.ParquetFile(path, read_dictionary=names)
    except _read_errors() as e:
        raise ValueError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None


def row_group_batches(pf, path: Path, batch_size: int) -> Iterator:
    """Record batches of ``pf``, one row group at a time, string columns as dictionaries (one dictionary per
    row group; pyarrow cannot hand over a nested column whose batch spans two). Where it cannot even within a
    row group (``ArrowNotImplementedError``), that row group's remaining rows come with plain strings."""
    import pyarrow as pa

    dpf = with_dictionaries(pf, path)
    for i in range(pf.num_row_groups):
        done = 0
        try:
            for batch in dpf.iter_batches(batch_size=batch_size, row_groups=[i]):
                done += batch.num_rows
                yield batch
        except pa.ArrowNotImplementedError:
            for batch in pf.iter_batches(batch_size=batch_size, row_groups=[i]):
                if done >= batch.num_rows:
                    done -= batch.num_rows
                    continue
                yield batch.slice(done)
                done = 0


def read_checked(path: Path, limit: int | None = None):
    """The whole table of Parquet file ``path`` (for the adapters that read one at once): its footer held
    against the load ceiling first (``limits.check_parquet``), then what its values decode to, before any string
    is decoded; ``ValueError`` naming the file over either (``limit``: the ceiling, default ``max_load_bytes``).
    The table is the one ``pf.read()`` gives."""
    import pyarrow as pa

    pf = open_parquet(path)
    check_parquet(pf, path, limit)
    try:
        batches = list(row_group_batches(pf, path, 1 << 16))
    except _read_errors() as e:
        raise ValueError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    rows = sum(b.num_rows for b in batches)
    why = decoded_over(path, f"its {rows:,} rows", sum(decoded_bytes(b) for b in batches), limit)
    if why:
        raise ValueError(f"{path}: {why}; refused before decoding")
    schema = pf.schema_arrow
    try:
        return pa.Table.from_batches([b.cast(schema) for b in batches], schema=schema)
    except _read_errors() as e:
        raise ValueError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None


def _schema():
    import pyarrow as pa

    seg = pa.struct(
        [("role", pa.string()), ("text", pa.large_string()), ("token_ids", pa.list_(pa.int32()))]
        + [(name, pa.list_(pa.float32())) for name in PER_TOKEN_FIELDS]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("group_id", pa.string()),
            ("prompt", pa.large_string()),
            ("prompt_token_ids", pa.list_(pa.int32())),
            ("segments", pa.list_(seg)),
            ("turn_rewards", pa.string()),
            ("global_rewards", pa.string()),
            ("metadata", pa.large_string()),
            ("step", pa.int64()),
        ]
    )


def _list_array(parts: list, dtype, pa_type):
    """Arrow list array from per-item numpy arrays (``None`` -> null) without per-element Python work."""
    import pyarrow as pa

    lengths = np.array([0 if p is None else len(p) for p in parts], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    present = [p for p in parts if p is not None]
    values = np.concatenate(present).astype(dtype, copy=False) if present else np.zeros(0, dtype=dtype)
    mask = pa.array([p is None for p in parts], type=pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa_type), mask=mask)


def _table(trajs):
    import pyarrow as pa

    segs = [s for t in trajs for s in t.segments]
    fields = [
        pa.array([s.role for s in segs], type=pa.string()),
        pa.array([s.text for s in segs], type=pa.large_string()),
        _list_array([s.token_ids for s in segs], TOKEN_DTYPE, pa.int32()),
    ] + [_list_array([getattr(s, n) for s in segs], FLOAT_DTYPE, pa.float32()) for n in PER_TOKEN_FIELDS]
    seg_struct = pa.StructArray.from_arrays(fields, fields=list(_schema().field("segments").type.value_type))
    seg_offsets = np.concatenate([[0], np.cumsum([len(t.segments) for t in trajs])]).astype(np.int32)
    columns = [
        pa.array([t.id for t in trajs], type=pa.string()),
        pa.array([t.group_id for t in trajs], type=pa.string()),
        pa.array([t.prompt for t in trajs], type=pa.large_string()),
        _list_array([t.prompt_token_ids for t in trajs], TOKEN_DTYPE, pa.int32()),
        pa.ListArray.from_arrays(pa.array(seg_offsets), seg_struct),
        pa.array([json.dumps(t.turn_rewards) for t in trajs], type=pa.string()),
        pa.array([json.dumps(t.global_rewards) for t in trajs], type=pa.string()),
        pa.array([json.dumps(t.metadata, ensure_ascii=False) for t in trajs], type=pa.large_string()),
        pa.array([t.step for t in trajs], type=pa.int64()),
    ]
    return pa.Table.from_arrays(columns, schema=_schema())


def write_native_parquet(trajectories: Iterable, header: dict, path: Path) -> None:
    """Write ``trajectories`` as native Parquet (zstd), row groups of 1024 trajectories, atomically, with
    ``header`` (a ``header_record``) in the schema metadata. ``trajectories`` is consumed once, one row group
    at a time, so a generator streams a run of any size."""
    import pyarrow.parquet as pq

    schema = _schema().with_metadata({HEADER_KEY: json.dumps(header[HEADER_KEY])})
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    items = iter(trajectories)
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            chunk = list(itertools.islice(items, ROW_GROUP))
            writer.write_table(_table(chunk).cast(schema))  # an empty run still gets its schema written
            while chunk := list(itertools.islice(items, ROW_GROUP)):
                writer.write_table(_table(chunk).cast(schema))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a generator or a record that failed half-way leaves no partial file


def is_native_parquet(column_names: list[str]) -> bool:
    return "segments" in column_names


class ListView:
    """numpy view of an Arrow list<primitive> column: item i is ``values[offsets[i]:offsets[i+1]]``."""

    def __init__(self, arr) -> None:
        self.offsets = arr.offsets.to_numpy()
        self.values = arr.values.to_numpy(zero_copy_only=False)
        self.valid = ~arr.is_null().to_numpy(zero_copy_only=False)

    def __getitem__(self, i: int):
        return self.values[self.offsets[i] : self.offsets[i + 1]] if self.valid[i] else None


def is_list_type(t) -> bool:
    """A list type whose item i is ``values[offsets[i]:offsets[i+1]]`` (not a list view or fixed-size list)."""
    import pyarrow as pa

    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _number_list(t) -> bool:
    import pyarrow as pa

    return pa.types.is_null(t) or (
        is_list_type(t) and any(f(t.value_type) for f in (pa.types.is_integer, pa.types.is_floating, pa.types.is_null))
    )


def check_columns(schema, path: Path) -> None:
    """``ValueError`` naming the column if one whose values the reader slices out of Arrow buffers has a type
    of another shape than the native schema's (a string column where token ids are expected): every row would
    be wrong the same way. Numbers of another width are fine (ids and values are checked row by row)."""
    import pyarrow as pa

    def refuse(name: str, t, want: str) -> ValueError:
        return ValueError(
            f"{path}: column {name!r} is {t}, expected {want} (the native Parquet schema); no row of this file "
            "can be read"
        )

    names = schema.names
    if "prompt_token_ids" in names and not _number_list(t := schema.field("prompt_token_ids").type):
        raise refuse("prompt_token_ids", t, "list<int32> (token ids)")
    if "step" in names and not (pa.types.is_integer(t := schema.field("step").type) or pa.types.is_null(t)):
        raise refuse("step", t, "int64 (the training step)")
    seg = schema.field("segments").type
    if pa.types.is_null(seg):
        return
    if not (is_list_type(seg) and pa.types.is_struct(seg.value_type)):
        raise refuse("segments", seg, "a list of segment structs (role, text, token_ids, log_probs, ...)")
    for child in seg.value_type:
        if child.name in ("token_ids", *PER_TOKEN_FIELDS) and not _number_list(child.type):
            raise refuse(
                f"segments.{child.name}", child.type, f"list<{'int32' if child.name == 'token_ids' else 'float'}>"
            )


class _Absent:
    """A column the file does not have (or has as all-null): None in every row."""

    def __getitem__(self, i: int) -> None:
        return None


def _list_view(arr):
    import pyarrow as pa

    return _Absent() if pa.types.is_null(arr.type) else ListView(arr)


def _pylist(arr) -> list:
    """``arr.to_pylist()``; a dictionary-encoded column decodes each dictionary entry once and the rows share
    it (a prompt repeated over a group is one string, not one per row)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(arr.type):
        return arr.to_pylist()
    values = arr.dictionary.to_pylist()
    return [None if i is None else values[i] for i in arr.indices.to_pylist()]


def _records(batch) -> Iterator[dict]:
    """Native record dicts (numpy slices inside) for one Arrow record batch (columns checked by
    ``check_columns``; a segment field the file lacks is None)."""
    import pyarrow as pa

    cols = {name: batch.column(name) for name in batch.schema.names}
    segs = cols["segments"]
    if pa.types.is_null(segs.type):
        segs = pa.array([None] * len(segs), type=pa.list_(pa.struct([("role", pa.string())])))
    seg_off = segs.offsets.to_numpy()
    structs = segs.values
    present = {f.name for f in structs.type}

    def field(name: str):
        return structs.field(name) if name in present else pa.nulls(len(structs))

    roles = _pylist(field("role"))
    texts = _pylist(field("text"))
    lists = {name: _list_view(field(name)) for name in ("token_ids",) + PER_TOKEN_FIELDS}
    ptids = _list_view(cols["prompt_token_ids"]) if "prompt_token_ids" in cols else None
    plain = {
        k: _pylist(cols[k])
        for k in ("id", "group_id", "prompt", "turn_rewards", "global_rewards", "metadata", "step")
        if k in cols
    }
    for i in range(batch.num_rows):
        seg_recs = []
        for j in range(seg_off[i], seg_off[i + 1]):
            rec = {"role": roles[j], "text": texts[j]}
            rec.update({name: view[j] for name, view in lists.items()})
            seg_recs.append(rec)
        out = {"segments": seg_recs, "prompt_token_ids": ptids[i] if ptids is not None else None}
        out.update({k: v[i] for k, v in plain.items()})
        yield out


def _row_trajectory(rec: dict, default_id: str) -> Trajectory:
    return trajectory_from_record(_decode_json_columns(rec), default_id)


def _decode_json_columns(rec: dict) -> dict:
    """Parse the JSON text columns of one row; ``RecordError`` naming the column if one is not JSON."""
    for k in JSON_COLUMNS:
        if rec.get(k) is not None and not isinstance(rec[k], (str, bytes)):
            raise RecordError(k, f"expected JSON text, got {type(rec[k]).__name__}")
        if rec.get(k):
            try:
                rec[k] = json.loads(rec[k])
            except (ValueError, RecursionError) as e:
                raise RecordError(k, f"expected JSON text ({e})") from None
    return rec


def _apply_header(meta: dict, ctx: LoadContext) -> None:
    raw = meta.get(HEADER_KEY.encode())
    if raw is None:
        return
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict):
        ctx.problem(None, HEADER_KEY, "the run header in the Parquet metadata is not a JSON object; ignored")
        return
    apply_header(header, ctx)


def read_native_parquet(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, object]]:
    """Adapter ``native`` for Parquet: yields ``(None, "row[i].", trajectory)``; bad rows -> problems."""
    pf = open_parquet(path)
    check_parquet(pf, path)  # row groups' declared sizes against the load ceiling, before any page is read
    check_columns(pf.schema_arrow, path)
    _apply_header(pf.schema_arrow.metadata or {}, ctx)
    total = max(pf.metadata.num_rows, 1)
    row = decoded = 0
    stem = Path(path).stem
    batches = row_group_batches(pf, path, ROW_GROUP)
    while True:
        try:
            batch = next(batches)
            decoded += decoded_bytes(batch)  # strings still dictionaries: counted before they are decoded
            if why := decoded_over(path, f"rows 0 to {row + batch.num_rows - 1:,}", decoded):
                ctx.problem(None, f"row[{row}]", f"rows {row:,} to {total - 1:,} are not read: {why}")
                return
            recs = list(_records(batch))
        except StopIteration:
            break
        except _read_errors() as e:
            reason = f"rows {row:,} to {total - 1:,} cannot be decoded ({type(e).__name__}: {e}); skipped"
            ctx.problem(None, f"row[{row}]", reason)
            return
        for rec in recs:
            prefix = f"row[{row}]."
            traj = ctx.attempt(None, prefix, _row_trajectory, rec, f"{stem}:{row}")
            if traj is not None:
                yield None, prefix, traj
            row += 1
        ctx.progress(row / total, f"reading {path.name}: row {row:,} of {total:,}")


__all__ = ["SCHEMA_ID", "is_native_parquet", "read_native_parquet", "write_native_parquet"]
