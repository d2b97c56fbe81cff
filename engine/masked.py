"""Masked reductions, as verl's ``verl.utils.torch_functional`` defines them (docs/conventions/verl.md §1.2).

Masks are float 0/1 tensors of the same shape as the values. Values outside the mask are neutralised with
``where`` first, so NaN or junk on padding never leaks into a sum.
"""

from __future__ import annotations

import torch


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Σ where(mask, x, 0) · mask over ``dim`` (all elements when None)."""
    v = torch.where(mask.bool(), x, 0.0)
    v = v.mul_(mask) if torch.result_type(v, mask) == v.dtype else v * mask  # in place: one [B, T] copy fewer
    return v.sum() if dim is None else v.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """masked_sum / (Σ mask + 1e-8): a fully masked row gives 0, not NaN (verl convention)."""
    n = mask.sum() if dim is None else mask.sum(dim=dim)
    return masked_sum(x, mask, dim) / (n + 1e-8)


def masked_var(
    x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True, mean: torch.Tensor | None = None
) -> torch.Tensor:
    """Variance over every masked element of the whole tensor; ×n/(n−1) when unbiased. ``mean``: the caller's
    ``masked_mean(x, mask)`` when it has it (the same number; a [B, T] pass fewer).

    Raises ``ValueError`` when Σmask is 0, or 1 with ``unbiased`` (verl raises in both cases).
    """
    if mean is None:
        mean = masked_mean(x, mask)
    centred = x - mean
    var = masked_mean(centred.mul_(centred), mask)  # squared in place: one [B, T] temporary fewer
    n = mask.sum()
    if unbiased:
        if n == 0:
            raise ValueError("masked_var: the mask is empty (no valid token in the batch)")
        if n == 1:
            raise ValueError("masked_var: only one valid token in the batch; the unbiased variance is undefined")
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """(x − μ) · rsqrt(σ² + 1e-8), μ and σ² over all masked elements of the whole batch (token-weighted).

    Applied to every position, masked ones included: callers that need zeros there multiply by the mask.
    """
    mean = masked_mean(x, mask)
    var = masked_var(x, mask, mean=mean)
    whitened = (x - mean) * torch.rsqrt(var + 1e-8)
    return whitened if shift_mean else whitened + mean


def whiten(x: torch.Tensor, mask: torch.Tensor, style: str = "verl", divide_by_std: bool = True) -> torch.Tensor:
    """Batch whitening of ``x`` over ``mask`` (token-weighted), every position transformed, none re-masked.

    ``style="verl"``: ``masked_whiten`` (unbiased variance, rsqrt(σ² + 1e-8)). ``"openrlhf"`` (OpenRLHF
    ``compute_advantages_and_returns``): μ = Σ x·m / Σ m, σ² = Σ (x − μ)²·m / Σ m (biased), rsqrt(max(σ², 1e-8)).
    ``divide_by_std=False`` only centres (OpenRLHF ``--no_std_norm``)."""
    if style == "verl":
        return masked_whiten(x, mask) if divide_by_std else x - masked_mean(x, mask)
    if style != "openrlhf":
        raise ValueError(f"whitening style {style!r} is not one of ['verl', 'openrlhf']")
    n = mask.sum()
    mean = (x * mask).sum() / n
    centred = x - mean
    if not divide_by_std:
        return centred
    var = (centred.square() * mask).sum() / n
    return centred * var.clamp(min=1e-8).rsqrt()
