"""The policy-loss stage: the gradient each token actually gets, after the advantage (verl 0.9.1,
docs/conventions/policy-stage.md §14).

Per token, with ρ_t = π_θ/π_old (``log_prob`` − ``old_log_prob``, clamped to ±``log_ratio_clamp``: 20 as verl, 10
under KG-R1, none under Search-R1), A_t the advantage, w_t the rollout correction weight and a_t the aggregation
weight (``engine.aggregation``), the loss's gradient with respect to log π_θ is ∂L/∂log π_t = a_t · w_t · g_t;
``grad_weight`` = −∂L/∂log π_t (positive: the token's probability goes up).

g_t is the registered policy loss's (``engine.policy_losses``: vanilla PPO clip, GSPO, CISPO, SAPO, GMPO, GPG,
DPPO, IPO, masked IS, VESPO, KL-Cov, each with its formula, the fields it reads and the trainer code it
reproduces); ``policy_gradient`` calls the one ``cfg.policy_loss`` names and adds what every loss shares:

* A is scaled by ``adv_tau`` first (prime-rl; 1 elsewhere);
* TRL's off-policy sequence mask (``off_policy_mask_threshold``) drops rows with A < 0 that drifted too far;
* penalties outside the IS weights: ``kl_tau``·(log ρ)² for the losses that read ``kl_tau`` (prime-rl's DPPO and
  IPO) and ``kl_loss_coef``·KL(π_θ‖π_ref), the latter aggregated with the loss or on its own, on the loss mask
  before rejection, whatever ``loss_agg_mode`` says (``kl_loss_weights``): ``kl_loss_agg="seq-mean-token-mean"``
  (SkyRL's worker) weight 1/(B·max(n_i, 1)), ``"token-mean"`` (OpenRLHF's actor) weight 1/N, N the batch's
  tokens; its estimator clamped per ``kl_clamp`` (OpenRLHF: every estimator to ±10; TRL: none), and weighted by
  the loss's own ratio under ``kl_loss_ratio_weighted`` (TRL's ``use_bias_correction_kl``, ``kl_ratio_level``).

Where the trainers differ from verl (docs/conventions/policy-stage.md §14), the profile's conventions say:
``gspo_gradient="row"`` (OpenRLHF, TRL: s_i uncapped and differentiated through the row, its aggregated gradient spread
over the row), ``cispo_clip="epsilon_high"`` (TRL: min(ρ, ε_high)), ``dual_clip_form="ratio_cap"`` (TRL's two-sided δ
caps ρ inside the PPO min: the whole gradient at ρ = δ, where min(−A·c, loss) gives half; ``"none"``: Search-R1's loss
has no dual clip), ``log_ratio_clamp`` (KG-R1 clamps log ρ at ±10, Search-R1 not at all), ``reduction_on_advantages``
(SkyRL: kl_cov's covariance of the reduction-scaled advantage, its penalty outside the reduction), ``seq_mean_losses``
(which losses aggregate seq-mean-token-mean whatever ``loss_agg_mode`` says) and ``rejected_tokens_counted``
(``engine.stages.weigh_loss``).
``policy_ratio_base="rollout"`` is verl's bypass mode (PPO clip against the rollout policy itself:
ρ = π_trainer/π_rollout; the rejection mask applies, the IS weights do not). The rollout correction itself is
``engine.rollout_correction``.
"""

from __future__ import annotations

import torch

from engine.kl import kl_penalty
from engine.policy_losses import (  # noqa: F401  (re-exported: the stage's callers import them from here)
    POLICY_LOSSES,
    LossInput,
    PolicyGradient,
    get_policy_loss,
    kl_cov_tokens,
)
from engine.rollout_correction import (  # noqa: F401  (re-exported)
    RS_OPTIONS,
    SAFETY,
    Correction,
    check_threshold,
    rollout_correction,
)


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
    ``penalty``; so does a KL term weighted by GSPO's sequence ratio (aggregated with ``agg``)."""
    loss = get_policy_loss(cfg.policy_loss)
    A = advantages * cfg.adv_tau if cfg.adv_tau != 1.0 else advantages
    pg = loss.fn(LossInput(log_prob, old_log_prob, A, mask, is_weights, agg), cfg)
    grad, clipped, penalty = pg.grad, pg.clipped, None
    if cfg.off_policy_mask_threshold is not None:  # TRL OPSM: drop rows with A < 0 that drifted too far
        behaviour = rollout_log_prob if rollout_log_prob is not None else old_log_prob
        n = mask.sum(-1, keepdim=True).clamp(min=1)
        drift = ((behaviour - log_prob) * mask).sum(-1, keepdim=True) / n
        keep = (advantages >= 0) | (drift <= cfg.off_policy_mask_threshold)
        grad, clipped = grad * keep, clipped | (~keep & (advantages != 0))
    if cfg.kl_tau and "kl_tau" in loss.reads:  # prime-rl: + kl_tau·(log ρ)², every token
        penalty = 2.0 * cfg.kl_tau * (log_prob - old_log_prob)
    if cfg.kl_loss_coef:
        if ref_log_prob is None:
            raise ValueError("kl_loss_coef needs the reference policy's log-probs (ref_log_probs); the run lacks them")
        own = cfg.kl_loss_agg != "loss"  # SkyRL, OpenRLHF: the KL term's own aggregation, on its own mask
        weights = kl_loss_weights(kl_mask if kl_mask is not None else mask, rows, cfg.kl_loss_agg) if own else agg
        level = kl_ratio_level(cfg) if cfg.kl_loss_ratio_weighted else None
        row_ratio = level == "sequence"
        if row_ratio and weights is None:
            raise ValueError("a KL term weighted by the sequence ratio needs the aggregation weights")
        term = cfg.kl_loss_coef * _kl_loss_gradient(
            log_prob, old_log_prob, ref_log_prob, mask, cfg, level, weights if row_ratio else None
        )
        if own or row_ratio:  # aggregated here: with its own weights, or through the row's ratio (TRL's GSPO)
            kl = term if row_ratio else term * weights
            return PolicyGradient(pg.ratio, clipped, grad, pg.aggregated, penalty, kl)
        penalty = term if penalty is None else penalty + term
    return PolicyGradient(pg.ratio, clipped, grad, pg.aggregated, penalty)


