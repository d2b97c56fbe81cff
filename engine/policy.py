"""The policy-loss stage: the gradient each token actually gets, after the advantage (verl 0.9.1, CONVENTIONS.md §14).

Per token, with ρ_t = π_θ/π_old (``log_prob`` − ``old_log_prob``, clamped to ±20), A_t the advantage, w_t the rollout
correction weight and a_t the aggregation weight (``engine.aggregation``), the loss's gradient with respect to
log π_θ is ∂L/∂log π_t = a_t · w_t · g_t; ``grad_weight`` = −∂L/∂log π_t (positive: the token's probability goes up).

* ``vanilla`` (PPO clip, clip-higher, dual clip; ``core_algos.compute_policy_loss_vanilla``): g = −A·ρ where the
  unclipped term is the one taken — A > 0 and ρ ≤ 1 + ε_high, or A < 0 and 1 − ε_low ≤ ρ ≤ c (dual clip) — else 0;
  where the two values a trainer's max or min compares are exactly equal, autograd gives each half the gradient
  (``_clip_share``): g = −A·ρ/2 at ρ = c with A < 0, and past 1 + ε_high where A·ρ and A·(1 + ε_high) round alike.
* ``gspo``: the ratio is the row's s_i = exp(mean_t log ρ_t) (capped at e^10, the cap passing the gradient at 10
  itself), clipped the same way (no dual clip); each token's own log-prob carries it (g = −A·s_i), nothing is
  spread over the row.
* ``cispo``: g = −clip(ρ, 1 − ε_low, 1 + ε_high)·A, the clipped ratio a constant: no token loses its gradient.
* ``sapo``: g = −4·A·σ(x)(1 − σ(x))·ρ with x = τ(ρ − 1), τ = τ_pos if A > 0 else τ_neg; aggregated
  seq-mean-token-mean whatever ``loss_agg_mode`` says.
* ``geo_mean``: the row's geometric-mean ratio of log-ratios clipped in log space, times the row's mean advantage,
  averaged over rows: g_t = −Ā_i·R_i·W_i·1[log ρ_t unclipped]/((n_i + 1e-8)·B).
* ``gpg``: g = −A.
* ``dppo_tv`` / ``dppo_kl`` / ``ipo`` (prime-rl, SkyRL): g = −A·ρ where the sampled token's probability stayed in the
  trust region (Δp = π_θ − π_old, or its binary KL; ``_trust_region``), else 0.
* ``masked_is`` (SkyRL rollout_is): g = −A·ρ inside (1 − ε_low, 1 + ε_high), else 0. ``vespo`` (TRL): g = −φ_i·A with
  the row's gamma weight φ(w).
* ``kl_cov`` (KL-Cov, "The Entropy Mechanism of RL for Reasoning LMs"; verl, SkyRL): g = −A·ρ (ρ not clamped)
  + ``ppo_kl_coef``·sign(log ρ) on the batch's top-k tokens by covariance (``kl_cov_tokens``), the derivative of
  its penalty ``ppo_kl_coef``·|log ρ| (0 at ρ = 1, as torch's ``abs``).

Where the trainers differ from verl (CONVENTIONS.md §14), the profile's conventions say: ``gspo_gradient="row"``
(OpenRLHF, TRL: s_i uncapped and differentiated through the row, its aggregated gradient spread over the row),
``cispo_clip="epsilon_high"`` (TRL: min(ρ, ε_high)), ``dual_clip_form="ratio_cap"`` (TRL's two-sided δ caps ρ inside
the PPO min: the whole gradient at ρ = δ, where min(−A·c, loss) gives half), ``reduction_on_advantages`` (SkyRL:
kl_cov's covariance of the reduction-scaled advantage, its penalty outside the reduction), ``seq_mean_losses`` (which
losses aggregate seq-mean-token-mean whatever ``loss_agg_mode`` says) and ``rejected_tokens_counted``
(``engine.stages.weigh_loss``).
A is scaled by ``adv_tau``; penalties outside the IS weights: ``kl_tau``·(log ρ)² and ``kl_loss_coef``·KL(π_θ‖π_ref),
the latter aggregated with the loss or on its own, on the loss mask before rejection, whatever ``loss_agg_mode``
says (``kl_loss_weights``): ``kl_loss_agg="seq-mean-token-mean"`` (SkyRL's worker) weight 1/(B·max(n_i, 1)),
``"token-mean"`` (OpenRLHF's actor) weight 1/N, N the batch's tokens; its estimator clamped to ±10 under
``kl_clamp="all"`` (OpenRLHF's ``compute_approx_kl``);
TRL's off-policy sequence mask (``off_policy_mask_threshold``) drops rows with A < 0 that drifted too far.

Rollout correction (``rollout_corr_helper``), from log π_old − log π_rollout (the train/inference mismatch, ±20):
``rollout_is`` token (w = e^δ) or sequence (w = e^{Σδ}), truncated at the threshold (TIS) or, with a lower bound,
set to 0 outside [lo, hi] (IcePop); ``rollout_rs`` rejection options drop tokens or whole rows whose k1/k2/k3
divergence is out of bounds. ``policy_ratio_base="rollout"`` is verl's bypass mode (PPO clip against the rollout
policy itself: ρ = π_trainer/π_rollout; the rejection mask applies, the IS weights do not). ``rollout_is_mode``
truncates into or masks outside the threshold whatever its form (TRL, OpenRLHF); the ``bkl`` / ``tv`` rejection
statistics are OpenRLHF's gates, ``seq_all_k1`` SkyRL's outlier-token mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.kl import kl_penalty
from engine.masked import masked_mean, masked_sum

SAFETY = 20.0  # verl's SAFETY_BOUND on log-ratios before exp
POLICY_LOSSES = (
    "vanilla", "gspo", "cispo", "sapo", "geo_mean", "gpg", "dppo_tv", "dppo_kl", "ipo", "masked_is", "vespo", "kl_cov"
)  # fmt: skip
RS_OPTIONS = tuple(
    f"{level}_{k}"
    for level, ks in (
        ("token", "k1 k2 k3 bkl tv"),
        ("seq_sum", "k1 k2 k3"),
        ("seq_mean", "k1 k2 k3 bkl tv"),
        ("seq_max", "k2 k3"),
        ("seq_all", "k1"),
    )
    for k in ks.split()
)


@dataclass(frozen=True)
class Correction:
    """weights [B, T] (None: no IS weighting) and keep [B, T] bool (None: nothing rejected), from the mismatch
    δ = log π_old − log π_rollout [B, T]."""

    mismatch: torch.Tensor
    weights: torch.Tensor | None
    keep: torch.Tensor | None


def _upper_lower(spec: str) -> tuple[float, float | None]:
    """verl's threshold spec: "U" or "L_U"."""
    lo, _, hi = spec.partition("_") if "_" in spec else (None, "", spec)
    upper, lower = float(hi), None if lo is None else float(lo)
    if not upper > 0 or (lower is not None and not 0 < lower <= upper):
        raise ValueError(f"rollout threshold {spec!r}: need 0 < lower <= upper")
    return upper, lower


