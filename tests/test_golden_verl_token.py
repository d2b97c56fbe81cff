"""Golden: verl's token-level estimators — GAE, REINFORCE++ (head and b178a3c), ReMax, OTB and TIR-OTB.

(a) the functional piece or the registered estimator, (b) ``compute_credit`` with the matching profile and the
golden ``token_level_rewards`` as the run's token scores. The engine means to match these tensors exactly, holes
and padding included (GAE's whitened values at padding, hole returns, …), so the full tensor is compared.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from golden_utils import (
    REFERENCE_ERRORS,
    assert_golden,
    credit_from_verl,
    golden_cases,
    is_error,
    load_golden,
    run_estimator,
    tensor,
)

from engine import CreditConfig, TrajectoryBatch
from engine.estimators.gae import compute_gae_advantage_return

# ------------------------------------------------------------------------------------------------ GAE (head)


@pytest.mark.parametrize("case", golden_cases("verl_gae.json"))
def test_gae_function(case):
    i, p = case["inputs"], case["params"]
    args = (tensor(i["token_level_rewards"]), tensor(i["values"]), tensor(i["response_mask"]), p["gamma"], p["lam"])
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            compute_gae_advantage_return(*args)
        return
    advantages, returns = compute_gae_advantage_return(*args)  # skip_holes=True: verl ≥ PR #2337
    assert_golden(advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("case", golden_cases("verl_gae.json"))
def test_gae_compute_credit(case):
    p = case["params"]
    cfg = CreditConfig(profile="verl", estimator="gae", placement="as_given", gamma=p["gamma"], lam=p["lam"])
    values = tensor(case["inputs"]["values"])
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            credit_from_verl(case["inputs"], cfg, values=values)
        return
    res = credit_from_verl(case["inputs"], cfg, values=values)
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


# ------------------------------------------------------------------------------- REINFORCE++ (head and legacy)

RFPP = {"verl_reinforce_pp.json": "verl", "verl_legacy_b178a3c_reinforce_pp.json": "verl-legacy"}
RFPP_CASES = [
    pytest.param(golden, p.values[0], id=f"{golden.removesuffix('.json')}/{p.id}")
    for golden in RFPP
    for p in golden_cases(golden)
]


def _rfpp_config(golden, case, **fields) -> CreditConfig:
    gamma = case["params"]["config.gamma"]  # verl's REINFORCE++ reads algorithm.gamma from its config
    return CreditConfig(profile=RFPP[golden], estimator="reinforce_plus_plus", gamma=gamma, **fields)


@pytest.mark.parametrize("golden,case", RFPP_CASES)
def test_reinforce_pp_estimator(golden, case):
    i = case["inputs"]
    rewards, mask = tensor(i["token_level_rewards"]), tensor(i["response_mask"])
    out = run_estimator(
        "reinforce_plus_plus", _rfpp_config(golden, case), token_level_rewards=rewards, response_mask=mask
    )
    assert_golden(out.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(out.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("golden,case", RFPP_CASES)
def test_reinforce_pp_compute_credit(golden, case):
    res = credit_from_verl(case["inputs"], _rfpp_config(golden, case, placement="as_given"))
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


# ------------------------------------------------------------------------------------------------------ ReMax


@pytest.mark.parametrize("case", golden_cases("verl_remax.json"))
def test_remax_estimator(case):
    i = case["inputs"]
    out = run_estimator(
        "remax",
        CreditConfig(profile="verl", estimator="remax"),
        token_level_rewards=tensor(i["token_level_rewards"]),
        response_mask=tensor(i["response_mask"]),
        reward_baselines=tensor(i["reward_baselines"]),
    )
    assert_golden(out.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(out.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("case", golden_cases("verl_remax.json"))
def test_remax_compute_credit(case):
    cfg = CreditConfig(profile="verl", estimator="remax", placement="as_given")
    res = credit_from_verl(case["inputs"], cfg, reward_baselines=tensor(case["inputs"]["reward_baselines"]))
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


# ------------------------------------------------------------------------------------ optimal token baseline


def _otb_config(case) -> CreditConfig:
    p = case["params"]
    return CreditConfig(profile="verl", estimator=p["estimator"], otb_handle_zero_tail=p["handle_zero_tail"])


@pytest.mark.parametrize("case", golden_cases("verl_optimal_token_baseline.json"))
def test_optimal_token_baseline_estimator(case):
    i = case["inputs"]
    out = run_estimator(
        case["params"]["estimator"],
        _otb_config(case),
        token_level_rewards=tensor(i["token_level_rewards"]),
        response_mask=tensor(i["response_mask"]),
        group_ids=torch.tensor(i["index"]),
        old_log_probs=tensor(i["old_log_probs"]),
        sum_pi_squared=tensor(i["sum_pi_squared"]),
    )
    assert_golden(out.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(out.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("case", golden_cases("verl_optimal_token_baseline.json"))
def test_optimal_token_baseline_compute_credit(case):
    """OTB needs the actor's Σ_v π² per token (verl ``sum_pi_squared``). While a TrajectoryBatch has no such field,
    compute_credit must refuse otb_sum_pi_squared='actor', naming the missing input, and the numbers wait."""
    i = case["inputs"]
    cfg = CreditConfig(
        profile="verl",
        estimator=case["params"]["estimator"],
        placement="as_given",
        otb_handle_zero_tail=case["params"]["handle_zero_tail"],
        otb_sum_pi_squared="actor",
    )
    extra = {"old_log_probs": tensor(i["old_log_probs"])}
    if "sum_pi_squared" not in {f.name for f in dataclasses.fields(TrajectoryBatch)}:
        with pytest.raises(ValueError, match="sum_pi_squared"):
            credit_from_verl(i, cfg, **extra)
        pytest.skip("TrajectoryBatch has no sum_pi_squared field: OTB's golden numbers need it")
    res = credit_from_verl(i, cfg, sum_pi_squared=tensor(i["sum_pi_squared"]), **extra)
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("estimator", ["optimal_token_baseline", "tir_optimal_token_baseline"])
def test_optimal_token_baseline_stand_in_is_the_sampled_tokens_share(estimator):
    """Without the actor's Σ_v π², the stand-in is π_t² = exp(2·old_log_prob), and the notes say so."""
    case = load_golden("verl_optimal_token_baseline.json")["cases"][0]["inputs"]
    fields = dict(
        token_level_rewards=tensor(case["token_level_rewards"]),
        response_mask=tensor(case["response_mask"]),
        group_ids=torch.tensor(case["index"]),
        old_log_probs=tensor(case["old_log_probs"]),
    )
    cfg = CreditConfig(profile="verl", estimator=estimator)
    stand_in = run_estimator(estimator, cfg, **fields)
    explicit = run_estimator(estimator, cfg, sum_pi_squared=torch.exp(2 * fields["old_log_probs"]), **fields)
    assert stand_in.notes["sum_pi_squared"] == "sampled_token" and explicit.notes["sum_pi_squared"] == "actor"
    torch.testing.assert_close(stand_in.advantages, explicit.advantages)
