"""Token-level return estimators without a critic: REINFORCE++ and ReMax.

REINFORCE++ (Hu 2025): G_t = r_t + γ G_next over valid tokens, advantages = masked_whiten(G, m) · m.
Holes, per ``cfg.reinforce_hole_mode``: ``carry`` (verl ≥ PR #7278/#7300: the return flows through a tool block,
γ applied once per valid token, rewards on holes dropped, G = 0 at holes) or ``reset`` (older verl's loop
G_t = r_t + γ·m_{t+1}·G_{t+1}: the running return is zeroed after every hole, so tokens before a tool call never
see the outcome reward, and a hole's own reward is counted at the hole) or ``positional`` (OpenRLHF's
``get_cumulative_returns``: rewards on holes dropped, γ once per column, holes included, and a hole reports the
running return). The whitening follows ``cfg.whitening`` (``engine.masked.whiten``).
ReMax (Li et al. 2023): G = reverse cumsum of r·m (γ = 1), A = G − b_i·m with b_i the greedy rollout's score.
"""

from __future__ import annotations

import torch

from engine.masked import whiten
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator
from engine.scan import Compaction, by_row_blocks, discounted_reverse_cumsum, next_hole_distance


def reinforce_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float, hole_mode: str) -> torch.Tensor:
    """REINFORCE++ returns (B, T). carry: discounted over valid tokens, 0 on holes and padding. positional:
    Σ_{k≥t} γ^(k−t) r_k m_k at every position (0 after the last valid token). reset: exactly
    what older verl's loop leaves at every position, G_t = Σ_{k=t}^{e−1} γ^(k−t) r_k with e the first hole
    after t (holes included: a hole reports its own reward plus the valid run that follows it)."""
    return by_row_blocks(lambda r, m: _returns_rows(r, m, gamma, hole_mode), rewards, mask)


def _returns_rows(rewards: torch.Tensor, mask: torch.Tensor, gamma: float, hole_mode: str) -> torch.Tensor:
    if hole_mode == "positional":
        return discounted_reverse_cumsum(rewards * mask, gamma)
    if hole_mode == "carry":
        cm = Compaction(mask)
        return cm.expand_next_valid(discounted_reverse_cumsum(cm.compact(rewards), gamma)) * mask
    full = discounted_reverse_cumsum(rewards.double(), gamma)  # (B, T) Σ_{k≥t} γ^(k−t) r_k, no reset
    span = 1 + torch.nn.functional.pad(next_hole_distance(mask)[:, 1:], (0, 1))  # e − t: first hole after t
    T = mask.shape[-1]
    e = torch.arange(T, device=mask.device) + span  # (B, T), ≤ T
    beyond = torch.gather(torch.nn.functional.pad(full, (0, 1)), 1, e)  # the sum from e on, 0 past the end
    return (full - (gamma ** span.double()) * beyond).to(rewards.dtype)


@register_estimator(
    "reinforce_plus_plus",
    short="REINFORCE++",
    label="REINFORCE++",
    formula=r"G_t = \sum_{k \ge t,\ m_k=1} \gamma^{\#\text{valid}(t,k)} r_k,"
    r"\quad A = \mathrm{whiten}_{\text{batch}}(G)\cdot m",
    kind="token",
    whitened=True,
    reference="verl core_algos.compute_reinforce_plus_plus_outcome_advantage (1dda039b; holes PR #7278/#7300)",
)
def reinforce_plus_plus(inp: EstimatorInput, cfg) -> EstimatorOutput:
    m = inp.response_mask
    g = reinforce_returns(inp.token_level_rewards, m, cfg.gamma, cfg.reinforce_hole_mode)
    adv = whiten(g, m, cfg.whitening, cfg.whiten_std)
    if cfg.whitening == "verl":
        adv = adv * m
    return EstimatorOutput(adv, g, {"returns_raw": g})


@register_estimator(
    "remax",
    label="ReMax (greedy baseline)",
    formula=r"G_t = \sum_{k\ge t} r_k m_k,\quad A_t = G_t - b_i\, m_t",
    requires=("reward_baselines",),
    kind="token",
    reference="verl core_algos.compute_remax_outcome_advantage (Li et al. 2023)",
)
def remax(inp: EstimatorInput, cfg) -> EstimatorOutput:
    if inp.reward_baselines is None:
        raise ValueError("remax needs reward_baselines (the greedy rollout's score per trajectory); the run has none")
    m = inp.response_mask
    g = torch.flip(torch.cumsum(torch.flip(inp.token_level_rewards * m, [-1]), -1), [-1])
    adv = g - inp.reward_baselines[:, None] * m
    return EstimatorOutput(adv, g, {"baseline": inp.reward_baselines})
