"""ROLL's rollout dump (rollout_dump_data.step_N.jsonl), written the way ROLL writes it, loads as exactly as it can."""

from __future__ import annotations

import json

import pytest
from test_io_support import write_jsonl
from writers import roll

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
