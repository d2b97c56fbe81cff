"""Adapter ``tagged_text``: Search-R1 / KG-R1 transcripts, one rollout per JSON record.

Record (JSONL or a JSON array)::

    {"id"?: str, "group_id"|"uid"|"index"?: str|int, "prompt": str | [messages],
     "response": str,                               # also: responses_str, completion, output
     "reward"|"score"?: float,                      # outcome reward -> global component "reward"
     "turn_rewards"?: {"1": {...}, "2": {...}},     # KG-R1 structured rewards (1-based turns), or a list
     "global_rewards"?: {...},                      # e.g. exact_match, retrieval_quality, _otc_scaling_factor
     "structured_rewards"?: {"turn_rewards": ..., "global_rewards": ...},
     "truncated"?: bool, "metadata"?: {...}}

``<information>...</information>`` blocks are tool segments, the rest model segments (``engine.io.text.tags``).
With structured rewards a scalar ``reward``/``score``/``total_score`` is kept in metadata, not double counted.

Steps: none. No trainer writes this format: Search-R1 (PeterGriffinJin/Search-R1 ``a14dc3a``) writes no rollout
file (``verl/trainer/ppo/ray_trainer.py`` has no ``_dump_generations``; its ``global_steps`` only reaches the
logger, stdout and ``global_step_{N}`` checkpoint folders), and KG-R1's ``structured_rewards`` reach a file only
through an export the user writes (``adapters.kgr1``). So no record field and no file or folder name is read as a
step: such a file is one unnumbered step, and beside files that have steps it is skipped with a problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import first_key, prompt_text, read_records, require_mapping
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_float, as_reward_dict, as_str, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, parse_turn_rewards, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.text.tags import looks_tagged, split_tagged

NAME = "tagged_text"
RESPONSE_KEYS = ("response", "responses_str", "completion", "output")
PROMPT_KEYS = ("prompt", "question", "input")
GROUP_KEYS = ("group_id", "uid", "index", "prompt_id")
SCALAR_KEYS = ("reward", "score", "total_score")


def sniff(rec: object) -> bool:
    if not isinstance(rec, Mapping):
        return False
    if isinstance(rec.get("structured_rewards"), Mapping) or isinstance(rec.get("turn_rewards"), Mapping):
        return first_key(rec, RESPONSE_KEYS) is not None
    key = first_key(rec, RESPONSE_KEYS)
    return key is not None and isinstance(rec[key], str) and looks_tagged(rec[key])


def convert(rec: object, default_id: str) -> Trajectory:
    rec = require_mapping(rec)
    rkey = first_key(rec, RESPONSE_KEYS)
    if rkey is None:
        raise RecordError("response", "missing response text")
    response = as_str(rec[rkey], rkey)
    pkey = first_key(rec, PROMPT_KEYS)
    prompt = prompt_text(rec[pkey], pkey) if pkey else ""
    structured = rec.get("structured_rewards") if isinstance(rec.get("structured_rewards"), Mapping) else rec
    turn = parse_turn_rewards(structured.get("turn_rewards") or [], "turn_rewards")
    glob = as_reward_dict(structured.get("global_rewards") or {}, "global_rewards")
    metadata = rec.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise RecordError("metadata", f"expected an object, got {type_name(metadata)}")
    metadata = dict(metadata)
    skey = first_key(rec, SCALAR_KEYS) or first_key(structured, SCALAR_KEYS)
    if skey is not None:
        scalar = as_float(rec.get(skey, structured.get(skey)), skey)
        if turn or glob:
            metadata[skey] = scalar
        else:
            glob = {"reward": scalar}
    if rec.get("truncated") is not None:  # kept as given: validation refuses a "no" or a 2 (never read as true)
        metadata["truncated"] = rec["truncated"]
    gkey = first_key(rec, GROUP_KEYS)
    return Trajectory(
        id=as_id(rec["id"], "id") if rec.get("id") is not None else default_id,
        group_id=as_id(rec[gkey], gkey) if gkey else prompt_group_id(prompt),
        prompt=prompt,
        segments=split_tagged(response),
        turn_rewards=turn,
        global_rewards=glob,
        metadata=metadata,
    )


def read(path: Path, ctx: LoadContext):
    return read_records(path, ctx, convert)