def kl_ratio_refusal(cfg) -> str | None:
    """Why no trainer weighs a KL term by ``cfg``'s loss's ratio (``kl_ratio_level``), or None where one does:
    geo_mean's ratio (verl), and a GSPO ratio carried by each token's own log-prob (``gspo_gradient="own_token"``,
    verl and SkyRL, which have no ratio-weighted KL). ``engine.config.rules`` refuses such a scheme when it is made."""
    level = get_policy_loss(cfg.policy_loss).kl_ratio
    if level is None:
        return (
            f"{cfg.policy_loss}'s ratio is not a per-token or per-row ratio a trainer weighs a KL term by (TRL's "
            f"use_bias_correction_kl weighs by its own loss's ratio)"
        )
    if level == "sequence" and cfg.gspo_gradient != "row":
        return (
            f"profile {cfg.profile!r}'s GSPO carries the sequence ratio on each token's own log-prob "
            f"(gspo_gradient='own_token'), and its trainer has no ratio-weighted KL; TRL's (profile 'trl', "
            f"gspo_gradient='row') weighs the KL by the row's sequence ratio"
        )
    return None


def kl_ratio_level(cfg) -> str:
    """The ratio TRL's ``use_bias_correction_kl`` (``kl_loss_ratio_weighted``) weighs the KL term with: the loss's
    own ``coef_1`` (its registration's ``kl_ratio``), "token" (π_θ/π_old per token: the token-level losses, VESPO at
    TRL's default token level) or "sequence" (GSPO: the row's s_i = exp(Σ_t m·log ρ_t / max(n_i, 1)),
    differentiated through the row). Raises where no trainer defines it (``kl_ratio_refusal``)."""
    if (why := kl_ratio_refusal(cfg)) is not None:
        raise ValueError(f"CreditConfig.kl_loss_ratio_weighted: {why}")
    return get_policy_loss(cfg.policy_loss).kl_ratio


def _kl_loss_gradient(log_prob, old_log_prob, ref_log_prob, mask, cfg, level, weights) -> torch.Tensor:
    """∂/∂log π of the KL term KL(π_θ‖π_ref) per token [B, T] (``kl_loss_type``, clamped per ``kl_clamp``), times
    the ratio ``level`` names (``kl_ratio_level``; None: not weighted). With ``weights`` [B, T] (the sequence ratio:
    the row's tokens are coupled through s_i), the gradient of Σ_t weights_t·KL_t·s_i, aggregated."""
    with torch.enable_grad():
        lp = log_prob.detach().requires_grad_(True)
        kl = kl_penalty(lp, ref_log_prob, cfg.kl_loss_type, clamp=cfg.kl_clamp)
        if level == "sequence":  # TRL: coef_1 = exp(Σ_t m·log ρ / max(n, 1)), (B, 1)
            n = mask.sum(-1, keepdim=True).clamp(min=1.0)
            kl = kl * torch.exp(((lp - old_log_prob) * mask).sum(-1, keepdim=True) / n)
        elif level == "token":
            kl = kl * torch.exp(lp - old_log_prob)
        total = kl.sum() if weights is None else (kl * weights).sum()
        (dkl,) = torch.autograd.grad(total, lp)
    return dkl


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
    weight w · A itself. The loss declares it (``unit_at_ratio_one`` in its registration); what every loss shares
    must leave it too: no ``adv_tau``, no KL term, no off-policy mask, and not a loss the profile aggregates
    seq-mean-token-mean whatever the mode (OpenRLHF's GSPO). ``tests/test_golden_policy_loss.py`` compares this
    shortcut with the full computation."""
    return (
        get_policy_loss(cfg.policy_loss).is_unit_at_ratio_one(cfg)
        and cfg.adv_tau == 1.0
        and cfg.kl_loss_coef == 0.0
        and cfg.off_policy_mask_threshold is None
        and cfg.policy_loss not in cfg.seq_mean_losses  # OpenRLHF's GSPO: not the mode's weights
    )
