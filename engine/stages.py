"""The four stages of ``compute_credit``, one function each, in the order the data flows.

batch ─► (1) ``place_scores``: structured turn/global rewards placed on tokens       → ``TokenScores``
      ─► (2) ``subtract_kl``:  rewards = scores − β·KL(old‖ref)·m (in-reward KL)      → ``Rewards``
      ─► (3) ``estimate``:     the registered estimator, under the rLLM mode           → ``EstimatorOutput``
      ─► (4) ``weigh_loss``:   loss mask, aggregation weights, w·A, summaries           → ``LossWeights``

Every stage is a pure function of the batch, the config and the earlier stages' outputs; ``compute_credit``
(``engine/credit.py``) calls them in order and gathers their outputs into one ``CreditResult``. Two masks run
through all four (``Masks``): the *state* mask (action tokens under ``state_masking``, else every attended token)
places rewards, masks the in-reward KL and is the loss mask; the *advantage* mask is what the estimator sees.
Between (2) and (3) ``reject_before_advantages`` takes the tokens verl's decoupled rollout rejection drops out of
the advantage mask, as verl's trainer does (``rollout_rs_masks_advantages``, docs/conventions/policy-stage.md §14).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import engine.estimators  # noqa: F401  (registers the built-in estimators)
from engine.aggregation import agg_weights
from engine.batch import TrajectoryBatch
from engine.config import CreditConfig
from engine.groups import GroupStats, group_stats
from engine.kl import apply_kl_penalty, check_kl_penalty, kl_penalty
from engine.policy import Correction, PolicyGradient, policy_gradient, rollout_correction, unit_at_ratio_one
from engine.registry import EstimatorInput, EstimatorOutput, get_estimator
from engine.rllm import SOLVE_PARTIAL, rejection_verdicts, run_broadcast, run_per_step
from engine.scan import by_row_blocks
from engine.shaping import (
    place_rewards,
    resolve_placement,
    turn_score,
    weighted_global_reward,
    weighted_turn_rewards,
)


@dataclass(frozen=True)
class Masks:
    """state [B, T]: placement, in-reward KL and loss mask (docs/TUTORIAL.md §7.1: state masking keeps tool/info
    tokens out). advantage [B, T]: the estimator's mask (``cfg.advantage_mask``, docs/conventions/search-r1.md §4), less
    the tokens rollout rejection drops where the trainer rejects before the advantages. correction: that rollout
    correction, computed once before stage 3 (``reject_before_advantages``) and reused by stage 4; None when
    stage 4 computes it (or there is none)."""

    state: torch.Tensor
    advantage: torch.Tensor
    correction: Correction | None = None


def masks_for(batch: TrajectoryBatch, cfg: CreditConfig) -> Masks:
    attn, act = batch.attention_mask, batch.action_mask
    return Masks(
        state=act if cfg.state_masking else attn,
        advantage=act if cfg.advantage_mask == "action" else attn,
    )


def _correction(batch: TrajectoryBatch, cfg: CreditConfig, mask: torch.Tensor) -> Correction:
    """verl's decoupled rollout correction (``engine.policy.rollout_correction``) of the run's two log-probs on
    ``mask``; raises when the run lacks one of them."""
    if batch.old_log_probs is None or batch.rollout_log_probs is None:
        raise ValueError(
            "rollout correction (rollout_is / rollout_rs) needs the trainer's and the rollout engine's log-probs "
            "(old_log_probs and rollout_log_probs); the run lacks "
            + ("both" if batch.old_log_probs is None and batch.rollout_log_probs is None else
               "old_log_probs" if batch.old_log_probs is None else "rollout_log_probs")
        )  # fmt: skip
    return rollout_correction(batch.old_log_probs, batch.rollout_log_probs, mask, cfg)


def reject_before_advantages(batch: TrajectoryBatch, cfg: CreditConfig, masks: Masks) -> Masks:
    """verl's decoupled mode (``cfg.rollout_rs_masks_advantages``): the trainer runs
    ``compute_rollout_correction_and_add_to_batch`` after the rewards and in-reward KL and before
    ``compute_advantage``, and it replaces ``response_mask`` by the rejection-masked one, so the estimator sees
    m·keep (docs/conventions/policy-stage.md §14). The correction is computed here on the state mask (verl's
    response_mask, every row of the batch) and kept in the masks for stage 4. Unchanged ``masks`` without rejection, in
    bypass mode (the loss rejects there) or under the other trainers' convention."""
    if not (cfg.rollout_rs and cfg.rollout_rs_masks_advantages and cfg.policy_ratio_base == "trainer"):
        return masks
    correction = _correction(batch, cfg, masks.state)
    return Masks(masks.state, masks.advantage * correction.keep, correction)


