"""Adapter ``areal_rollout``: AReaL's rollout dump (``<log_path>/rollout/<version>/<task_id>.jsonl``, or
``eval-rollout/``), written by ``WorkflowExecutor._dump_trajectory`` (``areal/infra/workflow_executor.py``).

One file per task (one dataset item run through the workflow, ``group_size`` samples), one line per sample:
``{"task_id", "sample_idx", "seqlen", "prompt_len", "head_version", "tail_version", "reward", "prompt",
"completion"}``. The writer cuts each sequence at ``prompt_len = seqlen - sum(loss_mask)`` and decodes both
halves with ``skip_special_tokens=False``; ids, the loss mask and log-probs are not written. So:

* the completion is re-tokenized from text as one model segment (single-turn workflows such as ``RLVRWorkflow``
  mask exactly the completion). The re-tokenized length is checked against ``seqlen - prompt_len`` (a problem
  when they differ: another tokenizer, or text that does not re-tokenize to the same ids).
* a completion holding a ChatML turn (``<|im_start|>``) comes from a multi-turn workflow (``MultiTurnWorkflow``
  masks the observations between turns); the writer's cut by token count then puts part of the episode into
  the "prompt" and observation tokens into the "completion", so the mask cannot be recovered: the record is
  refused.
* ``reward`` (the workflow's ``rewards`` tensor, what AReaL trains on) -> global reward ``reward``.
* Groups: the samples of one task share ``task_id`` -> group ``task-<task_id>``, id ``task-<id>/sample-<idx>``.
* Truncation is not dumped. A completion that does not end in an end-of-sequence token (``<|im_end|>``,
  ``<|endoftext|>``, ...) was cut by the length limit: ``metadata.truncated`` is inferred so and listed in
  ``metadata.synthesized`` (a generation stopped by a stop string without EOS reads as truncated too).
* ``head_version`` / ``tail_version`` (policy versions), ``seqlen``, ``prompt_len`` -> ``metadata.areal``.

Step = the record's ``tail_version`` (``STEP_FOLDER``: the ``<version>`` folder, for records that lack it).
inclusionAI/AReaL ``4aef98d8``: ``_dump_trajectory`` (``areal/infra/workflow_executor.py``) names the folder
``str(tail_version)`` with ``tail_version = max(versions)`` over the whole group's tensor (so a group never splits
across folders) and writes the same number into every line. ``areal/trainer/rl_trainer.py`` ``RLTrainer.train``:
at ``global_step`` s the trainer takes its batch from ``actor.prepare_batch`` and, after the update, calls
``rollout.set_version(global_step + 1)``; from step 0 (or a resumed step) the inference engine's version during step
s's rollout is s, and every generated token's version is the engine's version (``remote_inf_engine.py``). With
``max_head_offpolicyness`` 0 (the default in ``areal/api/cli_args.py``, synchronous) every sample trained at step
s has ``tail_version`` s, so the version is the trainer's step exactly. With staleness allowed (> 0) a sample of
version v may be trained at a step up to v + max_head_offpolicyness; the dump does not say which step consumed it,
and version v is the first step that could have (it cannot be trained earlier: version v exists only after step
v − 1). ``head_version`` is ``min(versions)``, −1 whenever the prompt tokens' −1 is in the tensor (always, in
``RLVRWorkflow``), so it says nothing about the step. A record whose ``tail_version`` differs from its folder (a
moved file) keeps its own, noted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import read_records, require_keys
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_float, as_str
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, as_step, mark_synthesized
from engine.io.reading.problems import RecordError
from engine.io.text.tokenize import encode_many, get_tokenizer

NAME = "areal_rollout"
KEYS = frozenset({"task_id", "sample_idx", "seqlen", "prompt_len", "head_version", "tail_version", "completion"})
END_OF_SEQUENCE = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>", "<｜end▁of▁sentence｜>")
VERSION_KEYS = ("seqlen", "prompt_len", "head_version", "tail_version")
STEP_FOLDER = re.compile(r"(\d+)")  # rollout/<tail_version>/<task_id>.jsonl (the task id is not a step)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and KEYS <= set(rec)


def _count(rec: Mapping, key: str) -> int:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RecordError(key, f"expected a non-negative integer, got {value!r}")
    return value


def convert(rec: object, ctx: LoadContext, notes: list[tuple[str, str]]) -> Trajectory:
    """One sample; what was changed or could not be checked goes to ``notes`` as (field, reason)."""
    notes.clear()
    rec = require_keys(rec, KEYS, "AReaL's _dump_trajectory")
    completion = as_str(rec.get("completion"), "completion")
    prompt = as_str(rec.get("prompt"), "prompt")
    task, sample = as_id(rec.get("task_id"), "task_id"), as_id(rec.get("sample_idx"), "sample_idx")
    n_generated = _count(rec, "seqlen") - _count(rec, "prompt_len")
    if "<|im_start|>" in completion:
        raise RecordError(
            "completion",
            "holds a chat turn (<|im_start|>): a multi-turn sample, which AReaL's dump cuts by the count of "
            "generated tokens, so its prompt/completion boundary and loss mask cannot be recovered; record skipped",
        )
    if not completion:
        raise RecordError("completion", "empty completion: the sample has zero tokens")
    (ids,) = encode_many(get_tokenizer(ctx.tokenizer or ctx.run_tokenizer), [completion])
    if len(ids) != n_generated:
        notes.append(
            (
                "completion",
                f"re-tokenized to {len(ids)} tokens but the trainer generated seqlen - prompt_len = {n_generated}",
            )
        )
    metadata: dict = {
        "truncated": not completion.endswith(END_OF_SEQUENCE),
        "areal": {k: rec.get(k) for k in VERSION_KEYS},
    }
    mark_synthesized(metadata, "truncated")
    return Trajectory(
        id=f"task-{task}/sample-{sample}",
        group_id=f"task-{task}",
        prompt=prompt,
        segments=[Segment(role="model", text=completion, token_ids=ids)],
        global_rewards={"reward": as_float(rec.get("reward"), "reward")},
        metadata=metadata,
        step=as_step(rec.get("tail_version"), "tail_version"),
    )


def read(path: Path, ctx: LoadContext):
    notes: list[tuple[str, str]] = []
    for line, prefix, traj in read_records(path, ctx, lambda rec, _default_id: convert(rec, ctx, notes)):
        for field_, reason in notes:  # reported outside the conversion, so that strict mode names them as they are
            ctx.problem(line, f"{prefix}{field_}", reason)
        yield line, prefix, traj
