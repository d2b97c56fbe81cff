"""KG-R1's own files (Jinyeop3110/KG-R1 ``7538a53``): the evaluator's per-sample results, and the refusal of
its generation dump.

``kgr1_eval``: ``{default_local_dir}/{dataset}_detailed_results.jsonl`` of ``main_eval`` with
``save_detailed_results=true`` (``RayKGEvaluator._save_batch_details``, ``verl/trainer/ppo/ray_evaluator_kg.py``)::

    {"uid": "test_batch000_sample003", "dataset", "batch_idx", "sample_idx",
     "prompt": decode(prompt ids + response ids), "response": decode(response ids),   # skip_special_tokens=True
     "score", "metrics": {...}, "metadata": {"response_length", "prompt_length"}}

* ``prompt`` is decoded from the generation's ``input_ids``, which are prompt + response: the response text is
  cut off its end (a record whose prompt does not end with its response is refused).
* ``response``: ``<information>`` blocks are tool segments, the rest model segments. No ``<|im_end|>`` is added:
  KG-R1's loop (``kg_r1/llm_agent/generation.py::_postprocess_responses``) decodes every turn without special
  tokens, cuts it after ``</kg-query>`` / ``</answer>`` and re-tokenizes it, so the trained response never holds one.
* Groups: ``uid`` is per sample. The evaluator repeats each prompt ``n_rollout_eval`` times inside its batch
  (``DataProto.repeat(interleave=True)``), so the rollouts of one prompt are the samples of one batch with the same
  prompt text; that is the group (reported once per load).
* ``score``: a list is verl's token-level reward row (``reward_tensor.tolist()``), loaded as global ``score`` = its
  sum, verl's sequence score. A scalar ``0.0`` is the writer's fallback: with ``kg_format_multiturn`` (the
  evaluation config's reward manager) the result has no ``reward_tensor``, so every sample gets ``0.0`` (and
  ``metrics`` stays ``{}``); such samples hold no reward and load without one (reported once per load; the batch
  reads a missing reward as 0 anyway). A non-zero scalar is taken as the score.
* ``metrics``: numbers go to ``metadata["reward_components"]`` (shown, never summed into the reward); other values
  are listed in ``metadata["ignored"]``. The file has no truncation flag: ``truncated`` is not set (read as false).

``main_eval`` writes ``{dataset}_passatk_results.json`` (the aggregated pass@k means) beside the results: a
summary, skipped by a folder load (``passatk_summary``).

``kgr1_rollout_dump``: ``{rollout_data_dir|validation_data_dir}/{step}.jsonl`` (``_dump_generations`` in
``verl/trainer/ppo/ray_trainer_kg.py``) is refused: besides ``input``/``output``/``score`` it holds only the reward
manager's per-sample aggregates (``KGFormatMultiTurnRewardManager._compute_wandb_metrics``), not the per-turn rewards
and turn boundaries KG-R1 trains on.

Steps: neither file gives one this module reads, so it sets no ``STEP_FILE``. The evaluator writes none: its records
(``_save_batch_details``, ``ray_evaluator_kg.py`` lines 539-599) hold no step and the file is named after the dataset
(``os.path.join(output_dir, f'{dataset_name}_detailed_results.jsonl')``, lines 196-203); ``main_eval`` sets
``evaluator.global_steps = 0`` (``verl/trainer/main_eval.py`` line 245) and evaluates one checkpoint. The trainer dump
does say its step, as verl does (``_dump_generations``, ``ray_trainer_kg.py`` lines 959-981: ``os.path.join(dump_path,
f"{self.global_steps}.jsonl")`` and ``"step": [self.global_steps] * n``), but it is refused whole; a ``<N>.jsonl``
pattern here would apply to ``kgr1_eval`` too (both adapters take this module's naming), which KG-R1 never names so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import read_records, require_mapping
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_float, as_float_array, as_str, is_number, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.text.tags import split_tagged

EVAL_KEYS = frozenset({"uid", "dataset", "batch_idx", "sample_idx", "prompt", "response", "score", "metrics"})
PASSATK_KEY = re.compile(r"_pass@\d+/mean$")
DUMP_AGGREGATES = ("turn_kg_query_validity", "turn_format_score", "turn_is_answer_score", "num_turns")

GROUP_NOTE = (
    "per-sample ids (<dataset>_batch<NNN>_sample<NNN>) name no prompt group; rollouts are grouped by dataset, "
    "batch_idx and prompt text (ray_evaluator_kg repeats each prompt n_rollout_eval times within its batch)"
)
NO_REWARD_NOTE = (
    "0.0 is ray_evaluator_kg's fallback when the reward manager returns structured_rewards (kg_format_multiturn) "
    "and no reward_tensor: such samples hold no reward and load without one"
)
DUMP_REFUSAL = (
    "KG-R1 generation dump (ray_trainer_kg._dump_generations): it holds the decoded input/output, score "
    "(total_score = mean turn reward + global rewards) and per-sample aggregates (turn_format_score and "
    "turn_kg_query_validity are means over turns, turn_is_answer_score is 1 if any turn answered, num_turns a "
    "count), not the per-turn rewards or turn boundaries KG-R1's multi-turn GRPO trains on. Export each sample's "
    "structured_rewards (turn_rewards keyed by turn, global_rewards) with its response text as JSONL (format "
    "tagged_text), or the batch tensors (responses, attention_mask, info_mask, turn_sequence_tensor, "
    "token_level_scores, old_log_probs, ref_log_prob, values, uid) as .pt (format verl_tensors)"
)


# ------------------------------------------------------------------------------------------------ evaluator
def eval_sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and EVAL_KEYS <= set(rec)


def _score(value: object) -> float | None:
    """The sequence score: a token-level reward row's sum; None for the writer's 0.0 fallback (no reward)."""
    if isinstance(value, list):
        return float(as_float_array(value, "score").sum())
    score = as_float(value, "score")
    return None if score == 0.0 else score


def eval_convert(rec: object, default_id: str) -> Trajectory:
    rec = require_mapping(rec)
    missing = sorted(EVAL_KEYS - set(rec))
    if missing:
        raise RecordError(missing[0], f"missing (the evaluator writes every one of {', '.join(sorted(EVAL_KEYS))})")
    full = as_str(rec["prompt"], "prompt")
    response = as_str(rec["response"], "response")
    if not response:
        raise RecordError("response", "empty response: the response has zero tokens")
    if not full.endswith(response):
        raise RecordError(
            "prompt", "does not end with the response (the evaluator decodes prompt + response ids into it)"
        )
    prompt = full[: len(full) - len(response)]
    metrics = rec["metrics"]
    if not isinstance(metrics, Mapping):
        raise RecordError("metrics", f"expected an object, got {type_name(metrics)}")
    components = {str(k): as_float(v, f"metrics.{k}") for k, v in metrics.items() if is_number(v)}
    ignored = sorted(str(k) for k, v in metrics.items() if not is_number(v))
    score = _score(rec["score"])
    metadata: dict = {"dataset": rec["dataset"], "batch_idx": rec["batch_idx"], "sample_idx": rec["sample_idx"]}
    if components:
        metadata["reward_components"] = components
    if ignored:
        metadata["ignored"] = [f"metrics.{k}" for k in ignored]
    if score is None:
        metadata["score_as_written"] = rec["score"]
    group = f"{rec['dataset']}/batch{rec['batch_idx']}/{prompt_group_id(prompt)}"
    return Trajectory(
        id=as_id(rec["uid"], "uid"),
        group_id=group,
        prompt=prompt,
        segments=split_tagged(response),
        global_rewards={"score": score} if score is not None else {},
        metadata=metadata,
    )


def eval_read(path: Path, ctx: LoadContext):
    for line, prefix, traj in read_records(path, ctx, eval_convert):
        ctx.note("uid", GROUP_NOTE, line, once="kgr1-eval-groups")
        if "score_as_written" in traj.metadata:
            ctx.note("score", NO_REWARD_NOTE, line, once="kgr1-eval-no-reward")
        yield line, prefix, traj


def passatk_summary(rec: object) -> str | None:
    """Why ``rec`` is not rollouts when it is ``main_eval``'s ``{dataset}_passatk_results.json``."""
    if (
        isinstance(rec, Mapping)
        and rec
        and all(is_number(v) for v in rec.values())
        and any(PASSATK_KEY.search(str(k)) for k in rec)
    ):
        return "KG-R1 evaluator pass@k results: means over all samples"
    return None


# ------------------------------------------------------------------------------------------------ trainer dump
def dump_sniff(rec: object) -> bool:
    return (
        isinstance(rec, Mapping)
        and {"input", "output", "score"} <= set(rec)
        and any(key in rec for key in DUMP_AGGREGATES)
    )


def dump_read(path: Path, ctx: LoadContext):
    raise ValueError(f"{path}: {DUMP_REFUSAL}")
