"""Lints on which tokens carry credit: tool/info tokens in the loss or the estimator's statistics, rewards on
masked positions, trajectories with nothing to train (docs/conventions/verl.md §1.3, §1.7,
docs/conventions/search-r1.md §4, docs/conventions/README.md §5.1, §5.6)."""

from __future__ import annotations

import torch

from engine.lint.context import LintContext, nof, span
from engine.lint.model import register_check
from engine.lint.thresholds import ADVANTAGE_TOL


@register_check(
    "info_tokens_in_loss",
    severity="error",
    description="tool/info tokens the policy did not generate are in the loss mask",
    reference="docs/conventions/verl.md §1.1, §1.7, docs/conventions/search-r1.md §4 (Search-R1 actor.state_masking)",
    explanation="""The loss mask includes tokens the policy did not generate (tool output, retrieved
    <information>, chat-template glue): state_masking is off, so the PPO loss, entropy and KL push up the policy's
    probability of text it never wrote. verl's multi-turn agent loops and Search-R1 with state_masking keep these
    tokens out of the loss (docs/conventions/verl.md §1.7, docs/conventions/search-r1.md §4); verl's compute_advantage
    falls back to the attention mask when a response_mask is missing (docs/conventions/verl.md §1.1), which has the same
    effect. Error when those tokens carry a nonzero effective weight (w·A); warning when the estimator left them at
    advantage 0 (advantage_mask='action'), where they still enter the token-mean denominator, the KL loss and the
    entropy bonus. Fix: state_masking=True.""",
)
def info_tokens_in_loss(ctx: LintContext):
    bad = ctx.loss & ctx.info
    if not bad.any():
        return None
    weighted = int((bad & (ctx.result.effective_weights.abs() > 0)).sum())
    if weighted:
        return ctx.finding(
            "info_tokens_in_loss",
            f"{span(bad, 'tool/info token')} in the loss mask, {weighted} with a nonzero effective weight: "
            "state_masking is off",
            token_mask=bad,
        )
    return ctx.finding(
        "info_tokens_in_loss",
        f"{span(bad, 'tool/info token')} in the loss mask with advantage 0: they still dilute the token count and "
        "enter the KL loss and entropy (state_masking is off)",
        severity="warning",
        token_mask=bad,
    )


@register_check(
    "advantage_on_info_tokens",
    severity="warning",
    description="the estimator sees tool/info tokens (advantage_mask='attention') and they carry advantages",
    reference="docs/conventions/search-r1.md §4, docs/conventions/README.md §5.6 (Search-R1, KG-R1)",
    explanation="""With advantage_mask='attention' (Search-R1, KG-R1) the estimator treats tool/info tokens as
    ordinary steps: they get advantages (GRPO broadcasts the row's scalar onto them) and they enter whatever the
    estimator computes over its mask: batch whitening statistics (GAE, REINFORCE++, REINFORCE++-baseline),
    OPO's length weights, ReMax/REINFORCE++ returns. When the loss mask drops them the advantages on info tokens
    themselves are only for display (info); when they change the advantages of trained tokens compared with
    advantage_mask='action' the finding is a warning with the measured shift (docs/conventions/search-r1.md §4,
    docs/conventions/README.md §5.6). GAE's TD steps through info tokens are reported by gae_through_holes.""",
)
def advantage_on_info_tokens(ctx: LintContext):
    if ctx.cfg.advantage_mask != "attention":
        return None
    on_info = ctx.info & ~ctx.loss & (ctx.result.advantages.abs() > ADVANTAGE_TOL)
    if not on_info.any():
        return None
    n_info = int(on_info.sum())
    if ctx.cfg.estimator != "gae":
        ref = ctx.recompute(advantage_mask="action")
        delta = torch.where(ctx.loss, (ctx.result.advantages - ref.advantages).abs(), 0.0)
        moved = delta > ADVANTAGE_TOL
        if moved.any():
            return ctx.finding(
                "advantage_on_info_tokens",
                f"{nof(n_info, 'tool/info token')} with advantages enter {ctx.cfg.estimator}'s statistics: "
                f"advantages of {span(moved, 'trained token')} shift by up to {float(delta.max()):.3g} against "
                "advantage_mask='action'",
                token_mask=moved,
            )
    return ctx.finding(
        "advantage_on_info_tokens",
        f"{span(on_info, 'tool/info token')} with advantages (advantage_mask='attention'); the loss mask drops "
        "them, so only the display sees them",
        severity="info",
        token_mask=on_info,
    )


