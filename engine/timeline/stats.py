"""Per-step statistics of a run's timeline: one function per statistic, each of one step's batch and its credit.

Every function takes a ``StepView`` (the step's ``TrajectoryBatch``, its ``CreditResult`` under a scheme and its
lint findings) and returns a number (NaN where the step cannot say: no log-probs, no logged advantages) or, for
``turn_credit_share``, a list. ``STATISTICS`` lists them in the order the timeline's columns take; ``step_row``
computes them all. What "solved" means is rLLM's rule (``engine.rllm.rejection_verdicts``): a score ≥ 1.

* ``score_mean`` / ``score_std``: the trajectories' scores (Σ_t token-level rewards: what outcome estimators see),
  population std;
* ``solve_rate``: share of trajectories with score ≥ 1;
* ``zero_variance_group_share``: share of prompt groups of ≥ 2 rollouts whose scores are all equal (GRPO's
  advantage is 0 for every one: the group teaches nothing), over all groups; ``singleton_group_share``: share of
  groups of one rollout;
* ``advantage_p05`` / ``advantage_p50`` / ``advantage_p95``: quantiles of the advantages on trained tokens (the
  loss mask);
* ``info_weight_share``: Σ|w·A| on tool/info tokens over Σ|w·A| on all tokens (0 when the scheme masks them);
* ``advantage_length_slope``: least-squares slope of each trajectory's mean advantage (on its trained tokens)
  against its number of trained tokens, per 1,000 tokens;
* ``turn_credit_share``: Σ|w·A| of each turn (0, 1, …) over Σ|w·A|;
* ``entropy_mean``: the policy's mean entropy on trained tokens (NaN without it);
* ``mismatch_mean``: mean |log π_trainer − log π_rollout| on trained tokens (NaN without both log-probs);
* ``logged_mismatch_share``: share of the action tokens with a logged advantage whose logged value differs from
  the recomputed one by more than the lint's tolerance (NaN without logged advantages);
* ``lint_<check>``: the trajectories each lint check flags (``lint_counts``; the timeline runs every check but the
  re-tokenization one, ``engine.timeline.compute.SKIPPED_CHECKS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.batch import TrajectoryBatch
from engine.credit import CreditResult
from engine.groups import dense_group_ids
from engine.lint.model import Finding
from engine.lint.thresholds import LOGGED_ADVANTAGE_TOL

SOLVED = 1.0  # rLLM's solve_all threshold: a score ≥ 1 is a solved trajectory
QUANTILES = (0.05, 0.5, 0.95)
NAN = float("nan")


@dataclass(frozen=True)
class StepView:
    """One step's batch, its credit under a scheme and (optionally) its lint findings and logged advantages
    aligned as the lint aligns them ([B, T] values, [B, T] bool where logged)."""

    batch: TrajectoryBatch
    result: CreditResult
    findings: list[Finding] = field(default_factory=list)
    logged: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def loss(self) -> torch.Tensor:
        return self.result.loss_mask.bool()


def score_mean(v: StepView) -> float:
    return float(v.result.scores.double().mean())


def score_std(v: StepView) -> float:
    return float(v.result.scores.double().std(correction=0))


def solve_rate(v: StepView) -> float:
    return float((v.result.scores >= SOLVED).double().mean())


def _group_spread(v: StepView) -> tuple[torch.Tensor, torch.Tensor]:
    """(size [G], max − min of the scores [G]) of the step's prompt groups."""
    scores = v.result.scores.double()
    idx, G = dense_group_ids(v.batch.group_ids.to(scores.device))
    size = torch.zeros(G, dtype=scores.dtype, device=scores.device).index_add_(0, idx, torch.ones_like(scores))
    hi = torch.full((G,), -math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(0, idx, scores, "amax")
    lo = torch.full((G,), math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(0, idx, scores, "amin")
    return size, hi - lo


def zero_variance_group_share(v: StepView) -> float:
    size, spread = _group_spread(v)
    return float(((size >= 2) & (spread == 0)).double().mean())


def singleton_group_share(v: StepView) -> float:
    size, _ = _group_spread(v)
    return float((size == 1).double().mean())


def advantage_quantiles(v: StepView) -> tuple[float, ...]:
    """The ``QUANTILES`` of the advantages on trained tokens (NaN each when nothing is trained); float32, no float64
    copy of the step's tokens."""
    a = v.result.advantages[v.loss]  # (N,)
    if a.numel() == 0:
        return tuple(NAN for _ in QUANTILES)
    return tuple(torch.quantile(a, torch.tensor(QUANTILES, dtype=a.dtype, device=a.device)).tolist())


def _abs_weights(v: StepView) -> torch.Tensor:
    """|w·A| per token [B, T] float32 (sums are taken in float64)."""
    return v.result.effective_weights.abs()


def info_weight_share(v: StepView) -> float:
    w = _abs_weights(v)
    total = float(w.sum(dtype=torch.float64))
    info = v.batch.attention_mask > v.batch.action_mask
    return float(w.masked_fill(~info, 0).sum(dtype=torch.float64)) / total if total > 0 else 0.0


def advantage_length_slope(v: StepView) -> float:
    """Slope of mean advantage vs trained length, per 1,000 tokens (NaN with < 2 lengths to tell apart)."""
    n = v.loss.sum(-1).double()
    rows = n > 0
    if int(rows.sum()) < 2:
        return NAN
    mean_adv = v.result.advantages.masked_fill(~v.loss, 0).sum(-1, dtype=torch.float64)[rows] / n[rows]
    x = n[rows] / 1000
    x = x - x.mean()
    den = float(x.square().sum())
    return float((x * (mean_adv - mean_adv.mean())).sum()) / den if den > 0 else NAN


def turn_credit_share(v: StepView) -> list[float]:
    """Σ|w·A| of turn k over Σ|w·A|, k = 0 … K−1 (zeros when no token carries weight)."""
    w = _abs_weights(v)
    turns = v.batch.turn_ids
    K = int(turns.max()) + 1 if turns.numel() else 0
    if K <= 0:
        return []
    real = turns >= 0
    per_turn = torch.zeros(K, dtype=torch.float64, device=w.device).index_add_(0, turns[real].long(), w[real].double())
    total = float(per_turn.sum())
    return (per_turn / total).tolist() if total > 0 else [0.0] * K


def entropy_mean(v: StepView) -> float:
    if v.batch.entropy is None or not bool(v.loss.any()):
        return NAN
    return float(v.batch.entropy[v.loss].sum(dtype=torch.float64)) / int(v.loss.sum())


def mismatch_mean(v: StepView) -> float:
    if v.batch.old_log_probs is None or v.batch.rollout_log_probs is None or not bool(v.loss.any()):
        return NAN
    return float(v.result.mismatch[v.loss].abs().sum(dtype=torch.float64)) / int(v.loss.sum())


def logged_mismatch_share(v: StepView) -> float:
    if v.logged is None:
        return NAN
    logged, where = v.logged
    n = int(where.sum())
    if n == 0:
        return NAN
    diff = (logged[where].double() - v.result.advantages[where].double()).abs()  # (N,): the logged tokens only
    return float((diff > LOGGED_ADVANTAGE_TOL).sum()) / n


def lint_counts(v: StepView) -> dict[str, int]:
    """``lint_<check>``: the trajectories the check flags in this step (a check that flags none: absent)."""
    out: dict[str, int] = {}
    for f in v.findings:
        key = f"lint_{f.check}"
        out[key] = out.get(key, 0) + (len(f.rows) if f.rows else max(f.count, 1))
    return out


Statistic = Callable[[StepView], float]
STATISTICS: dict[str, Statistic] = {
    "score_mean": score_mean,
    "score_std": score_std,
    "solve_rate": solve_rate,
    "zero_variance_group_share": zero_variance_group_share,
    "singleton_group_share": singleton_group_share,
    "info_weight_share": info_weight_share,
    "advantage_length_slope": advantage_length_slope,
    "entropy_mean": entropy_mean,
    "mismatch_mean": mismatch_mean,
    "logged_mismatch_share": logged_mismatch_share,
}
QUANTILE_COLUMNS = tuple(f"advantage_p{round(q * 100):02d}" for q in QUANTILES)


def step_row(v: StepView) -> dict:
    """Every statistic of one step: the ``STATISTICS`` columns, the advantage quantiles, ``turn_credit_share`` (a
    list) and the ``lint_<check>`` counts, with ``trajectories`` and ``tokens`` (trained tokens)."""
    row: dict = {"trajectories": v.batch.batch_size, "tokens": int(v.loss.sum())}
    row |= {name: fn(v) for name, fn in STATISTICS.items()}
    row |= dict(zip(QUANTILE_COLUMNS, advantage_quantiles(v), strict=True))
    row["turn_credit_share"] = turn_credit_share(v)
    return row | lint_counts(v)
