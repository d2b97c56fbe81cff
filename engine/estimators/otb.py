"""Optimal token baseline (OTB) and its tool-integrated variant, as verl computes them (docs/conventions/verl.md §1.3).

G_t = Σ_{k≥t} r_k m_k (reward-to-go, γ = 1).  Per-token path variance w_t = 1 − 2π_t + Σ_v π(v)² with π_t =
exp(old_log_prob_t) (× ρ_t² with rollout IS weights); W_t = Σ_{j≤t} w_j m_j.  Per group g of ≥ 2 trajectories
and per position t:  b_t = Σ_{i∈g} G_{i,t} W_{i,t} m_{i,t} / (Σ_{i∈g} W_{i,t} m_{i,t} + 1e-8); a singleton has b = 0.
``cfg.otb_handle_zero_tail``: when one trajectory of a group is strictly the longest (in valid tokens), its
baseline from the second-longest length on is 0.  A = (G − b)·m, returns = G.

Σ_v π² comes from the actor (``sum_pi_squared``); a run without it can use the stand-in π_t² (the sampled
token's own share, a lower bound: w = (1 − π_t)²), chosen by ``cfg.otb_sum_pi_squared`` and named in the notes.

``optimal_token_baseline`` aligns trajectories by absolute position t (holes included); ``tir_optimal_token_
baseline`` first compacts each row's valid tokens (holes removed), so positions are valid-token indices, and
leaves empty rows out of their group.  Both vectorized over groups (``index_add``), no Python loop.
"""

from __future__ import annotations

import torch

from engine.groups import dense_group_ids
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator
from engine.scan import Compaction

OTB_EPSILON = 1e-8  # verl's default for both estimators; the trainer does not pass one


def sum_pi_squared(inp: EstimatorInput, cfg, name: str) -> tuple[torch.Tensor, str]:
    """(Σ_v π² [B, T], its source): the actor's, or the stand-in π_t² = exp(2·old_log_prob)."""
    if inp.old_log_probs is None:
        raise ValueError(f"{name} needs old_log_probs (the rollout policy's log-probs); this run has none")
    source = cfg.otb_sum_pi_squared or ("actor" if inp.sum_pi_squared is not None else "sampled_token")
    if source == "actor":
        if inp.sum_pi_squared is None:
            raise ValueError(f"{name}: otb_sum_pi_squared='actor' but the input has no sum_pi_squared (Σ_v π²)")
        return inp.sum_pi_squared, source
    return torch.exp(2 * inp.old_log_probs), source


def reward_to_go(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """G_t = Σ_{k≥t} r_k m_k. (B, T)."""
    return torch.flip(torch.cumsum(torch.flip(rewards * mask, [-1]), -1), [-1])


def path_variance(inp: EstimatorInput, pi_squared: torch.Tensor) -> torch.Tensor:
    """W_t = Σ_{j≤t} (1 − 2π_j + Σπ²_j)·ρ_j²·m_j, the cumulative path-variance proxy. (B, T)."""
    w = 1 - 2 * torch.exp(inp.old_log_probs) + pi_squared
    if inp.rollout_is_weights is not None:
        w = w * inp.rollout_is_weights.square()
    return torch.cumsum(w * inp.response_mask, dim=-1)


def token_baseline(
    returns: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    members: torch.Tensor,
    handle_zero_tail: bool,
) -> torch.Tensor:
    """b [B, T]: the group's W-weighted mean return at each position; 0 for singletons and, with
    ``handle_zero_tail``, on the tail of a group's unique longest member. ``members`` [B] bool: rows that count."""
    B, T = mask.shape
    idx, G = dense_group_ids(group_ids)
    dt = returns.dtype
    num = torch.zeros(G, T, dtype=dt, device=mask.device).index_add_(0, idx, returns * weights * mask)
    den = torch.zeros(G, T, dtype=dt, device=mask.device).index_add_(0, idx, weights * mask) + OTB_EPSILON
    size = torch.zeros(G, dtype=dt, device=mask.device).index_add_(0, idx, members.to(dt))  # (G,)
    b = torch.where(size[idx, None] > 1, (num / den)[idx], torch.zeros_like(returns))
    if handle_zero_tail:
        length = torch.where(members, mask.sum(-1).long(), torch.full_like(idx, -1))  # (B,)
        longest = torch.full((G,), -1, dtype=torch.long, device=mask.device).scatter_reduce_(0, idx, length, "amax")
        is_max = members & (length == longest[idx])
        n_max = torch.zeros(G, dtype=torch.long, device=mask.device).index_add_(0, idx, is_max.long())
        shorter = torch.where(is_max, torch.full_like(length, -1), length)
        second = torch.full((G,), -1, dtype=torch.long, device=mask.device).scatter_reduce_(0, idx, shorter, "amax")
        unique = is_max & (n_max[idx] == 1) & (size[idx] > 1)  # (B,)
        tail = unique[:, None] & (torch.arange(T, device=mask.device) >= second[idx, None])  # (B, T)
        b = torch.where(tail, torch.zeros_like(b), b)
    return b


@register_estimator(
    "optimal_token_baseline",
    singleton="raw",
    label="Optimal token baseline (OTB)",
    formula=r"b_t = \frac{\sum_{i\in g} G_{i,t} W_{i,t}}{\sum_{i\in g} W_{i,t}},\ W_t = \sum_{j\le t} (1 - 2\pi_j"
    r" + \textstyle\sum_v \pi_j(v)^2),\quad A_t = G_t - b_t",
    requires=("old_log_probs",),
    kind="token",
    reference="verl core_algos.compute_optimal_token_baseline_advantage (1dda039b)",
)
def optimal_token_baseline(inp: EstimatorInput, cfg) -> EstimatorOutput:
    pi_sq, source = sum_pi_squared(inp, cfg, "optimal_token_baseline")
    m = inp.response_mask
    g = reward_to_go(inp.token_level_rewards, m)
    w = path_variance(inp, pi_sq)
    members = torch.ones_like(inp.group_ids, dtype=torch.bool)
    b = token_baseline(g, w, m, inp.group_ids, members, cfg.otb_handle_zero_tail)
    return EstimatorOutput((g - b) * m, g, {"baseline": b, "path_variance": w}, {"sum_pi_squared": source})


@register_estimator(
    "tir_optimal_token_baseline",
    singleton="raw",
    label="Optimal token baseline, tool-integrated (TIR-OTB)",
    formula=r"\text{OTB on each row's valid tokens only (holes removed, positions = valid-token index)}",
    requires=("old_log_probs",),
    kind="token",
    reference="verl core_algos.compute_multi_turn_optimal_token_baseline_advantage (1dda039b)",
)
def tir_optimal_token_baseline(inp: EstimatorInput, cfg) -> EstimatorOutput:
    pi_sq, source = sum_pi_squared(inp, cfg, "tir_optimal_token_baseline")
    m = inp.response_mask
    g = reward_to_go(inp.token_level_rewards, m)
    w = path_variance(inp, pi_sq)
    cm = Compaction(m)
    g_c, w_c, m_c = cm.compact(g), cm.compact(w), cm.valid.to(m.dtype)  # (B, T) valid tokens first
    members = m.sum(-1) > 0  # empty rows are left out of their group
    b_c = token_baseline(g_c, w_c, m_c, inp.group_ids, members, cfg.otb_handle_zero_tail)
    adv = cm.expand_next_valid((g_c - b_c) * m_c) * m
    b = cm.expand_next_valid(b_c) * m
    return EstimatorOutput(adv, g, {"baseline": b, "path_variance": w}, {"sum_pi_squared": source})