def reward_is_dropped(ctx: LintContext) -> bool:
    """True when the estimator sums r·m (rewards on masked positions are lost): token-level estimators on
    whole trajectories, except GAE without hole skipping, whose scan runs over every column
    (docs/conventions/README.md §5.1)."""
    if ctx.estimator.kind != "token" or ctx.cfg.stepwise_mode != "trajectory":
        return False
    return not (ctx.cfg.estimator == "gae" and not ctx.cfg.gae_skip_holes)


@register_check(
    "reward_on_masked_token",
    severity="error",
    description="a reward sits on a token the estimator masks out (dropped by GAE/REINFORCE++/ReMax)",
    reference="docs/conventions/README.md §5.1; docs/conventions/verl.md §1.3 (GAE case reward_on_masked_hole)",
    explanation="""A nonzero token score sits on a position outside the estimator's mask (a tool token, template
    glue or padding): typically a reward manager that writes the outcome at the last attended token when the
    response ends with a tool message, or state_masking off with advantage_mask='action'. Whether that reward
    counts depends on the estimator (docs/conventions/README.md §5.1): GAE with hole skipping, REINFORCE++ and ReMax sum
    r·m and silently drop it (error: the trajectory trains as if it had no reward); outcome estimators (GRPO, RLOO, …)
    sum every position, so it still counts (warning: switching estimator changes the score). Fix: place the
    reward on the last action token (placement='final_token_only').""",
)
def reward_on_masked_token(ctx: LintContext):
    scores = ctx.result.token_level_scores
    bad = (scores != 0) & ~ctx.result.advantage_mask.bool()
    if not bad.any():
        return None
    total = float(scores[bad].sum())
    head = f"{span(bad, 'token reward')} on masked positions (total {total:+.3g})"
    if reward_is_dropped(ctx):
        return ctx.finding(
            "reward_on_masked_token", f"{head}; {ctx.cfg.estimator} sums r·m and drops these rewards", token_mask=bad
        )
    return ctx.finding(
        "reward_on_masked_token",
        f"{head}; {ctx.cfg.estimator} still counts these rewards in the score (GAE/REINFORCE++/ReMax drop them)",
        severity="warning",
        token_mask=bad,
    )


@register_check(
    "no_trainable_tokens",
    severity="warning",
    description="trajectories with no trained token (loss mask all 0) that still enter group statistics",
    reference="docs/conventions/verl.md §1.3 (GRPO: an empty-mask row's score still enters its group)",
    explanation="""A kept trajectory has no token in the loss mask (an empty response, or one made only of tool
    and template tokens): it contributes no gradient, but its score still enters its group's mean and std
    (docs/conventions/verl.md §1.3), so it shifts the advantages of its siblings, and with seq-mean aggregations it is
    left out of the sequence count. Usually a loader or rollout bug (a response cut before the model
    spoke).""",
)
def no_trainable_tokens(ctx: LintContext):
    empty = ctx.result.kept & (ctx.n_loss == 0)
    if not empty.any():
        return None
    shared = empty & (ctx.group_size > 1)
    return ctx.finding(
        "no_trainable_tokens",
        f"{nof(int(empty.sum()), 'kept trajectory')} without a trained token, {int(shared.sum())} of them in a shared "
        "group whose mean and std their scores still shift",
        row_mask=empty,
    )
