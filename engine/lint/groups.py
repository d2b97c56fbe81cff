"""Lints on group-relative estimators (GRPO and kin): singleton groups, zero-variance groups, near-ties and
std blow-ups (docs/conventions/verl.md §1.3, §1.6, docs/conventions/rllm.md §2.4, docs/conventions/README.md §5.2,
§5.3). They read the prompt groups (trajectory mode, or rLLM broadcast grouped by prompt); rLLM's split and per-step
groups are the stepwise lints' business."""

from __future__ import annotations

import torch

from engine.lint.context import LintContext, nof
from engine.lint.model import register_check
from engine.lint.thresholds import (
    ADVANTAGE_TOL,
    NEAR_TIE_MIN_ADVANTAGE,
    NEAR_TIE_SPREAD,
    STD_BLOWUP_RATIO,
    ZERO_VARIANCE_WARN_SHARE,
)
from engine.registry import get_estimator


def uses_group_std(cfg) -> bool:
    """The scheme's estimator divides group-centred scores by the group std (registry: ``std_normalised``)."""
    return get_estimator(cfg.estimator).uses_group_std(cfg)


def singleton_convention(cfg) -> str | None:
    """'raw', 'zero', or None when ``cfg.estimator`` does not baseline rows against their group (registry:
    ``singleton``, docs/conventions/README.md §5.2)."""
    return get_estimator(cfg.estimator).singleton_gets(cfg)


def prompt_groups_apply(ctx: LintContext) -> bool:
    """The estimator groups rows by prompt in this scheme (trajectory mode, or broadcast keyed by prompt)."""
    mode, key = ctx.cfg.stepwise_mode, ctx.cfg.broadcast_group_key
    grouped_by_prompt = mode == "trajectory" or (mode == "broadcast" and key == "prompt")
    return grouped_by_prompt and singleton_convention(ctx.cfg) is not None


def trained_rows(ctx: LintContext) -> torch.Tensor:
    """Rows that enter the loss: kept and with at least one trained token. (B,) bool."""
    return ctx.result.kept & (ctx.n_loss > 0)


def group_max_abs_advantage(ctx: LintContext) -> torch.Tensor:
    """max |A| over the trained tokens of each row's prompt group. (B,)."""
    idx, _ = ctx.groups
    return ctx.per_group(ctx.row_abs_advantage, "amax")[idx]


def count_groups(ctx: LintContext, rows: torch.Tensor) -> int:
    idx, _ = ctx.groups
    return int(torch.unique(idx[rows]).numel())


@register_check(
    "singleton_raw_score",
    severity="warning",
    description="a trajectory alone in its prompt group gets its raw score as advantage",
    reference=(
        "docs/conventions/verl.md §1.3 (GRPO, RLOO, OPO, GPG singletons), "
        "docs/conventions/kg-r1.md §3.5, docs/conventions/README.md §5.2"
    ),
    explanation="""A prompt group of one rollout has no baseline: verl's GRPO sets μ = 0, σ = 1, so the
    advantage is the raw score s/(1 + ε); RLOO (loop), OPO, GPG and REINFORCE++-baseline (token scope) do the
    same (docs/conventions/verl.md §1.3, docs/conventions/README.md §5.2). A raw score is not group-relative: a constant
    reward offset (KG-R1's leaked '_otc_scaling_factor' adds +1, docs/conventions/kg-r1.md §3.5) or a reward on a
    different scale becomes a full-size advantage. rloo_vectorized and rLLM's REINFORCE++-baseline give singletons 0
    instead (see zero_variance_groups); pass@k refuses them.""",
)
def singleton_raw_score(ctx: LintContext):
    if not prompt_groups_apply(ctx) or singleton_convention(ctx.cfg) != "raw":
        return None
    single = trained_rows(ctx) & (ctx.group_size == 1) & (ctx.row_abs_advantage > ADVANTAGE_TOL)
    if not single.any():
        return None
    return ctx.finding(
        "singleton_raw_score",
        f"alone in their prompt group: {nof(int(single.sum()), 'trajectory')}; {ctx.cfg.estimator} gives each its raw "
        f"score as advantage (|A| up to {float(ctx.row_abs_advantage[single].max()):.3g})",
        row_mask=single,
    )


