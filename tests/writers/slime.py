"""Mimic of slime's debug rollout dump, ``--save-debug-rollout-data`` (``<dump_details>/rollout_data/<id>.pt``).

Source: THUDM/slime, commit 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21).

* ``slime/observability/rollout_data_utils.py`` ``save_debug_rollout_data(path_template, data, *, rollout_id,
  evaluation)`` (line 140): ``path = Path(path_template.format(rollout_id=("eval_" if evaluation else "") +
  str(rollout_id)))``, ``samples = [sample.to_dict() for sample in data]`` (``data`` is the flat list of the
  rollout's samples, called from ``RolloutManager.generate`` in ``slime/ray/rollout.py`` line 500 before the
  samples become train data; ``RolloutManager.eval``, line 522, passes ``evaluation=True`` and a dict of datasets),
  ``torch.save({"rollout_id": rollout_id, "samples": samples}, path)``: the step is the ``rollout_id`` key (an int,
  also for an evaluation's dump) and, under ``--dump-details`` (``slime/utils/arguments.py`` line 1891:
  ``f"{dump_details}/rollout_data/{{rollout_id}}.pt"``), the file name. ``train.py`` generates, dumps and trains
  one rollout per ``rollout_id`` (lines 49-69), and evaluates before training (rollout 0) and every
  ``eval_interval`` (line 90) into ``eval_<rollout_id>.pt`` beside the training dumps.
* ``slime/rollout/data_source.py`` (lines 108-114): ``group_index`` and ``index`` are the data source's running
  ``sample_group_index`` / ``sample_index``, counted on across rollouts (saved with the data source's state).
* ``slime/utils/types.py`` ``Sample``: the dataclass fields re-stated below with their defaults;
  ``Sample.to_dict`` = ``self.__dict__.copy()`` with ``status`` replaced by its string value and ``spec_info`` /
  ``prefix_cache_info`` by their ``to_dict()``. ``tokens`` = prompt ids + response ids, ``response_length`` =
  response ids, ``loss_mask`` / ``rollout_log_probs`` one per response token: ``append_response_tokens`` gives
  model tokens mask 1 and their log-probs, tool/environment tokens (``trainable=False``) mask 0 and log-prob 0.0.
  ``status`` is ``"truncated"`` when generation hit the length limit (``Sample.Status.TRUNCATED``).
* ``slime/ray/rollout.py`` ``_post_process_rewards``: GRPO normalises ``reward`` over consecutive groups of
  ``n_samples_per_prompt`` samples after the dump, so the dump holds raw rewards and no advantages.

Tokens come from CreditLens's offline Qwen2.5 tokenizer; log-probs are made up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import torch

from engine.io.text.tokenize import encode_many, get_tokenizer


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: list[int] | None = None
    rollout_top_p_token_offsets: list[int] | None = None
    rollout_routed_experts: list[list[int]] | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0
    spec_info: dict = field(
        default_factory=lambda: {
            "spec_accept_token_num": 0,
            "spec_draft_token_num": 0,
            "spec_verify_ct": 0,
            "completion_token_num": 0,
        }
    )
    prefix_cache_info: dict = field(default_factory=lambda: {"cached_tokens": 0, "total_prompt_tokens": 0})

    def to_dict(self) -> dict:
        value = self.__dict__.copy()
        value["status"] = self.status.value
        value["spec_info"] = dict(self.spec_info)  # SpecInfo.to_dict()
        value["prefix_cache_info"] = dict(self.prefix_cache_info)  # PrefixCacheInfo.to_dict()
        return value


@dataclass
class Spec:
    """One sample: a prompt and its response as (text, trainable) pieces; ``reward`` as slime's reward fn gives it."""

    prompt: str
    pieces: list[tuple[str, bool]]
    reward: float | dict | None
    truncated: bool = False
    remove: bool = False
    metadata: dict = field(default_factory=dict)


def build_sample(tok, spec: Spec, group_index: int | None, index: int, seed: int) -> Sample:
    rng = np.random.default_rng(seed)
    prompt_ids = encode_many(tok, [spec.prompt])[0].tolist()
    s = Sample(group_index=group_index, index=index, prompt=spec.prompt, tokens=list(prompt_ids))
    for text, trainable in spec.pieces:  # Sample.append_response_tokens
        ids = encode_many(tok, [text])[0].tolist()
        lps = [float(x) for x in (-rng.random(len(ids))).astype(np.float32)] if trainable else [0.0] * len(ids)
        s.tokens += ids
        s.response += text
        s.response_length += len(ids)
        s.loss_mask = (s.loss_mask or []) + [1 if trainable else 0] * len(ids)
        s.rollout_log_probs = (s.rollout_log_probs or []) + lps
    s.reward = spec.reward
    s.status = Sample.Status.TRUNCATED if spec.truncated else Sample.Status.COMPLETED
    s.remove_sample = spec.remove
    s.metadata = dict(spec.metadata)
    return s


def save_debug_rollout_data(
    path_template: str,
    groups: list[list[Spec]],
    rollout_id: int,
    first_group: int = 0,
    first_index: int = 0,
    evaluation: bool = False,
) -> tuple[str, list[Sample]]:
    """Build the rollout's samples and dump them as slime does. ``first_group`` / ``first_index``: the data source's
    running ``sample_group_index`` / ``sample_index`` when this rollout starts (the previous rollouts' counts)."""
    tok = get_tokenizer()
    data, index = [], first_index
    for g, specs in enumerate(groups):
        for spec in specs:
            group = None if evaluation else first_group + g  # eval_rollout_single_dataset sets only the index
            data.append(build_sample(tok, spec, group, index, seed=index))
            index += 1
    path = path_template.format(rollout_id=("eval_" if evaluation else "") + str(rollout_id))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"rollout_id": rollout_id, "samples": [sample.to_dict() for sample in data]}, path)
    return path, data
