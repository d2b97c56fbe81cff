"""GDPO (group reward-decoupled normalisation, arXiv:2601.05242) as verl computes it (docs/conventions/verl.md §1.3),
and as TRL's ``multi_objective_aggregation="normalize_then_sum"`` does (§10).

For each reward dimension k: A_k = GRPO(r_k) (group mean/std of that dimension alone); A = Σ_k w_k A_k; then the
batch normalisation ``cfg.gdpo_whiten``: ``token`` (verl) advantages = masked_whiten(A · m, m) · m (batch-wide,
token-weighted, so ≤ 1 valid token raises); ``row`` (TRL) advantages = (A − mean)/(std + ε) over rows (unbiased std,
0 for one row), broadcast on the mask.

Dimensions: ``cfg.gdpo_reward_keys`` names global reward components (verl ``algorithm.gdpo_reward_keys``, values
from ``non_tensor_batch``; TRL's reward functions); weights ``cfg.gdpo_reward_weights`` (default all 1). Without keys
verl falls back to one dimension, the token-level rewards, i.e. whiten(GRPO(s)) · m. A dimension's score is the
component value alone (verl places it on the last attended token; only its sum over tokens matters to GRPO). A row
without a value for a dimension (``global_present`` False: a TRL reward function that returned None) is left out of
that dimension's group mean and std, as TRL's ``nanmean``/``nanstd``, and adds nothing to Σ_k (``nansum``); so does a
value whose group has no other (its std is NaN in TRL).
"""

from __future__ import annotations

import torch

from engine.estimators.outcome import broadcast_rows, grpo_scalar, row_scores
from engine.groups import dense_group_ids
from engine.masked import masked_whiten
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


def gdpo_dimensions(inp: EstimatorInput, keys: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-dimension scores [B, K] (the named global components, or the row score Σ_t r when ``keys`` is empty)
    and which rows have each [B, K] (None: all)."""
    if not keys:
        return row_scores(inp)[:, None], None
    if inp.global_components is None:
        raise ValueError("gdpo_reward_keys needs the run's global reward components; this input has none")
    names = list(inp.global_component_names)
    missing = [k for k in keys if k not in names]
    if missing:
        raise ValueError(f"GDPO reward key(s) {missing} not among the global components {names}")
    cols = [names.index(k) for k in keys]
    present = None if inp.global_present is None else inp.global_present[:, cols]
    return inp.global_components[:, cols], present


def _present_grpo(r: torch.Tensor, present: torch.Tensor, group_ids: torch.Tensor, cfg) -> torch.Tensor:
    """GRPO of one dimension over the rows that have it (nanmean, nanstd with count − ddof); 0 where a row has no
    value, or its group fewer than two (TRL: NaN, then nansum)."""
    idx, G = dense_group_ids(group_ids)
    p = present.to(r.dtype)
    count = torch.zeros(G, dtype=r.dtype, device=r.device).index_add_(0, idx, p)
    total = torch.zeros(G, dtype=r.dtype, device=r.device).index_add_(0, idx, r * p)
    mean = (total / count.clamp(min=1))[idx]
    sq = torch.zeros(G, dtype=r.dtype, device=r.device).index_add_(0, idx, (r - mean).square() * p)
    n = count[idx]
    if cfg.norm_adv_by_std_in_grpo:
        std = (sq / (count - cfg.std_ddof).clamp(min=1)).sqrt()[idx]
        a = (r - mean) / (std + cfg.epsilon)
    else:
        a = r - mean
    return torch.where(present & (n > 1), a, 0.0)


@register_estimator(
    "gdpo",
    singleton=lambda cfg: cfg.grpo_singleton,
    std_normalised=True,
    label="GDPO (per-dimension GRPO, then batch whitening)",
    formula=r"A = \mathrm{whiten}_{\text{batch}}\Big(\sum_k w_k\,\frac{r_{k,i} - \mathrm{mean}_{g(i)}(r_k)}"
    r"{\mathrm{std}_{g(i)}(r_k) + \epsilon}\Big)\cdot m",
    reference="verl core_algos.compute_gdpo_outcome_advantage (1dda039b; GDPO arXiv:2601.05242); TRL "
    "normalize_then_sum (trl 1.16.0)",
)
def gdpo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    m = inp.response_mask
    dims, present = gdpo_dimensions(inp, cfg.gdpo_reward_keys)  # (B, K)
    K = dims.shape[1]
    weights = cfg.gdpo_reward_weights or (1.0,) * K
    per_dim = torch.stack(
        [
            grpo_scalar(
                dims[:, k], inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof,
                singleton=cfg.grpo_singleton,
            )[0]
            if present is None or bool(present[:, k].all())
            else _present_grpo(dims[:, k], present[:, k], inp.group_ids, cfg)
            for k in range(K)
        ],
        dim=-1,
    )  # (B, K), a loop over a handful of reward dimensions  # fmt: skip
    combined = (per_dim * per_dim.new_tensor(weights)).sum(-1)  # (B,)
    extras = {"dimension_scores": dims, "dimension_advantages": per_dim}
    if cfg.gdpo_whiten == "row":  # TRL: (x − nanmean)/(nanstd + 1e-4) over the batch's rows
        std = combined.std() if combined.numel() > 1 else combined.new_zeros(())
        a = (combined - combined.mean()) / (std + cfg.epsilon)
        return broadcast_rows(a, inp, extras | {"combined": combined})
    adv = masked_whiten(combined[:, None] * m, m) * m  # (B, T)
    return EstimatorOutput(adv, adv, extras | {"row_advantage": combined})
