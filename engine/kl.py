"""KL estimators and the in-reward KL penalty (verl ``kl_penalty``, ``apply_kl_penalty``;
docs/conventions/verl.md §1.4).

d = logprob − ref_logprob.  k1/kl: d;  abs: |d|;  k2/mse: ½d²;  k3/low_var_kl: x = clamp(−d, ±20),
clamp(eˣ − x − 1, ±10) (Schulman's unbiased low-variance estimator).  ``name+``: the value of ``name`` with the
gradient of k2 (straight-through), accepted by verl ≥ PR #6058 only. ``clamp`` says which estimators are clamped:
``"k3"`` (verl: low_var_kl only, as above), ``"all"`` (OpenRLHF ``compute_approx_kl``: every estimator's value to
[−10, 10]) or ``"none"`` (TRL's k3, eˣ − x − 1 with x = ref − logprob, no clamp at all).
In-reward: rewards = scores − β · kl · m, β from a fixed or adaptive controller (Ziegler et al. 2019).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.masked import masked_mean

KL_NAMES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


def check_kl_penalty(kind: str, allow_plus: bool = True) -> None:
    """Raise what ``kl_penalty`` raises for ``kind`` (verl's NotImplementedError), without computing anything."""
    if kind.endswith("+"):
        if not allow_plus:
            raise NotImplementedError(f"kl_penalty {kind!r}: '+' variants are not supported by this profile")
        return check_kl_penalty(kind[:-1])
    if kind == "full":
        raise NotImplementedError("kl_penalty 'full' needs full-vocabulary log-probs (verl raises too)")
    if kind not in KL_NAMES:
        raise NotImplementedError(f"unknown kl_penalty {kind!r}; choose from {list(KL_NAMES)} or their '+' variants")


def kl_penalty(
    logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str, allow_plus: bool = True, clamp: str = "k3"
) -> torch.Tensor:
    """Per-token KL estimate, same shape as the inputs; ``clamp``: "k3" (k3's own clamps), "all" (every estimator
    clamped to ±10), "none" (k3 unclamped, TRL)."""
    check_kl_penalty(kind, allow_plus)
    if clamp == "all" and not kind.endswith("+"):
        return kl_penalty(logprob, ref_logprob, kind).clamp(min=-10, max=10)
    d = logprob - ref_logprob
    if kind.endswith("+"):  # the value of the estimator, the gradient of k2
        k2 = 0.5 * d.square()
        return k2 - k2.detach() + kl_penalty(logprob, ref_logprob, kind[:-1], clamp=clamp).detach()
    if kind in ("kl", "k1"):
        return d
    if kind == "abs":
        return d.abs()
    if kind in ("mse", "k2"):
        return 0.5 * d.square()
    if clamp == "none":  # TRL: exp(ref - lp) - (ref - lp) - 1
        return torch.exp(-d) - (-d) - 1
    x = torch.clamp(-d, min=-20, max=20)  # low_var_kl, k3
    return torch.clamp(torch.exp(x) - x - 1, min=-10, max=10)


@dataclass(frozen=True)
class KLPenalty:
    """token_level_rewards [B, T]; kl [B, T] (masked); current_kl (batch metric); beta used; beta after update."""

    token_level_rewards: torch.Tensor
    kl: torch.Tensor
    current_kl: float
    beta: float
    beta_next: float


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    old_log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    mask: torch.Tensor,
    kind: str,
    beta: float,
    ctrl: str = "fixed",
    target: float = 0.1,
    horizon: float = 10000.0,
    allow_plus: bool = True,
    clamp: str = "k3",
) -> KLPenalty:
    """rewards = scores − β·kl·m; current_kl = mean over rows of the row's masked mean KL; then the controller
    update β ← β·(1 + clip(current_kl/target − 1, ±0.2)·B/horizon) when adaptive."""
    kld = kl_penalty(old_log_probs, ref_log_probs, kind, allow_plus, clamp) * mask
    rewards = token_level_scores - beta * kld
    current = float(masked_mean(kld, mask, dim=-1).mean())
    beta_next = beta
    if ctrl == "adaptive":
        err = max(min(current / target - 1.0, 0.2), -0.2)
        beta_next = beta * (1.0 + err * token_level_scores.shape[0] / horizon)
    return KLPenalty(rewards, kld, current, beta, beta_next)
