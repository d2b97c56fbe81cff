"""rLLM's three advantage modes on top of any estimator, plus rejection sampling (docs/conventions/rllm.md §2, example
docs/TUTORIAL.md §7.2).

A trajectory's steps are its turns (``turn_ids``); step k's tokens are the estimator mask's tokens of turn k.
* ``trajectory``: the estimator runs on whole trajectories.
* ``broadcast``: the estimator runs on the **last step** of every trajectory, scored with the trajectory reward
  Σ_k r_k (rLLM) or the last step's own reward (verl v1 sessions, ``broadcast_reward``) on the step's last
  token; each trajectory's scalar (mean advantage over the last step's tokens, or its value at the step's first
  token for verl v1, ``broadcast_read``; ÷ n_steps if ``normalize_by_steps``) is copied to every earlier step.
  Groups: the prompt (rLLM legacy trainer, verl v1) or (prompt, last-step index) (rLLM workflow trainer, where
  rollouts of different lengths split).
* ``per_step``: each step is a row whose reward is its Monte-Carlo return G_k = r_k + γ G_{k+1} on its last
  token; the k-th steps of one prompt's rollouts form a group (a late step is often a singleton: raw return).
Step rewards r_k are the token-level rewards summed over turn k.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.groups import dense_group_ids, group_stats
from engine.masked import masked_mean
from engine.registry import Estimator, EstimatorInput, EstimatorOutput
from engine.scan import discounted_reverse_cumsum
from engine.shaping import turn_last_positions, turn_token_counts


def mc_returns(step_rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_k = r_k + γ G_{k+1} (rLLM ``compute_mc_return``); steps past a trajectory's end must hold 0. (B, K)."""
    return discounted_reverse_cumsum(step_rewards, gamma)


@dataclass(frozen=True)
class StepLayout:
    """steps [B, K] bool (step k exists: it has estimator-mask tokens), n_steps [B], last_pos [B, K] (last token
    of each step, −1 if none), step_rewards [B, K]."""

    steps: torch.Tensor
    n_steps: torch.Tensor
    last_pos: torch.Tensor
    step_rewards: torch.Tensor


def step_layout(inp: EstimatorInput) -> StepLayout:
    K = int(inp.turn_ids.max().item()) + 1 if inp.turn_ids.numel() else 0
    K = max(K, 1)
    counts = turn_token_counts(inp.turn_ids, inp.response_mask, K)
    steps = counts > 0
    attn = (inp.turn_ids >= 0).to(inp.token_level_rewards.dtype)
    step_rewards = (
        torch.zeros_like(counts).scatter_add_(1, inp.turn_ids.clamp(min=0).long(), inp.token_level_rewards * attn)
        * steps
    )
    last_pos = turn_last_positions(inp.turn_ids, inp.response_mask, K)
    return StepLayout(steps, steps.sum(-1), last_pos, step_rewards)


def _rows(inp: EstimatorInput, rows: torch.Tensor, mask: torch.Tensor, rewards: torch.Tensor, groups) -> EstimatorInput:
    """A virtual batch: rows ``rows`` of ``inp`` with a new mask, rewards and group ids."""
    return inp.select(
        rows,
        token_level_rewards=rewards,
        response_mask=mask,
        group_ids=groups,
        action_mask=inp.action_mask[rows] * mask,
    )


def broadcast_scalar(last_step_advantages: torch.Tensor, mask_last: torch.Tensor, read: str) -> torch.Tensor:
    """Each trajectory's scalar from its last step's advantages [B, T]: the mean over the step's masked tokens
    (rLLM) or the value at its first masked token (verl v1); 0 for a trajectory without one. (B,)."""
    if read == "first":
        first_tok = torch.argmax(mask_last, dim=-1, keepdim=True)  # first masked token (0 when there is none)
        return last_step_advantages.gather(1, first_tok).squeeze(1) * (mask_last.sum(-1) > 0)
    return masked_mean(last_step_advantages, mask_last, dim=-1)


