"""Real NeMo Gym rollouts through the ``nemo_gym`` adapter, with hand-checked token layouts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_io_support import NEMO, NEMO_FILES, ids, nemo_records

from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.text.tokenize import get_tokenizer

IM_END = 151645


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer("qwen3")  # NeMo Gym runs default to Qwen3's tokenizer (same BPE, + <think> etc.)


def test_all_six_files_are_there():
    assert NEMO_FILES == [
        "blackjack.jsonl",
        "competitive_coding_challenges.jsonl",
        "example_multi_step.jsonl",
        "google_search.jsonl",
        "math_with_code.jsonl",
        "xlam_fc.jsonl",
    ]


@pytest.mark.parametrize("name", NEMO_FILES)
def test_every_file_loads_cleanly(name):
    assert detect_format(NEMO / name) == "nemo_gym"
    res = load_run(NEMO / name)
    one_rollout_per_task = len({t.group_id for t in res.run.trajectories}) == len(res.run)
    # example files with one rollout per task say that group-relative estimators would see raw scores
    assert [p.field for p in res.problems] == (["group_id"] if one_rollout_per_task else [])
    assert res.run.source == "nemo_gym" and len(res.run) == 5 and res.run.tokenizer == "qwen3"
    batch = res.run.to_batch()
    for i, traj in enumerate(res.run.trajectories):
        roles = res.run.token_roles(i)
        n = traj.num_tokens
        assert batch.attention_mask[i, :n].sum() == n and batch.attention_mask[i, n:].sum() == 0
        assert batch.action_mask[i, :n].tolist() == [float(r == "model") for r in roles]
        turns = batch.turn_ids[i, :n]
        assert (turns[1:] >= turns[:-1]).all() and (batch.turn_ids[i, n:] == -1).all()
        assert "reward" in traj.global_rewards
        assert traj.segments[0].role == "model"  # the response starts with the policy's generation


def test_blackjack_row0_hand_checked(tok):
    """Row 0: hit, the dealer's environment message, hit. Each action is '<action>hit</action>' + <|im_end|>."""
    rec = nemo_records("blackjack.jsonl")[0]
    run = load_run(NEMO / "blackjack.jsonl").run
    traj = run.trajectories[0]
    action = ids(tok, "<action>hit</action>") + [IM_END]
    env_text = rec["response"]["output"][1]["content"]
    env = ids(tok, f"\n<|im_start|>user\n{env_text}<|im_end|>\n<|im_start|>assistant\n")
    assert [s.role for s in traj.segments] == ["model", "user", "model"]
    assert [s.token_ids.tolist() for s in traj.segments] == [action, env, action]
    assert len(action) == 8
    batch = run.to_batch()
    n = 2 * len(action) + len(env)
    assert batch.action_mask[0, :n].tolist() == [1.0] * 8 + [0.0] * len(env) + [1.0] * 8
    assert batch.turn_ids[0, :n].tolist() == [0] * (8 + len(env)) + [1] * 8
    assert int(batch.action_mask[0].sum()) == 16
    assert traj.id == "blackjack/task-0/rollout-0" and traj.group_id == "blackjack/task-0"
    assert traj.global_rewards == {"reward": -1.0}
    assert traj.metadata["truncated"] is False
    assert run.token_texts(0)[:8] == ["<", "action", ">", "hit", "</", "action", ">", "<|im_end|>"]
    assert run.prompt_text(0).endswith(
        "Respond with <action>hit</action> or <action>stand</action>.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_competitive_coding_keeps_real_ids_and_log_probs(tok):
    recs = nemo_records("competitive_coding_challenges.jsonl")
    run = load_run(NEMO / "competitive_coding_challenges.jsonl").run
    assert {t.group_id for t in run.trajectories} == {"competitive_coding_challenges/task-0"}
    for rec, traj in zip(recs, run.trajectories, strict=True):
        msg = rec["response"]["output"][1]
        (seg,) = traj.segments
        assert seg.role == "model"
        assert seg.token_ids.tolist() == msg["generation_token_ids"]
        assert seg.token_ids[-1] == IM_END
        np.testing.assert_array_equal(seg.log_probs, np.asarray(msg["generation_log_probs"], dtype=np.float32))
        assert traj.prompt_token_ids.tolist() == msg["prompt_token_ids"]
        assert traj.prompt.startswith("<|im_start|>user\nYou are an expert competitive programmer")
        reasoning = rec["response"]["output"][0]["summary"][0]["text"]
        assert seg.text == "<think>" + reasoning + "</think>" + msg["content"][0]["text"] + "<|im_end|>"
        assert traj.global_rewards["reward"] == 0.0
    batch = run.to_batch()
    assert batch.old_log_probs is not None and batch.ref_log_probs is None
    assert batch.group_ids.tolist() == [0] * 5


def test_math_with_code_tool_call_rendering(tok):
    rec = nemo_records("math_with_code.jsonl")[0]
    out = rec["response"]["output"]
    traj = load_run(NEMO / "math_with_code.jsonl").run.trajectories[0]
    assert [s.role for s in traj.segments] == ["model", "tool", "model"]
    args = json.dumps(json.loads(out[1]["arguments"]), ensure_ascii=False)
    call = f'\n<tool_call>\n{{"name": "execute_python", "arguments": {args}}}\n</tool_call><|im_end|>'
    assert traj.segments[0].text == out[0]["content"][0]["text"] + call
    tool_text = (
        f"\n<|im_start|>user\n<tool_response>\n{out[2]['output']}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert traj.segments[1].text == tool_text
    assert traj.segments[1].token_ids.tolist() == ids(tok, tool_text)
    assert traj.segments[2].text == out[3]["content"][0]["text"] + "<|im_end|>"
    assert traj.global_rewards == {"reward": 1.0} and traj.metadata["reward_components"] == {"accuracy": 1.0}
    assert "execute_python" in traj.prompt and traj.prompt.startswith("<|im_start|>system\n# Instructions")


def test_xlam_reasoning_and_call_form_one_model_turn():
    traj = load_run(NEMO / "xlam_fc.jsonl").run.trajectories[0]
    assert [s.role for s in traj.segments] == ["model", "tool", "model"]
    first = traj.segments[0].text
    assert first.startswith("<think>\nOkay, the user is asking") and "\n</think>\n\n<tool_call>\n" in first
    assert first.endswith(
        '{"name": "web_chain_details", "arguments": {"chain_slug": "ethereum"}}\n</tool_call><|im_end|>'
    )
    # only the trainer's scalar is a reward; the environment's counts are kept, unsummed, as metadata
    assert traj.global_rewards == {"reward": 1.0}
    assert traj.metadata["reward_components"] == {"num_expected": 1.0, "num_predicted": 1.0, "num_correct": 1.0}


def test_example_multi_step_turns():
    run = load_run(NEMO / "example_multi_step.jsonl").run
    traj = run.trajectories[0]
    assert [s.role for s in traj.segments] == ["model", "tool"] * 3 + ["model"]
    assert run.to_batch().turn_ids[0].max() == 3  # three call/output turns, then the answer
    components = traj.metadata["reward_components"]
    assert components["accuracy"] == 1.0 and components["order_instruction_following_failure"] == 0.0
    assert list(traj.global_rewards) == ["reward"]
