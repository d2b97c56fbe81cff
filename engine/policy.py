"""The policy-loss stage: the gradient each token actually gets, after the advantage (verl 0.9.1, CONVENTIONS.md §14).

Per token, with ρ_t = π_θ/π_old (``log_prob`` − ``old_log_prob``, clamped to ±20), A_t the advantage, w_t the rollout
correction weight and a_t the aggregation weight (``engine.aggregation``), the loss's gradient with respect to
log π_θ is ∂L/∂log π_t = a_t · w_t · g_t; ``grad_weight`` = −∂L/∂log π_t (positive: the token's probability goes up).

* ``vanilla`` (PPO clip, clip-higher, dual clip; ``core_algos.compute_policy_loss_vanilla``): g = −A·ρ where the
  unclipped term is the one taken — A > 0 and ρ ≤ 1 + ε_high, or A < 0 and 1 − ε_low ≤ ρ ≤ c (dual clip) — else 0.
* ``gspo``: the ratio is the row's s_i = exp(mean_t log ρ_t) (capped at e^10), clipped the same way (no dual clip);
  each token's own log-prob carries it (g = −A·s_i), nothing is spread over the row.
* ``cispo``: g = −clip(ρ, 1 − ε_low, 1 + ε_high)·A, the clipped ratio a constant: no token loses its gradient.
* ``sapo``: g = −4·A·σ(x)(1 − σ(x))·ρ with x = τ(ρ − 1), τ = τ_pos if A > 0 else τ_neg; aggregated
  seq-mean-token-mean whatever ``loss_agg_mode`` says.
* ``geo_mean``: the row's geometric-mean ratio of log-ratios clipped in log space, times the row's mean advantage,
  averaged over rows: g_t = −Ā_i·R_i·W_i·1[log ρ_t unclipped]/((n_i + 1e-8)·B).
* ``gpg``: g = −A.

Rollout correction (``rollout_corr_helper``), from log π_old − log π_rollout (the train/inference mismatch, ±20):
``rollout_is`` token (w = e^δ) or sequence (w = e^{Σδ}), truncated at the threshold (TIS) or, with a lower bound,
set to 0 outside [lo, hi] (IcePop); ``rollout_rs`` rejection options drop tokens or whole rows whose k1/k2/k3
divergence is out of bounds. ``policy_ratio_base="rollout"`` is verl's bypass mode (PPO clip against the rollout
policy itself: ρ = π_trainer/π_rollout; the rejection mask applies, the IS weights do not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.masked import masked_mean, masked_sum

SAFETY = 20.0  # verl's SAFETY_BOUND on log-ratios before exp
POLICY_LOSSES = ("vanilla", "gspo", "cispo", "sapo", "geo_mean", "gpg")
RS_OPTIONS = tuple(
    f"{level}_{k}"
    for level, ks in (("token", "k1 k2 k3"), ("seq_sum", "k1 k2 k3"), ("seq_mean", "k1 k2 k3"), ("seq_max", "k2 k3"))
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
        if lower is None:
            weights = raw.clamp(max=upper)
        else:
            weights = torch.where((raw >= lower) & (raw <= upper), raw, 0.0)
        if cfg.rollout_is_batch_normalize:
            if cfg.rollout_is == "token":
                mean = masked_mean(weights, mask)
            else:
                rows = (mask.sum(-1) > 0).to(weights.dtype)
                mean = (masked_mean(weights, mask, dim=-1) * rows).sum() / rows.sum().clamp(min=1e-8)
            if mean > 1e-8:
                weights = weights / mean
    if cfg.rollout_rs:
        keep = _rejection_keep(delta, mask, cfg.rollout_rs, cfg.rollout_rs_threshold)
    return Correction(delta, weights, keep)


def _rejection_keep(delta, mask, options: tuple[str, ...], specs: tuple[str, ...]) -> torch.Tensor:
    if not specs:
        raise ValueError("rollout_rs needs rollout_rs_threshold (verl raises without one)")
    if len(specs) not in (1, len(options)):
        raise ValueError(f"rollout_rs_threshold: one threshold, or one per option ({len(options)})")
    specs = specs * len(options) if len(specs) == 1 else specs
    d = delta.clamp(-SAFETY, SAFETY)
    stats = {"k1": -d, "k2": 0.5 * d.square(), "k3": torch.exp(d) - 1.0 - d}
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
        keep = keep & ok.expand_as(keep)
    return keep


@dataclass(frozen=True)
class PolicyGradient:
    """ratio [B, T]: the ratio the loss clips (GSPO: the row's sequence ratio); clipped [B, T] bool: the policy
    gradient is cut at this token; grad [B, T]: ∂loss_t/∂log π_t before aggregation and IS weights (geo_mean:
    after, its own row mean); aggregated: whether ``grad`` already holds the aggregation."""

    ratio: torch.Tensor
    clipped: torch.Tensor
    grad: torch.Tensor
    aggregated: bool = False


def policy_gradient(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg,
    is_weights: torch.Tensor | None = None,
) -> PolicyGradient:
    """The per-token derivative of ``cfg.policy_loss``'s token loss with respect to log π (see the module doc)."""
    A = advantages
    lo, hi = cfg.clip_ratio_low, cfg.clip_ratio_high
    log_ratio = log_prob - old_log_prob
    loss = cfg.policy_loss
    if loss in ("vanilla", "cispo", "sapo"):
        inside = log_ratio.abs() <= SAFETY  # clamp(±20): no gradient beyond
        ratio = torch.exp(log_ratio.clamp(-SAFETY, SAFETY))
        if loss == "cispo":
            clipped_ratio = ratio.clamp(1 - lo, 1 + hi)
            return PolicyGradient(ratio, clipped_ratio != ratio, -clipped_ratio * A)
        if loss == "sapo":
            tau = torch.where(A > 0, cfg.tau_pos, cfg.tau_neg)
            sig = torch.sigmoid(tau * (ratio - 1.0))
            return PolicyGradient(ratio, torch.zeros_like(inside), -4.0 * A * sig * (1 - sig) * ratio * inside)
        active = ((A > 0) & (ratio <= 1 + hi)) | ((A < 0) & (ratio >= 1 - lo) & (ratio <= cfg.clip_ratio_c))
        active = active & inside
        return PolicyGradient(ratio, ~active & (A != 0), torch.where(active, -A * ratio, 0.0))
    if loss == "gspo":
        n = mask.sum(-1).clamp(min=1)
        seq = (log_ratio * mask).sum(-1) / n
        ratio = torch.exp(seq.clamp(max=10.0))[:, None].expand_as(A)
        active = ((A > 0) & (ratio <= 1 + hi)) | ((A < 0) & (ratio >= 1 - lo))
        active = active & (seq < 10.0)[:, None]
        return PolicyGradient(ratio, ~active & (A != 0), torch.where(active, -A * ratio, 0.0))
    if loss == "gpg":
        return PolicyGradient(torch.ones_like(A), torch.zeros_like(A, dtype=torch.bool), -A)
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
