"""Each input adapter on small hand-made files: detection by content, token layout, rewards, groups."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_io_support import ids, write_jsonl

from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.text.tokenize import get_tokenizer

IM_END = 151645


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


# ------------------------------------------------------------------------------------------------ verl tensors
def verl_dump() -> dict:
    """2 rows, P=3 (left-padded), T=6. Row 0: model [10,11], tool [12,13], model [14], pad. Row 1: model
    [20,21,22], pad x3. Outcome score on row 0's last real token."""
    return {
        "prompts": torch.tensor([[0, 1, 2], [3, 4, 5]]),
        "responses": torch.tensor([[10, 11, 12, 13, 14, 0], [20, 21, 22, 0, 0, 0]]),
        "attention_mask": torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0, 0, 0]]),
        "response_mask": torch.tensor([[1, 1, 0, 0, 1, 0], [1, 1, 1, 0, 0, 0]]),
        "token_level_scores": torch.tensor([[0, 0, 0, 0, 1.0, 0], [0, 0, 0.5, 0, 0, 0]]),
        "old_log_probs": torch.full((2, 6), -0.5),
        "ref_log_prob": torch.full((2, 6), -0.25),
        "values": torch.arange(12, dtype=torch.float32).reshape(2, 6) / 10,
        "uid": ["prompt-a", "prompt-a"],
    }


