"""prime-rl GRPO's linear length penalty (``GRPOAlgorithm.score_group`` with ``algo.length_penalty``, prime-rl
``src/prime_rl/orchestrator/algo/grpo.py`` at 559b4477): the scores are shaped within each group before GRPO's
baseline,

    f_i = w_out · out_i / max(max_g out, 1) + w_in · in_i / max(max_g in, 1) + w_turns · turns_i / max(max_g turns, 1)
    s'_i = s_i − mean_g(s) · f_i

out_i = the trace's output tokens (verifiers ``Trace.num_output_tokens``: the provider's completion tokens, summed
over the calls of every branch), in_i = its final-sequence tokens (``num_total_tokens``: the last call's prompt and
completion tokens, summed over branches) − out_i, turns_i = its sampled messages (``num_turns``). The penalty scales
with the group's pass rate mean_g(s), so a group that solves nothing is not shaped, and a negative mean rewards
length. A group of one is shaped by its own values, and GRPO then takes its mean. prime-rl computes in float32 in
this order; so does this.
"""

from __future__ import annotations

import torch

from engine.groups import group_stats


def linear_length_penalty(
    scores: torch.Tensor, group_ids: torch.Tensor, trace_lengths: torch.Tensor, weights: tuple[float, ...]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """s' = s − mean_g(s)·f (module docstring) for ``scores`` [B], ``trace_lengths`` [B, 3] (output tokens,
    final-sequence tokens, turns) and ``weights`` (w_out, w_in, w_turns). Returns s' [B] and the intermediates
    ``length_fraction`` f [B] and ``length_penalty`` mean_g(s)·f [B]."""
    st = group_stats(scores, group_ids, singleton_mean=None)  # a group of one: its own mean, as prime-rl
    lengths = trace_lengths.to(scores.dtype)
    output, total, turns = lengths.unbind(-1)
    counts = torch.stack([output, total - output, turns], -1)  # (B, 3): out, in, turns
    G = int(st.index.max()) + 1 if st.index.numel() else 0
    group_max = torch.zeros(G, 3, dtype=counts.dtype, device=counts.device)
    group_max = group_max.scatter_reduce_(0, st.index[:, None].expand_as(counts), counts, "amax")  # counts ≥ 0
    share = counts / group_max.clamp(min=1)[st.index]  # (B, 3)
    w_out, w_in, w_turns = weights
    fraction = w_out * share[:, 0] + w_in * share[:, 1] + w_turns * share[:, 2]
    penalty = st.mean * fraction
    return scores - penalty, {"length_fraction": fraction, "length_penalty": penalty}
