"""Lints on how token-level estimators cross tool/info blocks ("holes"): GAE taking TD steps through them and
REINFORCE++ resetting its return at them (docs/conventions/verl.md §1.3, §1.6, docs/conventions/search-r1.md §4). Each
measures the effect on trained tokens by recomputing the run under the fixed convention."""

from __future__ import annotations

import torch

from engine.lint.context import LintContext, nof, span
from engine.lint.model import register_check
from engine.lint.thresholds import ADVANTAGE_TOL


def shift_on_trained(ctx: LintContext, other: torch.Tensor, mine: torch.Tensor) -> torch.Tensor:
    """|mine − other| on trained tokens, 0 elsewhere. (B, T)."""
    return torch.where(ctx.loss, (mine - other).abs(), 0.0)


@register_check(
    "gae_through_holes",
    severity="warning",
    description="GAE takes TD steps through tool/info tokens instead of skipping them",
    reference=(
        "docs/conventions/verl.md §1.3 (verl PR #2337), docs/conventions/search-r1.md §4 (Search-R1/KG-R1 old-verl GAE)"
    ),
    explanation="""GAE runs one TD step per column, tool/info tokens included (gae_skip_holes=False, or
    advantage_mask='attention' where info tokens are not holes at all): the critic's values at tokens the
    policy did not generate bootstrap the action before them, and γ·λ is applied once per info token, so a long
    tool output discounts everything before it. verl ≥ PR #2337 bootstraps from the next *valid* token and
    applies γ, λ once per hole (docs/conventions/verl.md §1.3); Search-R1 and KG-R1 vendor the old version
    (docs/conventions/search-r1.md §4). The finding reports how far the advantages of trained tokens move against
    hole-skipping GAE over the action mask; it is silent when they do not move (e.g. γ = λ = 1 with zero values).""",
)
def gae_through_holes(ctx: LintContext):
    cfg = ctx.cfg
    if cfg.estimator != "gae" or (cfg.gae_skip_holes and cfg.advantage_mask == "action"):
        return None
    rows_with_holes = ctx.info.any(-1) & ctx.act.any(-1)
    if not rows_with_holes.any():
        return None
    ref = ctx.recompute(gae_skip_holes=True, advantage_mask="action")
    delta = shift_on_trained(ctx, ref.advantages, ctx.result.advantages)
    moved = delta > ADVANTAGE_TOL
    if not moved.any():
        return None
    holes = int((ctx.info & rows_with_holes[:, None]).sum())
    return ctx.finding(
        "gae_through_holes",
        f"GAE steps through {nof(holes, 'tool/info token')} (gae_skip_holes={cfg.gae_skip_holes}, advantage_mask="
        f"'{cfg.advantage_mask}'): advantages of {span(moved, 'trained token')} move by up to "
        f"{float(delta.max()):.3g} (mean {float(delta[moved].mean()):.3g}) against hole-skipping GAE",
        token_mask=moved,
    )


@register_check(
    "reinforce_reset_at_holes",
    severity="error",
    description="REINFORCE++ resets its return at tool tokens: turns before a tool call see no outcome reward",
    reference="docs/conventions/verl.md §1.6 (verl < PR #7278/#7300), FIELD_HELP reinforce_hole_mode",
    explanation="""With reinforce_hole_mode='reset' (verl before PR #7278/#7300, profile verl-legacy) the running
    return G_t = r_t + γ G_{t+1} is zeroed at every masked position, so every token before a tool call gets the
    return of its own segment only: with an outcome reward at the end, all turns but the last get return 0 and,
    after whitening, a negative advantage that has nothing to do with the outcome (docs/conventions/verl.md §1.6). Fix:
    reinforce_hole_mode='carry'.""",
)
def reinforce_reset_at_holes(ctx: LintContext):
    cfg = ctx.cfg
    if cfg.estimator != "reinforce_plus_plus" or cfg.reinforce_hole_mode != "reset":
        return None
    if cfg.stepwise_mode != "trajectory":  # a step's mask is one turn's action tokens: no hole inside it
        return None
    ref = ctx.recompute(reinforce_hole_mode="carry")
    delta = shift_on_trained(ctx, ref.returns, ctx.result.returns)
    moved = delta > ADVANTAGE_TOL
    if not moved.any():
        return None
    zeroed = moved & (ctx.result.returns.abs() <= ADVANTAGE_TOL)
    return ctx.finding(
        "reinforce_reset_at_holes",
        f"REINFORCE++ resets returns at holes: returns of {span(moved, 'trained token')} differ from 'carry', "
        f"{int(zeroed.sum())} of them 0",
        token_mask=moved,
    )