@register_check(
    "zero_variance_groups",
    severity="warning",
    description="groups whose rollouts all scored the same give no learning signal (share of the batch wasted)",
    reference=(
        "docs/conventions/verl.md §1.3 (all-equal group), "
        "docs/conventions/rllm.md §2.2 (rLLM rejection sampling), §2.4 (filter_uniform_groups)"
    ),
    explanation="""When every rollout of a prompt scored the same (all solved, all failed), a group-relative
    advantage is 0 for all of them (or, with REINFORCE++-baseline's batch whitening, the same constant shift):
    the rollouts cost generation time but carry no within-group signal, and they still dilute token-mean
    denominators. Singleton groups under a 'zero' convention (rloo_vectorized, rLLM RF++-baseline) are wasted
    the same way. rLLM's rejection sampling (rejection_sample=True) and filter_uniform_groups drop such groups
    (docs/conventions/rllm.md §2.2, §2.4). Info below a waste share of ZERO_VARIANCE_WARN_SHARE, warning above.""",
)
def zero_variance_groups(ctx: LintContext):
    if not prompt_groups_apply(ctx):
        return None
    trained = trained_rows(ctx)
    if not trained.any():
        return None
    idx, _ = ctx.groups
    adv = ctx.row_advantage
    adv_spread = (ctx.per_group(adv, "amax") - ctx.per_group(adv, "amin"))[idx]
    flat = trained & (ctx.group_size > 1) & (ctx.group_spread == 0) & (adv_spread <= ADVANTAGE_TOL)
    zeroed = trained & (ctx.group_size == 1) & (adv.abs() <= ADVANTAGE_TOL)
    if singleton_convention(ctx.cfg) != "zero":
        zeroed = torch.zeros_like(zeroed)
    wasted = flat | zeroed
    if not wasted.any():
        return None
    share = float(wasted.sum()) / float(trained.sum())
    token_share = float(ctx.n_loss[wasted].sum()) / float(ctx.n_loss[trained].sum())
    shift = float(adv[flat].abs().max()) if flat.any() else 0.0
    what = "advantage 0" if shift <= ADVANTAGE_TOL else f"one shared advantage per group (up to {shift:.3g})"
    parts = [f"{nof(count_groups(ctx, flat), 'zero-variance group')}"] if flat.any() else []
    if zeroed.any():
        parts.append(f"{nof(int(zeroed.sum()), 'singleton')} zeroed by {ctx.cfg.estimator}")
    return ctx.finding(
        "zero_variance_groups",
        f"{' and '.join(parts)}: {nof(int(wasted.sum()), 'trajectory')} ({share:.0%} of trained, {token_share:.0%} of "
        f"trained tokens) with {what} and no within-group signal",
        severity="warning" if share > ZERO_VARIANCE_WARN_SHARE else "info",
        row_mask=wasted,
    )


@register_check(
    "near_tie_amplified",
    severity="warning",
    description="tied scores (spread < 1e-6, exact ties included) get sizeable advantages from 1/(σ + ε)",
    reference="docs/conventions/verl.md §1.3 (near_tie_float_noise), §1.6 (verl PR #6348)",
    explanation="""The scores of a group are equal up to float rounding (spread below NEAR_TIE_SPREAD = 1e-6),
    yet a std-normalised estimator gives its rows advantages above NEAR_TIE_MIN_ADVANTAGE: dividing by σ + ε
    with σ ≈ 1e-8 turns rounding error into a learning signal. Two ways in: scores that differ by an ulp
    (0.7 against 0.1 + 0.6 in float32: verl GRPO gives ~0.057, the near_tie_float_noise golden of
    docs/conventions/verl.md §1.3), and bit-identical non-dyadic scores whose float32 group mean does not round back to
    the score (8 × 0.35: torch.mean/torch.std, as verl's GRPO loop uses them, give every rollout the same advantage ≈
    0.029, so the whole group is pushed one way by noise). Older grpo_vectorized floored the variance at 1e-6 and gave
    ~6e-5 (docs/conventions/verl.md §1.6). Fix: round rewards to dyadic values, Dr.GRPO (norm_adv_by_std_in_grpo=False)
    or a variance floor.""",
)
def near_tie_amplified(ctx: LintContext):
    if not prompt_groups_apply(ctx) or not uses_group_std(ctx.cfg):
        return None
    spread = ctx.group_spread
    big = group_max_abs_advantage(ctx)
    bad = trained_rows(ctx) & (ctx.group_size > 1) & (spread < NEAR_TIE_SPREAD) & (big > NEAR_TIE_MIN_ADVANTAGE)
    if not bad.any():
        return None
    n_groups, exact = count_groups(ctx, bad), count_groups(ctx, bad & (spread == 0))
    if exact == n_groups:
        what = f"{nof(n_groups, 'group')} of bit-identical scores"
    else:
        what = f"{nof(n_groups, 'group')} tied up to float rounding (spread ≤ {float(spread[bad].max()):.2g}"
        what += f"; {exact} bit-identical)" if exact else ")"
    return ctx.finding(
        "near_tie_amplified",
        f"{what}: advantages up to {float(big[bad].max()):.3g} on {nof(int(bad.sum()), 'trajectory')}",
        row_mask=bad,
    )


