"""The native format, JSONL flavour: one trajectory per line, optional run header on the first line.

Schema: ``engine/io/store/schema/trajectory.v1.json`` (documented in ``docs/FORMAT.md``). Only ``segments`` is
required; ``id`` defaults to ``<file stem>:<line>`` and ``group_id`` to a hash of the prompt. Per-token arrays
are written as float32 values (shortest round-trip text with orjson), so save -> load reproduces a run exactly.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.data.model import PER_TOKEN_FIELDS, Segment, Trajectory, normalize_role
from engine.io.reading.coerce import as_float_array, as_reward_dict, as_str, as_token_ids, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, as_step, parse_turn_rewards, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records, record_id
from engine.io.text.chatml import checked_messages, render_prompt

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

SCHEMA_ID = "creditlens.trajectory.v1"
HEADER_KEY = "creditlens"


def is_header(rec: object) -> bool:
    return isinstance(rec, Mapping) and isinstance(rec.get(HEADER_KEY), Mapping)


def segment_from_record(rec: object, field: str) -> Segment:
    """One native segment dict -> ``Segment`` (role checked, arrays typed)."""
    if not isinstance(rec, Mapping):
        raise RecordError(field, f"expected an object, got {type_name(rec)}")
    raw_role = as_str(rec.get("role"), f"{field}.role")
    role = normalize_role(raw_role)
    if role is None:
        raise RecordError(f"{field}.role", f"unknown role {raw_role!r} (expected model, tool, user or system)")
    text = rec.get("text")
    if text is not None:
        as_str(text, f"{field}.text")
    ids = as_token_ids(rec["token_ids"], f"{field}.token_ids") if rec.get("token_ids") is not None else None
    if text is None and ids is None:
        raise RecordError(field, "a segment needs text or token_ids")
    arrays = {  # finiteness is checked once, with lengths, by validate_trajectory
        name: as_float_array(rec[name], f"{field}.{name}", allow_nonfinite=True)
        for name in PER_TOKEN_FIELDS
        if rec.get(name) is not None
    }
    return Segment(role=role, text=text, token_ids=ids, **arrays)


def _check_declared_turns(segs: list[object]) -> None:
    """Optional ``turn`` numbers on segments must never go backwards."""
    last = None
    for j, s in enumerate(segs):
        turn = s.get("turn") if isinstance(s, Mapping) else None
        if turn is None:
            continue
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise RecordError(f"segments[{j}].turn", f"expected an integer, got {type_name(turn)}")
        if last is not None and turn < last:
            raise RecordError(f"segments[{j}].turn", f"turn ids go backwards ({last} then {turn})")
        last = turn


def trajectory_from_record(rec: object, default_id: str) -> Trajectory:
    """A native record (already JSON-parsed) -> ``Trajectory``; ``RecordError`` names the bad field."""
    if not isinstance(rec, Mapping):
        raise RecordError(None, f"expected a JSON object per trajectory, got {type_name(rec)}")
    segs = rec.get("segments")
    if not isinstance(segs, list):
        raise RecordError("segments", f"expected a list of segments, got {type_name(segs)}")
    _check_declared_turns(segs)
    prompt = rec.get("prompt", "")
    if isinstance(prompt, list):
        prompt = render_prompt(checked_messages(prompt, "prompt"))
    prompt = as_str(prompt, "prompt")
    metadata = rec.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise RecordError("metadata", f"expected an object, got {type_name(metadata)}")
    ptids = rec.get("prompt_token_ids")
    return Trajectory(
        id=as_id(rec["id"], "id") if rec.get("id") is not None else default_id,
        group_id=as_id(rec["group_id"], "group_id") if rec.get("group_id") is not None else prompt_group_id(prompt),
        prompt=prompt,
        segments=[segment_from_record(s, f"segments[{j}]") for j, s in enumerate(segs)],
        turn_rewards=parse_turn_rewards(rec.get("turn_rewards") or [], "turn_rewards"),
        global_rewards=as_reward_dict(rec.get("global_rewards") or {}, "global_rewards"),
        metadata=dict(metadata),
        prompt_token_ids=as_token_ids(ptids, "prompt_token_ids") if ptids is not None else None,
        step=as_step(rec["step"], "step") if rec.get("step") is not None else None,
    )


def apply_header(header: Mapping, ctx: LoadContext, line: int | None = None) -> None:
    """Take run name, tokenizer and metadata from a native header; remember what a run was converted from.

    A field of the wrong type is reported (``creditlens.<field>``) and ignored; the records still load.
    """
    fields = {"name": str, "tokenizer": str, "metadata": Mapping}
    ok = {}
    for key, kind in fields.items():
        value = header.get(key)
        if value is not None and not isinstance(value, kind):
            expected = "an object" if kind is Mapping else "a string"
            ctx.problem(line, f"{HEADER_KEY}.{key}", f"expected {expected}, got {type_name(value)}; ignored")
        else:
            ok[key] = value
    ctx.run_name = ok.get("name") or ctx.run_name
    if ok.get("tokenizer"):
        ctx.set_run_tokenizer(ok["tokenizer"], line, f"{HEADER_KEY}.tokenizer")
    ctx.run_metadata.update(ok.get("metadata") or {})
    if header.get("source") not in (None, "native"):
        ctx.run_metadata.setdefault("converted_from", header["source"])


def read_native_jsonl(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """Adapter ``native`` for JSON/JSONL: yields ``(line, field_prefix, trajectory)``; bad records -> problems."""
    stem = Path(path).stem
    for line, prefix, rec in iter_json_records(str(path), ctx):
        if is_header(rec):
            apply_header(rec[HEADER_KEY], ctx, line)
            continue
        default_id = record_id(stem, line, prefix)
        traj = ctx.attempt(line, prefix, trajectory_from_record, rec, default_id)
        if traj is not None:
            yield line, prefix, traj


# ------------------------------------------------------------------------------------------------ writing
def segment_to_record(seg: Segment) -> dict:
    rec: dict = {"role": seg.role, "text": seg.text, "token_ids": seg.token_ids}
    for name in PER_TOKEN_FIELDS:
        if getattr(seg, name) is not None:
            rec[name] = getattr(seg, name)
    return rec


def trajectory_to_record(traj: Trajectory) -> dict:
    """``Trajectory`` -> native record (numpy arrays inside; ``dumps_record`` serializes them)."""
    rec: dict = {
        "id": traj.id,
        "group_id": traj.group_id,
        "prompt": traj.prompt,
        "segments": [segment_to_record(s) for s in traj.segments],
        "turn_rewards": traj.turn_rewards,
        "global_rewards": traj.global_rewards,
        "metadata": traj.metadata,
    }
    if traj.prompt_token_ids is not None:
        rec["prompt_token_ids"] = traj.prompt_token_ids
    if traj.step is not None:
        rec["step"] = traj.step
    return rec


def header_record(name: str, source: str, tokenizer: str | None, metadata: Mapping | None = None) -> dict:
    return {
        HEADER_KEY: {
            "schema": SCHEMA_ID,
            "name": name,
            "source": source,
            "tokenizer": tokenizer,
            "metadata": dict(metadata or {}),
        }
    }


def _plain(value: object) -> object:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _has_nonfinite(value: object) -> bool:
    """Whether a NaN or infinite float sits anywhere in ``value`` outside numpy arrays (free metadata can hold
    one: the JSON reader's fallback parses ``NaN`` and ``1e400``; validation keeps rewards and arrays finite)."""
    if isinstance(value, (float, np.floating)):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        try:  # a long list of numbers (logged advantages) in one C loop; NaN and inf propagate
            return not math.isfinite(math.fsum(value))
        except (TypeError, ValueError, OverflowError):  # not all numbers, inf - inf, or a finite overflow
            return any(_has_nonfinite(v) for v in value)
    return False


def dumps_record(rec: dict) -> bytes:
    """One JSON line (bytes, no newline), written so that loading it gives back the same values.

    orjson writes float32 arrays with their shortest exact text, but it writes NaN and infinity as ``null`` and
    refuses integers beyond 64 bits (``TypeError``); a record holding either (in its free metadata: a run loaded
    from a file that had ``NaN``, ``1e400`` or a 4,000-digit integer there) is written by the standard library
    instead, as ``NaN`` / ``Infinity`` / all the digits, which the reader parses back to the same value."""
    if orjson is not None and not _has_nonfinite({k: v for k, v in rec.items() if k != "segments"}):
        try:
            return orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:  # an integer beyond 64 bits
            pass
    return json.dumps(_plain(rec), ensure_ascii=False).encode("utf-8")


def write_native_jsonl(trajectories: Iterable[Trajectory], header: dict, path: Path) -> None:
    """Write ``header`` (a ``header_record``) and ``trajectories`` as native JSONL, one per line, atomically.
    ``trajectories`` is consumed once, so a generator streams a run of any size."""
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(dumps_record(header) + b"\n")
            for traj in trajectories:
                f.write(dumps_record(trajectory_to_record(traj)) + b"\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a generator or a record that failed half-way leaves no partial file
