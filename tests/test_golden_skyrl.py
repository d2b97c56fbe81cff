"""Golden: SkyRL 0.3.0's advantage estimators (``skyrl_advantages.json``), run unmodified by
``references/skyrl/generate.py`` on the shared fixtures of the verl files.

The engine is not compared here yet. These tests pin how SkyRL relates to the verl golden data on the same
inputs: the fixtures are the verl ones, and where SkyRL runs the same computation as a verl function its
outputs match that function's golden outputs (GRPO = verl's loop and vectorized GRPO; RLOO = verl's vectorized
RLOO, singletons 0; REINFORCE++ = the legacy verl b178a3c version that resets the return at every hole; GAE =
the older verl copy without hole skipping, kept in kgr1_gae_no_hole_skip.json).
"""

from __future__ import annotations

import pytest
from golden_utils import assert_golden, load_golden, tensor

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


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_matches_the_same_computation_in_verl(case: dict) -> None:
    target = _same_as(case)
    verl = target and _verl(*target)
    if verl is None:
        pytest.skip("no verl golden case computes the same thing on this fixture")
    for key in ("advantages", "returns"):  # every position, masked ones included
        assert_golden(tensor(case["outputs"][key]), verl["outputs"][key], what=f"{target} {key}")