def check_threshold(field: str, spec: str) -> None:
    """Raise a ValueError naming ``field`` unless ``spec`` is a threshold verl accepts ("U" or "L_U")."""
    try:
        _upper_lower(spec)
    except ValueError as e:
        raise ValueError(f"CreditConfig.{field}: {spec!r} is not 'U' or 'L_U' with 0 < L <= U ({e})") from None


def rollout_correction(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, mask: torch.Tensor, cfg
) -> Correction:
    """verl ``compute_rollout_correction_and_rejection_mask`` (decoupled mode): the IS weights and the rejection
    mask of ``cfg.rollout_is`` / ``cfg.rollout_rs`` on ``mask``."""
    delta = old_log_prob - rollout_log_prob
    weights = keep = None
    if cfg.rollout_is is not None:
        upper, lower = _upper_lower(cfg.rollout_is_threshold)
        if cfg.rollout_is == "token":
            raw = torch.exp(delta.clamp(-SAFETY, SAFETY))
        else:
            raw = torch.exp(masked_sum(delta, mask, dim=-1).clamp(-SAFETY, SAFETY))[:, None].expand_as(delta)
        raw = raw * mask
        mode = cfg.rollout_is_mode or ("truncate" if lower is None else "mask")
        if mode == "truncate":
            weights = raw.clamp(min=lower, max=upper)
        else:
            inside = raw <= upper if lower is None else (raw >= lower) & (raw <= upper)
            weights = torch.where(inside, raw, 0.0)
        if cfg.rollout_is_batch_normalize:
            if cfg.rollout_is == "token":
                mean = masked_mean(weights, mask)
            else:
                rows = (mask.sum(-1) > 0).to(weights.dtype)
                mean = (masked_mean(weights, mask, dim=-1) * rows).sum() / rows.sum().clamp(min=1e-8)
            if mean > 1e-8:
                weights = weights / mean
    if cfg.rollout_rs:
        keep = _rejection_keep(delta, mask, cfg.rollout_rs, cfg.rollout_rs_threshold, old_log_prob, rollout_log_prob)
    return Correction(delta, weights, keep)