# ------------------------------------------------------------------------------------------------ (1) token scores
@dataclass(frozen=True)
class TokenScores:
    """placement: the placement used (``auto`` resolved). scores [B, T]: the token-level scores.
    turn_rewards, turn_mask [B, K]: weighted per-turn rewards and which turns exist (None without turn
    components). global_reward [B]: the weighted global reward G (None without global rewards or token scores).
    turn_score [B]: the turn rewards' mean or sum (``cfg.turn_score_reduce``; 0 without turns)."""

    placement: str
    scores: torch.Tensor
    turn_rewards: torch.Tensor | None
    turn_mask: torch.Tensor | None
    global_reward: torch.Tensor | None
    turn_score: torch.Tensor


def place_scores(batch: TrajectoryBatch, cfg: CreditConfig, masks: Masks) -> TokenScores:
    """Stage 1: r_{i,k} = Σ_c w_c·turn component, G_i = Σ_c w_c·global component, placed on the state mask's
    tokens by ``cfg.placement`` (``engine.shaping``)."""
    turn_r, turn_mask = weighted_turn_rewards(batch, cfg)
    global_r = weighted_global_reward(batch, cfg)
    placement = resolve_placement(batch, cfg)
    score = turn_score(turn_r, turn_mask, cfg.turn_score_reduce, batch.batch_size, masks.state)
    scores = place_rewards(batch, placement, turn_r, turn_mask, global_r, masks.state, cfg.turn_score_reduce, score)
    return TokenScores(placement, scores, turn_r, turn_mask, global_r, score)


# ------------------------------------------------------------------------------------------------ (2) in-reward KL
@dataclass(frozen=True)
class Rewards:
    """rewards [B, T]: what the estimator is given (the scores themselves without in-reward KL). kl [B, T]: the
    per-token KL subtracted, on the state mask (None when it is not subtracted: ``shown_kl`` computes it for
    display). metrics: current KL, β used and β after the controller's update (in-reward KL only)."""

    rewards: torch.Tensor
    kl: torch.Tensor | None
    metrics: dict[str, float]


def subtract_kl(batch: TrajectoryBatch, cfg: CreditConfig, scores: TokenScores, masks: Masks) -> Rewards:
    """Stage 2: verl's ``apply_kl_penalty`` when ``cfg.use_kl_in_reward`` (docs/conventions/verl.md §1.4)."""
    has_lp = batch.old_log_probs is not None and batch.ref_log_probs is not None
    if cfg.use_kl_in_reward:
        if not has_lp:
            raise ValueError("use_kl_in_reward needs old_log_probs and ref_log_probs; the run lacks them")
        pen = apply_kl_penalty(
            scores.scores, batch.old_log_probs, batch.ref_log_probs, masks.state, cfg.kl_penalty, cfg.kl_coef,
            cfg.kl_ctrl_type, cfg.kl_target, cfg.kl_horizon, cfg.trainer.kl_plus_variants, cfg.kl_clamp,
        )  # fmt: skip
        metrics = {"kl": pen.current_kl, "kl_coef": pen.beta, "kl_coef_next": pen.beta_next}
        return Rewards(pen.token_level_rewards, pen.kl, metrics)
    if has_lp:  # a scheme that cannot be shown fails here, not later
        check_kl_penalty(cfg.kl_penalty, cfg.trainer.kl_plus_variants)
    return Rewards(scores.scores, None, {})


