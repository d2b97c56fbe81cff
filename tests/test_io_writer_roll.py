"""ROLL's rollout dump (rollout_dump_data.step_N.jsonl), written the way ROLL writes it, loads as exactly as it can."""

from __future__ import annotations

import json

import pytest
from step_support import assert_ids_unique_per_step, assert_step_as_alone, group_sizes
from test_io_support import write_jsonl
from writers import roll

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.adapters.roll_rollout import REWARD_NOTE
from engine.io.detect import detect_format
from engine.io.text.chatml import render_prompt
from engine.io.text.tokenize import get_tokenizer


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


def test_roll_rollout_dump_loads(tmp_path, tok):
    path, truth, prompts = roll.write_step(tok, tmp_path)
    assert path.name == "rollout_dump_data.step_4.jsonl"
    assert detect_format(path) == "roll_rollout"
    res = load_run(path)
    assert [str(p) for p in res.problems] == [f"{path}: scores: {REWARD_NOTE}"]
    run = res.run
    batch = run.to_batch()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert [t.id for t in run.trajectories] == ["step-4/row-0", "step-4/row-1", "step-4/row-2", "step-4/row-3"]
    for i, (traj, r) in enumerate(zip(run.trajectories, truth, strict=True)):
        kept = [t for t in r.response_ids if t != eos]  # skip_special_tokens=True dropped the EOS; not re-added
        n = len(kept)
        assert batch.token_ids[i, :n].tolist() == kept
        assert batch.action_mask[i, :n].tolist() == r.response_mask[:n] and batch.action_mask[i, n:].sum() == 0
        assert traj.global_rewards == {"scores": r.score}
        assert traj.prompt == render_prompt(json.loads(prompts[r.prompt_index]["messages"]))
        assert traj.metadata["roll"] == {
            "id": prompts[r.prompt_index]["id"],
            "ground_truth": "x",
            "tag": "deepmath_103k",
            "domain": "math_rule",
            "global_step": 4,
        }
    assert batch.truncated.tolist() == [False] * 4  # not written by ROLL
    assert batch.group_ids.tolist() == [0, 0, 1, 1]
    assert json.loads(run.metadata["roll_sampling_params"]) == {"global_step": 4, "is_offload_states": True}


def test_roll_bad_row_is_one_problem(tmp_path):
    rec = {"responses": ["ok", 7], "scores": [1.0, 0.0], "sampling_params": ["{}", "{}"], "global_step": [2, 2]}
    path = write_jsonl(tmp_path / "rollout_dump_data.step_2.jsonl", [rec])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["step-2/row-0"]
    assert [str(p) for p in res.problems] == [
        f"{path}: scores: {REWARD_NOTE}",
        f"{path}:1: row[1].responses: expected a string, got int",
    ]
    short = write_jsonl(tmp_path / "s.jsonl", [rec | {"scores": [1.0]}])
    res = load_run(short, fmt="roll_rollout")
    assert [str(p) for p in res.problems] == [f"{short}:1: scores: column has 1 values but `responses` has 2"]


def test_roll_sniff_is_narrow(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"responses": ["a"], "scores": [1.0]}])
    with pytest.raises(ValueError, match="cannot detect"):
        detect_format(path)


# Steps: ROLL writes the step twice, as the ``global_step`` column and in the file name (rollout_dump_data.step_N).
NEXT_EPOCH = [
    [("4, so \\boxed{4}", True, 1.0), ("\\boxed{22}", True, 0.0)],
    [("\\boxed{6}", True, 0.0), ("\\boxed{9}.", True, 1.0)],
]
SCHEME = CreditConfig(estimator="grpo")  # ROLL has no profile of its own; its GRPO normalises within a prompt


def test_every_rollout_has_the_step_the_dump_states(tmp_path, tok):
    path, truth, _ = roll.write_step(tok, tmp_path, global_step=4)
    run = load_run(path).run
    assert [t.step for t in run.trajectories] == [4] * len(truth) == [4] * 4


def test_two_steps_of_the_same_prompts_stay_two_batches(tmp_path, tok):
    a, _, _ = roll.write_step(tok, tmp_path, global_step=0)
    b, _, _ = roll.write_step(tok, tmp_path, global_step=1, answers=NEXT_EPOCH)
    assert (a.name, b.name) == ("rollout_dump_data.step_0.jsonl", "rollout_dump_data.step_1.jsonl")
    res = load_run(tmp_path)
    assert [str(p) for p in res.problems] == [f"{a}: scores: {REWARD_NOTE}", f"{b}: scores: {REWARD_NOTE}"]
    run = res.run
    assert [t.step for t in run.trajectories] == [0] * 4 + [1] * 4
    assert_ids_unique_per_step(run)
    # the group id is the prompt's (ROLL dumps no uid), the same at both steps: the step keeps them two groups
    assert run.trajectories[0].group_id == run.trajectories[4].group_id
    assert group_sizes(run) == {0: [2, 2], 1: [2, 2]}
    for step, path in ((0, a), (1, b)):
        assert_step_as_alone(run, step, path, SCHEME)
    adv = compute_credit(run.to_batch(), SCHEME, device="cpu").advantages[:, 0]
    assert (adv[:4] > 0).tolist() == [True, False, True, False] and (adv[4:] > 0).tolist() == [True, False, False, True]


def test_a_renamed_dump_keeps_the_step_its_column_states(tmp_path, tok):
    path, _, _ = roll.write_step(tok, tmp_path / "dump", global_step=4)
    renamed = tmp_path / "rollout_dump_data.step_5.jsonl"
    renamed.write_bytes(path.read_bytes())
    res = load_run(renamed)
    assert {t.step for t in res.run.trajectories} == {4}
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(p.file, p.line, p.scope, p.reason) for p in notes] == [
        (
            str(renamed),
            1,
            "run",
            "records say step 4 but the file name 'rollout_dump_data.step_5.jsonl' says step 5; each record keeps "
            "the step it states (was the file renamed or copied from another step?)",
        )
    ]


def test_without_the_column_the_file_name_gives_the_step_and_equal_ids_stay(tmp_path, tok):
    """Dumps whose ``global_step`` column was dropped: the file name says the step, and the rows of two steps,
    whose ids are then the same (``step-?/row-j``), are two steps' rollouts, none de-duplicated away."""
    for step in (2, 3):
        path, _, _ = roll.write_step(tok, tmp_path, global_step=step)
        rec = json.loads(path.read_text())
        del rec["global_step"]
        path.write_text(json.dumps(rec) + "\n")
    res = load_run(tmp_path, fmt="roll_rollout")
    run = res.run
    assert [t.step for t in run.trajectories] == [2] * 4 + [3] * 4
    assert [t.id for t in run.trajectories] == [f"step-?/row-{j}" for j in range(4)] * 2
    assert_ids_unique_per_step(run)
    assert not [p for p in res.problems if p.field in ("id", "step")]
    bad = write_jsonl(
        tmp_path / "rollout_dump_data.step_1.jsonl",
        [{"responses": ["a"], "scores": [1.0], "sampling_params": ["{}"], "global_step": [-1]}],
    )
    res = load_run(bad)
    assert [str(p) for p in res.problems][-1] == (
        f"{bad}:1: row[0].global_step: expected a training step (a non-negative integer), got -1"
    )