def check_verl_batch(res) -> None:
    assert res.problems == []
    run = res.run
    assert run.source == "verl_tensors"
    t0 = run.trajectories[0]
    assert [(s.role, s.token_ids.tolist()) for s in t0.segments] == [
        ("model", [10, 11]),
        ("tool", [12, 13]),
        ("model", [14]),
    ]
    assert t0.prompt_token_ids.tolist() == [1, 2]  # left padding dropped
    b = run.to_batch()
    assert b.token_ids.tolist() == [[10, 11, 12, 13, 14], [20, 21, 22, 0, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert b.action_mask.tolist() == [[1, 1, 0, 0, 1], [1, 1, 1, 0, 0]]
    assert b.turn_ids.tolist() == [[0, 0, 0, 0, 1], [0, 0, 0, -1, -1]]
    assert b.token_scores.tolist() == [[0, 0, 0, 0, 1], [0, 0, 0.5, 0, 0]]
    expected_values = torch.tensor([[0.0, 0.1, 0.2, 0.3, 0.4], [0.6, 0.7, 0.8, 0.0, 0.0]])
    torch.testing.assert_close(b.values, expected_values)
    assert b.old_log_probs[0].tolist() == [-0.5] * 5 and b.ref_log_probs[1, :3].tolist() == [-0.25] * 3
    assert b.group_ids.tolist() == [0, 0]


def test_verl_tensors_pt(tmp_path):
    path = tmp_path / "batch.pt"
    torch.save(verl_dump(), path)
    assert detect_format(path) == "verl_tensors"
    check_verl_batch(load_run(path))


def test_verl_tensors_nested_dataproto_dict(tmp_path):
    dump = verl_dump()
    uid = dump.pop("uid")
    path = tmp_path / "nested.pt"
    torch.save({"batch": dump, "non_tensor_batch": {"uid": uid}, "meta_info": {"step": 3}}, path)
    check_verl_batch(load_run(path))


def test_verl_tensors_npz(tmp_path):
    path = tmp_path / "batch.npz"
    np.savez(path, **{k: (np.array(v) if isinstance(v, list) else v.numpy()) for k, v in verl_dump().items()})
    assert detect_format(path) == "verl_tensors"
    check_verl_batch(load_run(path))


def test_verl_tensors_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    dump = verl_dump()
    table = pa.table({k: (v if isinstance(v, list) else v.tolist()) for k, v in dump.items()})
    path = tmp_path / "batch.parquet"
    pq.write_table(table, path)
    assert detect_format(path) == "verl_tensors"
    check_verl_batch(load_run(path))


def test_verl_tensors_never_unpickles_code(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"responses": torch.zeros(1, 2, dtype=torch.long), "payload": np.random.default_rng(0)}, path)
    with pytest.raises(ValueError, match="cannot load safely with torch.load\\(weights_only=True\\)"):
        load_run(path)


def test_verl_tensors_bad_rows_and_fields(tmp_path):
    dump = verl_dump()
    dump["old_log_probs"][1, 1] = float("nan")
    dump["values"] = torch.zeros(2, 5)  # wrong shape: the field is dropped, rows stay
    dump["turn_ids"] = torch.tensor([[0, 0, 0, 0, 1, -1], [1, 0, 0, -1, -1, -1]])  # row 1 goes backwards
    path = tmp_path / "bad.pt"
    torch.save(dump, path)
    res = load_run(path)
    assert [str(p).split(": ", 1)[1] for p in res.problems] == [
        "values: shape does not match responses (2 rows); field ignored",
        "row[1].old_log_probs: non-finite value nan at token 1",
    ]
    assert [t.id for t in res.run.trajectories] == ["bad/row-0"]
    dump["old_log_probs"][1, 1] = -0.5
    torch.save(dump, path)
    res = load_run(path)
    assert str(res.problems[-1]).endswith("row[1].turn_ids: turn ids go backwards")


# ------------------------------------------------------------------------------------------------ verl rollout
def test_verl_rollout_dump(tmp_path, tok):
    rows = [
        {
            "input": "user\nWho?\nassistant\n",
            "output": "<search> who </search>\n\n<information>Doc: Bob</information>\n\n<answer> Bob </answer>",
            "gts": "Bob",
            "score": 1.0,
            "step": 3,
            "acc": True,
            "pred": "Bob",
        },
        {
            "input": "user\nWho?\nassistant\n",
            "output": "<answer> Alice </answer>",
            "gts": "Bob",
            "score": 0.0,
            "step": 3,
            "acc": False,
            "pred": "Alice",
        },
    ]
    path = write_jsonl(tmp_path / "3.jsonl", rows)
    assert detect_format(path) == "verl_rollout"
    res = load_run(path)
    assert [p.reason.split(":")[0] for p in res.problems] == ["2 rows"]  # the final <|im_end|> is assumed
    t0, t1 = res.run.trajectories
    assert [s.role for s in t0.segments] == ["model", "tool", "model"]
    assert t0.segments[2].token_ids.tolist() == ids(tok, "<answer> Bob </answer>") + [IM_END]
    assert t0.segments[1].text == "\n\n<information>Doc: Bob</information>\n\n"
    assert t0.global_rewards == {"score": 1.0} and t1.global_rewards == {"score": 0.0}  # verl trains on `score`
    assert t0.metadata["reward_components"] == {"acc": 1.0} and t1.metadata["reward_components"] == {"acc": 0.0}
    assert t0.step == 3 and t1.step == 3  # the line's step is the trajectory's, not metadata
    assert t0.metadata == {
        "ground_truth": "Bob",
        "synthesized": ["end_of_turn_token"],
        "reward_components": {"acc": 1.0},
        "extra": {"pred": "Bob"},  # kept, not read as a reward
    }
    assert t0.group_id == t1.group_id and t0.id == "3:1"


def test_verl_rollout_tool_agent_loop_output(tmp_path):
    call = 'I will compute.<tool_call>\n{"name": "calc"}\n</tool_call>'
    out = call + "\nuser\n<tool_response>\n4\n</tool_response>\nassistant\nIt is 4."
    path = write_jsonl(tmp_path / "1.jsonl", [{"input": "q", "output": out, "score": 1.0, "step": 1}])
    (traj,) = load_run(path).run.trajectories
    assert [(s.role, s.text) for s in traj.segments] == [  # the template tokens the dump dropped are back
        ("model", 'I will compute.<tool_call>\n{"name": "calc"}\n</tool_call><|im_end|>'),
        ("tool", "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
        ("model", "It is 4.<|im_end|>"),
    ]


# ------------------------------------------------------------------------------------------------ rLLM
def rllm_episode() -> dict:
    """Three cumulative steps with real ids: step k+1's prompt = step k's prompt + response + observation."""
    p0 = [1, 2, 3]
    r0, o1, r1, o2, r2 = [10, 11, IM_END], [50, 51, 52], [12, IM_END], [60, 61], [13, IM_END]
    p1 = p0 + r0 + o1
    p2 = p1 + r1 + o2
    step = lambda p, r, rew, obs: {
        "prompt_ids": p,
        "response_ids": r,
        "logprobs": [-0.1] * len(r),
        "reward": rew,
        "observation": obs,
        "model_response": "x",
        "mc_return": 0.0,
        "done": False,
    }
    traj = {
        "uid": "u-1",
        "name": "default_traj_name",
        "task": {"question": "2+2?"},
        "reward": 1.0,
        "steps": [step(p0, r0, 0.0, "2+2?"), step(p1, r1, 0.0, "tool: 4"), step(p2, r2, 1.0, "ok")],
    }
    return {
        "id": "task7:0",
        "task": {"question": "2+2?"},
        "termination_reason": "ENV_DONE",
        "is_correct": True,
        "trajectories": [traj],
        "metrics": {},
    }


def test_rllm_episode_with_ids(tmp_path):
    path = write_jsonl(tmp_path / "episodes.jsonl", [rllm_episode()])
    assert detect_format(path) == "rllm"
    res = load_run(path)
    assert res.problems == []
    (traj,) = res.run.trajectories
    assert traj.id == "task7:0" and traj.group_id == "task7"
    assert [(s.role, s.token_ids.tolist()) for s in traj.segments] == [
        ("model", [10, 11, IM_END]),
        ("user", [50, 51, 52]),
        ("model", [12, IM_END]),
        ("user", [60, 61]),
        ("model", [13, IM_END]),
    ]
    assert traj.prompt_token_ids.tolist() == [1, 2, 3]
    assert traj.turn_rewards == [{"step_reward": 0.0}, {"step_reward": 0.0}, {"step_reward": 1.0}]
    assert traj.global_rewards == {} and traj.metadata["trajectory_reward"] == 1.0
    b = res.run.to_batch()
    assert b.turn_ids[0].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert b.action_mask[0].tolist() == [1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert b.old_log_probs[0].tolist() == pytest.approx([-0.1] * 3 + [0] * 3 + [-0.1] * 2 + [0] * 2 + [-0.1] * 2)


def test_rllm_text_steps_with_chat_completions(tmp_path, tok):
    sys_user = [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "2+2?"}]
    a0 = {
        "role": "assistant",
        "content": "Let me compute.",
        "tool_calls": [{"name": "python", "arguments": {"code": "print(2+2)"}}],
    }
    t0 = {"role": "tool", "content": "4"}
    a1 = {"role": "assistant", "content": "The answer is 4."}
    traj = {
        "uid": "u-2",
        "name": "solver",
        "task": {"question": "2+2?"},
        "reward": 1.0,
        "steps": [
            {"chat_completions": sys_user + [a0], "reward": 0.0},
            {"chat_completions": sys_user + [a0, t0, a1], "reward": 0.0},
        ],
    }
    path = write_jsonl(tmp_path / "trajs.jsonl", [traj])
    res = load_run(path, fmt="rllm")
    assert res.problems == []
    (t,) = res.run.trajectories
    tool_text = "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert [(s.role, s.text) for s in t.segments] == [
        (
            "model",
            'Let me compute.\n<tool_call>\n{"name": "python", "arguments": {"code": "print(2+2)"}}\n'
            "</tool_call><|im_end|>",
        ),
        ("tool", tool_text),
        ("model", "The answer is 4.<|im_end|>"),
    ]
    assert t.segments[1].token_ids.tolist() == ids(tok, tool_text)
    assert (
        t.prompt
        == "<|im_start|>system\nUse tools.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert t.global_rewards == {"reward": 1.0} and t.turn_rewards == []
    assert t.id == "u-2" and t.group_id.startswith("task-")


def test_rllm_legacy_token_mode_and_chat_dump(tmp_path):
    token_mode = {
        "prompt_tokens": [1, 2],
        "response_tokens": [10, 11, 50, 51, 12],
        "response_masks": [1, 1, 0, 0, 1],
        "trajectory_reward": 0.5,
        "idx": 0,
        "termination_reason": "TRUNCATION",
    }
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = write_jsonl(tmp_path / "legacy.jsonl", [token_mode, chat])
    res = load_run(path, fmt="rllm")
    assert [p.field for p in res.problems] == ["group_id"]  # two rollouts, each alone in its group: reported
    t0, t1 = res.run.trajectories
    assert [(s.role, s.token_ids.tolist()) for s in t0.segments] == [
        ("model", [10, 11]),
        ("user", [50, 51]),
        ("model", [12]),
    ]
    assert t0.global_rewards == {"reward": 0.5} and t0.metadata["truncated"] is True
    assert [(s.role, s.text) for s in t1.segments] == [("model", "hello<|im_end|>")]


def test_rllm_bad_step_is_reported(tmp_path):
    ep = rllm_episode()
    ep["trajectories"][0]["steps"][1]["logprobs"] = [-0.1]
    path = write_jsonl(tmp_path / "bad.jsonl", [ep, rllm_episode() | {"id": "task8:0"}])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["task8:0"]
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (1, "trajectories[0].steps[1].logprobs", "has 1 values for 2 tokens")
    ]


# ------------------------------------------------------------------------------------------------ tagged text
def test_kgr1_structured_rewards(tmp_path, tok):
    query = '<think>q</think><kg-query>get_tail_relations("X")</kg-query>'
    response = query + "\n\n<information>r1, r2</information>\n\n<answer> Y </answer>"
    rec = {
        "uid": "q1",
        "prompt": "Q?",
        "response": response,
        "structured_rewards": {
            "turn_rewards": {
                "2": {"format_score": 1, "is_answer_score": 1},
                "1": {"format_score": 1, "kg_query_validity": 1},
                "3": 0.0,
            },
            "global_rewards": {
                "exact_match": 1.0,
                "_raw_exact_match": 1.0,
                "_otc_scaling_factor": 1.0,
                "_kg_turns_used": 1,
            },
            "total_score": 1.7,
        },
    }
    bad = dict(rec, structured_rewards={"turn_rewards": {"0": 1.0}})
    path = write_jsonl(tmp_path / "kg.jsonl", [rec, bad])
    assert detect_format(path) == "tagged_text"
    res = load_run(path)
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (2, "turn_rewards.0", "turn keys must be 1-based integers (KG-R1 numbers turns from 1)")
    ]
    (t,) = res.run.trajectories
    assert t.turn_rewards == [
        {"format_score": 1.0, "kg_query_validity": 1.0},
        {"format_score": 1.0, "is_answer_score": 1.0},
        {"turn_reward": 0.0},
    ]
    assert t.global_rewards["_otc_scaling_factor"] == 1.0 and t.metadata["total_score"] == 1.7
    assert [s.role for s in t.segments] == ["model", "tool", "model"]
    b = res.run.to_batch()
    assert b.turn_reward_names == ("format_score", "kg_query_validity", "is_answer_score", "turn_reward")
    assert b.turn_rewards[0].tolist() == [[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]]
    assert b.turn_mask.tolist() == [[1, 1, 1]] and int(b.turn_ids[0].max()) == 1  # 3 reward turns, 2 token turns
    assert b.global_reward_names == ("exact_match", "_raw_exact_match", "_otc_scaling_factor", "_kg_turns_used")


