"""Golden: OpenRLHF 0.11.2's ``compute_advantages_and_returns`` and ``compute_approx_kl``
(``openrlhf_advantages.json``), run unmodified by ``references/openrlhf/generate.py``.

Each case's rows become a batch: the scalar reward on the row's last action token (placement as_given), the
action mask as the only mask, the prompt group ``index // n_samples_per_prompt`` as group ids, the case's old and
reference log-probs and critic values. ``compute_credit`` under profile ``openrlhf`` (docs/conventions/openrlhf.md §12),
with OpenRLHF's estimator mapped by ``engine.profiles.openrlhf_estimator``, must reproduce its advantages and returns
(whole tensors) and its KL on the action mask (OpenRLHF's KL tensor is not masked; CreditLens masks it, and OpenRLHF
masks it before using it).
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import REFERENCE_ERRORS, assert_golden, golden_cases, is_error, load_golden, tensor

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.profiles import OPENRLHF_ESTIMATORS, openrlhf_estimator

OPENRLHF = "openrlhf_advantages.json"
CASES = golden_cases(OPENRLHF)


def _config(p: dict, profile: str = "openrlhf") -> CreditConfig:
    return CreditConfig(
        profile=profile,
        **openrlhf_estimator(p["estimator"]),
        placement="as_given",
        gamma=p["gamma"],
        lam=p["lambd"],
        whiten_std=not p["no_std_norm"],
        use_kl_in_reward=True,
        kl_coef=p["kl_coef"],
        kl_penalty=p["kl_estimator"],
        reward_clip=tuple(p["reward_clip_range"]) if p["reward_clip_range"] else None,
    )


def _batch(inputs: dict) -> TrajectoryBatch:
    mask = tensor(inputs["action_mask"])
    B, T = mask.shape
    last = (mask * torch.arange(T)).argmax(-1)  # OpenRLHF: the reward on the last action token (T − 1 if none)
    scores = torch.zeros(B, T)
    scores[torch.arange(B), last] = tensor(inputs["rewards"]) * mask[torch.arange(B), last]
    extra = {"values": tensor(inputs["values"])} if "values" in inputs else {}
    return TrajectoryBatch.from_tensors(
        token_level_scores=scores,
        response_mask=mask,
        attention_mask=mask,
        index=torch.tensor(inputs["group"]),
        old_log_probs=tensor(inputs["old_log_probs"]),
        ref_log_probs=tensor(inputs["ref_log_probs"]),
        **extra,
    )


def test_every_estimator_is_covered() -> None:
    reference = load_golden(OPENRLHF)["reference"]
    estimators = {c.values[0]["params"]["estimator"] for c in CASES}
    assert estimators == set(OPENRLHF_ESTIMATORS) == set(reference["estimators"])


@pytest.mark.parametrize("case", golden_cases(OPENRLHF, lambda c: not is_error(c)))
def test_compute_credit_under_the_openrlhf_profile(case: dict) -> None:
    res = compute_credit(_batch(case["inputs"]), _config(case["params"]), device="cpu")
    out = case["outputs"]
    assert_golden(res.advantages, out["advantages"], what="advantages")
    assert_golden(res.returns, out["returns"], what="returns")
    assert_golden(res.kl, out["kl"], mask=tensor(case["inputs"]["action_mask"]), what="kl")


@pytest.mark.parametrize("case", golden_cases(OPENRLHF, is_error))
def test_refused_where_openrlhf_raises(case: dict) -> None:
    with pytest.raises(REFERENCE_ERRORS, match="one size"):
        compute_credit(_batch(case["inputs"]), _config(case["params"]), device="cpu")


def test_the_verl_profile_differs() -> None:
    """Under verl the same scheme misses every case: the KL summed into the score (or, without KL, the advantage
    only on action tokens, not carried through holes), verl's whitening, hole-skipping GAE."""
    missed = 0
    ok = [c.values[0] for c in golden_cases(OPENRLHF, lambda c: not is_error(c))]
    for case in ok:
        res = compute_credit(_batch(case["inputs"]), _config(case["params"], profile="verl"), device="cpu")
        if not torch.allclose(res.advantages, tensor(case["outputs"]["advantages"]), atol=1e-5, equal_nan=True):
            missed += 1
    assert (missed, len(ok)) == (39, 39)


def test_a_group_of_one_is_nan_and_the_lint_says_so() -> None:
    from engine.lint import run_lints

    case = next(c for c in load_golden(OPENRLHF)["cases"] if c["name"] == "group_norm/multiturn_holes/n=1/kl=0.1,k1")
    batch, cfg = _batch(case["inputs"]), _config(case["params"])
    found = {f.check: f for f in run_lints(batch, cfg)}
    assert "non_finite_advantage" in found
    assert found["non_finite_advantage"].severity == "error"
    assert "6 of them alone in a prompt group" in found["non_finite_advantage"].message
