"""Outcome estimators: one scalar per trajectory from its score s_i = Σ_t r_{i,t} (all positions, holes
included, as verl sums them), broadcast to tokens as a_i · m_{i,t}. For these, ``returns`` is the same tensor
as ``advantages`` (verl convention). Most are written as their row advantage a_i = f(s) alone (``per_row``), the sum
and the broadcast said once there.

Under ``outcome_tokens="reward_to_go"`` (OpenRLHF) the score is taken before the in-reward KL and a_i becomes a
reward on the row's last masked token: every position up to it (holes included) gets a_i plus the reward-to-go
Σ_{k≥t} −β·KL_k·m_k (``outcome_tokens``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from engine.estimators.length_penalty import linear_length_penalty
from engine.groups import dense_group_ids, group_stats
from engine.masked import whiten
from engine.registry import EstimatorFn, EstimatorInput, EstimatorOutput, register_estimator


def outcome_tokens(a: torch.Tensor, inp: EstimatorInput) -> torch.Tensor:
    """The [B, T] token advantages of one advantage per row, ``a`` [B], per ``inp.outcome_tokens``: broadcast,
    a_i · m_{i,t}; reward_to_go (OpenRLHF ``get_cumulative_returns`` with γ = 1), a_i at every position up to the
    row's last masked token plus the reward-to-go of ``inp.kl_rewards`` on the mask (0 after the last token).
    ``inp.reward_clip`` clamps a_i first (OpenRLHF ``compute_reward``)."""
    mask = inp.response_mask
    if inp.reward_clip is not None:
        a = a.clamp(*inp.reward_clip)
    if inp.outcome_tokens == "broadcast":
        return a[:, None] * mask
    T = mask.shape[-1]
    last = torch.where(mask.bool(), torch.arange(T, device=mask.device), -1).amax(-1)  # (B,), −1: empty row
    upto = torch.arange(T, device=mask.device) <= last[:, None]
    adv = torch.where(upto, a[:, None], 0.0)  # 0 after the last token even when a_i is NaN (as OpenRLHF)
    if inp.kl_rewards is not None:
        adv = adv + torch.flip(torch.cumsum(torch.flip(inp.kl_rewards * mask, [-1]), -1), [-1])
    return adv


def broadcast_rows(a: torch.Tensor, inp: EstimatorInput, extras: dict) -> EstimatorOutput:
    """One advantage per row, ``a`` [B], on the tokens (``outcome_tokens``); returns = advantages (verl's and
    OpenRLHF's outcome estimators); ``extras`` gains ``row_advantage``."""
    adv = outcome_tokens(a, inp)  # (B, T)
    return EstimatorOutput(adv, adv, extras | {"row_advantage": a})


def row_scores(inp: EstimatorInput) -> torch.Tensor:
    """s_i = Σ_t r_{i,t}, every position (holes included, as verl sums them). (B,)."""
    return inp.token_level_rewards.sum(-1)


RowOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]  # a row advantage a [B] and its intermediates
RowAdvantage = Callable[[torch.Tensor, EstimatorInput, Any], RowOutput]


def per_row(row_advantage: RowAdvantage) -> EstimatorFn:
    """An outcome estimator written as its row advantage, ``row_advantage(scores, inp, cfg) -> (a, extras)`` with
    scores = ``row_scores(inp)`` [B] and a [B], made the registry's ``fn(inp, cfg) -> EstimatorOutput``: a on the
    tokens (``broadcast_rows``), the scores first among the extras (the estimator's own ``"scores"``, GRPO's
    length-shaped ones, win)."""

    @functools.wraps(row_advantage)
    def fn(inp: EstimatorInput, cfg) -> EstimatorOutput:
        scores = row_scores(inp)
        a, extras = row_advantage(scores, inp, cfg)
        return broadcast_rows(a, inp, {"scores": scores} | extras)

    return fn


