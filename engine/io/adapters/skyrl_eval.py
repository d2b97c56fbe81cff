"""Adapter ``skyrl_eval``: SkyRL's eval dump (``{export_path}/dumped_evals/global_step_<N>_evals/<data_source>.jsonl``).

Written by ``dump_per_dataset_eval_results`` (``skyrl/train/utils/trainer_utils.py``), one line per rollout:
``{"input_prompt", "output_response", "score", "stop_reason", "env_class", "env_extras", "data_source"}``.
Both texts are ``tokenizer.decode(ids)`` with special tokens kept, so the chat template is in the text; the
token ids and the loss mask are not dumped, so:

* the prompt and the response are re-tokenized from text. The response is split at the ChatML markers the
  SkyRL gym generator wrote into it (multi-turn, token-in-token-out): each assistant turn up to and including its
  ``<|im_end|>`` is a model segment; the observation after it (``\\n<|im_start|>user\\n...<|im_end|>`` blocks
  and the ``\\n<|im_start|>assistant\\n`` generation prompt) is one ``user`` segment (``tool`` when the role is
  ``tool`` or the content a ``<tool_response>``). A response without ChatML markers is one model segment, with
  ``<information>`` blocks as tool segments (observations appended as plain text). An EOS that SkyRL appended
  after a stop string (``append_eos_token_after_stop_str_in_multi_turn``, loss mask 0) cannot be told from a
  generated one and counts as a model token.
* ``score`` is what SkyRL trains on: a float (batched or custom-chat-template generation) becomes global reward
  ``score``; a list (the default agent loop: each step reward on the last generated token of its turn) becomes
  the per-token ``scores`` of the response when the re-tokenized response has exactly one token per entry and
  every non-zero entry falls on a model token. Otherwise its sum is the global reward ``score``, the list is
  kept in ``metadata.token_rewards`` and a problem says the placement was lost.
* ``stop_reason == "length"`` -> ``metadata.truncated``.
* Groups: no uid is dumped; the ``eval_n_samples_per_prompt`` rollouts of one dataset row share the prompt text
  and ``env_extras``, so rollouts with both equal form a group.
* ``aggregated_results.jsonl`` (one record of ``eval/...`` metrics, written beside the per-dataset files) holds no
  rollout: its metrics go to the run's metadata (``skyrl_eval_metrics``).

Step: the folder ``global_step_<N>_evals`` (``STEP_FOLDER``); the records hold none. NovaSky-AI/SkyRL ``a9564572``,
``skyrl/train/evaluate.py`` ``evaluate`` / ``evaluate_step_wise``: ``data_save_dir = export_path / "dumped_evals" /
("eval_only" if global_step is None else f"global_step_{global_step}_evals")``, called from
``skyrl/train/trainer.py`` ``RayPPOTrainer.eval`` with ``global_step=self.global_step`` (the trainer's step when the
evaluation ran). These are evaluation rollouts at that step, not a training batch; an ``eval_only`` dump has no
step. ``aggregated_results.jsonl`` of a step folder is also kept per step, as run metadata
``skyrl_eval_metrics_step_<N>`` (a load of ``dumped_evals/`` reads every step's).

Step-wise dumps (``step_wise_trajectories``) write one line per step, each with its own prompt; they load as
one trajectory per step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.adapters.common import read_records, require_mapping
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_float, as_float_array, as_str, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.text.tags import split_at, split_tagged
from engine.io.text.tokenize import encode_many, get_tokenizer

NAME = "skyrl_eval"
KEYS = frozenset({"input_prompt", "output_response", "score", "stop_reason", "env_class"})
METRICS_KEY = "eval/all/avg_score"
STEP_FOLDER = re.compile(r"global_step_(\d+)_evals")  # dumped_evals/global_step_<N>_evals/<data_source>.jsonl
# The ChatML markers an observation is cut at (``observations``).
HEADER, IM_END, GENERATION_PROMPT = "\n<|im_start|>", "<|im_end|>", "\n<|im_start|>assistant\n"
HEADER_ROLE = re.compile(r"\n<\|im_start\|>([^\n]*)\n(.{0,16})", re.DOTALL)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and (KEYS <= set(rec) or METRICS_KEY in rec)


def split_response(text: str) -> list[Segment]:
    """Model / observation segments of a decoded SkyRL response (module docstring)."""
    if "<|im_start|>" not in text:
        return split_tagged(text) or [Segment(role="model", text="")]
    return split_at(text, observations(text), _observation_role)


def _closed_block(text: str, at: int) -> int:
    """End of the non-assistant message (``\\n<|im_start|>role\\n...<|im_end|>``) that starts at ``at``: -1 if
    none starts there, -2 if no role line or ``<|im_end|>`` follows (then no later header can close either)."""
    if not text.startswith(HEADER, at) or text.startswith("assistant\n", at + len(HEADER)):
        return -1
    role_end = text.find("\n", at + len(HEADER))
    close = text.find(IM_END, role_end + 1) if role_end >= 0 else -1
    return -2 if close < 0 else close + len(IM_END)


def observations(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each observation in a response: closed non-assistant messages in a row, each from the
    newline before its header to its ``<|im_end|>`` (the first after its role line), then the assistant's
    generation prompt if it follows.

    Each search starts where the previous one ended and a failed one ends the scan, so the work is linear in
    ``len(text)``; a regular expression for the same blocks searched for ``<|im_end|>`` from every unclosed header
    (quadratic in 20,000 of them).
    """
    pos = 0
    while (at := text.find(HEADER, pos)) >= 0:
        end = _closed_block(text, at)
        if end == -2:
            return
        if end == -1:  # the assistant's header: part of the model's text
            pos = at + 1
            continue
        while (more := _closed_block(text, end)) >= 0:
            end = more
        if text.startswith(GENERATION_PROMPT, end):
            end += len(GENERATION_PROMPT)
        yield at, end
        pos = end


