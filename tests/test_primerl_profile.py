"""Profile ``prime-rl`` by hand (docs/conventions/prime-rl.md §13): what its golden cases leave out."""

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


def test_length_penalty_by_hand() -> None:
    """grpo.py's linear penalty, weights (0.25, 0.1, 0.1). Group 0: r = [1, 0], mean 0.5; out = [10, 20] (max 20),
    in = total − out = [30 − 10, 30 − 20] = [20, 10] (max 20), turns = [1, 2] (max 2):
    f = [0.25·0.5 + 0.1·1 + 0.1·0.5, 0.25·1 + 0.1·0.5 + 0.1·1] = [0.275, 0.4];
    s' = [1 − 0.5·0.275, 0 − 0.5·0.4] = [0.8625, −0.2], mean 0.33125, A = [0.53125, −0.53125].
    Group 1, a lone row, is shaped by itself and gets 0."""
    b = _batch([1.0, 0.0, 1.0], [0, 0, 1]).replace(trace_lengths=torch.tensor([[10, 30, 1], [20, 30, 2], [5, 9, 1]]))
    cfg = CreditConfig(profile="prime-rl", **prime_rl_algorithm("grpo", {"type": "linear"}))
    res = compute_credit(b, cfg, device="cpu")
    assert res.advantages[:, 0].tolist() == pytest.approx([0.53125, -0.53125, 0.0])
    assert res.extras["length_fraction"].tolist() == pytest.approx([0.275, 0.4, 0.45])
    assert res.extras["scores"][:2].tolist() == pytest.approx([0.8625, -0.2])
    plain = compute_credit(b, cfg.replace(length_penalty=None), device="cpu")
    assert plain.advantages[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.0])


def test_length_penalty_refusals() -> None:
    with pytest.raises(ValueError, match="trace_lengths"):
        compute_credit(_batch([1.0, 0.0], [0, 0]), CreditConfig(estimator="grpo", length_penalty=(0.25, 0.1, 0.1)))
    with pytest.raises(ValueError, match="three weights"):
        CreditConfig(length_penalty=(0.25, -0.1, 0.1))
    with pytest.raises(ValueError, match="only estimator 'grpo'"):
        CreditConfig(estimator="rloo", length_penalty=(0.25, 0.1, 0.1))
    assert prime_rl_algorithm("grpo", {"num_turns_weight": 0.0})["length_penalty"] == (0.25, 0.1, 0.0)
    with pytest.raises(ValueError, match="belongs to algo.type 'grpo'"):
        prime_rl_algorithm("max_rl", {})
    with pytest.raises(ValueError, match="unknown field"):
        prime_rl_algorithm("grpo", {"num_tokens_weight": 1.0})
    with pytest.raises(ValueError, match="trace_lengths"):
        TrajectoryBatch.from_tensors(response_mask=torch.ones(1, 2), trace_lengths=torch.tensor([[1.0, -2.0, 0.0]]))
