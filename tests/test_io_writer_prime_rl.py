"""prime-rl / verifiers v1 episode logs (``traces.jsonl``) written the way prime-rl's FileMonitor writes them
(``tests/writers/prime_rl.py``), loaded by the ``verifiers_traces`` adapter: exact token ids, action mask,
roles, log-probs, groups, rewards, truncation, problems, and prime-rl's logged advantages against CreditLens's
recomputation."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from step_support import advantages_of_step
from writers import prime_rl
from writers.prime_rl import Rollout, Turn

from engine import CreditConfig, compute_credit
from engine.batch import TRACE_LENGTHS
from engine.io import load_run
from engine.io.adapters import verifiers_traces
from engine.io.detect import detect_format
from engine.io.reading.problems import RecordError
from engine.lint import run_lints
from engine.profiles import prime_rl_algorithm

SYSTEM = "You are a calculator agent."


def rollout(user: str, turns: list[Turn], correct: float, fmt: float = 1.0, **kw) -> Rollout:
    return Rollout(SYSTEM, user, turns, {"correct": (correct, 1.0), "format": (fmt, 0.2)}, **kw)


GROUPS = {
    "g-add": [
        rollout("2+2?", [Turn("<tool_call>add(2,2)</tool_call>", tool="4"), Turn("The answer is 4.")], 1.0),
        rollout("2+2?", [Turn("It is 5.")], 0.0, 0.0),
        rollout("2+2?", [Turn("<tool_call>add(2,2)</tool_call>", tool="4"), Turn("4 it")], 1.0, 0.5),
        rollout("2+2?", [Turn("Let me think about this for a very long time", length_limited=True)], 0.0, 0.0),
    ],
    "g-mul": [
        rollout("3*3?", [Turn("9")], 1.0),
        rollout("3*3?", [Turn("6")], 0.0, metrics={"tokens": 1.0}),
        rollout("3*3?", [Turn("crash")], 0.0, ok=False),  # errored: not trained, not in the baseline
    ],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return prime_rl.write_step(str(tmp_path_factory.mktemp("prime_run")), 7, GROUPS, failed=1)


def expected_roles(truth) -> list[str]:
    """Model tokens are 'model'; each run of other tokens takes its first tool/user/system role, else 'system'."""
    out, k, roles = [], 0, truth.roles
    while k < len(roles):
        j = k
        while j < len(roles) and (roles[j] == "model") == (roles[k] == "model"):
            j += 1
        run = roles[k:j]
        role = "model" if run[0] == "model" else next((r for r in run if r in ("tool", "user", "system")), "system")
        out += [role] * (j - k)
        k = j
    return out


def test_detected_and_loaded_exactly(written):
    path, truths = written
    assert detect_format(path) == "verifiers_traces"
    res = load_run(path)
    lines = open(path).read().splitlines()
    assert len(lines) == 8 and json.loads(lines[-1])["ok"] is False
    assert [str(p) for p in res.problems] == [
        f"{path}:7: traces[0]: ok is false: prime-rl neither trains this trace nor counts it in its group; skipped",
        f"{path}:8: traces: episode without traces (ok=False, errors: ['sandbox']); nothing to load",
    ]
    run = res.run
    assert [t.id for t in run.trajectories] == [t.trace_id for t in truths] and len(truths) == 6
    batch = run.to_batch()
    for i, (traj, truth) in enumerate(zip(run.trajectories, truths, strict=True)):
        n = len(truth.response_ids)
        assert traj.prompt_token_ids.tolist() == truth.prompt_ids
        assert batch.token_ids[i, :n].tolist() == truth.response_ids
        assert batch.action_mask[i].tolist() == truth.action_mask + [0.0] * (batch.num_tokens - n)
        assert run.token_roles(i) == expected_roles(truth)
        assert batch.old_log_probs[i, :n].tolist() == pytest.approx(truth.log_probs, abs=0)
        assert traj.group_id == truth.group
        assert traj.global_rewards == {"reward": truth.reward}
        assert traj.metadata["truncated"] is truth.truncated
        assert traj.metadata["logged_advantages"] == [truth.advantage * m for m in truth.action_mask]
        assert traj.metadata["trace_lengths"] == dict(zip(TRACE_LENGTHS, truth.lengths, strict=True))
        assert batch.trace_lengths[i].tolist() == list(truth.lengths)
    assert [t.metadata["truncated"] for t in run.trajectories] == [False, False, False, True, False, False]
    assert batch.truncated.tolist() == [False, False, False, True, False, False]
    assert [t.global_rewards["reward"] for t in run.trajectories] == pytest.approx([1.2, 0.0, 1.1, 0.0, 1.2, 0.2])
    assert run.trajectories[0].metadata["reward_components"] == {"correct": 1.0, "format": 1.0}
    assert run.trajectories[0].metadata["reward_weights"] == {"correct": 1.0, "format": 0.2}
    assert run.token_roles(0).count("tool") > 0 and "user" not in run.token_roles(0)


# prime-rl's GRPO: A = r − mean(r) over the group's trainable traces (no std): verl GRPO without std division.
PRIME_SCHEME = CreditConfig(profile="verl", estimator="grpo", norm_adv_by_std_in_grpo=False)


def test_prime_advantages_equal_creditlens_under_matching_scheme(written):
    path, truths = written
    run = load_run(path).run
    batch = run.to_batch()
    res = compute_credit(batch, PRIME_SCHEME, device="cpu")
    act = batch.action_mask.bool()
    logged = torch.tensor([t.advantage for t in truths])
    for i in range(batch.batch_size):
        assert torch.allclose(res.advantages[i][act[i]], logged[i].expand(int(act[i].sum())), atol=1e-5, rtol=0)
    assert run_lints(batch, PRIME_SCHEME, run=run, checks=["logged_advantage_mismatch"]) == []


def test_length_penalty_reproduces_prime_rl(tmp_path):
    """GRPO with the linear length penalty, scored by the writer as grpo.py does from the trace's usage and turns:
    CreditLens reads the same counts from the record and gives the advantages prime-rl logged; without the penalty
    the lint reports the rows it moved."""
    weights = (0.25, 0.1, 0.1)
    path, truths = prime_rl.write_step(str(tmp_path), 3, GROUPS, length_penalty=weights)
    run = load_run(path).run
    batch = run.to_batch()
    scheme = CreditConfig(profile="prime-rl", **prime_rl_algorithm("grpo", {"type": "linear"}))
    assert scheme.length_penalty == weights
    res = compute_credit(batch, scheme, device="cpu")
    act = batch.action_mask.bool()
    for i, truth in enumerate(truths):
        assert torch.allclose(res.advantages[i][act[i]], torch.tensor(truth.advantage), atol=1e-6, rtol=0)
    assert run_lints(batch, scheme, run=run, checks=["logged_advantage_mismatch"]) == []
    plain = CreditConfig(profile="prime-rl", **prime_rl_algorithm("grpo"))
    (f,) = run_lints(batch, plain, run=run, checks=["logged_advantage_mismatch"])
    assert f.count > 0


def test_trace_lengths_follow_verifiers_properties():
    """Trace.num_output_tokens sums the completion tokens of every branch's calls (a shared call once per branch),
    num_total_tokens the last call with usage of each branch (cached input included), num_turns the sampled nodes;
    a call without usage counts nothing, and the last call of a node wins."""
    node = {"token_ids": [1], "mask": [True], "sampled": True}
    nodes = [{"token_ids": [1], "mask": [False]}, node | {"parent": 0}, node | {"parent": 1}, node | {"parent": 1}]
    calls = [
        {"node": 1, "usage": {"prompt_tokens": 9, "completion_tokens": 99}},  # overwritten by the next call of node 1
        {"node": 1, "usage": {"prompt_tokens": 5, "completion_tokens": 3, "cached_input_tokens": 2}},
        {"node": 2, "usage": {"prompt_tokens": 10, "completion_tokens": 4}},
        {"node": 3},  # no usage: branch 2's last usage is node 1's
        {"usage": {"prompt_tokens": 100, "completion_tokens": 100}},  # on no node: in no branch
    ]
    trace = {"nodes": nodes, "calls": calls}
    checked = [verifiers_traces._node(n, f"traces[0].nodes[{k}]") for k, n in enumerate(nodes)]
    got = verifiers_traces.trace_lengths(trace, checked, "traces[0]")
    # branches [0, 1, 2] and [0, 1, 3]: out = (3 + 4) + 3; total = (10 + 4) + (5 + 2 + 3); turns = 3 sampled nodes
    assert got == {"num_output_tokens": 10, "num_total_tokens": 24, "num_turns": 3}
    assert verifiers_traces.trace_lengths({"nodes": nodes}, checked, "t") == {
        "num_output_tokens": 0,
        "num_total_tokens": 0,
        "num_turns": 3,
    }
    bad = {"nodes": nodes, "calls": [{"node": 1, "usage": {"prompt_tokens": -1, "completion_tokens": 1}}]}
    with pytest.raises(RecordError, match="token count"):
        verifiers_traces.trace_lengths(bad, checked, "t")


def test_lint_reports_the_std_normalised_default(written):
    path, _ = written
    run = load_run(path).run
    batch = run.to_batch()
    (f,) = run_lints(batch, CreditConfig(), run=run, checks=["logged_advantage_mismatch"])
    # verl's default divides by the group std: every row with a nonzero advantage moves (all 6 here)
    assert f.count == 6 and f.rows == [0, 1, 2, 3, 4, 5]
    assert f.message.startswith("logged advantages differ from CreditLens's on 6 trajectories of 6:")


def test_fork_and_missing_group(tmp_path):
    """A trace whose graph forks after the user message (two leaves) loads as two rows, with a problem; an
    episode without group.id is grouped by its task key, with a problem."""
    tok = prime_rl.get_tokenizer()
    task = prime_rl.TraceTask(data={}, key="key-fork")
    trace, _ = prime_rl.build_trace(tok, task, rollout("hi?", [Turn("hello")], 1.0), seed=3)
    fork = trace.nodes[2].model_copy(update={"parent": 1, "token_ids": trace.nodes[2].token_ids[:-2] + [151645]})
    fork.mask, fork.logprobs = fork.mask[: len(fork.token_ids)], fork.logprobs[: sum(fork.mask[: len(fork.token_ids)])]
    trace.nodes.append(fork)
    prime_rl.score_group([ep := prime_rl.Episode(task=task, traces=[trace])])
    path = tmp_path / "traces.jsonl"
    path.write_bytes(prime_rl.orjson.dumps(ep.to_record(), option=prime_rl.orjson.OPT_APPEND_NEWLINE))
    res = load_run(path)
    assert [str(p) for p in res.problems] == [
        f"{path}:1: group: no group.id; grouped by task key 'key-fork'",
        f"{path}:1: traces[0]: 2 branches loaded as 2 trajectories (one per prime-rl training sample); prime-rl's "
        "group baseline counts the trace once",
    ]
    a, b = res.run.trajectories
    assert (a.id, b.id) == (
        f"{trace.id}/branch-0",
        f"{trace.id}/branch-1",
    ) and a.group_id == b.group_id == "task-key-fork"
    assert b.segments[-1].token_ids.tolist() == fork.token_ids[fork.mask.index(True) :]


# ------------------------------------------------------------------------------------------------------- steps
def test_step_is_the_folder_the_batch_was_shipped_under(written):
    """The step is ``rollouts/step_7``'s; the record's ``run.work.step`` is kept as the dispatch step."""
    path, truths = written
    res = load_run(path)
    assert [t.step for t in res.run.trajectories] == [7] * len(truths)
    assert res.run.trajectories[0].metadata["run_work"] == {
        "type": "train",
        "step": 7,
        "policy": {"start": 0, "end": 1},
    }
    assert not [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    """The same two prompts (groups "g-add", "g-mul") trained at steps 5 and 6; step 6's episodes were dispatched
    at step 5 (one step off-policy), so their records say ``run.work.step`` 5. Step 6's correctness scores are
    (1 − step 5's) / 2, so each group's mean differs between the steps."""
    run_dir = tmp_path_factory.mktemp("prime_two_steps")
    _, t5 = prime_rl.write_step(str(run_dir), 5, GROUPS)
    flip = {
        gid: [replace(r, rewards=r.rewards | {"correct": (0.5 - r.rewards["correct"][0] / 2, 1.0)}) for r in rs]
        for gid, rs in GROUPS.items()
    }
    _, t6 = prime_rl.write_step(str(run_dir), 6, flip, dispatch_step=5)
    return run_dir / "rollouts", t5, t6


def test_two_steps_of_the_same_prompts(two_steps):
    root, t5, t6 = two_steps
    both = load_run(root)
    assert not [p for p in both.problems if p.field in ("step", "id")]
    run = both.run
    assert [(t.id, t.step) for t in run.trajectories] == [(t.trace_id, 5) for t in t5] + [(t.trace_id, 6) for t in t6]
    assert [t.metadata["run_work"]["step"] for t in run.trajectories] == [5] * 12  # dispatched at 5, trained at 6
    sizes = {}
    for t in run.trajectories:
        sizes[(t.step, t.group_id)] = sizes.get((t.step, t.group_id), 0) + 1
    assert sizes == {(5, "g-add"): 4, (5, "g-mul"): 2, (6, "g-add"): 4, (6, "g-mul"): 2}
    batch = run.to_batch()
    assert batch.group_ids.tolist() == [0] * 4 + [1] * 2 + [2] * 4 + [3] * 2
    scheme = CreditConfig(profile="prime-rl", **prime_rl_algorithm("grpo"))
    assert scheme.estimator == "grpo"
    for step, truths in ((5, t5), (6, t6)):
        # the step alone: its file, its step folder, or the folder below it (which looks above itself for the step)
        alone = load_run(root / f"step_{step}" / "train" / "effective" / "traces.jsonl")
        assert {t.step for t in alone.run.trajectories} == {step}
        for folder in (root / f"step_{step}", root / f"step_{step}" / "train" / "effective"):
            assert load_run(folder).run.content_hash == alone.run.content_hash
        adv = advantages_of_step(both, alone, step, scheme)
        act = alone.run.to_batch().action_mask.bool()
        for i, truth in enumerate(truths):  # and they are prime-rl's own
            assert torch.allclose(adv[i][act[i]], torch.tensor(truth.advantage), atol=1e-6, rtol=0)
    merged = [t.step for t in run.trajectories]
    for t in run.trajectories:
        t.step = None  # the same rows as one step: the two steps' groups merge, and step 5's advantages change
    merged_res = compute_credit(run.to_batch(), scheme, device="cpu")
    for t, s in zip(run.trajectories, merged, strict=True):
        t.step = s
    assert not torch.equal(merged_res.advantages, compute_credit(batch, scheme, device="cpu").advantages)


def test_the_all_subset_is_noted(tmp_path):
    """``train/all`` holds every episode as it arrived, unscored: it loads with its step and a note that it is not
    the trained batch; its rows carry no advantages."""
    prime_rl.write_step(str(tmp_path), 4, GROUPS, all_subset=True)
    arrived = tmp_path / "rollouts" / "step_4" / "train" / "all" / "traces.jsonl"
    res = load_run(arrived)
    assert {t.step for t in res.run.trajectories} == {4}
    assert all("logged_advantages" not in t.metadata for t in res.run.trajectories)
    (note,) = [p for p in res.problems if "train/all subset" in p.reason]
    assert note.scope == "run" and note.file == str(arrived) and "step 4" in note.reason


def test_a_folder_load_reads_each_steps_training_batch_only(tmp_path):
    """prime-rl writes train/all (every episode as it arrived, the trained ones again) and eval beside the trained
    batch train/effective: a load of rollouts/ or of a step folder reads train/effective and names the others."""
    prime_rl.write_step(str(tmp_path), 4, GROUPS, all_subset=True)
    effective = tmp_path / "rollouts" / "step_4" / "train" / "effective" / "traces.jsonl"
    eval_dir = tmp_path / "rollouts" / "step_4" / "eval" / "all"
    eval_dir.mkdir(parents=True)
    (eval_dir / "traces.jsonl").write_bytes(effective.read_bytes())
    alone = load_run(effective)
    for folder in (tmp_path / "rollouts", tmp_path / "rollouts" / "step_4"):
        res = load_run(folder)
        assert res.run.content_hash == alone.run.content_hash  # the trained batch, and nothing else
        notes = sorted(p.file for p in res.problems if p.reason.startswith("not read: "))
        assert notes == [str(eval_dir / "traces.jsonl"), str(tmp_path / "rollouts/step_4/train/all/traces.jsonl")]
        assert all(p.scope == "run" for p in res.problems if p.file in notes)
