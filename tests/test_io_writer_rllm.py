"""rLLM dumps written the way rLLM writes them (``tests/writers/rllm.py``): EpisodeLogger step folders and
``rllm eval`` episode files with core ``Step(input=, output=)`` steps, loaded back exactly."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from step_support import advantages_of_step
from test_io_support import ids
from writers import rllm as writer

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.reading.problems import Problem
from engine.io.text.tokenize import get_tokenizer

SUMMARY_REASON = (
    "skipped: summary, not rollouts (rLLM EpisodeLogger batch summary: episode counts and accuracy of the "
    "episode files beside it)"
)
EMPTY_STEP = (
    "no model output: no response_ids, no assistant message in chat_completions, empty model_response and no "
    "output{}; rLLM's EpisodeLogger does not write a core Step's input/output, so export the episodes with "
    "Episode.to_dict() / model_dump() (what `rllm eval` stores) instead"
)


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


def check_trajectories(res, truths, tok) -> None:
    """Token ids, action mask, groups, rewards and truncation of every trajectory against the writer's truth."""
    run = res.run
    by_id = {t.id: i for i, t in enumerate(run.trajectories)}
    assert sorted(by_id) == sorted(t.id for t in truths)
    batch = run.to_batch()
    for truth in truths:
        i = by_id[truth.id]
        traj = run.trajectories[i]
        assert [(s.role, s.text) for s in traj.segments] == truth.segments
        want_ids = [x for _, text in truth.segments for x in ids(tok, text)]
        want_mask = [int(role == "model") for role, text in truth.segments for _ in ids(tok, text)]
        n = len(want_ids)
        assert batch.token_ids[i, :n].tolist() == want_ids
        assert batch.action_mask[i].tolist() == want_mask + [0] * (batch.action_mask.shape[1] - n)
        assert traj.group_id == truth.group
        assert traj.turn_rewards == truth.turn_rewards and traj.global_rewards == truth.global_rewards
        assert traj.metadata["truncated"] is truth.truncated and bool(batch.truncated[i]) is truth.truncated
    groups = {truth.group: set() for truth in truths}
    for truth in truths:
        groups[truth.group].add(int(batch.group_ids[by_id[truth.id]]))
    assert all(len(g) == 1 for g in groups.values()) and len({min(g) for g in groups.values()}) == len(groups)


def test_episode_logger_step_folder(tmp_path, tok):
    episodes, truths = writer.training_batch()
    step_dir = writer.log_episodes_batch(tmp_path, episodes, step=3)
    res = load_run(step_dir)
    assert res.problems == [Problem(str(step_dir / "batch_summary.json"), None, None, SUMMARY_REASON)]
    assert res.run.source == "rllm" and len(res.run.trajectories) == 6
    check_trajectories(res, truths, tok)
    first = next(t for t in res.run.trajectories if t.id == truths[0].id)
    assert first.prompt == (
        f"<|im_start|>system\n{writer.SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # the episode's metrics are shown, never summed into the reward; is_correct is metadata only
    assert first.metadata["reward_components"] == {"solver_acc": 1.0} and first.metadata["is_correct"] is True
    assert first.metadata["training_step"] == 3 and first.metadata["group_from"] == "episode id"


def test_batch_summary_alone_is_refused_as_a_summary(tmp_path):
    episodes, _ = writer.training_batch()
    step_dir = writer.log_episodes_batch(tmp_path, episodes[:2], step=0, mode="val")
    with pytest.raises(ValueError, match=r"batch_summary\.json: skipped: summary, not rollouts \(rLLM EpisodeLogger"):
        load_run(step_dir / "batch_summary.json")
    res = load_run(step_dir / "batch_summary.json", fmt="rllm")  # forced: the record is named, not loaded
    assert [(p.line, p.reason) for p in res.problems] == [(1, SUMMARY_REASON)]


def test_episode_ids_without_task_part_group_by_task_hash(tmp_path, tok):
    episodes, truths = writer.training_batch()
    for ep, truth in zip(episodes, truths, strict=True):
        ep["id"] = truth.id = ep["id"].replace(":", "-r")
        truth.group = f"task-{writer.task_hash(ep['task'])}:solver"
    step_dir = writer.log_episodes_batch(tmp_path, episodes, step=1)
    res = load_run(step_dir)
    first_file = sorted(step_dir.glob("episode_*.json"))[0]
    assert res.problems == [
        Problem(str(step_dir / "batch_summary.json"), None, None, SUMMARY_REASON),
        Problem(
            str(first_file),
            1,
            "episode_id",
            "episode ids carry no task part (task_id:rollout_idx); rollouts are grouped by the episode's task_hash",
            scope="run",
        ),
    ]
    check_trajectories(res, truths, tok)


def test_rllm_eval_core_steps_load_their_text(tmp_path, tok):
    pairs = [
        writer.template_episode("gsm8k-12", 0, "What is 6*7?", ["Let me think.", "Answer: \\boxed{42}"], 1.0),
        writer.template_episode("gsm8k-12", 1, "What is 6*7?", ["\\boxed{48}"], 0.0),
        writer.template_episode("gsm8k-13", 0, "What is 1+1?", ["\\boxed{2}"], 1.0),
    ]
    for idx, (episode, _) in enumerate(pairs):
        writer.store_eval_episode(tmp_path, idx, episode)
    res = load_run(tmp_path / "episodes")
    assert res.problems == []
    check_trajectories(res, [truth for _, truth in pairs], tok)
    traj = next(t for t in res.run.trajectories if t.id == "gsm8k-12:1")
    # the step's input as the user turn; the template's system prompt is not stored, Qwen2.5's default is rendered
    assert traj.prompt == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_core_steps_logged_by_episode_logger_are_refused(tmp_path, tok):
    """EpisodeLogger keeps no input/output: such a step has nothing generated and must not load as <|im_end|>."""
    core, _ = writer.template_episode("gsm8k-12", 0, "What is 6*7?", ["\\boxed{42}"], 1.0)
    episodes, truths = writer.training_batch()
    step_dir = writer.log_episodes_batch(tmp_path, [core, episodes[3]], step=0)
    res = load_run(step_dir)
    core_file = step_dir / writer.episode_filename(core)
    assert res.problems == [
        Problem(str(step_dir / "batch_summary.json"), None, None, SUMMARY_REASON),
        Problem(str(core_file), 1, "trajectories[0].steps[0]", EMPTY_STEP.format("")),
    ]
    check_trajectories(res, [truths[3]], tok)


def test_empty_step_names_what_it_has(tmp_path):
    step = {"observation": "What is 6*7?", "action": {"tool": "calc"}, "model_response": "", "chat_completions": []}
    path = tmp_path / "trajs.jsonl"
    path.write_text(json.dumps({"uid": "u1", "steps": [step]}) + "\n")
    res = load_run(path, fmt="rllm")
    assert res.run.trajectories == []
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (1, "steps[0]", EMPTY_STEP.format(" (it has only action, observation, which are not the generated text)"))
    ]


