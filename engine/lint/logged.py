"""Lint against what the trainer itself logged: its advantages beside CreditLens's recomputation under the chosen
scheme (loaders keep them as ``metadata.logged_advantage``, one float per trajectory, or
``metadata.logged_advantages``, one per response token). A mismatch means the scheme is not the trainer's:
another ε, std ddof, reward weighting or grouping, or a loader that read the data wrong. Under the estimator
``logged`` the advantages are the logged ones themselves: there is nothing to compare."""

from __future__ import annotations

import torch

from engine.io.data.logged import logged_advantage_tokens
from engine.lint.context import LintContext, nof
from engine.lint.model import register_check
from engine.lint.thresholds import LOGGED_ADVANTAGE_TOL

NO_REWARDS = "no_rewards"  # run metadata a loader sets when its format holds no rewards (prime-rl's token export)


def logged_advantages(ctx: LintContext) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(logged [B, T], where [B, T] bool): the trainer's advantage on each action token that has one.

    A per-trajectory ``logged_advantage`` applies to every action token (GRPO-style broadcast); a per-token
    ``logged_advantages`` list must have one value per response token (other lengths are not compared). None
    when the run says its format holds no rewards (``run.metadata["no_rewards"]``): CreditLens's advantages are then
    0 whatever the scheme, and a difference would say nothing about it."""
    trajs = getattr(ctx.run, "trajectories", None)
    if getattr(ctx.run, "metadata", {}).get(NO_REWARDS):  # nothing to recompute them from: not compared
        return None
    if not trajs or len(trajs) != ctx.batch.batch_size:
        return None
    B, T = ctx.batch.batch_size, ctx.batch.num_tokens
    logged = torch.zeros(B, T, dtype=ctx.result.advantages.dtype)
    where = torch.zeros(B, T, dtype=torch.bool)
    for i, traj in enumerate(trajs):
        row = logged_advantage_tokens(traj)
        if row is not None:
            values = torch.from_numpy(row).to(logged.dtype)
            logged[i, : len(row)] = torch.nan_to_num(values)
            where[i, : len(row)] = torch.isfinite(values)
    if not where.any():
        return None
    dev = ctx.result.advantages.device
    return logged.to(dev), where.to(dev) & ctx.act


@register_check(
    "logged_advantage_mismatch",
    severity="warning",
    description="the advantages the trainer logged differ from CreditLens's under this scheme",
    reference="docs/FORMAT.md, trainers table (verl batches, TRL completions, prime-rl traces log advantages)",
    explanation="""The run carries the trainer's own advantages (TRL's completions log, prime-rl / verifiers
    node advantages), and on the action tokens they differ from what CreditLens computes under the chosen scheme
    by more than LOGGED_ADVANTAGE_TOL = 1e-4. Either the scheme is not the trainer's (TRL divides by σ + 1e-4
    with the unbiased std, verl by σ + 1e-6; reward weights the file did not hold; Dr.GRPO without the std;
    prime-rl's GRPO with its length penalty) or the data was read wrong (groups, rewards). Until they agree,
    CreditLens's picture is not the one the trainer trained on: match the scheme (profile `trl` for TRL, or
    epsilon, std_ddof, global_weights, length_penalty) and look again.""",
    needs=("run",),
)
def logged_advantage_mismatch(ctx: LintContext):
    if ctx.cfg.estimator == "logged":  # the advantages are the logged ones: nothing recomputed to compare
        return None
    got = logged_advantages(ctx)
    if got is None:
        return None
    logged, where = got
    diff = torch.where(where, (ctx.result.advantages - logged).abs(), 0.0)  # (B, T)
    bad = where & (diff > LOGGED_ADVANTAGE_TOL)
    if not bad.any():
        return None
    rows = bad.any(-1)
    n_logged, worst = int(where.any(-1).sum()), int(diff.max(-1).values.argmax())
    pos = int(diff[worst].argmax())
    return ctx.finding(
        "logged_advantage_mismatch",
        f"logged advantages differ from CreditLens's on {nof(int(rows.sum()), 'trajectory')} of {n_logged}: max "
        f"|ΔA| = {float(diff.max()):.3g} (row {worst}: logged {float(logged[worst, pos]):.4g}, computed "
        f"{float(ctx.result.advantages[worst, pos]):.4g}; tolerance {LOGGED_ADVANTAGE_TOL:g})",
        token_mask=bad,
        count=int(rows.sum()),
    )
