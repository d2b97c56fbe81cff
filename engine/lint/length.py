"""Length bias: how strongly each trajectory's total credit follows its length under the loss aggregation
(docs/conventions/verl.md §1.5; Dr.GRPO, Liu et al. 2025; DAPO's token-level loss)."""

from __future__ import annotations

import torch

from engine.lint.context import LintContext, nof
from engine.lint.model import register_check
from engine.lint.thresholds import (
    LENGTH_BIAS_CORRELATION,
    LENGTH_BIAS_MIN_CV,
    LENGTH_BIAS_MIN_ROWS,
    LENGTH_SCALED_MODES,
)


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation of two 1-D tensors (0 when either is constant)."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    den = (x.square().sum() * y.square().sum()).sqrt()
    return float((x * y).sum() / den) if den > 0 else 0.0


@register_check(
    "length_bias",
    severity="warning",
    description="each trajectory's total credit Σ_t |w·A| follows its length under the chosen aggregation",
    reference="docs/conventions/verl.md §1.5 (agg_loss); Dr.GRPO (Liu et al. 2025)",
    explanation="""The total credit of a trajectory, Σ_t |w_t·A_t| (w = the aggregation weight of each trained
    token), correlates with its number of trained tokens above LENGTH_BIAS_CORRELATION: a response twice as
    long pushes the policy about twice as hard with the same advantage. token-sum, seq-mean-token-sum and
    seq-mean-token-sum-norm weigh every token alike without dividing by a token count, so the loss scale
    itself grows with length (warning); token-mean has the same per-trajectory profile divided by the batch's
    token count, which is its intent (each token weighs the same; info). seq-mean-token-mean gives every
    trajectory the same total weight (then only |A| itself can follow length). docs/conventions/verl.md §1.5 lists
    the weights.""",
)
def length_bias(ctx: LintContext):
    trained = ctx.result.kept & (ctx.n_loss > 0)
    if int(trained.sum()) < LENGTH_BIAS_MIN_ROWS:
        return None
    n = ctx.n_loss[trained].double()
    credit = ctx.result.effective_weights.abs().sum(-1)[trained].double()
    if float(credit.std()) <= LENGTH_BIAS_MIN_CV * float(credit.mean()):
        return None  # equal credit up to rounding (e.g. seq-mean-token-mean with equal |A|)
    r = pearson(n, credit)
    if r < LENGTH_BIAS_CORRELATION:
        return None
    mode = ctx.cfg.loss_agg_mode
    rows = nof(int(trained.sum()), "trajectory")
    return ctx.finding(
        "length_bias",
        f"Σ|w·A| per trajectory follows trained length (Pearson r = {r:.2f} over {rows} of {int(n.min())}–"
        f"{int(n.max())} tokens) under loss_agg_mode='{mode}'",
        severity="warning" if mode in LENGTH_SCALED_MODES else "info",
        row_mask=trained,
    )
