"""Adapter ``roll_rollout``: ROLL's RLVR rollout dump (``<rollout_dump_dir>/rollout_dump_data.step_<N>.jsonl``).

Written by ``dump_rollout_to_specific_path`` / ``write_to_json_process`` (``roll/pipeline/rlvr/utils.py``): the
whole step is ONE JSON line of columns, ``{column: [one value per rollout]}``, restricted to ``COLUMMNS_CONFIG``:
the dataset's ``id``, ``source``, ``difficulty``, ``prompt``, ``messages``, ``ground_truth``, ``case_type``,
``test_case_function``, ``test_cases``, ``tag``, ``domain`` when present, then ``responses`` (decoded with
``skip_special_tokens=True``), ``scores``, ``sampling_params`` (``json.dumps(meta_info)``), ``global_step``.

* Each response is re-tokenized from text as one model segment. The dump drops special tokens, so the
  end-of-sequence token a finished response ended with is gone and is not re-added (whether a response finished
  or ran into the length limit is not written); padding is dropped too.
* ``scores`` -> global reward ``scores``. ROLL trains on the reward worker's ``response_level_rewards``, which the
  dump leaves out; it equals ``scores`` for the math, code, LLM-judge and detection workers but not for ifeval
  (adds a repetition penalty) or crossthinkqa: every file gets one problem saying so.
* Prompt: ``messages`` (a list, or its JSON text) rendered with ChatML, else the ``prompt`` column as text.
* Groups: no uid is dumped; the ``num_return_sequences`` rollouts of one prompt share ``id``, ``messages`` and
  ``prompt``, so rollouts with all three equal form a group. Ids ``step-<N>/row-<j>``.
* The other dataset columns and ``global_step`` -> ``metadata.roll``; the first ``sampling_params`` -> the run's
  ``metadata.roll_sampling_params``.
* Step: ``dump_rollout_to_specific_path`` (alibaba/ROLL ``roll/pipeline/rlvr/utils.py``, commit ``8eb27cc2``)
  sets ``write_data['global_step'] = [global_step] * data_cnt`` (the ``global_step`` of ``RLVRPipeline.run``'s
  step loop, ``roll/pipeline/rlvr/rlvr_pipeline.py``), and ``write_to_json_process`` names the file
  ``f"rollout_dump_data.step_{global_step}.jsonl"`` with ``global_step = data.get('global_step', [0])[0]``, in the
  one ``rollout_dump_dir`` (no step folder). Each row's ``global_step`` -> ``Trajectory.step``; ``STEP_FILE`` gives
  the step of rows without one. The step is unpadded, counted from 0.

A step is one record, so a dump larger than ``max_bytes`` (16 MiB by default) needs ``load_run(max_bytes=...)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import prompt_text
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_float, as_str, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_step, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records

NAME = "roll_rollout"
STEP_FILE = re.compile(r"rollout_dump_data\.step_(\d+)\.jsonl")  # write_to_json_process's file name
KEYS = frozenset({"responses", "scores", "sampling_params", "global_step"})
METADATA_COLUMNS = (
    "id",
    "source",
    "difficulty",
    "ground_truth",
    "case_type",
    "test_case_function",
    "test_cases",
    "tag",
    "domain",
    "global_step",
)
REWARD_NOTE = (
    "ROLL trains on response_level_rewards, which the dump leaves out; the reward here is the verifier's `scores` "
    "(the same for the math, code, LLM-judge and detection workers, not for ifeval or crossthinkqa)"
)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and KEYS <= set(rec) and isinstance(rec.get("responses"), list)


def _columns(rec: object) -> tuple[dict[str, list], int]:
    if not isinstance(rec, Mapping):
        raise RecordError(None, f"expected one JSON object of columns, got {type_name(rec)}")
    cols = {}
    for key, value in rec.items():
        if not isinstance(value, list):
            raise RecordError(str(key), f"expected a column (a list, one value per rollout), got {type_name(value)}")
        cols[key] = value
    for key in ("responses", "scores"):
        if key not in cols:
            raise RecordError(key, "missing column")
    n = len(cols["responses"])
    for key, value in cols.items():
        if len(value) != n:
            raise RecordError(key, f"column has {len(value)} values but `responses` has {n}")
    return cols, n


def _prompt(row: dict) -> str:
    messages = row.get("messages")
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except ValueError:
            raise RecordError("messages", "expected chat messages as JSON text") from None
    if messages is not None:
        return prompt_text(messages, "messages")
    return as_str(row["prompt"], "prompt") if row.get("prompt") is not None else ""


def convert_row(row: dict, j: int) -> Trajectory:
    response = as_str(row["responses"], "responses")
    if not response:
        raise RecordError("responses", "empty response: the rollout has zero tokens")
    step = row.get("global_step")
    step = as_step(step, "global_step") if step is not None else None
    return Trajectory(
        id=f"step-{step if step is not None else '?'}/row-{j}",
        group_id=prompt_group_id([row.get("id"), row.get("messages"), row.get("prompt")]),
        prompt=_prompt(row),
        segments=[Segment(role="model", text=response)],
        global_rewards={"scores": as_float(row["scores"], "scores")},
        metadata={"roll": {k: row[k] for k in METADATA_COLUMNS if k in row}},
        step=step,
    )


def _convert_at(cols: dict, j: int) -> Trajectory:
    """Row ``j`` of a column dump as a trajectory."""
    return convert_row({c: v[j] for c, v in cols.items()}, j)


def read(path: Path, ctx: LoadContext):
    for line, prefix, rec in iter_json_records(str(path), ctx):
        try:
            cols, n = _columns(rec)
        except RecordError as err:
            ctx.log.add_error(ctx.file, line, err, prefix)
            continue
        ctx.note(f"{prefix}scores", REWARD_NOTE)  # the file as a whole: every row loads
        if cols.get("sampling_params"):
            ctx.run_metadata.setdefault("roll_sampling_params", cols["sampling_params"][0])
        for j in range(n):
            where = f"{prefix}row[{j}]."
            traj = ctx.attempt(line, where, _convert_at, cols, j)
            if traj is not None:
                yield line, where, traj