def shown_kl(batch: TrajectoryBatch, cfg: CreditConfig, scores: TokenScores, masks: Masks) -> torch.Tensor:
    """The per-token KL that stage 2 would subtract, on the state mask, for display when it is not subtracted
    (zeros without log-probs). [B, T]."""
    if batch.old_log_probs is None or batch.ref_log_probs is None:
        return torch.zeros_like(scores.scores)
    kl = kl_penalty(
        batch.old_log_probs, batch.ref_log_probs, cfg.kl_penalty, cfg.trainer.kl_plus_variants, cfg.kl_clamp
    ).detach()
    return kl.mul_(masks.state)  # kl_penalty returns a new tensor: masked in place, no second [B, T]


# ------------------------------------------------------------------------------------------------ (3) advantages
def estimator_input(
    batch: TrajectoryBatch, cfg: CreditConfig, scores: TokenScores, rewards: Rewards, masks: Masks
) -> EstimatorInput:
    """What stage 3 hands the estimator: the rewards on the advantage mask, and the batch fields it may read.
    Under ``outcome_tokens="reward_to_go"`` an outcome estimator gets the scores before KL and the KL term
    −β·KL·m apart (``kl_rewards``), which it adds after its baseline (OpenRLHF)."""
    token_rewards, kl_rewards = rewards.rewards, None
    outcome = get_estimator(cfg.estimator).kind == "outcome"
    if cfg.outcome_tokens == "reward_to_go" and outcome:
        token_rewards = scores.scores
        if rewards.kl is not None:
            kl_rewards = rewards.kl * -rewards.metrics["kl_coef"]
    elif cfg.reward_clip is not None and not outcome:  # OpenRLHF compute_reward: the reward clamped before the KL
        clipped = scores.scores.clamp(*cfg.reward_clip)
        token_rewards = clipped if rewards.kl is None else clipped - rewards.kl * rewards.metrics["kl_coef"]
    return EstimatorInput(
        token_level_rewards=token_rewards,
        response_mask=masks.advantage,
        group_ids=batch.group_ids,
        turn_ids=batch.turn_ids,
        action_mask=batch.action_mask,
        values=batch.values,
        old_log_probs=batch.old_log_probs,
        reward_baselines=batch.reward_baselines,
        turn_rewards=scores.turn_rewards,
        turn_mask=scores.turn_mask,
        global_reward=scores.global_reward,
        global_components=batch.global_rewards,
        global_component_names=batch.global_reward_names,
        global_present=batch.global_rewards_present,
        sum_pi_squared=batch.sum_pi_squared,
        rollout_is_weights=batch.rollout_is_weights,
        trace_lengths=batch.trace_lengths,
        outcome_tokens=cfg.outcome_tokens,
        kl_rewards=kl_rewards,
        reward_clip=cfg.reward_clip,
        logged_advantages=batch.logged_advantages,
        logged_advantage_mask=batch.logged_advantage_mask,
    )


def check_equal_groups(group_ids: torch.Tensor, profile: str) -> None:
    """Raise unless every prompt group has the same number of rows (OpenRLHF's ``n_samples_per_prompt``)."""
    sizes = torch.unique(torch.unique(group_ids, return_counts=True)[1])
    if sizes.numel() > 1:
        shown = ", ".join(str(int(s)) for s in sizes[:6])
        raise ValueError(
            f"profile {profile!r} needs prompt groups of one size (OpenRLHF's n_samples_per_prompt); this batch has "
            f"groups of {shown} rows. Choose another profile, or load only complete groups."
        )


