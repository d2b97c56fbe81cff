"""Golden: verl's KL estimators, in-reward KL penalty + controllers, loss aggregation and the dual-clip PPO loss
(docs/conventions/verl.md §1.4, §1.5), at head and at the older b178a3c commit (profile ``verl-legacy``,
docs/conventions/verl.md §1.6).

(a) the functional pieces (``engine.kl``, ``engine.aggregation``), value and autograd gradient;
(b) ``compute_credit``: its per-token KL, its in-reward KL rewards and controller metrics, and its per-token
aggregation weights (Σ w·L must equal verl's aggregated loss).
"""

from __future__ import annotations

import re

import pytest
import torch
from golden_utils import (
    REFERENCE_ERRORS,
    assert_golden,
    credit_from_verl,
    golden_cases,
    is_error,
    tensor,
)

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.aggregation import agg_loss, policy_loss_vanilla
from engine.kl import apply_kl_penalty, kl_penalty


def _versioned(files: dict[str, str], where=None) -> list:
    return [
        pytest.param(golden, p.values[0], id=f"{golden.removesuffix('.json')}/{p.id}")
        for golden in files
        for p in golden_cases(golden, where)
    ]


# ------------------------------------------------------------------------------------------------ kl_penalty

KL = {"verl_kl_penalty.json": "verl", "verl_legacy_b178a3c_kl_penalty.json": "verl-legacy"}


@pytest.mark.parametrize("golden,case", _versioned(KL))
def test_kl_penalty_value_and_gradient(golden, case):
    i, name = case["inputs"], case["params"]["kl_penalty"]
    allow_plus = CreditConfig(profile=KL[golden]).trainer.kl_plus_variants
    logprob = tensor(i["logprob"]).requires_grad_(True)
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            kl_penalty(logprob, tensor(i["ref_logprob"]), name, allow_plus)
        return
    kl = kl_penalty(logprob, tensor(i["ref_logprob"]), name, allow_plus)
    kl.sum().backward()
    assert_golden(kl, case["outputs"]["kl"], what="kl")
    assert_golden(logprob.grad, case["outputs"]["grad_wrt_logprob_of_sum"], what="d(Σ kl)/d logprob")


@pytest.mark.parametrize("golden,case", _versioned(KL))
def test_kl_penalty_compute_credit(golden, case):
    i = case["inputs"]
    logprob, ref = tensor(i["logprob"]), tensor(i["ref_logprob"])
    batch = TrajectoryBatch.from_tensors(
        response_mask=torch.ones_like(logprob), old_log_probs=logprob, ref_log_prob=ref, token_level_scores=0 * ref
    )
    cfg = CreditConfig(profile=KL[golden], kl_penalty=case["params"]["kl_penalty"], placement="as_given")
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            compute_credit(batch, cfg, device="cpu")
        return
    assert_golden(compute_credit(batch, cfg, device="cpu").kl, case["outputs"]["kl"], what="kl")


# ---------------------------------------------------------------------------------- in-reward KL (apply_kl_penalty)


def _controller(spec: str) -> dict:
    """'fixed(kl_coef=0.1)' / 'adaptive(init=0.2,target=0.1,horizon=10000)' → CreditConfig fields."""
    kind, args = re.fullmatch(r"(\w+)\((.*)\)", spec).groups()
    kv = {k: float(v) for k, v in (a.split("=") for a in args.split(","))}
    if kind == "fixed":
        return dict(kl_ctrl_type="fixed", kl_coef=kv["kl_coef"])
    return dict(kl_ctrl_type="adaptive", kl_coef=kv["init"], kl_target=kv["target"], kl_horizon=kv["horizon"])


def _assert_kl_outputs(case, rewards, current_kl, beta, beta_next) -> None:
    out = case["outputs"]
    assert_golden(rewards, out["token_level_rewards"], what="token_level_rewards")
    assert current_kl == pytest.approx(out["metrics"]["actor/reward_kl_penalty"], abs=1e-5, rel=1e-5)
    assert beta == pytest.approx(out["metrics"]["actor/reward_kl_penalty_coeff"], abs=1e-9)
    assert beta == pytest.approx(out["beta_used"], abs=1e-9)
    assert beta_next == pytest.approx(out["kl_ctrl_value_after_update"], abs=1e-9)


@pytest.mark.parametrize("case", golden_cases("verl_apply_kl_penalty.json"))
def test_apply_kl_penalty_function(case):
    i, ctrl = case["inputs"], _controller(case["params"]["controller"])
    pen = apply_kl_penalty(
        tensor(i["token_level_scores"]),
        tensor(i["old_log_probs"]),
        tensor(i["ref_log_prob"]),
        tensor(i["response_mask"]),
        case["params"]["kl_penalty"],
        ctrl["kl_coef"],
        ctrl["kl_ctrl_type"],
        ctrl.get("kl_target", 0.1),
        ctrl.get("kl_horizon", 10000.0),
    )
    _assert_kl_outputs(case, pen.token_level_rewards, pen.current_kl, pen.beta, pen.beta_next)


