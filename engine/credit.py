"""``compute_credit``: the whole pipeline, one call (the KG-R1 reward walkthrough's flow in order, CONVENTIONS.md §7.1).

batch ─► (1) token scores: structured turn/global rewards placed on tokens (``shaping``)
      ─► (2) in-reward KL: rewards = scores − β·KL(old‖ref)·m        (``kl``)
      ─► (3) advantages: registered estimator, under an rLLM mode     (``registry``, ``rllm``)
      ─► (4) loss mask, aggregation weights, effective weights        (``aggregation``)
      ─► CreditResult (every intermediate, [B, T] or [B])
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

import engine.estimators  # noqa: F401  (registers the built-in estimators)
from engine.aggregation import agg_weights
from engine.batch import TrajectoryBatch
from engine.config import CreditConfig
from engine.groups import group_stats
from engine.kl import apply_kl_penalty, kl_penalty
from engine.registry import EstimatorInput, EstimatorOutput, get_estimator
from engine.rllm import SOLVE_PARTIAL, rejection_verdicts, run_broadcast, run_per_step
from engine.scan import by_row_blocks
from engine.shaping import (
    per_turn_sums,
    place_rewards,
    resolve_placement,
    turn_score,
    weighted_global_reward,
    weighted_turn_rewards,
)


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
    """Run the whole credit pipeline of ``cfg`` on ``batch`` (see the module docstring).

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
    est = get_estimator(cfg.estimator)
    attn, act = batch.attention_mask, batch.action_mask
    state_mask = act if cfg.state_masking else attn  # CONVENTIONS.md §7.1: multi_turn & state_masking → loss_mask

    # (1) token scores
    turn_r, turn_mask = weighted_turn_rewards(batch, cfg)
    global_r = weighted_global_reward(batch, cfg)
    placement = resolve_placement(batch, cfg)
    scores_tok = place_rewards(batch, placement, turn_r, turn_mask, global_r, state_mask, cfg.turn_score_reduce)

    # (2) in-reward KL
    metrics: dict[str, float] = {}
    has_lp = batch.old_log_probs is not None and batch.ref_log_probs is not None
    if cfg.use_kl_in_reward:
        if not has_lp:
            raise ValueError("use_kl_in_reward needs old_log_probs and ref_log_probs; the run lacks them")
        pen = apply_kl_penalty(
            scores_tok, batch.old_log_probs, batch.ref_log_probs, state_mask, cfg.kl_penalty, cfg.kl_coef,
            cfg.kl_ctrl_type, cfg.kl_target, cfg.kl_horizon, cfg.kl_plus_variants,
        )  # fmt: skip
        rewards, kld = pen.token_level_rewards, pen.kl
        metrics |= {"kl": pen.current_kl, "kl_coef": pen.beta, "kl_coef_next": pen.beta_next}
    else:
        rewards = scores_tok
        kld = (
            kl_penalty(batch.old_log_probs, batch.ref_log_probs, cfg.kl_penalty, cfg.kl_plus_variants).detach()
            * state_mask
            if has_lp
            else torch.zeros_like(scores_tok)
        )

    # (3) advantages
    adv_mask = act if cfg.advantage_mask == "action" else attn
    inp = EstimatorInput(
        token_level_rewards=rewards,
        response_mask=adv_mask,
        group_ids=batch.group_ids,
        turn_ids=batch.turn_ids,
        action_mask=act,
        values=batch.values,
        old_log_probs=batch.old_log_probs,
        reward_baselines=batch.reward_baselines,
        turn_rewards=turn_r,
        turn_mask=turn_mask,
        global_reward=global_r,
        global_components=batch.global_rewards,
        global_component_names=batch.global_reward_names,
        sum_pi_squared=batch.sum_pi_squared,
        rollout_is_weights=batch.rollout_is_weights,
    )
    out = _run_mode(est, inp, cfg)
    values = out.extras.get("values", batch.values)  # the values GAE used (critic or stand-in)
    if not token_extras:
        out = dataclasses.replace(out, extras={k: v for k, v in out.extras.items() if v.shape != rewards.shape})

    # (4) loss mask and weights
    scores = rewards.sum(-1)
    verdicts = rejection_verdicts(scores_tok.sum(-1), batch.group_ids)
    kept = torch.ones_like(scores, dtype=torch.bool)
    if cfg.rejection_sample:
        kept = verdicts == SOLVE_PARTIAL
    if cfg.mask_truncated_samples:
        kept = kept & ~batch.truncated
    loss_mask = state_mask if bool(kept.all()) else state_mask * kept[:, None]  # no [B, T] copy when all kept
    w = agg_weights(
        loss_mask,
        cfg.loss_agg_mode,
        loss_scale_factor=cfg.loss_scale_factor,
        sum_norm_divides_by_seqs=cfg.sum_norm_divides_by_seqs,
    )
    advantages = out.advantages
    st = group_stats(scores, batch.group_ids, ddof=cfg.std_ddof)

    K = max(turn_r.shape[1] if turn_r is not None else int(batch.turn_ids.max().item()) + 1, 1)
    trained_adv = torch.where(loss_mask.bool(), advantages, 0.0)
    turn_sums = per_turn_sums(batch.turn_ids, K, trained_adv, rewards, loss_mask)  # (B, K, 3)
    effective_weights = trained_adv.mul_(w)  # w · A in place: no second [B, T] temporary (peak memory)
    turn_rw = turn_r if turn_r is not None else turn_sums[..., 1]

    notes = dict(out.notes) | {"placement": placement, "profile": cfg.profile}
    extras = dict(out.extras)
    if global_r is not None:
        extras["global_reward"] = global_r
    extras["turn_score"] = turn_score(turn_r, turn_mask, cfg.turn_score_reduce, batch.batch_size, rewards)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return CreditResult(
        config=cfg,
        device=str(dev),
        seconds=time.perf_counter() - start,
        placement=placement,
        token_level_scores=scores_tok,
        kl=kld,
        token_level_rewards=rewards,
        values=values,
        returns=out.returns,
        advantages=advantages,
        advantage_mask=adv_mask,
        loss_mask=loss_mask,
        agg_weights=w,
        effective_weights=effective_weights,
        scores=scores,
        sample_scores=by_row_blocks(lambda r, m: (r * m).sum(-1), out.returns, state_mask),  # no [B, T] product
        group_mean=st.mean,
        group_std=st.std,
        group_size=st.size,
        kept=kept,
        verdicts=verdicts,
        turn_rewards=turn_rw,
        turn_advantage=turn_sums[..., 0],
        turn_tokens=turn_sums[..., 2],
        extras=extras,
        notes=notes,
        metrics=metrics,
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


def _run_mode(est, inp: EstimatorInput, cfg: CreditConfig) -> EstimatorOutput:
    if cfg.stepwise_mode == "broadcast":
        return run_broadcast(est, inp, cfg)
    if cfg.stepwise_mode == "per_step":
        return run_per_step(est, inp, cfg)
    return est.fn(inp, cfg)