def estimate(
    batch: TrajectoryBatch,
    cfg: CreditConfig,
    scores: TokenScores,
    rewards: Rewards,
    masks: Masks,
) -> EstimatorOutput:
    """Stage 3: the registered estimator ``cfg.estimator`` on the rewards, under ``cfg.stepwise_mode``
    (trajectory: the estimator itself; broadcast / per_step: ``engine.rllm``)."""
    est = get_estimator(cfg.estimator)
    if cfg.trainer.group_sizes == "equal":
        check_equal_groups(batch.group_ids, cfg.profile)
    inp = estimator_input(batch, cfg, scores, rewards, masks)
    if cfg.stepwise_mode == "broadcast":
        return run_broadcast(est, inp, cfg)
    if cfg.stepwise_mode == "per_step":
        return run_per_step(est, inp, cfg)
    return est.fn(inp, cfg)


# ------------------------------------------------------------------------------------------------ (4) loss weights
@dataclass(frozen=True)
class LossWeights:
    """scores [B]: Σ_t rewards (what outcome estimators see). verdicts [B]: rLLM's rejection verdict of each row's
    group; kept [B]: rows that stay after rejection sampling and the truncation mask. loss_mask [B, T]: the state
    mask on kept rows. agg_weights [B, T]: each token's weight in the aggregated loss (``engine.aggregation``);
    effective_weights = agg_weights · A on the loss mask. groups: the scores' group statistics. turn_sums
    [B, K, 3]: per turn, Σ of trained advantages, of rewards and of loss-mask tokens. sample_scores [B]:
    Σ_t returns · state mask (the dump score, docs/TUTORIAL.md §7.1 step 6). count_mask [B, T]: the mask the
    aggregation counted: loss_mask itself, or the mask before rollout rejection where the trainer counts a rejected
    token (bypass mode, ``rejected_tokens_counted``)."""

    scores: torch.Tensor
    verdicts: torch.Tensor
    kept: torch.Tensor
    loss_mask: torch.Tensor
    count_mask: torch.Tensor
    agg_weights: torch.Tensor
    effective_weights: torch.Tensor
    groups: GroupStats
    turn_sums: torch.Tensor
    sample_scores: torch.Tensor
    policy: PolicyWeights


@dataclass(frozen=True)
class PolicyWeights:
    """The policy-loss stage (``engine.policy``), [B, T] each: mismatch = log π_trainer − log π_rollout (0 without
    the rollout's log-probs); ratio: the ratio the loss clips (1 on the decoupled first mini-batch); pg_clipped:
    the loss cuts the token's policy gradient; is_weight: the rollout-correction weight (1 when off); rejected:
    dropped by rollout rejection sampling (out of the loss mask); grad_weight = −∂L/∂log π per token, aggregation,
    IS weight and clip included (positive: the token's probability goes up). Constant ones are expanded scalars."""

    mismatch: torch.Tensor
    ratio: torch.Tensor
    pg_clipped: torch.Tensor
    is_weight: torch.Tensor
    rejected: torch.Tensor
    grad_weight: torch.Tensor


def batch_rows(kept: torch.Tensor) -> torch.Tensor | None:
    """How many rows the trainer's batch holds when rows were dropped from it (``kept`` [B]: rLLM's rejection
    sampling and truncation filter); None when none was (every row counts)."""
    return None if bool(kept.all()) else kept.sum().clamp(min=1)


def aggregation_config(cfg: CreditConfig) -> CreditConfig:
    """``cfg`` with the loss aggregation its policy loss really uses: seq-mean-token-mean for the profile's
    ``seq_mean_losses`` (verl's SAPO, OpenRLHF's GSPO), whatever ``loss_agg_mode`` says."""
    return cfg.replace(loss_agg_mode="seq-mean-token-mean") if cfg.policy_loss in cfg.seq_mean_losses else cfg


