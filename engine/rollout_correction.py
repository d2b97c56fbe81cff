"""Rollout correction (verl ``rollout_corr_helper``; docs/conventions/policy-stage.md §14): the IS weights and the
rejection mask from the train/inference mismatch δ = log π_old − log π_rollout (clamped to ±20).

``rollout_is`` token (w = e^δ) or sequence (w = e^{Σδ}), truncated at the threshold (TIS) or, with a lower bound,
set to 0 outside [lo, hi] (IcePop); ``rollout_rs`` rejection options drop tokens or whole rows whose k1/k2/k3
divergence is out of bounds. ``rollout_is_mode`` truncates into or masks outside the threshold whatever its form
(TRL, OpenRLHF); the ``bkl`` / ``tv`` rejection statistics are OpenRLHF's gates, ``seq_all_k1`` SkyRL's
outlier-token mask. Bypass mode (``policy_ratio_base="rollout"``) is in ``engine.policy``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.masked import masked_mean, masked_sum

SAFETY = 20.0  # verl's SAFETY_BOUND on log-ratios before exp
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
