"""slime debug rollout dumps (``rollout_data/<id>.pt``) written the way ``save_debug_rollout_data`` writes them
(``tests/writers/slime.py``), loaded by the ``slime_rollout`` adapter with ``torch.load(weights_only=True)``:
exact token ids, loss mask, groups, rewards, truncation, problems; and the refusal when a sample holds objects
that weights_only refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from writers import slime
from writers.slime import Spec

from engine.io import load_run
from engine.io.detect import detect_format

PROMPT = "<|im_start|>user\nWhat is 6*7? Use the calculator.<|im_end|>\n<|im_start|>assistant\n"
TOOL = "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
GROUPS = [
    [
        Spec(PROMPT, [("<tool_call>mul(6,7)</tool_call><|im_end|>", True), (TOOL, False), ("42<|im_end|>", True)], 1.0),
        Spec(PROMPT, [("It is 48.<|im_end|>", True)], 0.0),
        Spec(PROMPT, [("Let me compute 6*7 step by", True)], 0.0, truncated=True),
    ],
    [
        Spec("<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n", [("hi<|im_end|>", True)], 1.0),
        Spec(
            "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n", [("bye<|im_end|>", True)], 0.0, remove=True
        ),
    ],
]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    template = str(tmp_path_factory.mktemp("slime") / "dump" / "rollout_data" / "{rollout_id}.pt")
    return slime.save_debug_rollout_data(template, GROUPS, rollout_id=3)


def test_detected_and_loaded_exactly(written):
    path, samples = written
    assert detect_format(path) == "slime_rollout"
    res = load_run(path)
    assert [str(p) for p in res.problems] == [
        f"{path}: samples[4].remove_sample: slime zeroes this sample's loss mask; loaded with no action token"
    ]
    run = res.run
    assert [t.id for t in run.trajectories] == [f"3/sample-{i}" for i in range(5)]
    batch = run.to_batch()
    for b, (traj, s) in enumerate(zip(run.trajectories, samples, strict=True)):
        n = s.response_length
        assert traj.prompt_token_ids.tolist() == s.tokens[:-n]
        assert batch.token_ids[b, :n].tolist() == s.tokens[-n:]
        mask = [0] * n if s.remove_sample else s.loss_mask
        assert batch.action_mask[b].tolist() == mask + [0] * (batch.num_tokens - n)
        assert batch.old_log_probs[b, :n].tolist() == pytest.approx(s.rollout_log_probs, abs=0)
        assert traj.group_id == f"rollout-3/group-{s.group_index}"
        assert traj.global_rewards == {"reward": s.reward}
        assert traj.metadata["truncated"] is (s.status.value == "truncated")
    assert batch.truncated.tolist() == [False, False, True, False, False]
    assert [s.role for s in run.trajectories[0].segments] == ["model", "tool", "model"]
    assert run.trajectories[0].segments[1].text == TOOL
    assert batch.group_ids.tolist() == [0, 0, 0, 1, 1]


def test_objects_weights_only_refuses_are_refused_with_an_export_hint(tmp_path):
    path, _ = slime.save_debug_rollout_data(
        str(tmp_path / "{rollout_id}.pt"),
        [[Spec(PROMPT, [("42<|im_end|>", True)], 1.0, metadata={"judge_score": np.float64(0.9)})]],
        rollout_id=0,
    )
    assert detect_format(path) == "slime_rollout"
    with pytest.raises(ValueError) as err:
        load_run(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: the slime rollout dump holds objects torch.load(weights_only=True) refuses (")
    assert "numpy" in msg and "CreditLens never unpickles code: export plain data instead" in msg
    assert "['tokens', 'response_length', 'loss_mask', 'rollout_log_probs', 'reward', 'group_index', 'index', " in msg
    # the export the message proposes loads
    obj = torch.load(path, weights_only=False)  # the test's own file
    keep = ["tokens", "response_length", "loss_mask", "rollout_log_probs", "reward", "group_index", "index", "status"]
    torch.save({"rollout_id": 0, "samples": [{k: s[k] for k in keep} for s in obj["samples"]]}, tmp_path / "plain.pt")
    res = load_run(tmp_path / "plain.pt")
    assert res.problems == [] and res.run.trajectories[0].global_rewards == {"reward": 1.0}


def test_dict_rewards_are_reported(tmp_path):
    path, _ = slime.save_debug_rollout_data(
        str(tmp_path / "{rollout_id}.pt"),
        [
            [
                Spec(PROMPT, [("42<|im_end|>", True)], {"acc": 1.0, "fmt": 0.5, "note": "ok"}),
                Spec(PROMPT, [("x", True)], None),
            ]
        ],
        rollout_id=1,
    )
    res = load_run(path)
    assert [str(p) for p in res.problems] == [
        f"{path}: reward: rewards are dicts: slime trains on reward[--reward-key], which the file does not name; every "
        "numeric entry is a global component (weight 1 unless CreditConfig.global_weights says otherwise)",
        f"{path}: samples[1].reward: no reward (the sample was not scored)",
    ]
    assert res.run.trajectories[0].global_rewards == {"acc": 1.0, "fmt": 0.5}


def test_a_verl_pt_dump_is_still_verl(tmp_path):
    torch.save({"responses": torch.tensor([[1, 2]]), "attention_mask": torch.ones(1, 2)}, tmp_path / "v.pt")
    assert detect_format(tmp_path / "v.pt") == "verl_tensors"
