"""Lints on the run itself as the scheme reads it: truncated trajectories in the loss, turn ids that go
backwards, and global reward components summed into the reward that should not be: KG-R1's bookkeeping keys
(docs/conventions/kg-r1.md §3.5) and components that weigh 1 only because the scheme does not name them."""

from __future__ import annotations

import torch

from engine.lint.context import LintContext, nof, span
from engine.lint.model import register_check
from engine.registry import get_estimator
from engine.shaping import global_component_included


def global_components_used(ctx: LintContext) -> list[tuple[int, str]]:
    """(column, name) of the global reward components that enter G with a nonzero weight; [] when the scheme
    does not read G (the run's token scores are placed as given and the estimator ignores structured rewards)."""
    b, cfg = ctx.batch, ctx.cfg
    if b.global_rewards is None:
        return []
    # an estimator that reads the structured rewards itself (docs/conventions/kg-r1.md §3.3) reads G, any placement
    if ctx.result.placement == "as_given" and not get_estimator(cfg.estimator).structured_rewards:
        return []
    weights = dict(cfg.global_weights)
    included = global_component_included(b.global_reward_names, cfg)
    return [
        (c, n)
        for c, (n, inc) in enumerate(zip(b.global_reward_names, included, strict=True))
        if inc and weights.get(n, 1.0) != 0
    ]


@register_check(
    "truncated_in_loss",
    severity="warning",
    description="trajectories that ran into the length limit are trained on",
    reference="docs/conventions/rllm.md §2.2 (rLLM mask_truncated_samples), §2.5 (overlong_filter)",
    explanation="""A truncated trajectory never finished, so its score is the reward of an unfinished answer
    (usually 0, or a format penalty) and its last turn is cut mid-thought; training on it teaches the policy that
    the tokens before the cut were bad. rLLM drops such rows with mask_truncated_samples (docs/conventions/rllm.md §2.2)
    and its overlong_filter masks TRUNCATION/MAX_STEPS/TIMEOUT terminations (docs/conventions/rllm.md §2.5); verl trains
    on them unless a filter is configured. Silent when mask_truncated_samples=True or the run marks no row
    truncated.""",
)
def truncated_in_loss(ctx: LintContext):
    bad = ctx.batch.truncated & ctx.result.kept & (ctx.n_loss > 0)
    if not bad.any():
        return None
    return ctx.finding(
        "truncated_in_loss",
        f"{nof(int(bad.sum()), 'truncated trajectory')} in the loss (mask_truncated_samples is off); mean score "
        f"{float(ctx.result.scores[bad].mean()):.3g} against {float(ctx.result.scores.mean()):.3g} overall",
        row_mask=bad,
    )


@register_check(
    "turn_ids_backwards",
    severity="error",
    description="turn ids decrease along a trajectory's tokens",
    reference="engine.batch (turn_ids: 0-based turn of every real token), docs/conventions/kg-r1.md §3.1",
    explanation="""Turn ids must be non-decreasing over a trajectory's real tokens (a tool/info token belongs to
    the turn whose action it answers). A decrease means the run's turn tensor is misaligned with its tokens
    (KG-R1's turn_sequence_tensor must be permuted together with the tokens, docs/conventions/kg-r1.md §3.1): per-turn
    rewards, turn_proportional / turn_final_token placement and rLLM's steps then read the wrong tokens.""",
)
def turn_ids_backwards(ctx: LintContext):
    t = torch.where(ctx.attn, ctx.batch.turn_ids, -1)
    seen = torch.nn.functional.pad(torch.cummax(t, dim=-1).values[:, :-1], (1, 0), value=-1)  # max before t
    bad = ctx.attn & (ctx.batch.turn_ids < seen)
    if not bad.any():
        return None
    return ctx.finding(
        "turn_ids_backwards",
        f"turn ids go backwards at {span(bad)}",
        token_mask=bad,
    )