@pytest.mark.parametrize("case", golden_cases("verl_apply_kl_penalty.json"))
def test_apply_kl_penalty_compute_credit(case):
    i = case["inputs"]
    cfg = CreditConfig(
        profile="verl",
        use_kl_in_reward=True,
        kl_penalty=case["params"]["kl_penalty"],
        placement="as_given",
        **_controller(case["params"]["controller"]),
    )
    batch = TrajectoryBatch.from_tensors(
        token_level_scores=tensor(i["token_level_scores"]),
        response_mask=tensor(i["response_mask"]),
        old_log_probs=tensor(i["old_log_probs"]),
        ref_log_prob=tensor(i["ref_log_prob"]),
    )
    res = compute_credit(batch, cfg, device="cpu")
    _assert_kl_outputs(case, res.token_level_rewards, res.metrics["kl"], res.metrics["kl_coef"],
                       res.metrics["kl_coef_next"])  # fmt: skip


# ------------------------------------------------------------------------------------------------- agg_loss

AGG = {"verl_agg_loss.json": "verl", "verl_legacy_b178a3c_agg_loss.json": "verl-legacy"}
AGG_KWARGS = ("dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor")


def _profile_agg_kwargs(profile: str) -> dict:
    cfg = CreditConfig(profile=profile)
    return dict(
        sum_norm_divides_by_seqs=cfg.sum_norm_divides_by_seqs, token_sum_supported=cfg.trainer.token_sum_supported
    )


@pytest.mark.parametrize("golden,case", _versioned(AGG))
def test_agg_loss_function(golden, case):
    i, p = case["inputs"], case["params"]
    kw = {k: p[k] for k in AGG_KWARGS if k in p} | _profile_agg_kwargs(AGG[golden])
    args = (tensor(i["loss_mat"]), tensor(i["loss_mask"]), p["loss_agg_mode"])
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            agg_loss(*args, **kw)
        return
    assert_golden(agg_loss(*args, **kw), torch.tensor(case["outputs"]["loss"]), what="loss")


def _single_device(case) -> bool:
    """compute_credit aggregates one local batch: no dp_size / global counts."""
    return not {"dp_size", "batch_num_tokens", "global_batch_size"} & set(case["params"])


@pytest.mark.parametrize("golden,case", _versioned(AGG, where=_single_device))
def test_agg_loss_compute_credit_weights(golden, case):
    i, p = case["inputs"], case["params"]
    loss_mat, mask = tensor(i["loss_mat"]), tensor(i["loss_mask"])

    def run():
        cfg = CreditConfig(
            profile=AGG[golden],
            # agg_loss called directly, without global_batch_size, counts the non-empty rows; verl's trainer
            # passes every row of the mini-batch (the verl profile's "all": test_golden_policy_loss.py)
            seq_mean_rows="nonempty",
            loss_agg_mode=p["loss_agg_mode"],
            loss_scale_factor=p.get("loss_scale_factor"),
            placement="as_given",
        )
        return credit_from_verl({"token_level_rewards": 0 * mask, "response_mask": mask}, cfg)

    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            run()
        return
    loss = (run().agg_weights * loss_mat).sum()
    assert_golden(loss, torch.tensor(case["outputs"]["loss"]), what="Σ agg_weights · loss")


# ------------------------------------------------------------------------------ dual-clip PPO loss (vanilla)


def _policy_loss(case):
    i, p = case["inputs"], case["params"]
    return policy_loss_vanilla(
        tensor(i["old_log_prob"]),
        tensor(i["log_prob"]),
        tensor(i["advantages"]),
        tensor(i["response_mask"]),
        loss_agg_mode=p["loss_agg_mode"],
        clip_ratio_low=p["clip_ratio_low"],
        clip_ratio_high=p["clip_ratio_high"],
        clip_ratio_c=p["clip_ratio_c"],
    )


@pytest.mark.parametrize("case", golden_cases("verl_policy_loss_vanilla.json"))
def test_policy_loss_vanilla(case):
    loss, metrics = _policy_loss(case)
    assert_golden(loss, torch.tensor(case["outputs"]["pg_loss"]), what="pg_loss")
    for key, expected in case["outputs"]["metrics"].items():
        assert_golden(metrics[key.removeprefix("actor/")], torch.tensor(expected), what=key)


@pytest.mark.parametrize("case", golden_cases("verl_policy_loss_vanilla.json"))
def test_policy_loss_compute_credit_weights(case):
    """compute_credit's per-token aggregation weights turn verl's per-token PPO losses into its pg_loss."""
    _, metrics = _policy_loss(case)
    mask = tensor(case["inputs"]["response_mask"])
    cfg = CreditConfig(profile="verl", loss_agg_mode=case["params"]["loss_agg_mode"], placement="as_given")
    res = credit_from_verl({"token_level_rewards": 0 * mask, "response_mask": mask}, cfg)
    loss = (res.agg_weights * metrics["pg_losses"]).sum()
    assert_golden(loss, torch.tensor(case["outputs"]["pg_loss"]), what="Σ agg_weights · pg_losses")