def _rejection_keep(delta, mask, options: tuple[str, ...], specs: tuple[str, ...], old=None, rollout=None):
    if not specs:
        raise ValueError("rollout_rs needs rollout_rs_threshold (verl raises without one)")
    if len(specs) not in (1, len(options)):
        raise ValueError(f"rollout_rs_threshold: one threshold, or one per option ({len(options)})")
    specs = specs * len(options) if len(specs) == 1 else specs
    d = delta.clamp(-SAFETY, SAFETY)
    stats = {"k1": -d, "k2": 0.5 * d.square(), "k3": torch.exp(d) - 1.0 - d}
    if old is not None and rollout is not None:  # OpenRLHF's sampled-token divergences, p = π_rollout, q = π_old
        p, q = rollout.exp().clamp(1e-6, 1 - 1e-6), old.exp().clamp(1e-6, 1 - 1e-6)
        stats["bkl"] = p * (p / q).log() + (1 - p) * ((1 - p) / (1 - q)).log()
        stats["tv"] = (p - q).abs()
    keep = torch.ones_like(mask, dtype=torch.bool)
    for option, spec in zip(options, specs, strict=True):
        if option not in RS_OPTIONS:
            raise ValueError(f"rollout_rs option {option!r} is not one of {list(RS_OPTIONS)}")
        level, k = option.rsplit("_", 1)
        if k == "k1":
            upper, lower = _upper_lower(spec) if "_" in spec else (float(spec), 1.0 / float(spec))
            lo, hi = math.log(lower), math.log(upper)
        elif "_" in spec:
            raise ValueError(f"rollout_rs_threshold for {option!r} takes one upper bound, got {spec!r}")
        else:
            lo, hi = None, float(spec)
        stat = stats[k]
        if level == "seq_sum":
            stat = masked_sum(stat, mask, dim=-1)[:, None]
        elif level == "seq_mean":
            stat = masked_mean(stat, mask, dim=-1)[:, None]
        elif level == "seq_max":
            top = stat.masked_fill(~mask.bool(), -torch.inf).amax(-1)
            stat = torch.where(torch.isinf(top), 0.0, top)[:, None]
        ok = (stat <= hi) if lo is None else (stat >= lo) & (stat <= hi)
        if level == "seq_all":  # SkyRL's outlier-token mask: a row stays only if every token passes
            ok = (ok | ~mask.bool()).all(-1, keepdim=True)
        keep = keep & ok.expand_as(keep)
    return keep