def grpo_scalar(
    scores,
    group_ids,
    norm_by_std: bool,
    epsilon: float,
    ddof: int = 1,
    var_floor: float = 0.0,
    std_scope: str = "group",
    singleton: str = "raw",
    grid: bool = False,
):
    """GRPO per-row advantage (s − μ_g)/(σ + ε) or s − μ_g, σ the group's std (``std_scope="group"``) or one std
    over the batch (``"batch"``, TRL scale_rewards='batch'). A singleton group gets μ = 0, σ = 1, so its raw score
    (``singleton="raw"``, verl), or its own mean, so 0 (``"zero"``, TRL), or NaN (``"nan"``, OpenRLHF: the
    unbiased std of one value; also without the std, as OpenRLHF only has groups of one when all are). ``grid``:
    equal-size groups, their statistics taken as OpenRLHF takes them (``engine.groups.group_stats``)."""
    st = group_stats(scores, group_ids, ddof=ddof, singleton_mean=0.0 if singleton == "raw" else None, grid=grid)
    std = st.std
    if std_scope == "batch":  # TRL: nanstd(rewards) over the batch, 0 for a batch of one row
        batch_std = scores.std(correction=ddof) if scores.numel() > ddof else scores.new_zeros(())
        std = batch_std.expand_as(scores)
    if var_floor > 0:
        std = torch.where(st.size > 1, std.pow(2).clamp(min=var_floor).sqrt(), std)
    a = (scores - st.mean) / (std + epsilon) if norm_by_std else scores - st.mean
    if singleton == "nan" and norm_by_std:
        a = torch.where(st.size > 1, a, torch.nan)
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
@per_row
def grpo(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    """GRPO; with ``cfg.length_penalty`` the scores are first shaped by prime-rl's linear length penalty
    (``engine.estimators.length_penalty``), whose intermediates join the extras."""
    shaping = {}
    if cfg.length_penalty is not None:
        if inp.trace_lengths is None:
            raise ValueError(
                "length_penalty needs each trace's output tokens, final-sequence tokens and turns (the batch's "
                "trace_lengths, which the verifiers_traces loader fills); the run lacks them"
            )
        shaping = {"unshaped_scores": scores}
        scores, penalty = linear_length_penalty(scores, inp.group_ids, inp.trace_lengths, cfg.length_penalty)
        shaping |= penalty
    a, ex = grpo_scalar(
        scores,
        inp.group_ids,
        cfg.norm_adv_by_std_in_grpo,
        cfg.epsilon,
        cfg.std_ddof,
        std_scope=cfg.grpo_std_scope,
        singleton=cfg.grpo_singleton,
        grid=cfg.trainer.group_sizes == "equal",
    )
    return a, ex | shaping


@register_estimator(
    "grpo_vectorized",
    label="GRPO (vectorized, with variance floor)",
    short="GRPO (vectorized)",
    singleton="raw",
    std_normalised=True,
    formula=r"A_i = \frac{s_i - \mu_{g}}{\sqrt{\max(\sigma^2_{g}, \text{floor})} + \epsilon}",
    reference="verl core_algos.compute_grpo_vectorized_outcome_advantage (older verl floors var at 1e-6)",
)
@per_row
def grpo_vectorized(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    return grpo_scalar(
        scores, inp.group_ids, cfg.norm_adv_by_std_in_grpo, cfg.epsilon, cfg.std_ddof, cfg.grpo_var_floor
    )


def rloo_scalar(scores, group_ids, singleton: str = "raw"):
    """a_i = n/(n−1)·(s_i − μ) = s_i − mean_{j≠i} s_j; a singleton gets its raw score, 0 or NaN."""
    st = group_stats(scores, group_ids, singleton_mean=None)
    n = st.size
    loo = torch.where(n > 1, n / (n - 1).clamp(min=1) * (scores - st.mean), scores)
    if singleton != "raw":
        loo = torch.where(n > 1, loo, 0.0 if singleton == "zero" else torch.nan)
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
@per_row
def rloo(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    return rloo_scalar(scores, inp.group_ids, cfg.rloo_singleton)


@register_estimator(
    "rloo_vectorized",
    label="RLOO (vectorized: singletons get 0)",
    short="RLOO (vectorized)",
    singleton="zero",
    formula=r"A_i = \mathbb{1}[n_g>1]\,\Big(s_i - \frac{1}{n-1}\sum_{j \ne i} s_j\Big)",
    reference="verl core_algos.compute_rloo_vectorized_outcome_advantage",
)
@per_row
def rloo_vectorized(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    return rloo_scalar(scores, inp.group_ids, "zero")


@register_estimator(
    "opo",
    label="OPO (length-weighted baseline)",
    singleton="raw",
    formula=r"b_g = \frac{\sum_{i\in g} L_i s_i}{\sum_{i \in g} L_i},\quad A_i = s_i - b_{g(i)}",
    reference="verl core_algos.compute_opo_outcome_advantage (Hao et al. 2025)",
)
@per_row
def opo(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    lengths = inp.response_mask.sum(-1)
    st = group_stats(scores, inp.group_ids, weights=lengths)
    return scores - st.mean, {"baseline": st.mean, "group_size": st.size}


@register_estimator(
    "gpg",
    label="GPG (group policy gradient)",
    singleton="raw",
    formula=r"\alpha = \frac{B}{\max(1, \#\{i: s_i \ne 0\})},\quad A_i = \frac{\alpha\,(s_i - \mathrm{mean}_{g(i)}(s))}"
    r"{f_\text{norm}}",
    reference="verl core_algos.compute_gpg_outcome_advantage (Chu et al. 2025); the trainer passes f_norm = 1",
)
@per_row
def gpg(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    B = scores.numel()
    alpha = B / max(1, int((scores != 0).sum()))
    st = group_stats(scores, inp.group_ids)
    a = alpha * (scores - st.mean) / cfg.gpg_f_norm
    return a, {"group_mean": st.mean, "group_size": st.size, "alpha": torch.full_like(scores, alpha)}


@register_estimator(
    "grpo_passk",
    label="GRPO pass@k",
    singleton="zero",  # a singleton group raises (verl); the question never arises
    std_normalised=True,
    formula=r"A_{i^*} = \frac{s_{(1)} - s_{(2)}}{\mathrm{std}_g(s) + \epsilon}\ \text{for the group's best } i^*,"
    r"\ A_i = 0 \text{ otherwise}",
    reference="verl core_algos.compute_grpo_passk_outcome_advantage (Chen et al. 2025)",
)
@per_row
def grpo_passk(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
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
    return a, {"group_std": st.std, "group_size": st.size}


@register_estimator(
    "reinforce_plus_plus_baseline",
    label="REINFORCE++ with group baseline",
    short="REINFORCE++ baseline",
    singleton=lambda cfg: "raw" if cfg.rfpp_baseline_scope == "token" else "zero",
    whitened=True,
    formula=r"c_i = s_i - \mathrm{mean}_{g(i)}(s),"
    r"\quad A = \mathrm{whiten}_{\text{batch, token-weighted}}(c_i\, m_{i,t})",
    reference="verl core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage (Hu 2025); "
    "rLLM scope: population std of centred trajectory rewards",
)
def reinforce_plus_plus_baseline(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = row_scores(inp)
    m = inp.response_mask
    if cfg.rfpp_baseline_scope == "trajectory_popstd":
        st = group_stats(scores, inp.group_ids, singleton_mean=None)
        c = torch.where(st.size > 1, scores - st.mean, torch.zeros_like(scores))
        a = c / (c.std(correction=0) + cfg.epsilon)
        return broadcast_rows(a, inp, {"scores": scores, "group_mean": st.mean, "centred": c})
    st = group_stats(scores, inp.group_ids)
    c = scores - st.mean
    tokens = outcome_tokens(c, inp)
    adv = whiten(tokens, m, cfg.whitening, cfg.whiten_std)
    if cfg.whitening == "verl":
        adv = adv * m
    ex = {"scores": scores, "group_mean": st.mean, "centred": c, "row_advantage": c}
    # returns: verl hands back the advantages; OpenRLHF's cumulative returns are the tokens before whitening
    return EstimatorOutput(adv, tokens if inp.outcome_tokens == "reward_to_go" else adv, ex)


@register_estimator(
    "reinforce",
    label="REINFORCE (raw reward, rLLM)",
    formula=r"A_i = s_i",
    reference="rLLM rl_algo.calculate_reinforce_advantages",
)
@per_row
def reinforce(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    return scores, {}


@register_estimator(
    "flash_reinforce",
    label="FlashREINFORCE (batch-mean baseline)",
    short="FlashREINFORCE",
    formula=r"A_i = s_i - \mathrm{mean}_{\text{batch}}(s)",
    reference="OpenRLHF experience_maker.compute_advantages_and_returns, estimator flash_reinforce (openrlhf 0.11.2)",
)
@per_row
def flash_reinforce(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    baseline = scores.mean()
    return scores - baseline, {"baseline": baseline.expand_as(scores)}


@register_estimator(
    "prpo",
    label="PRPO (batch-normalised reward, rLLM)",
    formula=r"A_i = \frac{s_i - \mathrm{mean}_{\text{batch}}(s)}{\mathrm{popstd}_{\text{batch}}(s) + \epsilon}",
    reference="rLLM rl_algo.calculate_prpo_advantages",
)
@per_row
def prpo(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    return (scores - scores.mean()) / (scores.std(correction=0) + cfg.epsilon), {}


def num_groups(group_ids: torch.Tensor) -> int:
    return dense_group_ids(group_ids)[1]