@register_check(
    "bookkeeping_reward_leak",
    severity="error",
    description="global reward components starting with '_' (KG-R1 bookkeeping) are added to the reward",
    reference="docs/conventions/kg-r1.md §3.2, §3.5 (KG-R1 '_otc_scaling_factor', '_kg_turns_used')",
    explanation="""KG-R1's reward manager stores bookkeeping values in the global reward dict
    ('_otc_scaling_factor', '_kg_turns_used', '_raw_*'), but its advantage code and converter only skip keys
    starting with '_raw_', so the others are added to the global reward (docs/conventions/kg-r1.md §3.5): without OTC a
    constant +1 (cancels inside GRPO groups except singletons, shifts PPO rewards by +1), with OTC e^(1−k/7) + k, which
    rewards *more* KG turns. global_exclude_prefixes decides what is skipped (profile kg-r1: ('_raw_',)).
    Fix: global_exclude_prefixes=('_',).""",
)
def bookkeeping_reward_leak(ctx: LintContext):
    leaked = [(c, n) for c, n in global_components_used(ctx) if n.startswith("_")]
    if not leaked:
        return None
    b, cfg = ctx.batch, ctx.cfg
    weights = dict(cfg.global_weights)
    cols = torch.tensor([c for c, _ in leaked], device=b.device)
    vals = b.global_rewards[:, cols] * torch.tensor([weights.get(n, 1.0) for _, n in leaked], device=b.device)
    rows = (vals != 0).any(-1) & ctx.result.kept
    if not rows.any():
        return None
    parts = []
    for j, (_, name) in enumerate(leaked):
        v = vals[:, j]
        varies = int((ctx.per_group(v, "amax") != ctx.per_group(v, "amin")).sum())
        spread = f"varies within {nof(varies, 'group')}" if varies else "constant within groups"
        parts.append(f"'{name}' (mean {float(v.mean()):.3g}, {spread})")
    return ctx.finding(
        "bookkeeping_reward_leak",
        f"{', '.join(parts)} added to the global reward of {nof(int(rows.sum()), 'trajectory')} "
        f"(global_exclude_prefixes={list(cfg.global_exclude_prefixes)})",
        row_mask=rows,
    )


@register_check(
    "implicit_global_weights",
    severity="warning",
    description="several global reward components are summed, some only because unlisted components weigh 1",
    reference="engine.shaping (G = Σ_c w_c · component, unlisted w_c = 1); docs/conventions/kg-r1.md §3.2",
    explanation="""The global reward is G = Σ_c w_c · component_c over every component the run carries that
    global_exclude_prefixes does not skip; a component global_weights does not name weighs 1. A loader that
    keeps every numeric field of a record as a component (NeMo Gym rollouts carry 'accuracy', 'num_expected',
    'num_correct', … next to 'reward') then adds counts and duplicate scores into the reward. Name each
    component in global_weights (0 to leave it out) so the reward is what the trainer used. Components starting
    with '_' are reported by bookkeeping_reward_leak instead.""",
)
def implicit_global_weights(ctx: LintContext):
    used = global_components_used(ctx)
    named = dict(ctx.cfg.global_weights)
    implicit = [(c, n) for c, n in used if n not in named and not n.startswith("_")]
    if len(used) < 2 or not implicit:
        return None
    vals = ctx.batch.global_rewards[:, [c for c, _ in implicit]] * ctx.result.kept[:, None]  # (B, C_implicit)
    top = vals.abs().max(0).values.tolist()
    parts = [f"'{n}' (|x| up to {m:.3g})" for (_, n), m in zip(implicit, top, strict=True) if m > 0]
    if not parts:
        return None
    return ctx.finding(
        "implicit_global_weights",
        f"the global reward sums {nof(len(used), 'component')}; not named in global_weights, so weighing 1: "
        f"{', '.join(parts)}",
        row_mask=(vals != 0).any(-1),
    )
