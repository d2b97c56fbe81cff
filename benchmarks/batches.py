"""A random multi-turn ``TrajectoryBatch`` with every optional input filled: the benchmarks' and the tests' input."""

from __future__ import annotations

import torch

from engine import TrajectoryBatch

TURN_COMPONENTS = ("format_score", "kg_query_validity", "is_answer_score")
GLOBAL_COMPONENTS = ("exact_match", "retrieval_quality", "_raw_exact_match", "_otc_scaling_factor", "_kg_turns_used")


def synthetic_batch(
    B: int, T: int, turns: int = 4, group_size: int = 8, seed: int = 0, device: str | torch.device = "cpu"
) -> TrajectoryBatch:
    """A random multi-turn batch with every optional input filled.

    Each row uses 50–100 % of T: ``turns`` action segments with a tool/info segment (a hole of the action mask)
    between consecutive ones, then padding. KG-R1-style structured rewards (3 turn components, 5 global ones
    including the '_otc_scaling_factor' / '_kg_turns_used' bookkeeping keys), critic values, old and reference
    log-probs, Σ_v π² and truncated IS weights (optimal token baseline), ReMax baselines, logged advantages on every
    real token, groups of ``group_size`` consecutive rows, ~5 % truncated rows.
    """
    g = torch.Generator().manual_seed(seed)
    K, S = turns, 2 * turns - 1  # segments: action, info, action, …, action
    if T < 2 * K:
        raise ValueError(f"synthetic_batch: T={T} is too short for {K} turns")
    used = (T * (0.5 + 0.5 * torch.rand(B, generator=g))).long()  # (B,) tokens per row
    w = torch.rand(B, S, generator=g) + 0.1
    seg = (w / w.sum(-1, keepdim=True) * (used - K)[:, None]).floor().long()  # (B, S)
    seg[:, 0::2] += 1  # every action segment has at least one token
    ends = seg.cumsum(-1)  # (B, S)
    pos = torch.arange(T).expand(B, T).contiguous()
    seg_id = torch.searchsorted(ends, pos, right=True)  # (B, T) segment holding t; S on padding
    attention = seg_id < S
    action = attention & (seg_id % 2 == 0)
    turn_ids = torch.where(attention, seg_id // 2, torch.full_like(seg_id, -1))  # info k answers action k

    def bern(p: float, *shape: int) -> torch.Tensor:
        return (torch.rand(*shape, generator=g) < p).float()

    turn_rewards = torch.stack([bern(0.8, B, K), bern(0.6, B, K), bern(0.5, B, K)], dim=-1)  # (B, K, 3)
    turn_rewards[:, :-1, 2] = 0.0  # only the last turn answers
    em, rq = bern(0.4, B), bern(0.5, B)
    global_rewards = torch.stack([em, rq, em, torch.ones(B), torch.full((B,), float(K - 1))], dim=-1)  # (B, 5)
    old_log_probs = -2.0 * torch.rand(B, T, generator=g)
    pi = old_log_probs.exp()  # the sampled token's probability; Σ_v π² lies in [π², π² + (1 − π)²]
    batch = TrajectoryBatch(
        token_ids=torch.randint(0, 1000, (B, T), generator=g),
        attention_mask=attention,
        action_mask=action,
        turn_ids=turn_ids,
        group_ids=torch.arange(B) // group_size,
        old_log_probs=old_log_probs,
        ref_log_probs=old_log_probs + 0.1 * torch.randn(B, T, generator=g),
        values=0.5 * torch.randn(B, T, generator=g),
        sum_pi_squared=pi.square() + (1 - pi).square() * torch.rand(B, T, generator=g),
        rollout_is_weights=(0.5 + torch.rand(B, T, generator=g)).clamp(max=1.2),
        reward_baselines=torch.rand(B, generator=g),
        turn_rewards=turn_rewards,
        turn_reward_names=TURN_COMPONENTS,
        global_rewards=global_rewards,
        global_reward_names=GLOBAL_COMPONENTS,
        truncated=bern(0.05, B),
        # the trainer's own advantages (estimator `logged`), from a generator of their own: the fields above stay
        logged_advantages=torch.randn(B, T, generator=torch.Generator().manual_seed(seed + 1)) * attention,
    )
    return batch.to(device)
