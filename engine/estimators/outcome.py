"""Outcome estimators: one scalar per trajectory from its score s_i = Σ_t r_{i,t} (all positions, holes
included, as verl sums them), broadcast to tokens as a_i · m_{i,t}. For these, ``returns`` is the same tensor
as ``advantages`` (verl convention).
"""

from __future__ import annotations

import torch

from engine.groups import dense_group_ids, group_stats
from engine.masked import masked_whiten
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


def broadcast_rows(a: torch.Tensor, mask: torch.Tensor, extras: dict) -> EstimatorOutput:
    """One advantage per row, ``a`` [B], on the row's ``mask`` tokens; returns = advantages (verl's outcome
    estimators); ``extras`` gains ``row_advantage``."""
    adv = a[:, None] * mask  # (B, T)
    return EstimatorOutput(adv, adv, extras | {"row_advantage": a})


def grpo_scalar(
    scores,
    group_ids,
    norm_by_std: bool,
    epsilon: float,
    ddof: int = 1,
    var_floor: float = 0.0,
    std_scope: str = "group",
    singleton: str = "raw",
):
    """GRPO per-row advantage (s − μ_g)/(σ + ε) or s − μ_g, σ the group's std (``std_scope="group"``) or one std
    over the batch (``"batch"``, TRL scale_rewards='batch'). A singleton group gets μ = 0, σ = 1, so its raw score
    (``singleton="raw"``, verl), or its own mean, so 0 (``"zero"``, TRL)."""
    st = group_stats(scores, group_ids, ddof=ddof, singleton_mean=0.0 if singleton == "raw" else None)
    std = st.std
    if std_scope == "batch":  # TRL: nanstd(rewards) over the batch, 0 for a batch of one row
        batch_std = scores.std(correction=ddof) if scores.numel() > ddof else scores.new_zeros(())
        std = batch_std.expand_as(scores)
    if var_floor > 0:
        std = torch.where(st.size > 1, std.pow(2).clamp(min=var_floor).sqrt(), std)
    a = (scores - st.mean) / (std + epsilon) if norm_by_std else scores - st.mean
    return a, {"scores": scores, "group_mean": st.mean, "group_std": std, "group_size": st.size}


@register_estimator(
    "grpo",
    label="GRPO (÷ group std)",
    short="GRPO",
    singleton=lambda cfg: cfg.grpo_singleton,
    std_normalised=True,
    formula=r"A_i = \frac{s_i - \mathrm{mean}_{g(i)}(s)}{\mathrm{std}_{g(i)}(s) + \epsilon}"
    r"\quad(\text{Dr.GRPO: } A_i = s_i - \mathrm{mean}_{g(i)}(s))",
    reference="verl core_algos.compute_grpo_outcome_advantage (Shao et al. 2024; Dr.GRPO: Liu et al. 2025)",
)
def grpo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    a, ex = grpo_scalar(
        scores,
        inp.group_ids,
        cfg.norm_adv_by_std_in_grpo,
        cfg.epsilon,
        cfg.std_ddof,
        std_scope=cfg.grpo_std_scope,
        singleton=cfg.grpo_singleton,
    )
    return broadcast_rows(a, inp.response_mask, ex)


