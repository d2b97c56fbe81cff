"""KG-R1's structured-reward GRPO estimators (docs/conventions/kg-r1.md §3.3) on weighted turn rewards r_{i,k} and G_i.

``grpo_multiturn``: per group, pool **every** (sample, turn) reward of the group (turn indices are not separated,
although the reference's docstring says "per turn"); A_T(i,k) = (r_{ik} − μ_T)/(σ_T + ε) on the action tokens of
turn k; A_G(i) = GRPO of G on every action token; A = coef·A_T + A_G (coef 0.5).
``grpo_uniform``: U_i = mean_k r_{ik} + G_i, GRPO per group, on every action token.
Both ignore token_level_rewards (so an in-reward KL penalty does not reach them, as in KG-R1).
"""

from __future__ import annotations

import torch

from engine.estimators.outcome import grpo_scalar
from engine.groups import dense_group_ids
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


def _require_structured(inp: EstimatorInput, name: str) -> None:
    if inp.turn_rewards is None or inp.global_reward is None:
        raise ValueError(f"{name} needs structured turn and global rewards; this run has none")


def _turn_token_values(per_turn: torch.Tensor, turn_ids: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Write per-turn values [B, K] onto the action tokens of each turn. (B, T)."""
    K = per_turn.shape[1]
    idx = turn_ids.clamp(min=0, max=max(K - 1, 0)).long()
    out = torch.gather(per_turn, 1, idx) if K > 0 else torch.zeros_like(action_mask)
    inside = (turn_ids >= 0) & (turn_ids < K) & action_mask.bool()
    return torch.where(inside, out, torch.zeros_like(out))


@register_estimator(
    "grpo_multiturn",
    short="KG-R1 multi-turn GRPO",
    singleton="raw",
    std_normalised=True,
    structured_rewards=True,
    label="KG-R1 multi-turn GRPO",
    formula=r"A_{i,t} = c\,\frac{r_{i,k(t)} - \mu^{T}_{g}}{\sigma^{T}_{g} + \epsilon}"
    r" + \frac{G_i - \mu^{G}_g}{\sigma^G_g + \epsilon}",
    requires=("turn_rewards", "global_rewards"),
    reference="KG-R1 core_algos.compute_grpo_multiturn_advantage (7538a53)",
)
def grpo_multiturn(inp: EstimatorInput, cfg) -> EstimatorOutput:
    _require_structured(inp, "grpo_multiturn")
    r, tm = inp.turn_rewards, inp.turn_mask  # (B, K)
    idx, G = dense_group_ids(inp.group_ids)
    dt = r.dtype
    gi = idx[:, None].expand_as(r)
    cnt = torch.zeros(G, dtype=dt, device=r.device).index_add_(0, gi.reshape(-1), tm.reshape(-1))
    tot = torch.zeros(G, dtype=dt, device=r.device).index_add_(0, gi.reshape(-1), (r * tm).reshape(-1))
    mu = tot / cnt.clamp(min=1)
    dev = (r - mu[gi]) * tm
    sq = torch.zeros(G, dtype=dt, device=r.device).index_add_(0, gi.reshape(-1), (dev * dev).reshape(-1))
    sd = (sq / (cnt - cfg.std_ddof).clamp(min=1)).sqrt()
    mu = torch.where(cnt <= 1, torch.zeros_like(mu), mu)
    sd = torch.where(cnt <= 1, torch.ones_like(sd), sd)
    a_turn = (r - mu[gi]) / (sd[gi] + cfg.epsilon) if cfg.norm_adv_by_std_in_grpo else r - mu[gi]
    a_turn = a_turn * tm  # (B, K)
    a_glob, ex = grpo_scalar(inp.global_reward, inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof)
    act = inp.action_mask
    adv = cfg.multiturn_turn_coef * _turn_token_values(a_turn, inp.turn_ids, act) + a_glob[:, None] * act
    extras = {
        "turn_advantage": a_turn,
        "turn_pool_mean": mu[idx],
        "turn_pool_std": sd[idx],
        "global_advantage": a_glob,
        "group_mean": ex["group_mean"],
        "group_std": ex["group_std"],
        "group_size": ex["group_size"],
    }
    return EstimatorOutput(adv, adv, extras)


@register_estimator(
    "grpo_uniform",
    short="KG-R1 uniform GRPO",
    singleton="raw",
    std_normalised=True,
    structured_rewards=True,
    label="KG-R1 uniform GRPO",
    formula=r"U_i = \frac{1}{K_i}\sum_k r_{i,k} + G_i,"
    r"\quad A_i = \frac{U_i - \mathrm{mean}_g(U)}{\mathrm{std}_g(U) + \epsilon}",
    requires=("turn_rewards", "global_rewards"),
    reference="KG-R1 core_algos.compute_grpo_uniform_advantage (7538a53)",
)
def grpo_uniform(inp: EstimatorInput, cfg) -> EstimatorOutput:
    _require_structured(inp, "grpo_uniform")
    r, tm = inp.turn_rewards, inp.turn_mask
    mean_turn = (r * tm).sum(-1) / tm.sum(-1).clamp(min=1)
    u = mean_turn + inp.global_reward
    a, ex = grpo_scalar(u, inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof)
    adv = a[:, None] * inp.action_mask
    return EstimatorOutput(adv, adv, ex | {"row_advantage": a})