@register_check(
    "std_blowup",
    severity="warning",
    description="|A| is more than 1000× the group's score spread: tiny reward differences become full advantages",
    reference=(
        "verl issue #957 class; docs/conventions/verl.md §1.3 (1/(σ + ε)), "
        "docs/conventions/README.md §5.3; Dr.GRPO (Liu et al. 2025)"
    ),
    explanation="""A group's scores differ by a tiny amount (above float noise), but std normalisation scales
    the differences up to unit-size advantages: max |A| / spread exceeds STD_BLOWUP_RATIO = 1000. Small
    partial-credit or shaping terms (format bonuses, length penalties, KL in the reward) then dominate the
    update for that prompt exactly as much as solving it would (the difficulty bias Dr.GRPO describes; the
    verl issue #957 class of std blow-ups). Fix: Dr.GRPO (norm_adv_by_std_in_grpo=False), a variance floor
    (grpo_vectorized with grpo_var_floor), or coarser rewards.""",
)
def std_blowup(ctx: LintContext):
    if not prompt_groups_apply(ctx):
        return None
    spread = ctx.group_spread
    big = group_max_abs_advantage(ctx)
    ratio = big / spread.clamp(min=torch.finfo(spread.dtype).tiny)
    bad = trained_rows(ctx) & (ctx.group_size > 1) & (spread >= NEAR_TIE_SPREAD) & (ratio > STD_BLOWUP_RATIO)
    if not bad.any():
        return None
    return ctx.finding(
        "std_blowup",
        f"{nof(count_groups(ctx, bad), 'group')} with score spread down to {float(spread[bad].min()):.2g}: advantages "
        f"up to {float(big[bad].max()):.3g} on {nof(int(bad.sum()), 'trajectory')} (|A|/spread up to "
        f"{float(ratio[bad].max()):.3g}×)",
        row_mask=bad,
    )


@register_check(
    "non_finite_advantage",
    severity="error",
    description="trained tokens whose advantage is NaN or infinite",
    reference=(
        "docs/conventions/README.md §5.2 (singletons), docs/conventions/openrlhf.md §12 (OpenRLHF: groups of one)"
    ),
    explanation="""A NaN or infinite advantage on a trained token makes the whole loss NaN. OpenRLHF's
    group_norm and rloo (profile openrlhf) divide by the spread or the size of a group minus one, so a group of
    one rollout gets NaN: OpenRLHF only ever has groups of one when n_samples_per_prompt = 1, and then every row
    is NaN. A reward that is NaN (a reward function that returned None, TRL's convention) or an ε of 0 on a
    zero-variance group do the same. Use groups of two or more, another estimator, or a profile whose singleton
    convention is 'raw' or 'zero'.""",
)
def non_finite_advantage(ctx: LintContext):
    bad = ctx.loss & ~torch.isfinite(ctx.result.advantages)
    if not bad.any():
        return None
    rows = bad.any(-1)
    alone = rows & (ctx.group_size == 1)
    why = f"; {int(alone.sum())} of them alone in a prompt group" if alone.any() else ""
    return ctx.finding(
        "non_finite_advantage",
        f"{nof(int(bad.sum()), 'trained token')} in {nof(int(rows.sum()), 'trajectory')} have a NaN or infinite "
        f"advantage under {ctx.cfg.estimator} ({ctx.cfg.profile} profile){why}",
        token_mask=bad,
    )
