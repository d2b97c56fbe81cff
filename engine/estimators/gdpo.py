"""GDPO (group reward-decoupled normalisation, arXiv:2601.05242) as verl computes it (CONVENTIONS.md §1.3).

For each reward dimension k: A_k = GRPO(r_k) (group mean/std of that dimension alone); A = Σ_k w_k A_k;
advantages = masked_whiten(A · m, m) · m (batch-wide, token-weighted, so ≤ 1 valid token raises).

Dimensions: ``cfg.gdpo_reward_keys`` names global reward components (verl ``algorithm.gdpo_reward_keys``, values
from ``non_tensor_batch``); weights ``cfg.gdpo_reward_weights`` (default all 1). Without keys verl falls back to
one dimension, the token-level rewards, i.e. whiten(GRPO(s)) · m. A dimension's score is the component value
alone (verl places it on the last attended token; only its sum over tokens matters to GRPO).
"""

from __future__ import annotations

import torch

from engine.estimators.outcome import grpo_scalar
from engine.masked import masked_whiten
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


def gdpo_dimensions(inp: EstimatorInput, keys: tuple[str, ...]) -> torch.Tensor:
    """Per-dimension scores [B, K]: the named global components, or the row score Σ_t r when ``keys`` is empty."""
    if not keys:
        return inp.token_level_rewards.sum(-1, keepdim=True)
    if inp.global_components is None:
        raise ValueError("gdpo_reward_keys needs the run's global reward components; this input has none")
    names = list(inp.global_component_names)
    missing = [k for k in keys if k not in names]
    if missing:
        raise ValueError(f"GDPO reward key(s) {missing} not among the global components {names}")
    return inp.global_components[:, [names.index(k) for k in keys]]


@register_estimator(
    "gdpo",
    singleton="raw",
    std_normalised=True,
    label="GDPO (per-dimension GRPO, then batch whitening)",
    formula=r"A = \mathrm{whiten}_{\text{batch}}\Big(\sum_k w_k\,\frac{r_{k,i} - \mathrm{mean}_{g(i)}(r_k)}"
    r"{\mathrm{std}_{g(i)}(r_k) + \epsilon}\Big)\cdot m",
    reference="verl core_algos.compute_gdpo_outcome_advantage (1dda039b; GDPO arXiv:2601.05242)",
)
def gdpo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    m = inp.response_mask
    dims = gdpo_dimensions(inp, cfg.gdpo_reward_keys)  # (B, K)
    K = dims.shape[1]
    weights = cfg.gdpo_reward_weights or (1.0,) * K
    per_dim = torch.stack(
        [
            grpo_scalar(dims[:, k], inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof)[0]
            for k in range(K)
        ],
        dim=-1,
    )  # (B, K), a loop over a handful of reward dimensions
    combined = (per_dim * per_dim.new_tensor(weights)).sum(-1)  # (B,)
    adv = masked_whiten(combined[:, None] * m, m) * m  # (B, T)
    extras = {"dimension_scores": dims, "dimension_advantages": per_dim, "row_advantage": combined}
    return EstimatorOutput(adv, adv, extras)
