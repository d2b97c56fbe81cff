"""Run.to_batch: masks, turn ids, padding, reward stacking, per-token fields, on hand-built trajectories."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.io import Run, Segment, Trajectory
from engine.io.data.layout import segment_turns, token_layout


def S(role, n, start=1, **arrays):
    return Segment(
        role,
        "x" * n,
        np.arange(start, start + n, dtype=np.int32),
        **{k: np.asarray(v, np.float32) for k, v in arrays.items()},
    )


def T(id_, segs, group="g", **kw):
    return Trajectory(id=id_, group_id=group, prompt="p", segments=segs, **kw)


def test_turns_follow_model_runs():
    # a turn = a maximal run of model segments + the non-model segments after it; leading observations -> turn 0
    assert segment_turns(["model", "tool", "model", "model", "user", "tool", "model"]) == [0, 0, 1, 1, 1, 1, 2]
    assert segment_turns(["user", "model", "tool"]) == [0, 0, 0]
    assert segment_turns(["model", "system", "model"]) == [0, 0, 1]


def test_batch_layout_by_hand():
    run = Run(
        [
            T("a", [S("model", 2), S("tool", 3), S("model", 1)], group="p1", metadata={"truncated": True}),
            T("b", [S("model", 3)], group="p2"),
            T("c", [S("model", 1), S("user", 1)], group="p1"),
        ]
    )
    b = run.to_batch()
    assert b.token_ids.shape == (3, 6)
    assert b.attention_mask.tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]]
    assert b.action_mask.tolist() == [[1, 1, 0, 0, 0, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]]
    assert b.turn_ids.tolist() == [[0, 0, 0, 0, 0, 1], [0, 0, 0, -1, -1, -1], [0, 0, -1, -1, -1, -1]]
    assert b.group_ids.tolist() == [0, 1, 0]
    assert b.truncated.tolist() == [True, False, False]
    assert b.trajectory_ids == ("a", "b", "c")
    assert b.turn_rewards is None and b.global_rewards is None and b.token_scores is None
    assert b.old_log_probs is None and b.values is None
    assert run.token_roles(0) == ["model"] * 2 + ["tool"] * 3 + ["model"]


def test_reward_components_union_and_placeholders():
    run = Run(
        [
            T("a", [S("model", 1)], turn_rewards=[{"f": 1.0}, {"f": 0.5, "v": 1.0}, {}], global_rewards={"em": 1.0}),
            T("b", [S("model", 1)], turn_rewards=[{"v": 2.0}], global_rewards={"_k": 3.0, "em": 0.0}),
        ]
    )
    b = run.to_batch()
    assert b.turn_reward_names == ("f", "v") and b.global_reward_names == ("em", "_k")
    assert b.turn_rewards.tolist() == [[[1, 0], [0.5, 1], [0, 0]], [[0, 2], [0, 0], [0, 0]]]
    assert b.turn_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert b.global_rewards.tolist() == [[1, 0], [0, 3]]


def test_per_token_fields_all_or_nothing():
    both = [
        T("a", [S("model", 2, log_probs=[-1, -2], values=[1, 2]), S("tool", 1)]),
        T("b", [S("model", 1, log_probs=[-3], values=[3], scores=[1.0])]),
    ]
    b = Run(both).to_batch()
    assert b.old_log_probs.tolist() == [[-1, -2, 0], [-3, 0, 0]]  # tool token without a value counts as 0
    assert b.values.tolist() == [[1, 2, 0], [3, 0, 0]]
    assert b.token_scores.tolist() == [[0, 0, 0], [1, 0, 0]]  # scores: any trajectory having them is enough
    assert b.ref_log_probs is None
    mixed = both + [T("c", [S("model", 1)])]
    assert Run(mixed).to_batch().old_log_probs is None


def test_reward_baselines_and_device():
    run = Run(
        [
            T("a", [S("model", 1)], metadata={"reward_baseline": 0.5}),
            T("b", [S("model", 2)], metadata={"reward_baseline": -1}),
        ]
    )
    b = run.to_batch(device="cpu")
    assert b.reward_baselines.tolist() == [0.5, -1.0] and b.device == torch.device("cpu")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["model", "tool", "user", "system"]), st.integers(1, 4)), min_size=1, max_size=6
        ),
        min_size=1,
        max_size=5,
    )
)
def test_layout_properties(shapes):
    run = Run([T(f"t{i}", [S(r, n) for r, n in segs]) for i, segs in enumerate(shapes)])
    b = run.to_batch()
    for i, segs in enumerate(shapes):
        n = sum(k for _, k in segs)
        lay = token_layout(run.trajectories[i])
        assert len(lay.token_ids) == n
        assert b.action_mask[i, :n].sum() == sum(k for r, k in segs if r == "model")
        turns = b.turn_ids[i, :n]
        assert bool((turns[1:] - turns[:-1] >= 0).all()) and bool(((turns[1:] - turns[:-1]) <= 1).all())
        starts = sum(1 for j, (r, _) in enumerate(segs) if r == "model" and (j == 0 or segs[j - 1][0] != "model"))
        assert int(turns.max()) + 1 == max(starts, 1)
        assert bool((b.turn_ids[i, n:] == -1).all()) and bool((b.attention_mask[i, n:] == 0).all())


def test_empty_segments_are_ignored_in_layout():
    traj = T("a", [S("model", 2), Segment("tool", "", np.zeros(0, np.int32)), S("model", 1)])
    assert token_layout(traj).turn_ids.tolist() == [0, 0, 0]  # no tool tokens between: still one turn
    with pytest.raises(ValueError):
        Run([T("z", [S("model", 1, values=[float("nan")])])]).to_batch()  # the batch refuses non-finite values


def test_empty_run_cannot_be_batched():
    with pytest.raises(ValueError, match="the run has no trajectories"):
        Run([]).to_batch()


def test_exclude_from_loss_zeroes_the_action_row_only():
    # NeMo Gym's mask_sample: the row stays (tokens, attention, turns, rewards), none of it is an action
    run = Run(
        [
            T("a", [S("model", 2), S("tool", 1), S("model", 1)], global_rewards={"r": 1.0}),
            T(
                "b",
                [S("model", 2), S("tool", 1), S("model", 1)],
                global_rewards={"r": 0.0},
                metadata={"exclude_from_loss": True},
            ),
        ]
    )
    b = run.to_batch()
    assert b.action_mask.tolist() == [[1, 1, 0, 1], [0, 0, 0, 0]]
    assert b.attention_mask.tolist() == [[1] * 4, [1] * 4]
    assert b.token_ids.tolist() == [[1, 2, 1, 1], [1, 2, 1, 1]]
    assert b.turn_ids.tolist() == [[0, 0, 0, 1], [0, 0, 0, 1]]
    assert b.global_rewards.tolist() == [[1.0], [0.0]]
    assert run.token_roles(1) == ["model", "model", "tool", "model"]
