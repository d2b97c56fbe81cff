"""AReaL's rollout dump (rollout/<version>/<task_id>.jsonl), written the way AReaL writes it, loads exactly."""

from __future__ import annotations

import json

import pytest
from step_support import advantages_of_step
from test_io_support import write_jsonl
from writers import areal

from engine import CreditConfig
from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.text.tokenize import get_tokenizer


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


def test_areal_rollout_dump_loads_exact(tmp_path, tok):
    folder, truth = areal.write_rollouts(tok, tmp_path)
    assert detect_format(folder / "7.jsonl") == "areal_rollout"
    res = load_run(folder)
    assert res.problems == []
    run = res.run
    batch = run.to_batch()
    assert [t.id for t in run.trajectories] == [
        "task-7/sample-0",
        "task-7/sample-1",
        "task-8/sample-0",
        "task-8/sample-1",
    ]
    for i, (traj, s) in enumerate(zip(run.trajectories, truth, strict=True)):
        n = len(s.output_ids)
        assert batch.token_ids[i, :n].tolist() == s.output_ids
        assert batch.action_mask[i, :n].tolist() == s.loss_mask and batch.action_mask[i, n:].sum() == 0
        assert batch.attention_mask[i].sum().item() == n
        assert traj.global_rewards == {"reward": s.reward}
        assert traj.group_id == f"task-{s.task_id}"
        assert traj.prompt == tok.decode(s.prompt_ids)
        assert traj.metadata["areal"] == {
            "seqlen": len(s.prompt_ids) + n,
            "prompt_len": len(s.prompt_ids),
            "head_version": -1,
            "tail_version": 3,
        }
        assert traj.metadata["synthesized"] == ["truncated"]
    assert batch.truncated.tolist() == [s.truncated for s in truth] == [False, False, False, True]
    assert batch.group_ids.tolist() == [0, 0, 1, 1]


def test_areal_refuses_multi_turn_and_checks_length(tmp_path):
    base = {"task_id": 1, "seqlen": 20, "head_version": -1, "tail_version": 0, "reward": 1.0, "prompt": "p"}
    rows = [
        base | {"sample_idx": 0, "prompt_len": 16, "completion": "<answer>4</answer><|im_end|>"},  # 8 tokens, not 4
        base | {"sample_idx": 1, "prompt_len": 10, "completion": "4<|im_end|>\n<|im_start|>user\nwrong<|im_end|>"},
    ]
    path = write_jsonl(tmp_path / "1.jsonl", rows)
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["task-1/sample-0"]
    assert [str(p) for p in res.problems] == [
        f"{path}:1: completion: re-tokenized to 8 tokens but the trainer generated seqlen - prompt_len = 4",
        f"{path}:2: completion: holds a chat turn (<|im_start|>): a multi-turn sample, which AReaL's dump cuts by the "
        "count of generated tokens, so its prompt/completion boundary and loss mask cannot be recovered; record "
        "skipped",
    ]


def test_areal_wins_over_tagged_text_and_sniff_is_narrow(tmp_path):
    rec = {"task_id": 1, "sample_idx": 0, "seqlen": 9, "prompt_len": 3, "head_version": -1, "tail_version": 0}
    rec |= {"reward": 1.0, "prompt": "p", "completion": "<answer> x </answer><|im_end|>"}
    path = write_jsonl(tmp_path / "1.jsonl", [rec])
    assert detect_format(path) == "areal_rollout"  # a tagged completion is not a Search-R1 transcript
    other = tmp_path / "2.jsonl"
    other.write_text(json.dumps({"task_id": 1, "completion": "x", "reward": 1.0}) + "\n")
    with pytest.raises(ValueError, match="cannot detect"):
        detect_format(other)


# ------------------------------------------------------------------------------------------------------- steps
# AReaL has no profile of its own; its GRPO (group mean / std of the scalar reward) is verl's
AREAL_GRPO = CreditConfig(profile="verl", estimator="grpo")


def test_step_is_the_tail_version(tmp_path, tok):
    folder, _ = areal.write_rollouts(tok, tmp_path, version=3)
    for path, n in ((folder, 4), (folder / "7.jsonl", 2), (tmp_path / "rollout", 4)):
        res = load_run(path)
        assert [t.step for t in res.run.trajectories] == [3] * n, path
        assert not [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]


def test_two_versions_of_the_same_prompts(tmp_path, tok):
    """Versions (steps) 3 and 4 sample the same two prompts (task ids 7, 8 then 17, 18, as AReaL's task counter
    runs on); step 4's first task scores (1, 1). ``rollout/`` reads both version folders, each step keeps its
    groups and its folder's advantages."""
    areal.write_rollouts(tok, tmp_path, version=3)
    areal.write_rollouts(tok, tmp_path, version=4, first_task_id=17, rewards=(1.0, 1.0))
    both = load_run(tmp_path / "rollout")
    assert both.problems == []
    run = both.run
    assert [(t.id, t.step) for t in run.trajectories] == [
        (f"task-{task}/sample-{i}", step)
        for step, tasks in ((3, (7, 8)), (4, (17, 18)))
        for task in tasks
        for i in (0, 1)
    ]
    assert run.to_batch().group_ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [t.prompt for t in run.trajectories[:4]] == [t.prompt for t in run.trajectories[4:]]
    adv = {}
    for step in (3, 4):
        alone = load_run(tmp_path / "rollout" / str(step))
        assert {t.step for t in alone.run.trajectories} == {step}
        adv[step] = advantages_of_step(both, alone, step, AREAL_GRPO)
    assert adv[3][0].any() and not adv[4][:2].any()  # step 4's first group scored 1, 1: no advantage


def test_renamed_version_folder_keeps_the_tail_version(tmp_path, tok):
    folder, _ = areal.write_rollouts(tok, tmp_path, version=3)
    folder.rename(tmp_path / "rollout" / "5")
    res = load_run(tmp_path / "rollout")
    assert [(t.id, t.step) for t in res.run.trajectories] == [
        ("task-7/sample-0", 3),
        ("task-7/sample-1", 3),
        ("task-8/sample-0", 3),
        ("task-8/sample-1", 3),
    ]
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [p.file for p in notes] == [str(tmp_path / "rollout" / "5" / f"{task}.jsonl") for task in (7, 8)]
    assert all(p.scope == "run" and "records say step 3 but the folder name '5' says step 5" in p.reason for p in notes)