@register_estimator(
    "grpo_vectorized",
    label="GRPO (vectorized, with variance floor)",
    short="GRPO (vectorized)",
    singleton="raw",
    std_normalised=True,
    formula=r"A_i = \frac{s_i - \mu_{g}}{\sqrt{\max(\sigma^2_{g}, \text{floor})} + \epsilon}",
    reference="verl core_algos.compute_grpo_vectorized_outcome_advantage (older verl floors var at 1e-6)",
)
def grpo_vectorized(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    a, ex = grpo_scalar(
        scores, inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof, cfg.grpo_var_floor
    )
    return broadcast_rows(a, inp.response_mask, ex)


def rloo_scalar(scores, group_ids, singleton: str = "raw"):
    """a_i = n/(n−1)·(s_i − μ) = s_i − mean_{j≠i} s_j; a singleton gets its raw score or 0."""
    st = group_stats(scores, group_ids, singleton_mean=None)
    n = st.size
    loo = torch.where(n > 1, n / (n - 1).clamp(min=1) * (scores - st.mean), scores)
    if singleton == "zero":
        loo = torch.where(n > 1, loo, torch.zeros_like(loo))
    baseline = scores - loo
    return loo, {"scores": scores, "group_mean": st.mean, "group_size": n, "baseline": baseline}


@register_estimator(
    "rloo",
    label="RLOO (leave-one-out)",
    short="RLOO",
    singleton=lambda cfg: cfg.rloo_singleton,
    formula=r"A_i = s_i - \frac{1}{n-1}\sum_{j \ne i,\, g(j)=g(i)} s_j",
    reference="verl core_algos.compute_rloo_outcome_advantage (Ahmadian et al. 2024)",
)
def rloo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    a, ex = rloo_scalar(scores, inp.group_ids, cfg.rloo_singleton)
    return broadcast_rows(a, inp.response_mask, ex)


@register_estimator(
    "rloo_vectorized",
    label="RLOO (vectorized: singletons get 0)",
    short="RLOO (vectorized)",
    singleton="zero",
    formula=r"A_i = \mathbb{1}[n_g>1]\,\Big(s_i - \frac{1}{n-1}\sum_{j \ne i} s_j\Big)",
    reference="verl core_algos.compute_rloo_vectorized_outcome_advantage",
)
def rloo_vectorized(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    a, ex = rloo_scalar(scores, inp.group_ids, "zero")
    return broadcast_rows(a, inp.response_mask, ex)


@register_estimator(
    "opo",
    label="OPO (length-weighted baseline)",
    singleton="raw",
    formula=r"b_g = \frac{\sum_{i\in g} L_i s_i}{\sum_{i \in g} L_i},\quad A_i = s_i - b_{g(i)}",
    reference="verl core_algos.compute_opo_outcome_advantage (Hao et al. 2025)",
)
def opo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    lengths = inp.response_mask.sum(-1)
    st = group_stats(scores, inp.group_ids, weights=lengths)
    a = scores - st.mean
    return broadcast_rows(a, inp.response_mask, {"scores": scores, "baseline": st.mean, "group_size": st.size})


@register_estimator(
    "gpg",
    label="GPG (group policy gradient)",
    singleton="raw",
    formula=r"\alpha = \frac{B}{\max(1, \#\{i: s_i \ne 0\})},\quad A_i = \frac{\alpha\,(s_i - \mathrm{mean}_{g(i)}(s))}"
    r"{f_\text{norm}}",
    reference="verl core_algos.compute_gpg_outcome_advantage (Chu et al. 2025); the trainer passes f_norm = 1",
)
def gpg(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    B = scores.numel()
    alpha = B / max(1, int((scores != 0).sum()))
    st = group_stats(scores, inp.group_ids)
    a = alpha * (scores - st.mean) / cfg.gpg_f_norm
    ex = {"scores": scores, "group_mean": st.mean, "group_size": st.size, "alpha": torch.full_like(scores, alpha)}
    return broadcast_rows(a, inp.response_mask, ex)


@register_estimator(
    "grpo_passk",
    label="GRPO pass@k",
    singleton="zero",  # a singleton group raises (verl); the question never arises
    std_normalised=True,
    formula=r"A_{i^*} = \frac{s_{(1)} - s_{(2)}}{\mathrm{std}_g(s) + \epsilon}\ \text{for the group's best } i^*,"
    r"\ A_i = 0 \text{ otherwise}",
    reference="verl core_algos.compute_grpo_passk_outcome_advantage (Chen et al. 2025)",
)
def grpo_passk(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    st = group_stats(scores, inp.group_ids)
    if bool((st.size < 2).any()):
        i = int((st.size < 2).nonzero()[0])
        raise ValueError(f"grpo_passk needs groups of at least 2 rollouts; row {i} is alone in its group")
    idx = st.index
    B = scores.numel()
    # top-1 per group: largest score, first row on ties (torch.topk picks one; a tie gives r1 − r2 = 0 anyway)
    order = torch.argsort(scores, descending=True, stable=True)
    g_sorted = idx[order]
    order = order[torch.argsort(g_sorted, stable=True)]  # rows grouped, best first inside each group
    first = torch.ones(B, dtype=torch.bool, device=scores.device)
    first[1:] = idx[order][1:] != idx[order][:-1]
    top1 = order[first]  # (G,) best row of each group, in group order
    second = order[torch.nonzero(first).squeeze(-1) + 1]
    gap = scores[top1] - scores[second]
    if cfg.norm_adv_by_std_in_grpo:
        gap = gap / (st.std[top1] + cfg.epsilon)
    a = torch.zeros_like(scores)
    a[top1] = gap
    return broadcast_rows(a, inp.response_mask, {"scores": scores, "group_std": st.std, "group_size": st.size})


@register_estimator(
    "reinforce_plus_plus_baseline",
    label="REINFORCE++ with group baseline",
    short="REINFORCE++ baseline",
    singleton=lambda cfg: "raw" if cfg.rfpp_baseline_scope == "token" else "zero",
    formula=r"c_i = s_i - \mathrm{mean}_{g(i)}(s),"
    r"\quad A = \mathrm{whiten}_{\text{batch, token-weighted}}(c_i\, m_{i,t})",
    reference="verl core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage (Hu 2025); "
    "rLLM scope: population std of centred trajectory rewards",
)
def reinforce_plus_plus_baseline(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    m = inp.response_mask
    if cfg.rfpp_baseline_scope == "trajectory_popstd":
        st = group_stats(scores, inp.group_ids, singleton_mean=None)
        c = torch.where(st.size > 1, scores - st.mean, torch.zeros_like(scores))
        a = c / (c.std(correction=0) + cfg.epsilon)
        return broadcast_rows(a, m, {"scores": scores, "group_mean": st.mean, "centred": c})
    st = group_stats(scores, inp.group_ids)
    c = scores - st.mean
    adv = masked_whiten(c[:, None] * m, m) * m
    ex = {"scores": scores, "group_mean": st.mean, "centred": c, "row_advantage": c}
    return EstimatorOutput(adv, adv, ex)


@register_estimator(
    "reinforce",
    label="REINFORCE (raw reward, rLLM)",
    formula=r"A_i = s_i",
    reference="rLLM rl_algo.calculate_reinforce_advantages",
)
def reinforce(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    return broadcast_rows(scores, inp.response_mask, {"scores": scores})


@register_estimator(
    "prpo",
    label="PRPO (batch-normalised reward, rLLM)",
    formula=r"A_i = \frac{s_i - \mathrm{mean}_{\text{batch}}(s)}{\mathrm{popstd}_{\text{batch}}(s) + \epsilon}",
    reference="rLLM rl_algo.calculate_prpo_advantages",
)
def prpo(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    a = (scores - scores.mean()) / (scores.std(correction=0) + cfg.epsilon)
    return broadcast_rows(a, inp.response_mask, {"scores": scores})


def num_groups(group_ids: torch.Tensor) -> int:
    return dense_group_ids(group_ids)[1]
