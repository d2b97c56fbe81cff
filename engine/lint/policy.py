"""Lints on the policy-loss stage: where the trainer and the rollout engine disagree about the sampled tokens, and
where the policy's recorded entropy says it has stopped exploring (docs/conventions/policy-stage.md §14)."""

from __future__ import annotations

import math

from engine.lint.context import LintContext, span
from engine.lint.model import register_check
from engine.lint.thresholds import ENTROPY_COLLAPSE_NATS, MISMATCH_LOG_RATIO


@register_check(
    "train_inference_mismatch",
    severity="warning",
    description="trained tokens whose trainer and rollout-engine log-probs are more than 2× apart",
    reference="docs/conventions/policy-stage.md §14 (verl rollout_corr_helper: TIS, IcePop, rejection sampling)",
    explanation="""The rollout engine (vLLM, SGLang) sampled these tokens with a probability more than 2× away from
    the one the trainer computes for the same policy (|log π_trainer − log π_rollout| > log 2): different kernels,
    precision or a stale weight sync. PPO's ratio then measures the engines' disagreement, not the update, and the
    gradient of these tokens is off-policy. Rollout correction weighs or drops them: rollout_is='token' truncates
    the IS weight at the threshold (TIS), a threshold 'L_U' zeroes it outside [L, U] (IcePop), rollout_rs drops
    tokens or rows (verl's rollout_corr_helper). Silent when the scheme has a rollout correction (the token view
    still shows the mismatch, the IS weight and what was dropped).""",
)
def train_inference_mismatch(ctx: LintContext):
    res = ctx.result
    if ctx.batch.old_log_probs is None or ctx.batch.rollout_log_probs is None:
        return None
    delta = res.mismatch
    tokens = ctx.act & (res.kept[:, None]) & ctx.attn
    bad = tokens & (delta.abs() > MISMATCH_LOG_RATIO)
    if not bad.any():
        return None
    worst = delta.abs().masked_fill(~bad, 0).flatten().argmax()
    row, col = divmod(int(worst), delta.shape[1])
    if ctx.cfg.rollout_is is not None or ctx.cfg.rollout_rs:
        return None  # corrected: the IS weights and the rejection mask are the scheme's answer
    return ctx.finding(
        "train_inference_mismatch",
        f"{span(bad, 'trained token')} where trainer and rollout engine are more than 2× apart (largest at row "
        f"{row}, position {col}: π_trainer/π_rollout = {math.exp(float(delta[row, col])):.3g}); no rollout "
        "correction (rollout_is, rollout_rs) weighs or drops them",
        token_mask=bad,
    )


@register_check(
    "entropy_collapse",
    severity="warning",
    description="the policy's entropy on the trained tokens is near zero (the run records it)",
    reference=(
        "docs/conventions/policy-stage.md §14 (token entropy); "
        "Cui et al. 2025, The Entropy Mechanism of RL for Reasoning LMs"
    ),
    explanation="""The run records the policy's entropy at each token (verl's entropys). When the trained tokens'
    mean entropy is below ENTROPY_COLLAPSE_NATS nats the policy is nearly deterministic where it is trained: the
    sampled rollouts of a prompt barely differ, group baselines see ties, and the few high-entropy ('forking')
    tokens carry what learning is left. Analytics' 'Credit by token entropy' shows which entropy range the gradient
    lands on. Common remedies: clip-higher (ε_high 0.28), an entropy bonus, Clip-Cov / KL-Cov, a higher sampling
    temperature.""",
)
def entropy_collapse(ctx: LintContext):
    if ctx.batch.entropy is None:
        return None
    trained = ctx.loss & ctx.act
    if not trained.any():
        return None
    h = ctx.batch.entropy[trained]
    mean = float(h.mean())
    if mean >= ENTROPY_COLLAPSE_NATS:
        return None
    return ctx.finding(
        "entropy_collapse",
        f"the trained tokens' mean entropy is {mean:.3g} nats (median {float(h.median()):.3g}; "
        f"{float((h < ENTROPY_COLLAPSE_NATS).double().mean()):.0%} of them below {ENTROPY_COLLAPSE_NATS:g}): the "
        "policy is nearly deterministic where it is trained",
        row_mask=trained.any(-1),
    )
