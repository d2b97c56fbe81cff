"""``compute_credit``: the whole pipeline, one call (the KG-R1 reward walkthrough's flow in order, CONVENTIONS.md §7.1).

batch ─► (1) token scores: structured turn/global rewards placed on tokens  (``stages.place_scores``)
      ─► (2) in-reward KL: rewards = scores − β·KL(old‖ref)·m         (``stages.subtract_kl``)
      ─► (3) advantages: registered estimator, under an rLLM mode      (``stages.estimate``)
      ─► (4) loss mask, aggregation weights, effective weights         (``stages.weigh_loss``)
      ─► CreditResult (every intermediate, [B, T] or [B])
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from engine.aggregation import agg_weights
from engine.batch import TrajectoryBatch
from engine.config import CreditConfig
from engine.shaping import turn_score
from engine.stages import estimate, masks_for, place_scores, subtract_kl, weigh_loss


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass(frozen=True)
class CreditResult:
    """Everything ``compute_credit`` computed. Token tensors are [B, T], row tensors [B], turn tensors [B, K].

    token_level_scores: rewards placed on tokens, before KL. kl: per-token KL (masked; zeros without log-probs).
    token_level_rewards: scores − β·kl when in-reward KL is on, else the scores. values: the values GAE used
    (or None). returns, advantages: the estimator's (under the rLLM mode). loss_mask: tokens that enter the loss.
    agg_weights: each token's weight in the aggregated loss; effective_weights = agg_weights · advantages.
    scores: Σ_t token_level_rewards (what outcome estimators see). sample_scores: Σ_t returns · score mask (the
    dump score, CONVENTIONS.md §7.1 step 6). group_mean/std/size: statistics of the scores' groups. kept: rows
    kept by rejection sampling. verdicts: 0 solve_none / 1 partial / 2 solve_all. turn_*: per-turn summaries.
    extras: estimator intermediates (TD errors, advantages before whitening, baselines, step returns, …).
    notes: strings such as the value stand-in used and the placement resolved. metrics: floats (current
    KL, β after the update, …).
    """

    config: CreditConfig
    device: str
    seconds: float
    placement: str
    token_level_scores: torch.Tensor
    kl: torch.Tensor
    token_level_rewards: torch.Tensor
    values: torch.Tensor | None
    returns: torch.Tensor
    advantages: torch.Tensor
    advantage_mask: torch.Tensor
    loss_mask: torch.Tensor
    agg_weights: torch.Tensor
    effective_weights: torch.Tensor
    scores: torch.Tensor
    sample_scores: torch.Tensor
    group_mean: torch.Tensor
    group_std: torch.Tensor
    group_size: torch.Tensor
    kept: torch.Tensor
    verdicts: torch.Tensor
    turn_rewards: torch.Tensor
    turn_advantage: torch.Tensor
    turn_tokens: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def token_quantities(self) -> dict[str, torch.Tensor]:
        """The [B, T] quantities a token view can colour by, by display name."""
        q = {
            "token score": self.token_level_scores,
            "KL": self.kl,
            "reward": self.token_level_rewards,
            "return": self.returns,
            "advantage": self.advantages,
            "effective weight": self.effective_weights,
        }
        if self.values is not None:
            q["value"] = self.values
        return q


def compute_credit(
    batch: TrajectoryBatch, cfg: CreditConfig | None = None, device=None, token_extras: bool = True
) -> CreditResult:
    """Run the whole credit pipeline of ``cfg`` on ``batch``: the four stages of ``engine.stages``, in order.

    ``token_extras=False`` leaves the estimator's [B, T] intermediates (GAE's TD errors and raw advantages, …)
    out of ``extras``, dropped as soon as the estimator returns: for programs that keep results of big batches
    (the dashboard). Row and turn intermediates stay; every other field is the same."""
    cfg = cfg or CreditConfig()
    if batch.batch_size == 0 or batch.num_tokens == 0:
        raise ValueError(
            f"compute_credit: the batch is empty ({batch.batch_size} trajectories × {batch.num_tokens} tokens)"
        )
    start = time.perf_counter()
    dev = resolve_device(device if device is not None else cfg.device)
    batch = batch.to(dev)
    masks = masks_for(batch, cfg)
    scores = place_scores(batch, cfg, masks)  # (1)
    rewards = subtract_kl(batch, cfg, scores, masks)  # (2)
    out = estimate(batch, cfg, scores, rewards, masks)  # (3)
    values = out.extras.get("values", batch.values)  # the values GAE used (critic or stand-in)
    if not token_extras:  # dropped as soon as the estimator returns
        shape = rewards.rewards.shape
        out = dataclasses.replace(out, extras={k: v for k, v in out.extras.items() if v.shape != shape})
    loss = weigh_loss(batch, cfg, scores, rewards, out, masks)  # (4)

    extras = dict(out.extras)
    if scores.global_reward is not None:
        extras["global_reward"] = scores.global_reward
    extras["turn_score"] = turn_score(
        scores.turn_rewards, scores.turn_mask, cfg.turn_score_reduce, batch.batch_size, rewards.rewards
    )
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return CreditResult(
        config=cfg,
        device=str(dev),
        seconds=time.perf_counter() - start,
        placement=scores.placement,
        token_level_scores=scores.scores,
        kl=rewards.kl,
        token_level_rewards=rewards.rewards,
        values=values,
        returns=out.returns,
        advantages=out.advantages,
        advantage_mask=masks.advantage,
        loss_mask=loss.loss_mask,
        agg_weights=loss.agg_weights,
        effective_weights=loss.effective_weights,
        scores=loss.scores,
        sample_scores=loss.sample_scores,
        group_mean=loss.groups.mean,
        group_std=loss.groups.std,
        group_size=loss.groups.size,
        kept=loss.kept,
        verdicts=loss.verdicts,
        turn_rewards=scores.turn_rewards if scores.turn_rewards is not None else loss.turn_sums[..., 1],
        turn_advantage=loss.turn_sums[..., 0],
        turn_tokens=loss.turn_sums[..., 2],
        extras=extras,
        notes=dict(out.notes) | {"placement": scores.placement, "profile": cfg.profile},
        metrics=rewards.metrics,
    )


def with_loss_agg_mode(res: CreditResult, mode: str) -> CreditResult:
    """``res`` as ``compute_credit`` gives it under ``loss_agg_mode=mode``: the mode changes only the
    aggregation weights and, through them, the effective weights (w · A on the loss mask), so those two are
    recomputed from the result's own loss mask and advantages exactly as ``compute_credit`` computes them; every
    other field is the same tensor. Raises the ``ValueError`` the config or ``agg_weights`` raises for a mode the
    profile lacks (Run analytics varies the mode: one computation instead of one per mode)."""
    cfg = res.config.replace(loss_agg_mode=mode)
    w = agg_weights(
        res.loss_mask,
        cfg.loss_agg_mode,
        loss_scale_factor=cfg.loss_scale_factor,
        sum_norm_divides_by_seqs=cfg.sum_norm_divides_by_seqs,
    )
    effective = torch.where(res.loss_mask.bool(), res.advantages, 0.0).mul_(w)
    return dataclasses.replace(res, config=cfg, agg_weights=w, effective_weights=effective)
