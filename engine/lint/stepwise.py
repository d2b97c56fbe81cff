"""Lints on rLLM's stepwise modes (docs/conventions/rllm.md §2.2, §2.3): broadcast groups split by step count, steps
left without advantage, and small or singleton per-step groups. A step is a turn (``turn_ids``)."""

from __future__ import annotations

import torch

from engine.groups import dense_group_ids
from engine.lint.context import LintContext, nof, span
from engine.lint.groups import singleton_convention
from engine.lint.model import register_check
from engine.lint.thresholds import ADVANTAGE_TOL, SMALL_STEP_GROUP


def per_step_max(ctx: LintContext, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """max of x [B, T] over the ``mask`` tokens of each (row, turn); 0 where a step has none. (B, K)."""
    K = int(ctx.batch.turn_ids.max().clamp(min=0)) + 1
    idx = ctx.batch.turn_ids.clamp(min=0).long()
    vals = torch.where(mask, x, torch.zeros_like(x))
    return torch.zeros(x.shape[0], K, dtype=x.dtype, device=x.device).scatter_reduce_(1, idx, vals, "amax")


def step_tokens(ctx: LintContext, steps: torch.Tensor) -> torch.Tensor:
    """Trained tokens of the flagged (row, turn) steps [B, K] bool. (B, T) bool."""
    idx = ctx.batch.turn_ids.clamp(min=0, max=steps.shape[1] - 1).long()
    return steps.gather(1, idx) & ctx.loss


@register_check(
    "broadcast_group_split",
    severity="warning",
    description="rLLM broadcast grouped by (prompt, last step) splits a prompt's rollouts by step count",
    reference="docs/conventions/rllm.md §2.3 (AgentWorkflowPPOTrainer: uid = step id)",
    explanation="""rLLM's workflow trainer sets uid = step id, so stepwise broadcast groups last steps by
    (task, last-step index) (broadcast_group_key='prompt_and_last_step', profile rllm-workflow): rollouts of one
    prompt that took different numbers of steps land in different GRPO groups, often singletons that get
    their raw reward as advantage (docs/conventions/rllm.md §2.3: u0's rollouts get 1.0, 1.0, 0.2). The legacy trainer
    grouped by prompt (broadcast_group_key='prompt').""",
)
def broadcast_group_split(ctx: LintContext):
    cfg = ctx.cfg
    if cfg.stepwise_mode != "broadcast" or cfg.broadcast_group_key != "prompt_and_last_step":
        return None
    if singleton_convention(cfg) is None or "n_steps" not in ctx.result.extras:
        return None
    n_steps = ctx.result.extras["n_steps"].long()
    idx, _ = ctx.groups
    split_group = ctx.per_group(n_steps.float(), "amax") != ctx.per_group(n_steps.float(), "amin")
    split = split_group[idx] & ctx.result.kept
    if not split.any():
        return None
    sub, n_sub = dense_group_ids(idx * (int(n_steps.max()) + 2) + n_steps)
    sub_size = torch.zeros(n_sub, device=idx.device).index_add_(0, sub, torch.ones_like(n_steps, dtype=torch.float))
    alone = split & (sub_size[sub] == 1)
    n_sub = int(torch.unique(sub[split]).numel())
    return ctx.finding(
        "broadcast_group_split",
        f"{nof(int(split_group.sum()), 'prompt group')} split by step count into {n_sub} (prompt, last-step) groups; "
        f"alone after the split (raw reward as advantage): {nof(int(alone.sum()), 'rollout')}",
        row_mask=split,
    )


@register_check(
    "zero_advantage_steps",
    severity="warning",
    description="rLLM stepwise mode leaves steps with zero advantage although their trajectory has credit",
    reference="docs/conventions/rllm.md §2.2 (broadcast, per_step), docs/TUTORIAL.md §7.2 (worked example)",
    explanation="""In stepwise_mode 'broadcast' every step of a trajectory should get the last step's scalar,
    and in 'per_step' each step its group-relative MC return. A step whose trained tokens all get advantage 0
    while the same trajectory has nonzero credit under stepwise_mode='trajectory' is left out of the update:
    e.g. with broadcast_group_key='prompt_and_last_step' a split-off group whose
    rewards tie gets 0 although its prompt group does not tie; in per_step a k-th-step group whose MC returns
    tie gets 0 (with stepwise_gamma = 0, rLLM's workflow default, every step but the last).""",
)
def zero_advantage_steps(ctx: LintContext):
    if ctx.cfg.stepwise_mode not in ("broadcast", "per_step"):
        return None
    has = per_step_max(ctx, ctx.loss.float(), ctx.loss) > 0
    mine = per_step_max(ctx, ctx.result.advantages.abs(), ctx.loss)
    ref = per_step_max(ctx, ctx.recompute(stepwise_mode="trajectory").advantages.abs(), ctx.loss)
    bad = has & (mine <= ADVANTAGE_TOL) & (ref > ADVANTAGE_TOL)
    if not bad.any():
        return None
    return ctx.finding(
        "zero_advantage_steps",
        f"advantage 0 under stepwise_mode='{ctx.cfg.stepwise_mode}' on {span(bad, 'step')} whose trajectory has credit",
        token_mask=step_tokens(ctx, bad),
        count=int(bad.sum()),
    )


@register_check(
    "small_step_groups",
    severity="warning",
    description="rLLM per_step groups (k-th steps of a prompt's rollouts) that are singletons or small",
    reference="docs/conventions/rllm.md §2.2 (per_step: a singleton group returns the raw MC return)",
    explanation="""In stepwise_mode 'per_step' the k-th steps of one prompt's rollouts form a group. Late steps
    exist only in the longer rollouts, so their groups are small, and a singleton group gets its raw
    Monte-Carlo return as advantage (docs/conventions/rllm.md §2.2): the last turns of the longest rollout are trained
    on an unbaselined return. Warning for singletons with a raw-score convention, info for groups smaller than
    SMALL_STEP_GROUP (and than their prompt group). Sizes come from the engine's step_group_size extra.""",
)
def small_step_groups(ctx: LintContext):
    conv = singleton_convention(ctx.cfg)
    size = ctx.result.extras.get("step_group_size")
    if ctx.cfg.stepwise_mode != "per_step" or conv is None or size is None:
        return None
    prompt = ctx.group_size[:, None]
    trained = per_step_max(ctx, ctx.loss.float(), ctx.loss)[:, : size.shape[1]] > 0
    size = size[:, : trained.shape[1]]
    single = trained & (size == 1)
    small = trained & (size > 1) & (size < SMALL_STEP_GROUP) & (size < prompt)
    if not (single.any() or small.any()):
        return None
    raw = conv == "raw" and bool(single.any())
    what = "raw MC return as advantage" if conv == "raw" else "advantage 0"
    return ctx.finding(
        "small_step_groups",
        f"per-step groups: {nof(int(single.sum()), 'step')} alone ({what}), {nof(int(small.sum()), 'step')} in "
        f"groups smaller than {SMALL_STEP_GROUP}",
        severity="warning" if raw else "info",
        token_mask=step_tokens(ctx, single | small),
        count=int((single | small).sum()),
    )
