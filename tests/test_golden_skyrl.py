"""Golden: SkyRL 0.3.0's advantage estimators (``skyrl_advantages.json``), run unmodified by
``references/skyrl/generate.py`` on the shared fixtures of the verl files.

(a) ``compute_credit`` under profile ``skyrl`` reproduces every case, whole tensors (docs/conventions/skyrl.md §11).
(b) How SkyRL relates to the verl golden data on the same inputs: the fixtures are the verl ones, and where SkyRL
runs the same computation as a verl function its outputs match that function's golden outputs (GRPO = verl's loop
and vectorized GRPO; RLOO = verl's vectorized RLOO, singletons 0; REINFORCE++ = the legacy verl b178a3c version
that resets the return at every hole; GAE = the older verl copy without hole skipping, kept in
kgr1_gae_no_hole_skip.json).
"""

from __future__ import annotations

import pytest
from golden_utils import assert_golden, credit_from_verl, load_golden, tensor

from engine import CreditConfig

SKYRL = "skyrl_advantages.json"
CASES = load_golden(SKYRL)["cases"]
VERL_FIXTURE = {
    "multiturn_holes": "multiturn_holes_groups_3_2_1/norm_by_std=True",
    "ties_zero_std": "ties_zero_std/norm_by_std=True",
    "random_dense_seed0": "random_dense_seed0/norm_by_std=True",
    "near_tie_float_noise": "near_tie_float_noise/norm_by_std=True",
}


def _verl(file_name: str, case_name: str) -> dict | None:
    return next((c for c in load_golden(file_name)["cases"] if c["name"] == case_name), None)


def _same_as(case: dict) -> tuple[str, str] | None:
    """The verl golden case SkyRL's estimator reproduces on this fixture, if there is one."""
    estimator, fixture = case["params"]["estimator"], case["name"].split("/")[1]
    verl_fixture = "multiturn_holes_groups_3_2_1" if fixture == "multiturn_holes" else fixture
    if estimator == "grpo":
        return "verl_grpo_outcome.json", f"{verl_fixture}/norm_by_std={case['params']['grpo_norm_by_std']}"
    if estimator == "rloo":
        return "verl_rloo_vectorized.json", verl_fixture
    if estimator == "reinforce++":
        return "verl_legacy_b178a3c_reinforce_pp.json", f"{fixture}/gamma={case['params']['gamma']}"
    if estimator == "gae":
        return "kgr1_gae_no_hole_skip.json", f"{fixture}/gamma={case['params']['gamma']},lam={case['params']['lambd']}"
    return None


def test_every_registered_estimator_is_covered() -> None:
    reference = load_golden(SKYRL)["reference"]
    assert {c["params"]["estimator"] for c in CASES} == set(reference["registered_estimators"])
    assert reference["package"] == "skyrl==0.3.0 (PyPI)"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_inputs_are_the_verl_fixtures(case: dict) -> None:
    verl = _verl("verl_grpo_outcome.json", VERL_FIXTURE[case["name"].split("/")[1]])
    for key in ("token_level_rewards", "response_mask", "index"):
        assert case["inputs"][key] == verl["inputs"][key], key


ESTIMATOR = {"grpo": "grpo", "rloo": "rloo", "reinforce++": "reinforce_plus_plus", "gae": "gae", "maxrl": "maxrl"}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_compute_credit_under_the_skyrl_profile(case: dict) -> None:
    p, inputs = case["params"], case["inputs"]
    cfg = CreditConfig(
        profile="skyrl",
        estimator=ESTIMATOR[p["estimator"]],
        placement="as_given",
        gamma=p["gamma"],
        lam=p["lambd"],
        norm_adv_by_std_in_grpo=p["grpo_norm_by_std"],
        epsilon=p["epsilon"],
    )
    extra = {"values": tensor(inputs["values"])} if "values" in inputs else {}
    res = credit_from_verl(inputs, cfg, **extra)
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


WITH_VERL_TWIN = [c for c in CASES if (t := _same_as(c)) is not None and _verl(*t) is not None]


def test_the_verl_twins_are_the_expected_ones() -> None:
    """Every case but MaxRL (not in verl) and two fixtures the old-GAE file lacks has a verl twin."""
    names = {c["name"] for c in CASES} - {c["name"] for c in WITH_VERL_TWIN}
    assert names == {
        *(f"maxrl/{f}" for f in VERL_FIXTURE),
        "gae/random_dense_seed0/gamma=1.0,lambd=1.0",
        "gae/random_dense_seed0/gamma=0.99,lambd=0.95",
        "reinforce++/ties_zero_std/gamma=1.0",
        "reinforce++/near_tie_float_noise/gamma=1.0",
    }, names


@pytest.mark.parametrize("case", WITH_VERL_TWIN, ids=[c["name"] for c in WITH_VERL_TWIN])
def test_matches_the_same_computation_in_verl(case: dict) -> None:
    target = _same_as(case)
    verl = _verl(*target)
    for key in ("advantages", "returns"):  # every position, masked ones included
        assert_golden(tensor(case["outputs"][key]), verl["outputs"][key], what=f"{target} {key}")
