"""Profile ``prime-rl`` by hand (CONVENTIONS.md §13): what its golden cases leave out."""

from __future__ import annotations

import pytest
import torch

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.profiles import prime_rl_algorithm


def _batch(scores: list[float], groups: list[int], T: int = 3) -> TrajectoryBatch:
    s = torch.zeros(len(scores), T)
    s[:, -1] = torch.tensor(scores)
    return TrajectoryBatch.from_tensors(token_level_scores=s, response_mask=torch.ones(len(scores), T),
                                        index=torch.tensor(groups))  # fmt: skip


def test_maxrl_gives_a_group_with_a_non_positive_mean_zero() -> None:
    """prime-rl max_rl.py: m ≤ 0 → every row 0; SkyRL divides by m + ε."""
    b = _batch([-1.0, 0.5, 1.0, 0.0], [0, 0, 1, 1])  # group 0: m = −0.25; group 1: m = 0.5
    res = compute_credit(b, CreditConfig(profile="prime-rl", **prime_rl_algorithm("max_rl")), device="cpu")
    assert res.advantages[:, 0].tolist() == pytest.approx([0.0, 0.0, 1.0, -1.0])
    sky = compute_credit(b, CreditConfig(profile="skyrl", estimator="maxrl"), device="cpu")
    assert sky.advantages[0, 0].item() == pytest.approx(-0.75 / (-0.25 + 1e-6))


def test_zero_advantage_rows_drop_out_of_the_token_mean() -> None:
    """A tied group's tokens have advantage 0: under prime-rl they leave the loss, so the other group's tokens
    share the token-mean weight (1/6 each instead of 1/12)."""
    b = _batch([1.0, 1.0, 1.0, 0.0], [0, 0, 1, 1])
    cfg = CreditConfig(profile="prime-rl", **prime_rl_algorithm("grpo"))
    res = compute_credit(b, cfg, device="cpu")
    assert res.loss_mask.sum(-1).tolist() == [0, 0, 3, 3]
    assert res.agg_weights[2:].flatten().tolist() == pytest.approx([1 / 6] * 6)
    verl = compute_credit(b, cfg.replace(profile="verl"), device="cpu")
    assert verl.agg_weights.flatten().tolist() == pytest.approx([1 / 12] * 12)


def test_algorithm_names() -> None:
    assert prime_rl_algorithm("grpo") == {"estimator": "grpo", "norm_adv_by_std_in_grpo": False}
    with pytest.raises(ValueError, match="rae"):
        prime_rl_algorithm("rae")
