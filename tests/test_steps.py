"""A step is a batch: ``compute_credit`` on a batch of several training steps gives each step exactly what computing
that step alone gives (engine/steps.py), for every estimator, profile, rLLM mode and loss aggregation; groups,
whitening, batch statistics, KL controllers and loss counts never cross steps."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import _config, full_batch, layouts

from engine import ESTIMATORS, PROFILES, CreditConfig, TrajectoryBatch, compute_credit
from engine.config import LOSS_AGG_MODES, STEPWISE_MODES
from engine.credit import with_loss_agg_mode

FEW = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The fast loop (-m "not slow") checks every estimator under the default profile; every profile is the full suite's
# (231 cases, ~25 s).
SWEPT_PROFILES = [
    p if p == CreditConfig().profile else pytest.param(p, marks=pytest.mark.slow) for p in sorted(PROFILES)
]


def two_steps(layout, seed: int) -> tuple[TrajectoryBatch, torch.Tensor, torch.Tensor]:
    """The same prompts (group ids) sampled at steps 5 and 6, with other rollouts and rewards: (batch, rows of
    step 5, rows of step 6). Step 6's rows come first, so the split must put rows back in place."""
    group_ids, rows = layout
    B = len(rows)
    batch = full_batch(group_ids + group_ids, rows + rows, seed)
    steps = torch.tensor([6] * B + [5] * B)
    return batch.replace(steps=steps), torch.arange(B, 2 * B), torch.arange(B)


def assert_rows_equal(merged, alone, rows: torch.Tensor, what: str) -> None:
    """Every row quantity of ``merged`` on ``rows`` is ``alone``'s, bit for bit (NaN where it is NaN)."""
    mine = merged[rows]
    if mine.dim() > 1:  # a step with fewer turns than the batch: its trailing columns are padding
        mine = mine[(slice(None), *(slice(0, n) for n in alone.shape[1:]))]
    torch.testing.assert_close(mine, alone, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


def assert_step_is_alone(batch, cfg, rows_of: dict[int, torch.Tensor]) -> None:
    merged = compute_credit(batch, cfg)
    assert merged.step_rows and [s for s, _ in merged.step_rows] == sorted(rows_of)
    for step, rows in rows_of.items():
        alone = compute_credit(batch.select(rows), cfg)
        for name in ("token_level_scores", "token_level_rewards", "returns", "advantages", "advantage_mask"):
            assert_rows_equal(getattr(merged, name), getattr(alone, name), rows, f"step {step} {name}")
        if alone.values is not None:
            assert_rows_equal(merged.values, alone.values, rows, f"step {step} values")
        for name, view in alone.views().items():
            assert_rows_equal(merged.views()[name], view, rows, f"step {step} view {name}")
        for name, extra in alone.extras.items():
            if extra.dim() > 0 and extra.shape[0] == len(rows):
                assert_rows_equal(merged.extras[name], extra, rows, f"step {step} extras[{name}]")
        for name, value in alone.metrics.items():
            assert merged.metrics.get(name, merged.metrics.get(f"step {step}/{name}")) == value


@pytest.mark.parametrize("profile", SWEPT_PROFILES)
@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
@FEW
@given(
    layout=layouts(min_group=2, same_turns=True),
    seed=st.integers(0, 2**32 - 1),
    mode=st.sampled_from(STEPWISE_MODES),
    agg=st.sampled_from(LOSS_AGG_MODES),
    flags=st.fixed_dictionaries(
        {"use_kl_in_reward": st.booleans(), "rejection_sample": st.booleans(), "state_masking": st.booleans()}
    ),
)
def test_each_step_of_a_two_step_batch_is_computed_alone(estimator, profile, layout, seed, mode, agg, flags):
    batch, rows5, rows6 = two_steps(layout, seed)
    cfg = _config(profile, estimator, mode, agg, **flags)
    sizes = torch.unique(batch.group_ids, return_counts=True)[1]
    if cfg.trainer.group_sizes == "equal" and sizes.unique().numel() > 1:  # OpenRLHF refuses (each step alone does too)
        with pytest.raises(ValueError, match="prompt groups of one size"):
            compute_credit(batch, cfg)
        return
    assert_step_is_alone(batch, cfg, {5: rows5, 6: rows6})


def test_the_same_prompt_in_two_steps_is_two_groups_not_one():
    """The issue's example: one prompt, 4 rollouts at step 5 and 4 at step 6. Merged into one batch without steps,
    GRPO sees one group of 8 and REINFORCE++ whitens across both steps, so step 5's advantages move; with steps,
    they are step 5's own."""
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0])  # step 5: 1 of 4 solved; step 6: 3 of 4
    B, T = 8, 3
    batch = TrajectoryBatch.from_tensors(
        response_mask=torch.ones(B, T),
        token_level_scores=torch.zeros(B, T).index_put_((torch.arange(B), torch.full((B,), T - 1)), scores),
        index=torch.zeros(B, dtype=torch.long),
        steps=torch.tensor([5] * 4 + [6] * 4),
    )
    step5 = batch.select(torch.arange(4))
    for estimator in ("grpo", "reinforce_plus_plus"):
        cfg = CreditConfig(profile="verl", estimator=estimator)
        own = compute_credit(step5, cfg).advantages
        by_step = compute_credit(batch, cfg).advantages[:4]
        merged = compute_credit(batch.replace(steps=None), cfg).advantages[:4]
        assert torch.equal(by_step, own)
        assert (merged - own).abs().max() > 0.3  # what the merged batch silently did
    # GRPO by hand: step 5 alone, mean 0.25, std (ddof 1) 0.5: the solved row gets (1 - 0.25) / (0.5 + 1e-6)
    grpo = compute_credit(batch, CreditConfig(profile="verl", estimator="grpo")).advantages[:, -1]
    assert grpo[0].item() == pytest.approx(0.75 / (0.5 + 1e-6))
    assert grpo[4].item() == pytest.approx(0.25 / (0.5 + 1e-6))  # step 6: mean 0.75


