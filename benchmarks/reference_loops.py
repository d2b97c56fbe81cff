"""Deliberately naive loop implementations, written the way the reference trainers write them.

They are the yardstick for the vectorized engine: tests check ``engine == loop`` on random masks with holes, and
``benchmarks.credit`` times both on the same inputs. Nothing here is used by ``compute_credit``.

* GAE and REINFORCE++ loop over time t = T−1…0 in Python with a few [B] tensor ops per step (verl
  ``core_algos.compute_gae_advantage_return`` / ``compute_reinforce_plus_plus_outcome_advantage``): cost ∝ T.
* GRPO and RLOO loop over rows in Python, group with a dict of lists and write ``scores[i] = …`` element by
  element (verl ``compute_grpo_outcome_advantage`` / ``compute_rloo_outcome_advantage``): cost ∝ B.
* rLLM's Monte-Carlo step returns loop backwards over each trajectory's steps (``compute_mc_return``).

Shapes: token tensors [B, T], masks float 0/1, ``index`` a length-B sequence of hashable group keys.
"""

from __future__ import annotations

from collections import defaultdict

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ x·m / (Σ m + 1e-8) over the whole tensor (verl ``masked_mean``)."""
    return (values * mask).sum() / (mask.sum() + 1e-8)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(x − μ)·rsqrt(σ² + 1e-8), μ and the unbiased σ² over every masked element (verl ``masked_whiten``)."""
    mean = masked_mean(values, mask)
    centered = values - mean
    variance = masked_mean(centered**2, mask)
    mask_sum = mask.sum()
    if mask_sum <= 1:
        raise ValueError("masked_whiten: need at least two valid tokens")
    variance = variance * mask_sum / (mask_sum - 1)
    return (values - mean) * torch.rsqrt(variance + 1e-8)


def gae_loop(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
    skip_holes: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE by a backward loop over t. Returns (whitened advantages, returns = raw advantages + values).

    skip_holes=True (verl ≥ PR #2337): at a masked t the state (next value, running advantage) is carried
    unchanged, so a hole is invisible to the valid tokens around it. skip_holes=False (old verl, Search-R1, KG-R1):
    every column is a TD step with V_T = 0; the mask only feeds the whitening.
    """
    with torch.no_grad():
        nextvalues = 0
        lastgaelam = 0
        advantages_reversed = []
        gen_len = token_level_rewards.shape[-1]
        for t in reversed(range(gen_len)):
            if not skip_holes:
                nextvalues = values[:, t + 1] if t < gen_len - 1 else 0.0
            delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
            lastgaelam_ = delta + gamma * lam * lastgaelam
            if skip_holes:
                nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
                lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
            else:
                lastgaelam = lastgaelam_
            advantages_reversed.append(lastgaelam)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        returns = advantages + values
        advantages = masked_whiten(advantages, response_mask)
    return advantages, returns


def reinforce_pp_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float, hole_mode: str = "carry"
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ by a backward loop over t. Returns (advantages = whiten(returns)·m, returns).

    carry (verl ≥ PR #7278): G' = r_t + γG; returns_t = G'·m_t; G ← G' only where m_t = 1.
    reset (older verl): returns_t = G' (unmasked, so a hole keeps its own reward); then G ← G'·m_t.
    """
    with torch.no_grad():
        returns = torch.zeros_like(token_level_rewards)
        running_return = torch.zeros_like(token_level_rewards[:, 0])
        for t in reversed(range(token_level_rewards.shape[1])):
            new_return = token_level_rewards[:, t] + gamma * running_return
            if hole_mode == "carry":
                returns[:, t] = new_return * response_mask[:, t]
                running_return = torch.where(response_mask[:, t].bool(), new_return, running_return)
            else:
                returns[:, t] = new_return
                running_return = new_return * response_mask[:, t]
        advantages = masked_whiten(returns, response_mask) * response_mask
    return advantages, returns


def _keys(index) -> list:
    return index.tolist() if isinstance(index, torch.Tensor) else list(index)


def grpo_loop(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    ddof: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: per group μ, σ (std with ``ddof``; a singleton gets μ = 0, σ = 1), a_i = (s_i − μ)/(σ + ε) or s_i − μ,
    broadcast ·m. Returns (advantages, advantages) as verl does."""
    index = _keys(index)
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0, dtype=scores.dtype)
                id2std[idx] = torch.tensor(1.0, dtype=scores.dtype)
            else:
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor, correction=ddof)
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def rloo_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index, singleton: str = "raw"
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO: a_i = n/(n−1)·s_i − n/(n−1)·μ = s_i − mean_{j≠i} s_j for n > 1; a singleton keeps its raw score
    (``singleton='raw'``, verl loop) or gets 0 (``'zero'``, verl rloo_vectorized). Broadcast ·m."""
    index = _keys(index)
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0, dtype=scores.dtype)
            else:
                id2mean[idx] = torch.mean(torch.stack(id2score[idx]))
        for i in range(bsz):
            response_num = len(id2score[index[i]])
            if response_num > 1:
                scores[i] = scores[i] * response_num / (response_num - 1) - id2mean[index[i]] * response_num / (
                    response_num - 1
                )
            elif singleton == "zero":
                scores[i] = 0.0
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def discounted_cumsum_loop(x: torch.Tensor, c: float) -> torch.Tensor:
    """y_t = x_t + c·y_{t+1} along the last axis, one column at a time."""
    out = torch.zeros_like(x)
    running = torch.zeros_like(x[..., 0])
    for t in reversed(range(x.shape[-1])):
        running = x[..., t] + c * running
        out[..., t] = running
    return out


def mc_returns_loop(step_rewards: list[list[float]], gamma: float) -> list[list[float]]:
    """rLLM ``compute_mc_return``: per trajectory, backwards over its steps, G ← r_k + γ·G."""
    out = []
    for rewards in step_rewards:
        G = 0.0
        returns = [0.0] * len(rewards)
        for k in reversed(range(len(rewards))):
            G = rewards[k] + gamma * G
            returns[k] = G
        out.append(returns)
    return out


def per_step_grpo_loop(
    step_rewards: list[list[float]],
    index,
    gamma: float,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    ddof: int = 1,
) -> list[list[float]]:
    """rLLM per_step mode with GRPO: every step is a row scored by its MC return; rows are grouped by
    (prompt, step index) (``step_ids = f"{uid}_step{k}"``). Returns each step's advantage, per trajectory."""
    index = _keys(index)
    returns = mc_returns_loop(step_rewards, gamma)
    keys, scores = [], []
    for i, traj in enumerate(returns):
        for k, G in enumerate(traj):
            keys.append(f"{index[i]}_step{k}")
            scores.append(G)
    rows = torch.tensor(scores, dtype=torch.float64)[:, None]
    adv, _ = grpo_loop(rows, torch.ones_like(rows), keys, epsilon, norm_adv_by_std_in_grpo, ddof)
    flat = adv[:, 0].tolist()
    out, pos = [], 0
    for traj in returns:
        out.append(flat[pos : pos + len(traj)])
        pos += len(traj)
    return out