def run_broadcast(est: Estimator, inp: EstimatorInput, cfg) -> EstimatorOutput:
    lay = step_layout(inp)
    B, T = inp.response_mask.shape
    K = lay.steps.shape[1]
    k_idx = torch.arange(K, device=lay.steps.device)
    last_k = torch.where(lay.steps, k_idx, torch.full_like(k_idx, -1)).max(-1).values.clamp(min=0)  # last existing step
    on_last = (inp.turn_ids == last_k[:, None]) & inp.response_mask.bool()
    mask_last = inp.response_mask * on_last
    last_tok = lay.last_pos.gather(1, last_k[:, None]).squeeze(1).clamp(min=0)
    if cfg.broadcast_reward == "last_step":  # verl v1: the final row's own score
        traj_reward = lay.step_rewards.gather(1, last_k[:, None]).squeeze(1)
    else:  # rLLM: trajectory reward = Σ step rewards
        traj_reward = lay.step_rewards.sum(-1)
    rewards = torch.zeros_like(inp.token_level_rewards).scatter_(1, last_tok[:, None], traj_reward[:, None])
    rewards = rewards * (lay.n_steps > 0)[:, None]
    groups = inp.group_ids
    if cfg.broadcast_group_key == "prompt_and_last_step":
        # the workflow trainer's uid is "{task}_step{i}" with i the last step's number in rLLM's dense numbering
        groups = dense_group_ids(inp.group_ids)[0] * (T + 1) + (lay.n_steps - 1).clamp(min=0)
    rows = torch.arange(B, device=inp.group_ids.device)
    out = est.fn(_rows(inp, rows, mask_last, rewards, groups), cfg)
    scalar = broadcast_scalar(out.advantages, mask_last, cfg.broadcast_read)  # (B,)
    if cfg.normalize_by_steps:
        scalar = scalar / lay.n_steps.clamp(min=1)
    adv = scalar[:, None] * inp.response_mask
    if not cfg.normalize_by_steps:
        adv = torch.where(on_last, out.advantages, adv)
    extras = {
        "step_scalar": scalar,
        "n_steps": lay.n_steps.to(adv.dtype),
        "step_rewards": lay.step_rewards,
        "trajectory_reward": traj_reward,
        "last_step_advantages": out.advantages,
    }
    extras |= {f"last_step_{k}": v for k, v in out.extras.items() if v.dim() == 1}
    returns = torch.where(on_last, out.returns, adv) if not cfg.normalize_by_steps else adv
    return EstimatorOutput(adv, returns, extras, out.notes)


def run_per_step(est: Estimator, inp: EstimatorInput, cfg) -> EstimatorOutput:
    lay = step_layout(inp)
    B, T = inp.response_mask.shape
    K = lay.steps.shape[1]
    G = mc_returns(lay.step_rewards, cfg.stepwise_gamma)  # (B, K)
    row, k = lay.steps.nonzero(as_tuple=True)  # one virtual row per existing step
    N = row.numel()
    vmask = inp.response_mask[row] * (inp.turn_ids[row] == k[:, None])
    rewards = torch.zeros(N, T, dtype=inp.token_level_rewards.dtype, device=row.device)
    rewards.scatter_(1, lay.last_pos[row, k][:, None].clamp(min=0), G[row, k][:, None])
    groups = dense_group_ids(inp.group_ids)[0][row] * K + k
    out = est.fn(_rows(inp, row, vmask, rewards, groups), cfg)
    vindex = torch.full((B, K), -1, dtype=torch.long, device=row.device)
    vindex[row, k] = torch.arange(N, device=row.device)
    tok_v = vindex.gather(1, inp.turn_ids.clamp(min=0).long())  # (B, T) virtual row of each token
    ok = (tok_v >= 0) & (inp.turn_ids >= 0)
    src = tok_v.clamp(min=0)
    t_idx = torch.arange(T, device=row.device).expand(B, T)
    adv = torch.where(ok, out.advantages[src, t_idx], torch.zeros_like(inp.response_mask)) * inp.response_mask
    ret = torch.where(ok, out.returns[src, t_idx], torch.zeros_like(inp.response_mask)) * inp.response_mask
    step_adv = torch.zeros(B, K, dtype=adv.dtype, device=row.device)
    step_adv[row, k] = masked_mean(out.advantages, vmask, dim=-1)
    st = group_stats(G[row, k], groups)
    step_group_size = torch.zeros(B, K, dtype=adv.dtype, device=row.device)
    step_group_size[row, k] = st.size
    extras = {
        "step_rewards": lay.step_rewards,
        "step_mc_returns": G * lay.steps,
        "step_advantage": step_adv,
        "step_group_size": step_group_size,
        "n_steps": lay.n_steps.to(adv.dtype),
    }
    return EstimatorOutput(adv, ret, extras, out.notes)


SOLVE_NONE, SOLVE_PARTIAL, SOLVE_ALL = 0, 1, 2


def rejection_verdicts(scores: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Per row: SOLVE_NONE if every score of its group is ≤ 0, SOLVE_ALL if every one is ≥ 1, else SOLVE_PARTIAL
    (rLLM legacy trainer's rule on Σ_t token_level_scores). (B,) long."""
    idx, G = dense_group_ids(group_ids)
    bad_none = torch.zeros(G, device=scores.device).index_add_(0, idx, (scores > 0).float()) == 0
    bad_all = torch.zeros(G, device=scores.device).index_add_(0, idx, (scores < 1).float()) == 0
    v = torch.full_like(idx, SOLVE_PARTIAL)
    v = torch.where(bad_all[idx], torch.full_like(v, SOLVE_ALL), v)
    return torch.where(bad_none[idx], torch.full_like(v, SOLVE_NONE), v)