def test_search_r1_unclosed_information_block(tmp_path):
    rec = {"prompt": "Q", "response": "<search> q </search>\n\n<information>cut off", "reward": 0.0, "truncated": True}
    res = load_run(write_jsonl(tmp_path / "s.jsonl", [rec]))
    (t,) = res.run.trajectories
    assert [(s.role, s.text) for s in t.segments] == [
        ("model", "<search> q </search>"),
        ("tool", "\n\n<information>cut off"),
    ]
    assert t.global_rewards == {"reward": 0.0} and t.truncated


def test_fmt_overrides_detection(tmp_path):
    rec = {"prompt": "Q", "response": "plain answer", "reward": 1.0}
    path = write_jsonl(tmp_path / "plain.jsonl", [rec])
    with pytest.raises(ValueError, match="cannot detect"):
        load_run(path)
    (t,) = load_run(path, fmt="tagged_text").run.trajectories
    assert [s.role for s in t.segments] == ["model"] and t.global_rewards == {"reward": 1.0}


def test_json_array_and_pretty_printed_documents(tmp_path):
    recs = [{"id": f"a{i}", "segments": [{"role": "model", "token_ids": [i + 1]}]} for i in range(3)]
    (tmp_path / "arr.json").write_text(json.dumps(recs))
    res = load_run(tmp_path / "arr.json")
    assert [t.id for t in res.run.trajectories] == ["a0", "a1", "a2"]
    (tmp_path / "one.json").write_text(json.dumps(rllm_episode(), indent=2))
    assert [t.id for t in load_run(tmp_path / "one.json").run.trajectories] == ["task7:0"]
    recs[1]["segments"] = 5
    (tmp_path / "arr.json").write_text(json.dumps(recs))
    res = load_run(tmp_path / "arr.json")
    assert [(p.line, p.field) for p in res.problems] == [(None, "[1].segments")]