# ------------------------------------------------------------------------------------------------------- steps
RLLM_GRPO = CreditConfig(profile="rllm", estimator="grpo")


def test_training_step_of_every_episode(tmp_path):
    episodes, _ = writer.training_batch()
    step_dir = writer.log_episodes_batch(tmp_path, episodes, step=3, epoch=1)
    assert step_dir.name == "train_step_3_epoch_1"
    for path in (step_dir, tmp_path / "episodes", next(step_dir.glob("episode_*.json"))):
        res = load_run(path)
        assert res.run.trajectories and all(t.step == 3 for t in res.run.trajectories), path
        assert all(t.metadata["epoch"] == 1 for t in res.run.trajectories)
        assert not [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]


def test_two_steps_of_the_same_tasks(tmp_path):
    """Steps 5 and 6 roll out the same two tasks (same task ids, so the same episode ids); step 6 lost rollout
    a:1. The episodes folder reads both step folders; each step keeps its own groups and its folder's advantages;
    the validation folder beside them is named, not read."""
    episodes, _ = writer.training_batch()
    writer.log_episodes_batch(tmp_path, episodes, step=5)
    writer.log_episodes_batch(tmp_path, [ep for ep in episodes if ep["id"] != "5b0c6d1e-task-a:1"], step=6, epoch=1)
    writer.log_episodes_batch(tmp_path, episodes[:2], step=6, mode="val")
    both = load_run(tmp_path / "episodes")
    assert not [p for p in both.problems if p.field in ("step", "id", "episode_id")]
    (val,) = [p for p in both.problems if "val_step_6_epoch_0" in p.file]
    assert "subfolder not read" in val.reason
    run = both.run
    assert [t.step for t in run.trajectories] == [5] * 6 + [6] * 5
    sizes: dict = {}
    for t in run.trajectories:
        sizes[(t.step, t.group_id)] = sizes.get((t.step, t.group_id), 0) + 1
    a, b = "5b0c6d1e-task-a:solver", "9f3e2a77-task-b:solver"
    assert sizes == {(5, a): 3, (5, b): 3, (6, a): 2, (6, b): 3}
    assert len(set(run.to_batch().group_ids.tolist())) == 4
    for step, folder in ((5, "train_step_5_epoch_0"), (6, "train_step_6_epoch_1")):
        alone = load_run(tmp_path / "episodes" / folder)
        assert {t.step for t in alone.run.trajectories} == {step}
        assert advantages_of_step(both, alone, step, RLLM_GRPO).any()
    # the same rows as one step: task a's group of 5 has another mean, so its advantages change
    merged = [replace(t, step=None) for t in run.trajectories]
    one = compute_credit(replace(run, trajectories=merged).to_batch(), RLLM_GRPO, device="cpu")
    assert not torch.equal(one.advantages, compute_credit(run.to_batch(), RLLM_GRPO, device="cpu").advantages)


def test_renamed_step_folder_keeps_the_records_step(tmp_path):
    episodes, _ = writer.training_batch()
    step_dir = writer.log_episodes_batch(tmp_path, episodes, step=5)
    step_dir.rename(step_dir.with_name("train_step_9_epoch_0"))
    res = load_run(tmp_path / "episodes")
    assert [t.step for t in res.run.trajectories] == [5] * 6
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    moved = sorted(str(p) for p in (tmp_path / "episodes" / "train_step_9_epoch_0").glob("episode_*.json"))
    assert sorted(p.file for p in notes) == moved and all(p.scope == "run" for p in notes)
    assert all("records say step 5 but the folder name 'train_step_9_epoch_0' says step 9" in p.reason for p in notes)