def _observation_role(block: str) -> str:
    head = HEADER_ROLE.match(block)
    role, start = (head.group(1), head.group(2)) if head else ("user", "")
    return "tool" if role == "tool" or start.startswith("<tool_response>") else "user"


def _place_token_rewards(segs: list[Segment], rewards: np.ndarray, tok_name: str | None) -> str | None:
    """Put per-token rewards on the segments; the reason it cannot be done otherwise (nothing is changed then)."""
    ids = encode_many(get_tokenizer(tok_name), [s.text for s in segs])
    n = sum(len(i) for i in ids)
    if n != len(rewards):
        return f"{len(rewards)} per-token rewards but the re-tokenized response has {n} tokens"
    bounds = np.cumsum([0] + [len(i) for i in ids])
    on_model = np.zeros(n, dtype=bool)
    for s, a, b in zip(segs, bounds[:-1], bounds[1:], strict=True):
        on_model[a:b] = s.role == "model"
    stray = np.flatnonzero((rewards != 0) & ~on_model)
    if stray.size:
        return f"a non-zero reward falls on re-tokenized token {int(stray[0])}, which is not a model token"
    for s, seg_ids, a, b in zip(segs, ids, bounds[:-1], bounds[1:], strict=True):
        s.token_ids, s.scores = seg_ids, rewards[a:b]
    return None


def convert(rec: object, default_id: str, ctx: LoadContext, notes: list[tuple[str, str]]) -> list[Trajectory]:
    """The record's trajectory (none for the aggregated metrics); what was changed goes to ``notes``."""
    notes.clear()
    rec = require_mapping(rec)
    if METRICS_KEY in rec and not KEYS <= set(rec):  # aggregated_results.jsonl: the run's metrics, no rollout
        ctx.run_metadata["skyrl_eval_metrics"] = dict(rec)
        if ctx.path_step is not None:  # one entry per step: a load of dumped_evals/ keeps every step's metrics
            ctx.run_metadata[f"skyrl_eval_metrics_step_{ctx.path_step}"] = dict(rec)
        return []
    prompt = as_str(rec.get("input_prompt"), "input_prompt")
    response = as_str(rec.get("output_response"), "output_response")
    if not response:
        raise RecordError("output_response", "empty response: the rollout has zero tokens")
    env_extras = rec.get("env_extras")
    if env_extras is not None and not isinstance(env_extras, Mapping):
        raise RecordError("env_extras", f"expected an object, got {type_name(env_extras)}")
    stop = rec.get("stop_reason")
    metadata: dict = {
        "truncated": stop == "length",
        "stop_reason": stop,
        "env_class": rec.get("env_class"),
        "data_source": rec.get("data_source"),
    }
    segs = split_response(response)
    score = rec.get("score")
    rewards: dict[str, float] = {}
    if isinstance(score, list):
        token_rewards = as_float_array(score, "score")
        why = _place_token_rewards(segs, token_rewards, ctx.tokenizer or ctx.run_tokenizer)
        if why is not None:
            total = float(token_rewards.sum(dtype=np.float64))
            rewards = {"score": total}
            metadata["token_rewards"] = token_rewards.tolist()
            notes.append(("score", f"{why}: their sum {total:g} is the outcome reward `score` (placement lost)"))
    else:
        rewards = {"score": as_float(score, "score")}
    return [
        Trajectory(
            id=default_id,
            group_id=prompt_group_id([prompt, env_extras]),
            prompt=prompt,
            segments=segs,
            global_rewards=rewards,
            metadata=metadata,
        )
    ]


def read(path: Path, ctx: LoadContext):
    notes: list[tuple[str, str]] = []
    for line, prefix, traj in read_records(path, ctx, lambda rec, default_id: convert(rec, default_id, ctx, notes)):
        for field_, reason in notes:  # reported outside the conversion, so that strict mode names them as they are
            ctx.problem(line, f"{prefix}{field_}", reason)
        notes.clear()
        yield line, prefix, traj
