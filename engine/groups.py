"""Per-group statistics of per-row scalars, vectorized with ``index_add`` (verl ``group_mean_std`` style).

Groups are dense ids 0..G−1 (``dense_group_ids``). Conventions are arguments, never literals:
``ddof`` (1 = verl's unbiased ``torch.std``, 0 = rLLM's ``np.std``) and what a singleton group gets.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def dense_group_ids(group_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Any integer ids → 0..G−1 (sorted order of the distinct ids) and G."""
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    return inv, int(uniq.numel())


@dataclass(frozen=True)
class GroupStats:
    """Per-row views of group statistics, each [B]: mean, std, size, and the dense group index."""

    mean: torch.Tensor
    std: torch.Tensor
    size: torch.Tensor
    index: torch.Tensor


def group_stats(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    ddof: int = 1,
    singleton_mean: float | None = 0.0,
    singleton_std: float = 1.0,
    weights: torch.Tensor | None = None,
    grid: bool = False,
) -> GroupStats:
    """Group mean and std of ``scores`` [B] broadcast back to rows.

    mean_g = Σ w s / Σ w (w = 1 unless ``weights``); var_g = Σ (s − mean)² / (n − ddof) (unweighted).
    A singleton group (n = 1) gets mean = ``singleton_mean`` (None keeps its own score) and std = ``singleton_std``
    (verl: μ = 0, σ = 1, so its advantage is its raw score).

    ``grid``: the groups are all the same size (the caller checked), and the statistics are taken as OpenRLHF
    takes them, ``mean(-1)`` and ``std(-1)`` of the scores laid out as a [G, n] tensor; the same numbers up to
    rounding, bit for bit OpenRLHF's (a 1-ulp tie is amplified by its ε = 1e-9).
    """
    idx, G = dense_group_ids(group_ids)
    if grid and weights is None:
        return _grid_stats(scores, idx, G, ddof, singleton_mean, singleton_std)
    dt = scores.dtype
    ones = torch.ones_like(scores)
    size = torch.zeros(G, dtype=dt, device=scores.device).index_add_(0, idx, ones)
    w = ones if weights is None else weights.to(dt)
    wsum = torch.zeros(G, dtype=dt, device=scores.device).index_add_(0, idx, w)
    ssum = torch.zeros(G, dtype=dt, device=scores.device).index_add_(0, idx, w * scores)
    mean = ssum / wsum
    centred = scores - mean[idx]
    sq = torch.zeros(G, dtype=dt, device=scores.device).index_add_(0, idx, centred * centred)
    var = sq / (size - ddof).clamp(min=1)
    std = var.sqrt()
    single = size == 1
    if singleton_mean is not None:
        mean = torch.where(single, torch.full_like(mean, singleton_mean), mean)
    std = torch.where(single, torch.full_like(std, singleton_std), std)
    return GroupStats(mean=mean[idx], std=std[idx], size=size[idx], index=idx)


def _grid_stats(scores, idx, G, ddof, singleton_mean, singleton_std) -> GroupStats:
    order = torch.argsort(idx, stable=True)
    n = scores.numel() // max(G, 1)
    table = scores[order].reshape(G, n)  # row g: group g's scores in batch order
    mean = table.mean(-1)
    std = table.std(-1, correction=ddof) if n > ddof else torch.full_like(mean, torch.nan)
    size = torch.full_like(mean, float(n))
    if n == 1:
        if singleton_mean is not None:
            mean = torch.full_like(mean, singleton_mean)
        std = torch.full_like(std, singleton_std)
    return GroupStats(mean=mean[idx], std=std[idx], size=size[idx], index=idx)