@dataclass(frozen=True)
class PolicyGradient:
    """ratio [B, T]: the ratio the loss clips (GSPO: the row's sequence ratio); clipped [B, T] bool: the policy
    gradient is cut at this token; grad [B, T]: ∂loss_t/∂log π_t before aggregation and IS weights (geo_mean:
    after, its own row mean); aggregated: whether ``grad`` already holds the aggregation; penalty [B, T]: the
    penalty terms' gradient, aggregated with the loss; kl [B, T]: the KL loss term's gradient aggregated on its own
    (``kl_loss_agg`` other than ``"loss"``), on its own mask."""

    ratio: torch.Tensor
    clipped: torch.Tensor
    grad: torch.Tensor
    aggregated: bool = False
    penalty: torch.Tensor | None = None
    kl: torch.Tensor | None = None

    def weighted(self, agg: torch.Tensor, is_weights: torch.Tensor | None) -> torch.Tensor:
        """∂L/∂log π per token from the loss: the policy gradient times the aggregation and the IS weights (unless
        aggregated already), plus the penalty terms' gradient (``penalty``: KL terms, outside the IS weights) times
        the aggregation. Without ``kl``, which ``total`` adds."""
        grad = self.grad if self.aggregated else self.grad * agg * (is_weights if is_weights is not None else 1.0)
        return grad if self.penalty is None else grad + self.penalty * agg

    def total(self, agg: torch.Tensor, is_weights: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """∂L/∂log π per token [B, T]: ``weighted`` on ``mask`` (0 elsewhere), plus ``kl`` where it is set (its own
        mask: a token rollout rejection took out of ``mask`` keeps it)."""
        grad = torch.where(mask.bool(), self.weighted(agg, is_weights), 0.0)
        return grad if self.kl is None else grad + self.kl


def kl_loss_weights(
    kl_mask: torch.Tensor, rows: torch.Tensor | float | None = None, agg: str = "seq-mean-token-mean"
) -> torch.Tensor:
    """A KL loss term's own aggregation weights [B, T] on ``kl_mask`` (the loss mask before the off-policy masks).
    ``agg="seq-mean-token-mean"``, SkyRL's worker (``_forward_backward_micro``: ``masked_mean(kl, loss_mask,
    dim=-1).mean()`` per micro-batch times the micro-batch's share of the rows): w = m/(B·max(n_i, 1)), B every row
    of the mini-batch (a fully masked one too), or ``rows`` where rows were dropped from the trainer's batch.
    ``agg="token-mean"``, OpenRLHF's actor (``training_step``: ``aggregate_loss(kl, action_mask, **loss_batch_info)``,
    whose batch info carries no ``token_level_loss``): w = m/max(N, 1), N the mask's tokens over the batch."""
    if agg == "token-mean":
        return kl_mask / kl_mask.sum().clamp(min=1)
    n = kl_mask.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
    return kl_mask / (n * (rows if rows is not None else kl_mask.shape[0]))


def policy_gradient(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg,
    is_weights: torch.Tensor | None = None,
    agg: torch.Tensor | None = None,
    rollout_log_prob: torch.Tensor | None = None,
    ref_log_prob: torch.Tensor | None = None,
    kl_mask: torch.Tensor | None = None,
    rows: torch.Tensor | float | None = None,
) -> PolicyGradient:
    """The per-token derivative of ``cfg.policy_loss``'s token loss with respect to log π (see the module doc).
    ``agg`` [B, T]: the aggregation weights, needed where the loss is a function of the whole row (GSPO with
    ``gspo_gradient="row"``, VESPO: the gradient comes back aggregated, IS weights included). ``rollout_log_prob``:
    what TRL's off-policy sequence mask compares π_θ with (``old_log_prob`` without it); ``ref_log_prob``: the
    reference policy of the KL loss term (``kl_loss_coef``). Then the off-policy mask and the penalties:
    ``kl_tau``·(log ρ)² (prime-rl) and ``kl_loss_coef``·KL(π_θ‖π_ref) (TRL β, ratio-weighted under
    ``kl_loss_ratio_weighted``; every estimator clamped to ±10 under ``kl_clamp="all"``), outside the IS weights.
    Under ``kl_loss_agg`` other than ``"loss"`` the KL term is aggregated here (``kl_loss_weights`` on ``kl_mask``,
    default ``mask``; ``rows``: the trainer's row count where rows were dropped) and comes back as ``kl``, not in
    ``penalty``."""
    pg = _policy_gradient(log_prob, old_log_prob, advantages, mask, cfg, is_weights, agg)
    grad, clipped, penalty = pg.grad, pg.clipped, None
    if cfg.off_policy_mask_threshold is not None:  # TRL OPSM: drop rows with A < 0 that drifted too far
        behaviour = rollout_log_prob if rollout_log_prob is not None else old_log_prob
        n = mask.sum(-1, keepdim=True).clamp(min=1)
        drift = ((behaviour - log_prob) * mask).sum(-1, keepdim=True) / n
        keep = (advantages >= 0) | (drift <= cfg.off_policy_mask_threshold)
        grad, clipped = grad * keep, clipped | (~keep & (advantages != 0))
    log_ratio = log_prob - old_log_prob
    if cfg.kl_tau and cfg.policy_loss in ("dppo_tv", "dppo_kl", "ipo"):  # prime-rl: + kl_tau·(log ρ)², every token
        penalty = 2.0 * cfg.kl_tau * log_ratio
    if cfg.kl_loss_coef:
        if ref_log_prob is None:
            raise ValueError("kl_loss_coef needs the reference policy's log-probs (ref_log_probs); the run lacks them")
        with torch.enable_grad():
            lp = log_prob.detach().requires_grad_(True)
            kl = kl_penalty(lp, ref_log_prob, cfg.kl_loss_type, clamp_all=cfg.kl_clamp == "all")
            if cfg.kl_loss_ratio_weighted:
                if cfg.policy_loss in ("gspo", "geo_mean", "vespo"):
                    raise ValueError("kl_loss_ratio_weighted weighs the KL by the token ratio: not with a row ratio")
                kl = kl * torch.exp(lp - old_log_prob)
            (dkl,) = torch.autograd.grad(kl.sum(), lp)
        term = cfg.kl_loss_coef * dkl
        if cfg.kl_loss_agg != "loss":  # SkyRL, OpenRLHF: the KL term's own aggregation, on its own mask
            own_mask = kl_mask if kl_mask is not None else mask
            weights = kl_loss_weights(own_mask, rows, cfg.kl_loss_agg)
            return PolicyGradient(pg.ratio, clipped, grad, pg.aggregated, penalty, term * weights)
        penalty = term if penalty is None else penalty + term
    return PolicyGradient(pg.ratio, clipped, grad, pg.aggregated, penalty)


def _policy_gradient(log_prob, old_log_prob, advantages, mask, cfg, is_weights, agg) -> PolicyGradient:
    A = advantages * cfg.adv_tau if cfg.adv_tau != 1.0 else advantages
    lo, hi = cfg.clip_ratio_low, cfg.clip_ratio_high
    c = cfg.clip_ratio_c if cfg.clip_ratio_c is not None else math.inf
    log_ratio = log_prob - old_log_prob
    loss = cfg.policy_loss
    if loss in ("vanilla", "cispo", "sapo", "dppo_tv", "dppo_kl", "ipo", "masked_is"):
        inside = log_ratio.abs() <= SAFETY  # clamp(±20): no gradient beyond
        ratio = torch.exp(log_ratio.clamp(-SAFETY, SAFETY))
        if loss == "cispo":
            if cfg.cispo_clip == "epsilon_high":  # TRL: the cap is ε_high itself, no lower bound
                clipped_ratio = ratio.clamp(max=hi)
            else:
                clipped_ratio = ratio.clamp(1 - lo, 1 + hi)
            return PolicyGradient(ratio, clipped_ratio != ratio, -clipped_ratio * A)
        if loss == "masked_is":  # SkyRL rollout_is: the ratio as a detached weight, 0 outside (1 − ε_low, 1 + ε_high)
            inside_band = (ratio > 1 - lo) & (ratio < 1 + hi)
            return PolicyGradient(ratio, ~inside_band, torch.where(inside_band, -A * ratio, 0.0))
        if loss == "sapo":
            tau = torch.where(A > 0, cfg.tau_pos, cfg.tau_neg)
            sig = torch.sigmoid(tau * (ratio - 1.0))
            return PolicyGradient(ratio, torch.zeros_like(inside), -4.0 * A * sig * (1 - sig) * ratio * inside)
        if loss in ("dppo_tv", "dppo_kl", "ipo"):
            active = _trust_region(log_prob, old_log_prob, A, lo, hi, loss) & inside
            return PolicyGradient(ratio, ~active & (A != 0), torch.where(active, -A * ratio, 0.0))
        share = _clip_share(A, ratio, inside, lo, hi, c, cfg.dual_clip_form)
        return PolicyGradient(ratio, (share == 0) & (A != 0), torch.where(share > 0, -A * ratio * share, 0.0))
    if loss == "gspo":
        if cfg.gspo_gradient == "row":
            return _gspo_row(log_ratio, A, mask, lo, hi, c, cfg.dual_clip_form, is_weights, agg)
        n = mask.sum(-1).clamp(min=1)
        seq = (log_ratio * mask).sum(-1) / n
        ratio = torch.exp(seq.clamp(max=10.0))[:, None].expand_as(A)
        # clamp(max=10) passes the gradient at 10 itself; no dual clip in verl's or SkyRL's GSPO
        share = _clip_share(A, ratio, (seq <= 10.0)[:, None], lo, hi, math.inf, cfg.dual_clip_form)
        return PolicyGradient(ratio, (share == 0) & (A != 0), torch.where(share > 0, -A * ratio * share, 0.0))
    if loss == "gpg":
        return PolicyGradient(torch.ones_like(A), torch.zeros_like(A, dtype=torch.bool), -A)
    if loss == "vespo":
        return _vespo(log_ratio, A, mask, cfg.vespo_params, is_weights, agg)
    if loss == "kl_cov":
        return _kl_cov(log_prob, log_ratio, A, mask, cfg, agg)
    if loss == "geo_mean":
        sgn = torch.sign(A)
        unclipped = ((sgn > 0) & (log_ratio <= hi)) | ((sgn < 0) & (log_ratio >= -lo))
        lr = torch.where(unclipped, log_ratio, torch.where(sgn > 0, hi, torch.where(sgn < 0, -lo, 0.0)))
        n = mask.sum(-1) + 1e-8
        R = torch.exp((lr * mask).sum(-1) / n)
        abar = (A * mask).sum(-1) / n
        W = torch.ones_like(R)
        if is_weights is not None:
            W = torch.exp((torch.log(is_weights + 1e-10) * mask).sum(-1) / n)
        grad = -(abar * R * W / n)[:, None] * mask * unclipped / A.shape[0]
        ratio = R[:, None].expand_as(A)
        return PolicyGradient(ratio, ~unclipped & (sgn != 0), grad, aggregated=True)
    raise ValueError(f"policy_loss {loss!r} is not one of {list(POLICY_LOSSES)}")


def _clip_share(A, ratio, passes, lo, hi, c, form) -> torch.Tensor:
    """The share w of −A·ρ's gradient a PPO-clipped token keeps (0, ½ or 1; ¼ where two ties coincide): autograd's
    derivative of the loss max(−A·ρ₁, −A·clip(ρ, 1 − ε_low, 1 + ε_high)) and, under ``form="min_loss"`` with A < 0,
    of min(−A·c, that loss), the dual clip a constant branch (verl, SkyRL, OpenRLHF); under ``form="ratio_cap"``
    ρ₁ = min(ρ, c) (TRL's two-sided δ, either sign of A), else ρ₁ = ρ. ``passes`` [B, T] bool: where ρ itself carries
    its gradient (the ±20 clamp on log ρ, GSPO's cap at e¹⁰). A clamp passes the gradient at its bounds;
    torch.maximum and torch.minimum give each of two equal values half of it, so where the compared values are
    exactly equal (ρ on a bound, or A·ρ and A·bound rounding to the same float) the token gets the mean of the two
    branches' shares: ½ at ρ = c under min_loss, whole at ρ = 1 + ε_high (both branches pass there)."""
    f = passes.to(ratio.dtype)
    r1, f1 = ratio, f
    if math.isfinite(c) and form == "ratio_cap":
        r1, f1 = ratio.clamp(max=c), f * (ratio <= c)
    pg1, pg2 = -A * r1, -A * ratio.clamp(1 - lo, 1 + hi)
    f2 = f * ((ratio >= 1 - lo) & (ratio <= 1 + hi))
    share = torch.where(pg1 > pg2, f1, torch.where(pg2 > pg1, f2, 0.5 * (f1 + f2)))
    if math.isfinite(c) and form == "min_loss":
        pg3 = torch.where(A < 0, -A * c, math.inf)  # the dual clip's branch, a constant
        loss = torch.maximum(pg1, pg2)
        share = torch.where(loss < pg3, share, torch.where(loss == pg3, 0.5 * share, 0.0))
    return share


def _trust_region(log_prob, old_log_prob, A, lo, hi, loss) -> torch.Tensor:
    """Where DPPO / IPO keep a token's policy gradient: the divergence between π_θ and π_old on the sampled token,
    Δp = π_θ − π_old, within the trust region (the mask is not differentiated).

    dppo_tv (DPPO-Binary-TV; prime-rl default_loss_fn, SkyRL binary_tv): drop A > 0 with Δp > ε_high and A < 0
    with −Δp > ε_low. dppo_kl (SkyRL binary_kl): drop A > 0, Δp > 0 and A < 0, Δp < 0 whose binary KL
    μ·log(μ/p) + (1 − μ)·log((1 − μ + 1e-8)/(1 − p + 1e-8)) exceeds ε_high / ε_low. ipo (prime-rl): drop
    |Δp| > ε_high whatever the sign of A."""
    p, mu = log_prob.exp(), old_log_prob.exp()
    dp = p - mu
    if loss == "ipo":
        return dp.abs() <= hi
    if loss == "dppo_tv":
        return ~(((A > 0) & (dp > hi)) | ((A < 0) & (-dp > lo)))
    eps = 1e-8
    bkl = mu * (old_log_prob - log_prob) + (1 - mu) * torch.log((1 - mu + eps) / (1 - p + eps))
    return ~(((A > 0) & (dp > 0) & (bkl > hi)) | ((A < 0) & (dp < 0) & (bkl > lo)))


def _vespo(log_ratio, A, mask, params, is_weights, agg) -> PolicyGradient:
    """TRL's VESPO: −sg(φ_i)·A·log π with the row's gamma weight φ(w) = e^λ·w^k·e^{−λw}, w = the row's product
    ratio Σ_t clamp(log ρ_t, ±20) (plus Σ_t log of the IS weight, clamped to [log 1e-8, 20]: the IS weight enters
    w, not the loss), log w clamped to [log 1e-8, 20]; (k, λ) = (k_pos, λ_pos) where A ≥ 0, else (k_neg, λ_neg)."""
    if agg is None:
        raise ValueError("vespo needs the aggregation weights")
    k_pos, lam_pos, k_neg, lam_neg = params
    floor = math.log(1e-8)
    log_w = (log_ratio.clamp(-SAFETY, SAFETY) * mask).sum(-1, keepdim=True)
    if is_weights is not None:
        log_w = log_w + (torch.log(is_weights).clamp(floor, SAFETY) * mask).sum(-1, keepdim=True)
    log_w = log_w.clamp(floor, SAFETY)
    nonneg = A >= 0
    k = torch.where(nonneg, k_pos, k_neg)
    lam = torch.where(nonneg, lam_pos, lam_neg).clamp(min=1e-4)
    phi = torch.exp(lam + k * log_w - lam * log_w.exp()).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    w = log_w.exp().expand_as(A)
    return PolicyGradient(w, torch.zeros_like(A, dtype=torch.bool), -phi * A * agg, aggregated=True)


def kl_cov_tokens(advantages: torch.Tensor, log_prob: torch.Tensor, mask: torch.Tensor, ratio: float) -> torch.Tensor:
    """[B, T] bool: the k = max(1, ⌊n·``ratio``⌋) tokens of ``mask`` (n of them) with the largest covariance term
    (A_t − Ā)(log π_t − mean log π), both means over those n tokens; none when n = 0. As verl's and SkyRL's
    ``compute_policy_loss_kl_cov``: the tokens flattened row-major, their means and ``torch.topk`` on the CPU, so
    that rounding and ties fall as there."""
    valid = mask > 0  # (B, T)
    picked = torch.zeros(valid.numel(), dtype=torch.bool)
    index = torch.nonzero(valid.reshape(-1).cpu(), as_tuple=True)[0]
    if index.numel():
        a = advantages[valid].detach().reshape(-1).cpu()
        lp = log_prob[valid].detach().reshape(-1).cpu()
        cov = (a - a.mean()) * (lp - lp.mean())
        k = max(1, int(len(cov) * ratio))
        picked[index[torch.topk(cov, k, largest=True).indices]] = True
    return picked.view(valid.shape).to(valid.device)


def _kl_cov(log_prob, log_ratio, A, mask, cfg, agg) -> PolicyGradient:
    """KL-Cov: the loss −A·ρ + ``ppo_kl_coef``·|log ρ|·1[token picked by ``kl_cov_tokens``], ρ = exp(log ρ) not
    clamped; ∂/∂log π = −A·ρ + ``ppo_kl_coef``·sign(log ρ) on the picked tokens. verl picks by the covariance of A
    and aggregates both terms (IS weights included); SkyRL (``reduction_on_advantages``) hands the loss the
    advantage already scaled by the reduction, Â = a·A: it picks by the covariance of Â and sums the loss, so the
    penalty is outside the aggregation (the gradient comes back aggregated)."""
    ratio = torch.exp(log_ratio)
    no_clip = torch.zeros_like(mask, dtype=torch.bool)
    if cfg.reduction_on_advantages:
        if agg is None:
            raise ValueError("kl_cov with reduction_on_advantages needs the aggregation weights")
        scaled = A * agg
        picked = kl_cov_tokens(scaled, log_prob, mask, cfg.kl_cov_ratio)
        grad = -scaled * ratio + cfg.ppo_kl_coef * torch.sign(log_ratio) * picked
        return PolicyGradient(ratio, no_clip, grad, aggregated=True)
    picked = kl_cov_tokens(A, log_prob, mask, cfg.kl_cov_ratio)
    return PolicyGradient(ratio, no_clip, -A * ratio + cfg.ppo_kl_coef * torch.sign(log_ratio) * picked)


def _gspo_row(log_ratio, A, mask, lo, hi, c, form, is_weights, agg) -> PolicyGradient:
    """GSPO with the sequence ratio s_i = exp(Σ_t m·log ρ_t / max(n_i, 1)) differentiated as a function of the
    row (OpenRLHF, TRL importance_sampling_level="sequence"): uncapped, clipped per token like PPO (``_clip_share``:
    the dual clip as ``form`` says), and the row's aggregated policy gradient Σ_t a_t·w_t·(−A_t·s_i)·share_t reaches
    every token of the row as that sum / n_i."""
    if agg is None:
        raise ValueError("gspo_gradient='row' needs the aggregation weights")
    n = mask.sum(-1).clamp(min=1)
    s = torch.exp((log_ratio * mask).sum(-1) / n)[:, None].expand_as(A)
    share = _clip_share(A, s, torch.ones_like(A, dtype=torch.bool), lo, hi, c, form)
    g = torch.where((share > 0) & (A != 0), -A * s * share, 0.0) * agg * mask  # s may overflow where clipped
    if is_weights is not None:
        g = g * is_weights
    grad = (g.sum(-1) / n)[:, None] * mask
    return PolicyGradient(s, (share == 0) & (A != 0), grad, aggregated=True)


def credit_by_entropy(
    entropy: torch.Tensor, grad_weight: torch.Tensor, mask: torch.Tensor, bins: int = 5
) -> list[dict[str, float]]:
    """The trained tokens (``mask``) cut into ``bins`` equal-count groups by their entropy, lowest first: per bin
    the entropy range, the token count, its share of the batch's Σ|grad_weight| and its mean grad_weight. Empty
    when no token is trained."""
    on = mask.bool()
    h, g = entropy[on].double(), grad_weight[on].double()
    if h.numel() == 0:
        return []
    order = torch.argsort(h, stable=True)
    total = float(g.abs().sum()) or 1.0
    out = []
    for part in torch.tensor_split(order, min(bins, h.numel())):
        out.append(
            {
                "entropy from": float(h[part].min()),
                "entropy to": float(h[part].max()),
                "tokens": int(part.numel()),
                "share of |gradient|": float(g[part].abs().sum()) / total,
                "mean gradient weight": float(g[part].mean()),
            }
        )
    return out


def unit_at_ratio_one(cfg) -> bool:
    """Whether ``cfg``'s policy loss, at ratio 1 (π_θ = π_old: the decoupled first mini-batch) and without IS
    weights, gives every token exactly −A times its aggregation weight, so that the gradient weight is the effective
    weight w · A itself. Declared here, beside the losses: a loss or option that changes the gradient at ratio 1
    must say so here (``tests/test_golden_policy_loss.py`` compares this shortcut with the full computation).
    kl_cov is unit there: its penalty |log ρ| has gradient sign(0) = 0 at ratio 1 (torch's ``abs``; verl's golden case
    at ratio 1 confirms it), whichever tokens it picks."""
    unit_cispo = cfg.cispo_clip == "one_plus" or cfg.clip_ratio_high >= 1.0  # min(1, ε_high) = 1
    return (
        (cfg.policy_loss in ("vanilla", "gspo", "gpg", "kl_cov") or (cfg.policy_loss == "cispo" and unit_cispo))
        and cfg.adv_tau == 1.0
        and cfg.kl_loss_coef == 0.0
        and cfg.off_policy_mask_threshold is None
        and cfg.policy_loss not in cfg.seq_mean_losses  # OpenRLHF's GSPO: not the mode's weights
    )
