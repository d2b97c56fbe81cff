"""Every shipped sample run loads cleanly, and its numbers are the ones its README promises."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from test_io_support import NEMO, SAMPLES

from engine.io import load_run
from engine.io.detect import detect_format

IM_END = 151645


OURS = ("kgqa_multiturn", "nemo_gym", "python_tool_two_rollouts", "search_agent", "search_steps")


@pytest.fixture(scope="module")
def runs():
    return {name: load_run(SAMPLES / name) for name in OURS}


def test_every_sample_folder_loads():
    """Every folder of sample_runs/ (ours and others', e.g. lint cases) loads into a batch."""
    folders = [p for p in sorted(SAMPLES.iterdir()) if p.is_dir()]
    assert set(OURS) <= {p.name for p in folders}
    for folder in folders:
        res = load_run(folder)
        assert len(res.run) > 0 and res.run.to_batch().batch_size == len(res.run), folder.name


def test_our_samples_load_without_problems(runs):
    for name, res in runs.items():
        assert res.problems == [], name
        assert (SAMPLES / name / "README.md").is_file()
        batch = res.run.to_batch()
        assert batch.batch_size == len(res.run.trajectories) > 0
        assert bool((batch.action_mask <= batch.attention_mask).all())
        assert res.run.content_hash == load_run(SAMPLES / name).run.content_hash


def test_python_tool_two_rollouts(runs):
    run = runs["python_tool_two_rollouts"].run
    assert detect_format(SAMPLES / "python_tool_two_rollouts" / "run.jsonl") == "native"
    assert [t.id for t in run.trajectories] == ["rollout-0", "rollout-1"]
    assert {t.group_id for t in run.trajectories} == {"primes-1-10"}
    batch = run.to_batch()
    for i, traj in enumerate(run.trajectories):
        assert [s.role for s in traj.segments] == ["model", "tool", "model", "tool", "model"]
        model = [s for s in traj.segments if s.role == "model"]
        assert all(s.token_ids[-1] == IM_END for s in model)
        n = traj.num_tokens
        sizes = [s.num_tokens for s in traj.segments]
        expected_turns = [0] * (sizes[0] + sizes[1]) + [1] * (sizes[2] + sizes[3]) + [2] * sizes[4]
        assert batch.turn_ids[i, :n].tolist() == expected_turns
        assert int(batch.action_mask[i].sum()) == sizes[0] + sizes[2] + sizes[4]
    assert "\\boxed{4}" in run.trajectories[0].segments[-1].text
    assert "\\boxed{5}" in run.trajectories[1].segments[-1].text
    assert batch.turn_reward_names == ("step_reward",)
    assert batch.turn_rewards[:, :, 0].tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    # rLLM MC returns with gamma 0.95, backwards over steps: G2 = 1, G1 = 0 + .95*1, G0 = 0 + .95*.95
    r = batch.turn_rewards[0, :, 0].tolist()
    g, returns = 0.0, []
    for x in reversed(r):
        g = x + 0.95 * g
        returns.insert(0, g)
    assert returns == pytest.approx([0.9025, 0.95, 1.0])
    assert batch.global_rewards is None and batch.old_log_probs is None


def test_kgqa_multiturn(runs):
    run = runs["kgqa_multiturn"].run
    batch = run.to_batch()
    sizes = Counter(t.group_id for t in run.trajectories)
    assert len(run) == 57 and sorted(sizes.values()) == [1] + [8] * 7 and sizes["q7"] == 1
    assert batch.turn_reward_names == ("format_score", "kg_query_validity", "is_answer_score")
    assert batch.global_reward_names == (
        "exact_match",
        "retrieval_quality",
        "_raw_exact_match",
        "_raw_retrieval_quality",
        "_otc_scaling_factor",
        "_kg_turns_used",
    )
    assert tuple(batch.turn_rewards.shape) == (57, 6, 3)
    assert bool((batch.turn_mask == 1).all())  # placeholder turns of finished samples exist
    assert set(np.unique(batch.turn_rewards.numpy())) <= {0.0, 1.0}
    # zero-variance group: every rollout of q5 has the same turn and global rewards
    q5 = [i for i, t in enumerate(run.trajectories) if t.group_id == "q5"]
    assert len(q5) == 8
    assert bool((batch.turn_rewards[q5] == batch.turn_rewards[q5[0]]).all())
    assert bool((batch.global_rewards[q5] == batch.global_rewards[q5[0]]).all())
    # scenarios: truncated rollouts, failed and duplicate queries, wrong answers
    scen = [t.metadata["scenario"] for t in run.trajectories]
    assert batch.truncated.tolist() == [s == "truncated" for s in scen] and sum(batch.truncated.tolist()) == 4
    failed = scen.index("failed_then_good")
    assert run.trajectories[failed].turn_rewards[0] == {
        "format_score": 1.0,
        "kg_query_validity": 0.0,
        "is_answer_score": 0.0,
    }
    dup = scen.index("duplicate")
    assert [d["kg_query_validity"] for d in run.trajectories[dup].turn_rewards[:4]] == [1.0, 0.0, 1.0, 0.0]
    wrong = scen.index("wrong")
    assert run.trajectories[wrong].global_rewards["exact_match"] == 0.0
    # every rollout: 2-6 token turns, info blocks are tool tokens, log-probs and values synthesized and marked
    for i, t in enumerate(run.trajectories):
        assert 2 <= int(batch.turn_ids[i].max()) + 1 <= 6
        assert all(s.text.startswith("\n\n<information>") for s in t.segments if s.role == "tool")
        assert {"log_probs", "ref_log_probs", "values"} <= set(t.metadata["synthesized"])
        answered = t.metadata["scenario"] != "truncated"
        assert (t.segments[-1].token_ids[-1] == IM_END) == answered
    assert batch.old_log_probs is not None and batch.ref_log_probs is not None and batch.values is not None
    assert (SAMPLES / "kgqa_multiturn" / "run.jsonl").stat().st_size < 2 * 2**20


def test_search_agent(runs):
    run = runs["search_agent"].run
    assert detect_format(SAMPLES / "search_agent" / "rollouts.jsonl") == "tagged_text"
    assert run.source == "tagged_text" and len(run) == 30
    assert sorted(Counter(t.group_id for t in run.trajectories).values()) == [5] * 6
    batch = run.to_batch()
    assert batch.global_reward_names == ("reward",) and batch.turn_rewards is None
    assert set(batch.global_rewards[:, 0].tolist()) == {0.0, 1.0}
    assert sum(batch.truncated.tolist()) == 3
    for i, t in enumerate(run.trajectories):
        for s in t.segments:
            assert (s.role == "tool") == ("<information>" in s.text)
        roles = run.token_roles(i)
        assert batch.action_mask[i, : len(roles)].tolist() == [float(r == "model") for r in roles]
    assert batch.old_log_probs is None


def test_nemo_gym_sample_is_the_real_data(runs):
    res = runs["nemo_gym"]
    run = res.run
    assert len(run) == 30 and run.source == "native"
    assert (SAMPLES / "nemo_gym" / "LICENSE").read_text() == (NEMO / "LICENSE").read_text()
    raw = load_run(NEMO).run
    assert [t.id for t in raw.trajectories] == [t.id for t in run.trajectories]
    for a, b in zip(raw.trajectories, run.trajectories, strict=True):
        assert [s.token_ids.tolist() for s in a.segments] == [s.token_ids.tolist() for s in b.segments]
        assert a.global_rewards == b.global_rewards
        for sa, sb in zip(a.segments, b.segments, strict=True):
            if sa.log_probs is not None:  # real log-probs (competitive coding) are kept untouched
                np.testing.assert_array_equal(sa.log_probs, sb.log_probs)
        assert "synthesized" not in a.metadata and "values" in b.metadata["synthesized"]
    batch = run.to_batch()
    assert batch.old_log_probs is not None and batch.values is not None