def token_weights(
    loss_mask: torch.Tensor,
    cfg: CreditConfig,
    group_ids: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Each token's weight in the loss ``cfg.loss_agg_mode`` aggregates, on ``loss_mask``, with the profile's
    sum-norm and seq-mean conventions (``engine.aggregation.agg_weights``). [B, T]. ``group_ids`` [B]: the prompt
    groups (needed by prompt-mean-token-mean). ``rows``: how many rows the trainer's batch holds when some were
    dropped from it (rLLM's rejection sampling and truncation filter remove rows; a row the loss mask empties
    stays): under ``seq_mean_rows="all"`` the seq-mean modes divide by it instead of by every row of
    ``loss_mask``."""
    return agg_weights(
        loss_mask,
        cfg.loss_agg_mode,
        global_batch_size=rows if cfg.seq_mean_rows == "all" else None,
        loss_scale_factor=cfg.loss_scale_factor,
        sum_norm_divides_by_seqs=cfg.sum_norm_divides_by_seqs,
        seq_mean_rows=cfg.seq_mean_rows,
        group_ids=group_ids,
    )


def aggregation_weights(
    count_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    cfg: CreditConfig,
    group_ids: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Stage 4's aggregation weights [B, T]: ``token_weights`` of the mask the trainer counts (``count_mask``) under
    the aggregation its policy loss uses (``aggregation_config``), and 0 on a counted token the loss mask drops (a
    token rollout rejection drops and the trainer still counts: bypass mode, ``rejected_tokens_counted``).
    ``group_ids``, ``rows``: as in ``token_weights``."""
    w = token_weights(count_mask, aggregation_config(cfg), group_ids, rows)
    if count_mask is not loss_mask:  # a rejected token still counted: it gets no weight
        w = w * loss_mask.bool()
    return w


def weigh_loss(
    batch: TrajectoryBatch,
    cfg: CreditConfig,
    scores: TokenScores,
    rewards: Rewards,
    out: EstimatorOutput,
    masks: Masks,
) -> LossWeights:
    """Stage 4: which rows and tokens the loss keeps, how ``cfg.loss_agg_mode`` weighs each token, and the
    per-row and per-turn summaries of where the advantage lands."""
    row_scores = rewards.rewards.sum(-1)
    # the rejection rule reads the scores before KL (rLLM: Σ_t token_level_scores)
    raw_scores = row_scores if rewards.rewards is scores.scores else scores.scores.sum(-1)
    verdicts = rejection_verdicts(raw_scores, batch.group_ids)
    kept = torch.ones_like(row_scores, dtype=torch.bool)
    if cfg.rejection_sample:
        kept = verdicts == SOLVE_PARTIAL
    if cfg.mask_truncated_samples:
        kept = kept & ~batch.truncated
    rows = batch_rows(kept)
    loss_mask = masks.state if rows is None else masks.state * kept[:, None]  # no [B, T] copy when all kept
    if cfg.zero_advantage_tokens == "dropped":  # prime-rl: a token with advantage exactly 0 trains nothing
        loss_mask = loss_mask * (out.advantages != 0)
    correction = masks.correction  # computed before the advantages (verl's decoupled mode), else here
    if correction is None and (cfg.rollout_is is not None or cfg.rollout_rs):
        correction = _correction(batch, cfg, loss_mask)
    count_mask = loss_mask
    if correction is not None and correction.keep is not None:  # verl swaps in the rejection-masked response mask
        loss_mask = loss_mask * correction.keep
        # bypass mode, and trainers that zero a rejected token's loss after fixing the normaliser (SkyRL, OpenRLHF):
        # the token count stays the original mask's; verl's SAPO, OpenRLHF's GSPO count the loss mask
        counted = cfg.policy_ratio_base == "rollout" or cfg.rejected_tokens_counted
        if not counted or cfg.policy_loss in cfg.seq_mean_losses:
            count_mask = loss_mask
    w = aggregation_weights(count_mask, loss_mask, cfg, batch.group_ids, rows)
    groups = group_stats(row_scores, batch.group_ids, ddof=cfg.std_ddof)
    trained_adv = torch.where(loss_mask.bool(), out.advantages, 0.0)
    turn_sums = batch.turn_segments.sums(trained_adv, rewards.rewards, loss_mask)  # (B, K, 3)
    effective = trained_adv.mul_(w)  # w · A in place: no second [B, T] temporary (peak memory)
    sample_scores = by_row_blocks(lambda r, m: (r * m).sum(-1), out.returns, masks.state)  # no [B, T] product
    policy = weigh_policy(
        batch, cfg, out.advantages, loss_mask, w, effective, correction, count_mask=count_mask, rows=rows
    )
    return LossWeights(
        row_scores, verdicts, kept, loss_mask, count_mask, w, effective, groups, turn_sums, sample_scores, policy
    )


def _constant(like: torch.Tensor, value, dtype=None) -> torch.Tensor:
    return torch.full((), value, dtype=dtype or like.dtype, device=like.device).expand_as(like)


def weigh_policy(
    batch: TrajectoryBatch,
    cfg: CreditConfig,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    agg: torch.Tensor,
    effective: torch.Tensor,
    correction,
    shortcut: bool = True,
    count_mask: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> PolicyWeights:
    """Stage 4's policy loss (``engine.policy``): π_θ is the trainer's log-probs (the first mini-batch of the
    update), π_old the trainer's own (decoupled) or the rollout engine's (``policy_ratio_base="rollout"``, verl's
    bypass mode, where the IS weights are not applied). Without log-probs the ratio is 1. ``shortcut``: where
    ``engine.policy.unit_at_ratio_one`` says the loss leaves w · A as it is, hand back the effective weights
    themselves (no [B, T] work; a test checks it against the full computation). ``agg``: the aggregation weights
    (seq-mean-token-mean for the profile's ``seq_mean_losses``, whatever the mode). ``count_mask`` (default
    ``loss_mask``) and ``rows``: the mask and the row count of a KL loss term aggregated on its own
    (``kl_loss_agg``)."""
    trainer, rollout = batch.old_log_probs, batch.rollout_log_probs
    bypass = cfg.policy_ratio_base == "rollout"
    if bypass and (trainer is None or rollout is None):
        raise ValueError("policy_ratio_base='rollout' (bypass mode) needs old_log_probs and rollout_log_probs")
    mismatch = correction.mismatch if correction is not None else None
    if mismatch is None and trainer is not None and rollout is not None:
        mismatch = trainer - rollout
    is_w = correction.weights if correction is not None and not bypass else None
    rejected = _constant(loss_mask, False, torch.bool)
    if correction is not None and correction.keep is not None:
        rejected = batch.action_mask.bool() & ~correction.keep
    zeros = _constant(loss_mask, 0.0)
    if shortcut and not bypass and is_w is None and unit_at_ratio_one(cfg):  # grad = w · A: the effective weights
        one = _constant(loss_mask, 1.0)
        no = _constant(loss_mask, False, torch.bool)
        return PolicyWeights(mismatch if mismatch is not None else zeros, one, no, one, rejected, effective)
    lp = trainer if trainer is not None else torch.zeros_like(loss_mask)
    old = rollout if bypass else lp
    pg: PolicyGradient = policy_gradient(
        lp, old, advantages, loss_mask, cfg, is_weights=is_w, agg=agg, rollout_log_prob=rollout,
        ref_log_prob=batch.ref_log_probs, kl_mask=count_mask, rows=rows,
    )  # fmt: skip
    grad = -pg.total(agg, is_w, loss_mask)
    return PolicyWeights(
        mismatch if mismatch is not None else zeros,
        pg.ratio if bypass else _constant(loss_mask, 1.0),  # π_θ = π_old = the trainer's: 1 (up to exp(0))
        pg.clipped & loss_mask.bool(),
        is_w if is_w is not None else _constant(loss_mask, 1.0),
        rejected,
        grad,
    )
