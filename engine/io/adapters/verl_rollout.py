"""Adapter ``verl_rollout``: verl's rollout dump (``trainer.rollout_data_dir/<step>.jsonl``).

Each line is ``{"input": prompt text, "output": response text, "gts"?: ..., "score": float, "step": int,
**reward_extra_infos}`` (``RayPPOTrainer._dump_generations``). verl decodes both texts with
``skip_special_tokens=True``, so:

* the response is re-tokenized from text (ids are what the tokenizer gives, which matches generation except
  where special tokens were stripped); tool observations (``<information>`` blocks, or
  ``user\\n<tool_response>...</tool_response>\\nassistant\\n`` blocks of verl's tool agent loop) become tool segments;
* the end-of-turn token ``<|im_end|>`` that the policy generated but the dump dropped is appended to the last
  model segment and listed in ``metadata.synthesized`` (``"end_of_turn_token"``); not when the response ends in
  a tool block (the loop was cut off before the model answered).

Rewards: ``score`` first, then every other numeric column, as global components (``score`` is the trainer's
scalar; the extras are the reward function's components, for display). No uid is dumped, so rollouts of the
same input text form a group (or ``uid`` if a custom dump has it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import read_records, require_mapping
from engine.io.coerce import as_float, as_str, is_number
from engine.io.context import LoadContext
from engine.io.fields import as_id, mark_synthesized, prompt_group_id
from engine.io.model import Segment, Trajectory
from engine.io.problems import RecordError
from engine.io.tags import INFORMATION_BLOCK, TOOL_RESPONSE_BLOCK, split_tagged

NAME = "verl_rollout"
END_OF_TURN = "<|im_end|>"
NOT_REWARDS = frozenset({"input", "output", "gts", "step", "uid", "id", "index", "data_source"})


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and {"input", "output", "score"} <= set(rec)


def _segments(output: str) -> list[Segment]:
    pattern = TOOL_RESPONSE_BLOCK if "<tool_response>" in output else INFORMATION_BLOCK
    return split_tagged(output, pattern) or [Segment(role="model", text="")]


def convert(rec: object, default_id: str) -> Trajectory:
    rec = require_mapping(rec)
    prompt = as_str(rec.get("input"), "input")
    output = as_str(rec.get("output"), "output")
    # verl trains on `score`; extra reward columns (e.g. `acc`) describe it and are kept as metadata.
    rewards = {"score": as_float(rec.get("score"), "score")}
    components = {
        key: as_float(value, key)
        for key, value in rec.items()
        if key not in NOT_REWARDS and key != "score" and is_number(value)
    }
    segs = _segments(output)
    metadata: dict = {"step": rec.get("step")} if rec.get("step") is not None else {}
    if components:
        metadata["reward_components"] = components
    if "gts" in rec:
        metadata["ground_truth"] = rec["gts"]
    if segs[-1].role == "model":  # a response that ends in a tool block was cut off: no end-of-turn token
        segs[-1].text += END_OF_TURN
        mark_synthesized(metadata, "end_of_turn_token")
    if rec.get("uid") is not None:
        group = as_id(rec["uid"], "uid")
    else:
        group = prompt_group_id(prompt)
    if not output.strip():
        raise RecordError("output", "empty output: the response has zero tokens")
    return Trajectory(
        id=as_id(rec["id"], "id") if rec.get("id") is not None else default_id,
        group_id=group,
        prompt=prompt,
        segments=segs,
        global_rewards=rewards,
        metadata=metadata,
    )


def read(path: Path, ctx: LoadContext):
    return read_records(path, ctx, convert)
