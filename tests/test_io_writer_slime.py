"""slime debug rollout dumps (``rollout_data/<id>.pt``) written the way ``save_debug_rollout_data`` writes them
(``tests/writers/slime.py``), loaded by the ``slime_rollout`` adapter with ``torch.load(weights_only=True)``:
exact token ids, loss mask, groups, rewards, truncation, problems; and the refusal when a sample holds objects
that weights_only refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from step_support import assert_ids_unique_per_step, assert_step_as_alone, group_sizes
from writers import slime
from writers.slime import Spec

from engine import CreditConfig
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


# Steps: the dump's rollout_id is the step (slime trains on one rollout per rollout_id); --dump-details names the
# file <rollout_id>.pt; an evaluation's dump is eval_<rollout_id>.pt beside them.
HI = "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n"
EPOCHS = [
    [
        [Spec(PROMPT, [("42<|im_end|>", True)], 1.0), Spec(PROMPT, [("48<|im_end|>", True)], 0.0)],
        [Spec(HI, [("hi<|im_end|>", True)], 1.0), Spec(HI, [("bye<|im_end|>", True)], 0.0)] * 2,
    ],
    [  # the same prompts at the next rollout (the next epoch), other rewards
        [Spec(PROMPT, [("42<|im_end|>", True)], 1.0), Spec(PROMPT, [("42.<|im_end|>", True)], 0.5)],
        [Spec(HI, [("hello<|im_end|>", True)], 1.0)] + [Spec(HI, [("no<|im_end|>", True)], 0.0)] * 3,
    ],
]
SCHEME = CreditConfig(estimator="grpo")  # slime's GRPO normalises over each prompt's n_samples_per_prompt


def rollouts(root, evaluate: bool = False) -> list[str]:
    """Rollouts 0 and 1 as ``--dump-details`` writes them (the data source's counters run on); with ``evaluate``
    also the evaluation before training (``eval_0.pt``)."""
    template = str(root / "rollout_data" / "{rollout_id}.pt")
    paths = []
    if evaluate:
        paths.append(slime.save_debug_rollout_data(template, [EPOCHS[0][0]], rollout_id=0, evaluation=True)[0])
    group, index = 0, 0
    for rollout_id, groups in enumerate(EPOCHS):
        paths.append(slime.save_debug_rollout_data(template, groups, rollout_id, group, index)[0])
        group, index = group + len(groups), index + sum(map(len, groups))
    return paths


def test_every_sample_has_its_rollout_id_as_step(written):
    path, samples = written
    assert path.endswith("/rollout_data/3.pt")
    assert [t.step for t in load_run(path).run.trajectories] == [3] * len(samples) == [3] * 5


def test_two_rollouts_of_the_same_prompts_stay_two_batches(tmp_path):
    a, b = rollouts(tmp_path)
    res = load_run(tmp_path / "rollout_data")
    assert res.problems == []
    run = res.run
    assert [t.step for t in run.trajectories] == [0] * 6 + [1] * 6
    assert [t.id for t in run.trajectories] == [f"0/sample-{i}" for i in range(6)] + [
        f"1/sample-{i}" for i in range(6, 12)
    ]
    assert_ids_unique_per_step(run)
    assert group_sizes(run) == {0: [2, 4], 1: [2, 4]}
    assert [t.group_id for t in run.trajectories][::2] == [
        "rollout-0/group-0", "rollout-0/group-1", "rollout-0/group-1",
        "rollout-1/group-2", "rollout-1/group-3", "rollout-1/group-3",
    ]  # fmt: skip
    assert run.trajectories[0].prompt_token_ids.tolist() == run.trajectories[6].prompt_token_ids.tolist()
    for step, path in ((0, a), (1, b)):
        assert_step_as_alone(run, step, path, SCHEME)


def test_a_renamed_dump_keeps_its_rollout_id(tmp_path, written):
    path, _ = written
    renamed = tmp_path / "4.pt"
    renamed.write_bytes(open(path, "rb").read())
    res = load_run(renamed)
    assert {t.step for t in res.run.trajectories} == {3}
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(p.file, p.scope, p.reason) for p in notes] == [
        (
            str(renamed),
            "run",
            "records say step 3 but the file name '4.pt' says step 4; each record keeps the step it states (was the "
            "file renamed or copied from another step?)",
        )
    ]


def test_an_evaluation_dump_is_no_training_step(tmp_path):
    ev, a, b = rollouts(tmp_path, evaluate=True)
    assert ev.endswith("/rollout_data/eval_0.pt")
    res = load_run(ev)
    assert [t.step for t in res.run.trajectories] == [None, None]
    assert [t.metadata["eval_rollout_id"] for t in res.run.trajectories] == [0, 0]
    assert [(p.field, p.scope, p.reason) for p in res.problems] == [
        (
            "rollout_id",
            "run",
            "an evaluation's dump (slime names it eval_0): evaluation rollouts at rollout 0, not a training batch; its "
            "trajectories get no step",
        ),
        *[(f"samples[{b}].group_index", "record", "no group_index; grouped by prompt token ids") for b in (0, 1)],
    ]
    res = load_run(tmp_path / "rollout_data")  # beside the training dumps: skipped, the two steps load as before
    assert [t.step for t in res.run.trajectories] == [0] * 6 + [1] * 6
    skipped = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(p.file, p.scope) for p in skipped] == [(ev, "record")]
    assert skipped[0].reason.startswith("its step cannot be read") and skipped[0].reason.count("file skipped") == 1


def test_a_rollout_id_that_is_no_step(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"rollout_id": "abc", "samples": []}, path)
    res = load_run(path, fmt="slime_rollout")
    assert [str(p) for p in res.problems] == [
        f"{path}: rollout_id: expected a training step (a non-negative integer), got str 'abc'; the samples get no step"
    ]