def test_metrics_that_differ_between_steps_are_named_by_step():
    """The adaptive KL controller runs per step: each step's KL is its own, named ``step <s>/kl``."""
    g = torch.Generator().manual_seed(0)
    B, T = 4, 5
    old = -torch.rand(B, T, generator=g)
    batch = TrajectoryBatch.from_tensors(
        response_mask=torch.ones(B, T),
        token_level_scores=torch.rand(B, T, generator=g),
        old_log_probs=old,
        ref_log_prob=old + torch.tensor([[0.1], [0.1], [0.5], [0.5]]),
        index=torch.tensor([0, 0, 1, 1]),
        steps=torch.tensor([1, 1, 2, 2]),
    )
    cfg = CreditConfig(profile="verl", estimator="grpo", use_kl_in_reward=True, kl_ctrl_type="adaptive")
    res = compute_credit(batch, cfg)
    one = compute_credit(batch.select([0, 1]), cfg).metrics
    two = compute_credit(batch.select([2, 3]), cfg).metrics
    assert res.metrics["step 1/kl"] == one["kl"] and res.metrics["step 2/kl"] == two["kl"]
    assert one["kl"] != two["kl"] and "kl" not in res.metrics
    assert res.metrics["kl_coef"] == one["kl_coef"] == two["kl_coef"]  # the same β at the start of each step
    assert res.notes["steps"].startswith("2 steps (1, 2), each computed alone")


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "token-sum"])
def test_another_aggregation_of_a_multi_step_result_counts_each_step_alone(mode):
    """``with_loss_agg_mode`` recomputes the weights from the result's masks: token-mean divides by the tokens of
    the step's batch, not of every step."""
    g = torch.Generator().manual_seed(1)
    B, T = 6, 7
    mask = (torch.rand(B, T, generator=g) < 0.7).float()
    batch = TrajectoryBatch.from_tensors(
        response_mask=mask,
        token_level_scores=torch.rand(B, T, generator=g) * mask,
        index=torch.tensor([0, 0, 0, 0, 1, 1]),
        steps=torch.tensor([3, 3, 4, 4, 4, 4]),
    )
    base = compute_credit(batch, CreditConfig(profile="verl", estimator="grpo", loss_agg_mode="token-mean"))
    got = with_loss_agg_mode(base, mode)
    want = compute_credit(batch, CreditConfig(profile="verl", estimator="grpo", loss_agg_mode=mode))
    torch.testing.assert_close(got.agg_weights, want.agg_weights, rtol=0, atol=0)
    torch.testing.assert_close(got.effective_weights, want.effective_weights, rtol=0, atol=0)
    if mode == "token-mean":  # step 3's two rows share 1 / (their tokens), step 4's 1 / (its tokens)
        n3, n4 = mask[:2].sum(), mask[2:].sum()
        assert torch.allclose(want.agg_weights[:2][mask[:2] > 0], 1 / n3)
        assert torch.allclose(want.agg_weights[2:][mask[2:] > 0], 1 / n4)


def test_a_batch_of_one_step_is_computed_as_it_is():
    batch = TrajectoryBatch.from_tensors(
        response_mask=torch.ones(2, 2), token_level_scores=torch.eye(2), steps=torch.tensor([7, 7])
    )
    res = compute_credit(batch, CreditConfig(estimator="grpo"))
    assert res.step_rows == () and "steps" not in res.notes
    with pytest.raises(ValueError, match="TrajectoryBatch.steps: negative step -1"):
        batch.replace(steps=torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match=r"TrajectoryBatch.steps: expected shape \[2\]"):
        batch.replace(steps=torch.tensor([1, 2, 3]))
