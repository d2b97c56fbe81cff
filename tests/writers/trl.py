"""Mimic of TRL's GRPO completion log, ``<output_dir>/completions/completions_<step:05d>.parquet``.

Source: huggingface/trl, commit f2cd57710ae345ea6428ae95363267fcf38a3dc8 (2026-07-24), ``trl/trainer/grpo_trainer.py``:

* ``GRPOTrainer._generate_and_score_completions`` fills ``self._logs`` for one generation batch:
  ``prompts_text = processing_class.batch_decode(prompt_ids, skip_special_tokens=True)`` and likewise
  ``completions_text`` from ``completion_ids`` (the completion mask keeps tokens up to and including the first
  EOS, so a finished completion's ids end in EOS and a length-limited one does not; decoding drops the EOS
  either way); ``rewards_per_func`` [N, K] float32 with NaN where a reward function returned ``None``; with
  ``multi_objective_aggregation="sum_then_normalize"`` (default) ``rewards = (rewards_per_func *
  reward_weights).nansum(dim=1)``, NaN again for a row whose every reward is NaN; ``scale_rewards="group"``
  (default): ``mean = nanmean(rewards.view(-1, G), 1)``, ``std = nanstd(rewards.view(-1, G), 1)`` (``nanstd`` in
  ``trl/trainer/utils.py``: Bessel-corrected, count/(count − 1)), both ``repeat_interleave(G)``;
  ``advantages = (rewards − mean) / (std + 1e-4)``, then ``nan_to_num(nan=0.0)``. ``_logs["rewards"][name]``
  gets ``rewards_per_func[:, k].tolist()`` per reward function name, ``_logs["advantages"]`` the advantages.
  Rows are in the sampler's order: each prompt repeated ``num_generations`` times consecutively (RepeatSampler),
  which is what ``view(-1, G)`` relies on. ``log_extra`` columns go to ``_logs["extra"]``.
* ``GRPOTrainer.log`` (main process, ``log_completions=True``; lines 3311-3327 at that commit) builds
  ``{"step": [self.state.global_step] * N, "prompt": ..., "completion": ..., **rewards, **extra, "advantage": ...}``
  and writes ``pd.DataFrame(table).to_parquet(os.path.join(output_dir, "completions",
  f"completions_{self.state.global_step:05d}.parquet"))`` (the folder made once in ``__init__``, line 1174): the
  step is both the ``step`` column and the file name, and a run is one file per logging step in one folder.

Here the "model tokenizer" is CreditLens's offline Qwen2.5 one (a ``PreTrainedTokenizerFast``, as TRL's
``processing_class``), prompts are ChatML-rendered chat messages with the generation prompt, the EOS is
``<|im_end|>``. What the file loses (and the loader therefore cannot recover): special tokens, which
completions hit the length limit, ``num_generations`` and ``reward_weights``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from engine.io.text.chatml import render_prompt
from engine.io.text.tokenize import encode_many, get_tokenizer

RewardFn = Callable[[str, str], float | None]  # (prompt text, completion text) -> reward or None


@dataclass
class Written:
    """Ground truth of one written file (row order = file order)."""

    path: str
    prompts: list[str]
    completions: list[str]
    completion_ids: list[list[int]]  # what the loader's re-tokenization of the logged text must give
    trained_ids: list[list[int]]  # what TRL trained on (EOS included unless length-limited)
    groups: list[int]  # TRL's block index (row // num_generations)
    rewards: dict[str, list[float]]  # per reward function, NaN where it returned None
    advantages: list[float]
    extra: dict[str, list]


def nanstd(x: torch.Tensor, dim: int) -> torch.Tensor:
    """TRL's ``nanstd``: sqrt(nanmean((x − nanmean)²) · n/(n − 1)), NaN when n ≤ 1."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(x), dim=dim, keepdim=True)
    correction = torch.where(count > 1, count / (count - 1), torch.full_like(var, float("nan")))
    return torch.sqrt(var * correction).squeeze(dim)


def grpo_advantages(rewards_per_func: torch.Tensor, weights: torch.Tensor, G: int) -> torch.Tensor:
    """sum_then_normalize + scale_rewards='group', as ``_generate_and_score_completions`` computes them."""
    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable] = torch.nan
    mean = torch.nanmean(rewards.view(-1, G), dim=1).repeat_interleave(G)
    std = nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G)
    return torch.nan_to_num((rewards - mean) / (std + 1e-4), nan=0.0)


def write_completions(
    output_dir: str,
    step: int,
    prompts: Sequence[list[dict]],
    completions: Sequence[Sequence[str]],
    reward_funcs: dict[str, RewardFn],
    reward_weights: Sequence[float] | None = None,
    truncated: Sequence[Sequence[bool]] | None = None,
    extra: dict[str, Callable[[str], object]] | None = None,
) -> Written:
    """One generation batch: ``prompts[p]`` (chat messages) with ``completions[p]`` (G texts each), as TRL logs it.

    ``truncated[p][g]``: the completion hit max_completion_length (no EOS in its ids). ``extra``: log_extra
    columns, name -> fn(completion text).
    """
    tok = get_tokenizer()
    G = len(completions[0])
    assert all(len(c) == G for c in completions), "TRL draws num_generations completions per prompt"
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    prompt_ids, completion_ids, truncs = [], [], []
    for p, msgs in enumerate(prompts):
        ids = encode_many(tok, [render_prompt(msgs)])[0].tolist()
        for g, text in enumerate(completions[p]):
            cut = bool(truncated and truncated[p][g])
            prompt_ids.append(ids)  # RepeatSampler: the same prompt G times in a row
            completion_ids.append(encode_many(tok, [text])[0].tolist() + ([] if cut else [eos]))
            truncs.append(cut)
    prompts_text = tok.batch_decode(prompt_ids, skip_special_tokens=True)
    completions_text = tok.batch_decode(completion_ids, skip_special_tokens=True)
    names = list(reward_funcs)
    rewards_per_func = torch.tensor(
        [
            [np.nan if (r := fn(pt, ct)) is None else r for fn in reward_funcs.values()]
            for pt, ct in zip(prompts_text, completions_text, strict=True)
        ],
        dtype=torch.float32,
    )  # (N, K)
    weights = torch.tensor(reward_weights if reward_weights is not None else [1.0] * len(names), dtype=torch.float32)
    advantages = grpo_advantages(rewards_per_func, weights, G)
    extra_cols = {name: [fn(ct) for ct in completions_text] for name, fn in (extra or {}).items()}
    table = {
        "step": [step] * len(prompts_text),
        "prompt": prompts_text,
        "completion": completions_text,
        **{name: rewards_per_func[:, k].tolist() for k, name in enumerate(names)},
        **extra_cols,
        "advantage": advantages.tolist(),
    }
    os.makedirs(os.path.join(output_dir, "completions"), exist_ok=True)
    path = os.path.join(output_dir, "completions", f"completions_{step:05d}.parquet")
    pd.DataFrame(table).to_parquet(path)
    return Written(
        path=path,
        prompts=prompts_text,
        completions=completions_text,
        completion_ids=[x.tolist() for x in encode_many(tok, completions_text)],
        trained_ids=completion_ids,
        groups=[i // G for i in range(len(prompts_text))],
        rewards={name: rewards_per_func[:, k].tolist() for k, name in enumerate(names)},
        advantages=advantages.tolist(),
        extra=extra_cols,
    )
