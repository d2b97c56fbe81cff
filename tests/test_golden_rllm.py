"""Golden: rLLM's Monte-Carlo step returns and its native (unified-trainer) advantages, docs/conventions/rllm.md §2.1
and §2.4.

(a) ``engine.rllm.mc_returns`` and the registered estimators on an ``EstimatorInput``; (b) ``compute_credit``:
one trajectory whose steps are consecutive turns (the step reward on each step's last token) for the MC returns,
and one single-token row per trajectory, grouped by task, under the ``rllm`` profile for the native advantages.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import assert_golden, golden_cases, run_estimator

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.rllm import mc_returns

TOKENS_PER_STEP = 2


def _gamma(case) -> float:
    g = case["params"]["gamma"]
    return CreditConfig().stepwise_gamma if isinstance(g, str) else g  # "function default (0.95)"


def test_stepwise_gamma_default_is_compute_mc_return_default():
    assert CreditConfig().stepwise_gamma == 0.95


@pytest.mark.parametrize("case", golden_cases("rllm_mc_returns.json"))
def test_mc_returns_function(case):
    steps = torch.tensor([case["inputs"]["step_rewards"]])  # (1, K)
    assert_golden(mc_returns(steps, _gamma(case))[0], case["outputs"]["mc_returns"], what="mc_returns")
    assert_golden(steps.sum(), torch.tensor(case["outputs"]["trajectory_reward"]), what="trajectory_reward")


def _steps_as_turns(step_rewards: list[float]) -> TrajectoryBatch:
    """One trajectory, step k = turn k of TOKENS_PER_STEP action tokens, its reward on the step's last token."""
    K = len(step_rewards)
    scores = torch.zeros(K, TOKENS_PER_STEP)
    scores[:, -1] = torch.tensor(step_rewards)
    turn_ids = torch.arange(K).repeat_interleave(TOKENS_PER_STEP)
    return TrajectoryBatch.from_tensors(
        token_level_scores=scores.reshape(1, -1), response_mask=torch.ones(1, K * TOKENS_PER_STEP),
        turn_ids=turn_ids[None],
    )  # fmt: skip


@pytest.mark.parametrize("case", golden_cases("rllm_mc_returns.json"))
def test_mc_returns_compute_credit(case):
    cfg = CreditConfig(profile="rllm-legacy", stepwise_mode="per_step", stepwise_gamma=_gamma(case))
    res = compute_credit(_steps_as_turns(case["inputs"]["step_rewards"]), cfg, device="cpu")
    assert_golden(res.extras["step_mc_returns"][0], case["outputs"]["mc_returns"], what="step_mc_returns")
    assert_golden(res.scores[0], torch.tensor(case["outputs"]["trajectory_reward"]), what="trajectory reward")


# --------------------------------------------------------------------------- rLLM-native advantages (unified)


def _native_config(case) -> CreditConfig:
    p = case["params"]
    fields = {k: p[k] for k in ("norm_adv_by_std_in_grpo", "epsilon") if k in p}
    return CreditConfig(profile="rllm", estimator=case["name"].split("/")[0], **fields)


def _flat(groups: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    rewards = torch.tensor([r for g in groups for r in g])
    group_ids = torch.tensor([k for k, g in enumerate(groups) for _ in g])
    return rewards, group_ids


@pytest.mark.parametrize("case", golden_cases("rllm_native_advantages.json"))
def test_native_advantages_estimator(case):
    rewards, group_ids = _flat(case["inputs"]["groups"])
    cfg = _native_config(case)
    out = run_estimator(
        cfg.estimator, cfg, token_level_rewards=rewards[:, None], response_mask=torch.ones(len(rewards), 1),
        group_ids=group_ids,
    )  # fmt: skip
    expected, _ = _flat(case["outputs"]["advantages_by_group"])
    assert_golden(out.advantages[:, 0], expected.float(), what="advantages")


@pytest.mark.parametrize("case", golden_cases("rllm_native_advantages.json"))
def test_native_advantages_compute_credit(case):
    rewards, group_ids = _flat(case["inputs"]["groups"])
    batch = TrajectoryBatch.from_tensors(
        token_level_scores=rewards[:, None], response_mask=torch.ones(len(rewards), 1), index=group_ids
    )
    res = compute_credit(batch, _native_config(case), device="cpu")
    expected, _ = _flat(case["outputs"]["advantages_by_group"])
    assert_golden(res.advantages[:, 0], expected.float(), what="advantages")
