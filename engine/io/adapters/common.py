"""Glue shared by the JSON adapters: iterate records, convert each, turn failures into problems."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_str, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records, record_id
from engine.io.text.chatml import checked_messages, render_prompt

Convert = Callable[[object, str], Trajectory | Iterable[Trajectory]]


def read_records(path: Path, ctx: LoadContext, convert: Convert) -> Iterator[tuple[int | None, str, Trajectory]]:
    """Run ``convert(record, default_id)`` over every JSON record; a ``RecordError`` becomes a problem.

    A record that holds several trajectories (an rLLM episode's ``trajectories``) yields each with the field
    prefix ``trajectories[j].``, so that a trajectory failing validation is named and the others still load.
    """
    stem = Path(path).stem
    for line, prefix, rec in iter_json_records(str(path), ctx):
        default_id = record_id(stem, line, prefix)
        trajs = ctx.attempt(line, prefix, _as_list, convert, rec, default_id) or []
        for j, traj in enumerate(trajs):  # an rLLM episode: problems with one trajectory name it
            yield line, f"{prefix}trajectories[{j}]." if len(trajs) > 1 else prefix, traj


def _as_list(convert: Convert, rec: object, default_id: str) -> list[Trajectory]:
    out = convert(rec, default_id)
    return [out] if isinstance(out, Trajectory) else list(out)


def require_mapping(rec: object) -> Mapping:
    if not isinstance(rec, Mapping):
        raise RecordError(None, f"expected a JSON object per record, got {type_name(rec)}")
    return rec


def require_keys(rec: object, keys: Iterable[str], writer: str) -> Mapping:
    """``rec`` as a mapping holding every one of ``keys`` (those ``writer`` writes in every record); else a
    ``RecordError`` naming the first key missing, so that a damaged record is reported by its field."""
    rec = require_mapping(rec)
    for key in sorted(keys):
        if key not in rec:
            raise RecordError(key, f"missing: {writer} writes it in every record; record skipped")
    return rec


def first_key(rec: Mapping, keys: Iterable[str]) -> str | None:
    """The first of ``keys`` present (and not null) in ``rec``."""
    return next((k for k in keys if rec.get(k) is not None), None)


def prompt_text(value: object, field: str) -> str:
    """A prompt given as text, or as chat messages (rendered with ChatML)."""
    if isinstance(value, list):
        return render_prompt(checked_messages(value, field))
    return as_str(value, field)


TRUNCATION_WORDS = ("TRUNCAT", "LENGTH", "MAX_TOKENS")


def truncated_from_reason(reason: object) -> bool:
    """rLLM / OpenAI style termination reasons that mean "ran into the length limit"."""
    return isinstance(reason, str) and any(w in reason.upper() for w in TRUNCATION_WORDS)


def load_weights_only(path: Path, before: str, after: str) -> object:
    """``torch.load(path, weights_only=True)``: tensors, containers, strings and numbers only, never code. A file
    holding anything else raises ``ValueError("{path}: {before} ({the class torch refused}){after}")``; so does
    one whose zip members declare more than the load ceiling (``engine.io.reading.limits.check_zip``, before
    reading) or whose pickle runs more opcodes than ``PICKLE_ITEMS`` (``check_pickle``)."""
    import re

    import torch

    from engine.io.reading.limits import check_pickle, check_zip

    check_zip(path)
    check_pickle(path)  # how many items unpickling would build, counted first
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError/RuntimeError/... variants; one message
        m = re.search(r"GLOBAL ([\w.]+)", str(e))
        refused = m.group(1) if m else (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"{path}: {before} ({refused}){after}") from None
