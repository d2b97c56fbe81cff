"""The pipeline as its diagram: each of ``compute_credit``'s four stages on its own (tiny batches, the numbers
worked out in the comments), the result equal to the stages chained, and the batch-derived structures the stages
reuse (per-turn runs, row extents) equal to naive loops."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from benchmarks.batches import synthetic_batch
from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine import stages as S
from engine.scan import TurnSegments

# one prompt, two rollouts; tokens: action, action, tool, action | padding
#   row 0: turns 0 0 0 1, row 1: turns 0 0 -1 -1 (two tokens, then padding)
ATTN = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.float32)
ACT = torch.tensor([[1, 1, 0, 1], [1, 1, 0, 0]], dtype=torch.float32)
TURNS = torch.tensor([[0, 0, 0, 1], [0, 0, -1, -1]])


def tiny(**kw) -> TrajectoryBatch:
    fields = dict(
        token_ids=torch.zeros(2, 4, dtype=torch.long),
        attention_mask=ATTN,
        action_mask=ACT,
        turn_ids=TURNS,
        group_ids=torch.tensor([0, 0]),
        global_rewards=torch.tensor([[1.0], [0.0]]),
        global_reward_names=("exact_match",),
    )
    return TrajectoryBatch(**(fields | kw))


def test_stage_1_places_the_global_reward_on_the_last_action_token() -> None:
    cfg = CreditConfig(estimator="grpo", global_weights={"exact_match": 0.5})
    b = tiny()
    scores = S.place_scores(b, cfg, S.masks_for(b, cfg))
    assert scores.placement == "final_token_only"
    # G = 0.5 · 1 on row 0's last action token (t = 3), 0.5 · 0 on row 1's (t = 1)
    assert scores.scores.tolist() == [[0.0, 0.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0]]
    assert scores.global_reward.tolist() == [0.5, 0.0]


def test_stage_1_adds_weighted_components_left_to_right_in_float32() -> None:
    # five float32 components where the order shows: 1e8 + 1 = 1e8 (spacing 8), so left to right gives
    # ((((1e8 + 1) + 1) + 1) − 1e8) = 0; a reduction that pairs 1e8 with −1e8 first would give 3
    names = ("a", "b", "c", "d", "e")
    comps = torch.tensor([[1e8, 1.0, 1.0, 1.0, -1e8], [0.1, 0.2, 0.3, 0.0, 0.0]])
    b = tiny(global_rewards=comps, global_reward_names=names)
    cfg = CreditConfig(estimator="grpo", global_weights={"c": 3.0})  # unnamed components weigh 1
    g = S.place_scores(b, cfg, S.masks_for(b, cfg)).global_reward
    f32 = torch.tensor  # each product and partial sum rounded to float32, in the run's component order
    second = ((f32(0.1) + f32(0.2)) + f32(0.3) * f32(3.0)).item()
    assert g.tolist() == [0.0, second]
    # an excluded component is left out, not multiplied by 0: (1e8 + 1 + 3) − 1e8 still rounds to 0
    cfg = CreditConfig(estimator="grpo", global_exclude_prefixes=("d",))
    assert S.place_scores(b, cfg, S.masks_for(b, cfg)).global_reward[1].item() == ((f32(0.1) + 0.2) + 0.3).item()


def test_stage_2_subtracts_beta_kl_on_the_state_mask() -> None:
    old = torch.full((2, 4), -1.0)
    ref = torch.full((2, 4), -1.5)  # k1 = old − ref = 0.5 everywhere
    b = tiny(old_log_probs=old, ref_log_probs=ref)
    cfg = CreditConfig(
        estimator="grpo",
        use_kl_in_reward=True,
        kl_coef=0.1,
        placement="final_token_only",  # auto would spread G over the tokens once KL is in the reward
        global_weights={"exact_match": 0.5},
    )
    m = S.masks_for(b, cfg)
    rewards = S.subtract_kl(b, cfg, S.place_scores(b, cfg, m), m)
    # β · kl = 0.05 on action tokens only (the tool token at row 0, t = 2 is out of the state mask)
    assert rewards.kl.tolist() == [[0.5, 0.5, 0.0, 0.5], [0.5, 0.5, 0.0, 0.0]]
    assert torch.allclose(rewards.rewards, torch.tensor([[-0.05, -0.05, 0.0, 0.45], [-0.05, -0.05, 0.0, 0.0]]))
    assert rewards.metrics["kl_coef"] == pytest.approx(0.1)


def test_stage_2_without_in_reward_kl_passes_the_scores_through() -> None:
    b = tiny()
    cfg = CreditConfig(estimator="grpo")
    m = S.masks_for(b, cfg)
    scores = S.place_scores(b, cfg, m)
    rewards = S.subtract_kl(b, cfg, scores, m)
    assert rewards.rewards is scores.scores and rewards.kl is None and rewards.metrics == {}
    assert not S.shown_kl(b, cfg, scores, m).any()  # no log-probs: zeros to show


def test_stage_3_runs_the_estimator_on_the_advantage_mask() -> None:
    b = tiny()
    cfg = CreditConfig(estimator="grpo", norm_adv_by_std_in_grpo=False, global_weights={"exact_match": 0.5})
    m = S.masks_for(b, cfg)
    scores = S.place_scores(b, cfg, m)
    out = S.estimate(b, cfg, scores, S.subtract_kl(b, cfg, scores, m), m)
    # scores 0.5 and 0, group mean 0.25: ±0.25 broadcast on the action mask (the tool token gets 0)
    assert out.advantages.tolist() == [[0.25, 0.25, 0.0, 0.25], [-0.25, -0.25, 0.0, 0.0]]


def test_stage_4_weighs_tokens_and_sums_turns() -> None:
    b = tiny()
    cfg = CreditConfig(estimator="grpo", norm_adv_by_std_in_grpo=False, global_weights={"exact_match": 0.5})
    m = S.masks_for(b, cfg)
    scores = S.place_scores(b, cfg, m)
    rewards = S.subtract_kl(b, cfg, scores, m)
    loss = S.weigh_loss(b, cfg, scores, rewards, S.estimate(b, cfg, scores, rewards, m), m)
    # token-mean over the 5 loss tokens: w = 1/5 on each, w · A = ±0.05
    assert torch.allclose(loss.agg_weights, ACT / 5)
    assert torch.allclose(loss.effective_weights, torch.tensor([[0.05, 0.05, 0, 0.05], [-0.05, -0.05, 0, 0]]))
    # per turn: Σ A on loss tokens, Σ rewards, loss tokens. Row 0 turn 0 = t 0..2 (2 loss tokens), turn 1 = t 3
    expected = torch.tensor([[[0.5, 0.0, 2.0], [0.25, 0.5, 1.0]], [[-0.5, 0.0, 2.0], [0.0, 0.0, 0.0]]])
    assert torch.allclose(loss.turn_sums, expected)
    assert loss.scores.tolist() == [0.5, 0.0] and loss.kept.all()
    assert loss.sample_scores.tolist() == pytest.approx([0.75, -0.5])  # Σ_t returns (= advantages) · state mask


@pytest.mark.parametrize("estimator", ["gae", "grpo", "reinforce_plus_plus"])
def test_compute_credit_is_the_four_stages_chained(estimator: str) -> None:
    b = synthetic_batch(24, 40, group_size=4)
    cfg = CreditConfig(estimator=estimator, use_kl_in_reward=True)
    res = compute_credit(b, cfg, device="cpu")
    m = S.masks_for(b, cfg)
    scores = S.place_scores(b, cfg, m)
    rewards = S.subtract_kl(b, cfg, scores, m)
    out = S.estimate(b, cfg, scores, rewards, m)
    loss = S.weigh_loss(b, cfg, scores, rewards, out, m)
    assert torch.equal(res.token_level_scores, scores.scores) and torch.equal(res.token_level_rewards, rewards.rewards)
    assert torch.equal(res.advantages, out.advantages) and torch.equal(res.effective_weights, loss.effective_weights)
    assert torch.equal(res.turn_advantage, loss.turn_sums[..., 0]) and torch.equal(res.agg_weights, loss.agg_weights)


def naive_turn_sums(turn_ids: torch.Tensor, K: int, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(turn_ids.shape[0], K)
    for i in range(turn_ids.shape[0]):
        for t in range(turn_ids.shape[1]):
            k = int(turn_ids[i, t])
            if 0 <= k < K:
                out[i, k] += x[i, t]
    return out


def test_turn_segments_sum_like_a_loop_with_backward_and_out_of_range_turns() -> None:
    turn_ids = torch.tensor([[0, 0, 1, 1, 2, -1], [0, 1, 0, 1, -1, -1], [3, 0, 0, 2, 2, 5], [-1, -1, -1, -1, -1, -1]])
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
    seg = TurnSegments.of(turn_ids, K=3)
    got = seg.sums(x, torch.ones(4, 6))
    assert torch.equal(got[..., 0], naive_turn_sums(turn_ids, 3, x))
    assert torch.equal(got[..., 1], naive_turn_sums(turn_ids, 3, torch.ones(4, 6)))
    # row blocks: the same runs when built a few rows at a time
    big = turn_ids.repeat(700, 1)
    assert torch.equal(TurnSegments.of(big, 3).sums(x.repeat(700, 1))[..., 0], got[..., 0].repeat(700, 1))


def test_batch_keeps_its_turn_segments_and_row_extents() -> None:
    b = tiny()
    assert b.turn_segments is b.turn_segments and b.turn_segments.turns == 2
    last, has, n = b.row_extent(b.action_mask)
    assert last.tolist() == [3, 1] and has.tolist() == [True, True] and n.tolist() == [3.0, 2.0]
    assert b.row_extent(b.action_mask)[0] is last  # kept
    other = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.float32)
    last, has, n = b.row_extent(other)
    assert last.tolist() == [0, 0] and has.tolist() == [True, False] and n.tolist() == [1.0, 0.0]
    fresh = dataclasses.replace(b)  # a new batch computes its own
    assert "turn_segments" not in fresh.__dict__ and fresh.turn_segments.turns == 2


# ------------------------------------------------------------------------------------------------ views (stage 4)
def test_views_are_computed_on_first_read_all_together_and_kept() -> None:
    b = synthetic_batch(16, 32, group_size=4)
    res = compute_credit(b, CreditConfig(estimator="grpo"), device="cpu")
    assert res._views is None and res._pending is not None  # stages 1-3 only
    seconds = res.seconds
    w = res.agg_weights
    assert res._pending is None and set(res._views) == set(res.VIEWS)  # every view at once; the inputs let go
    assert res.agg_weights is w and res.views() is res.views() and res.seconds > seconds
    assert res.materialize() is res
    q = res.quantities()
    assert set(res.VIEWS) <= set(q) and "advantages" in q and not any(k.startswith("_") for k in q)


def test_views_read_by_several_threads_are_computed_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    res = compute_credit(synthetic_batch(64, 64, group_size=8), CreditConfig(estimator="gae"), device="cpu")
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: res.effective_weights, range(8)))
    assert all(g is got[0] for g in got)


def test_replace_changes_fields_and_views_and_refuses_unknown_names() -> None:
    res = compute_credit(tiny(), CreditConfig(estimator="grpo"), device="cpu")
    zero = torch.zeros_like(res.agg_weights)
    other = res.replace(agg_weights=zero, placement="x")
    assert other.agg_weights is zero and other.placement == "x" and other.advantages is res.advantages
    assert other.kl is res.kl and res.agg_weights is not zero
    with pytest.raises(TypeError, match="unknown names"):
        res.replace(no_such_thing=1)


def test_a_scheme_that_cannot_be_shown_fails_in_compute_credit_not_later() -> None:
    b = tiny(old_log_probs=torch.zeros(2, 4), ref_log_probs=torch.zeros(2, 4))
    with pytest.raises(NotImplementedError, match="full"):
        compute_credit(b, CreditConfig(estimator="grpo", kl_penalty="full"), device="cpu")
    with pytest.raises(NotImplementedError, match="'\\+' variants"):
        compute_credit(b, CreditConfig(profile="verl-legacy", estimator="grpo", kl_penalty="k1+"), device="cpu")
