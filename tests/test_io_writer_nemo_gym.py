"""NeMo Gym rollouts written the way ``ng_collect_rollouts`` and its agents write them (``writers/nemo_gym.py``),
loaded with ``load_run``: exact token ids, action mask, groups, rewards, truncation flags and problems."""

from __future__ import annotations

import json

import pytest
from writers import nemo_gym as writer

from engine.credit import compute_credit
from engine.io import load_run

IMAGE_PAD, IM_END = 151655, 151645
NO_IDS = (
    "empty ([]) on {n} of {n} generations: the model server returned no token ids, so their rendered text is "
    "tokenized instead and they have no log-probs (metadata.synthesized)"
)
IMAGE_NOTE = (
    "input_image rendered as the placeholder <|vision_start|><|image_pad|><|vision_end|> where the Qwen-VL chat "
    "template puts it; the model saw one pad token per patch"
)


def assert_matches(truth: writer.Truth, res) -> None:
    """Ids, groups, prompts, per-row token ids / action mask / rewards / truncation as the writer says."""
    run = res.run
    batch = run.to_batch()
    assert [t.id for t in run.trajectories] == truth.ids
    assert batch.group_ids.tolist() == truth.group_ids
    assert batch.truncated.tolist() == truth.truncated
    for i, traj in enumerate(run.trajectories):
        n = traj.num_tokens
        assert [(s.role, s.text) for s in traj.segments] == truth.segments[i]
        assert batch.token_ids[i, :n].tolist() == truth.token_ids(i)
        assert batch.action_mask[i, :n].tolist() == truth.action_mask(i)
        assert batch.attention_mask[i, :n].sum() == n and batch.attention_mask[i, n:].sum() == 0
        assert traj.global_rewards == {"reward": truth.rewards[i]}
        assert traj.metadata["truncated"] is truth.truncated[i]
        assert run.prompt_text(i) == truth.prompts[i]


def test_hermes_empty_generation_ids_fall_back_to_text(tmp_path):
    truth = writer.write_hermes(tmp_path)
    res = load_run(truth.path)
    assert_matches(truth, res)
    f = truth.path
    assert [str(p) for p in res.problems] == [
        f"{f}:1: response.output[0].generation_token_ids: " + NO_IDS.format(n=2),
        f"{f}:2: response.output[0].generation_token_ids: " + NO_IDS.format(n=1),
    ]
    batch = res.run.to_batch()
    assert batch.action_mask.sum(1).tolist() == [sum(truth.action_mask(0)), sum(truth.action_mask(1))]
    assert min(batch.action_mask.sum(1).tolist()) > 0  # the loader used to load these with 0 action tokens
    assert all(t.metadata["synthesized"] == ["generation_token_ids"] for t in res.run.trajectories)
    assert batch.old_log_probs is None  # [] log-probs are none, not zero-length arrays
    assert truth.token_ids(1) == [785, 4226, 374, 220, 19, 16, 13, IM_END]  # "The answer is 41." + <|im_end|>


def test_zero_action_tokens_is_a_problem(tmp_path):
    # Not a writer path: a guard. An output holding only an environment message has no policy tokens.
    rec = {
        "responses_create_params": {"input": "Play."},
        "response": {"output": [{"type": "message", "role": "user", "content": "You lost."}]},
        "reward": 0.0,
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
    }
    path = tmp_path / "lost.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    res = load_run(path)
    assert [str(p) for p in res.problems] == [
        f"{path}:1: response.output: no assistant output: this rollout has 0 action tokens"
    ]
    assert res.run.to_batch().action_mask.sum() == 0


def test_aviary_transitions_load_as_turns(tmp_path):
    truth = writer.write_aviary(tmp_path)
    res = load_run(truth.path)
    assert_matches(truth, res)
    assert [str(p) for p in res.problems] == [
        f"{truth.path}:3: response.output[1]: step 1 rewrites items of step 0 (aviary collapse_old_env_states); "
        "each item is loaded as first written, so later turns show context the model no longer saw"
    ]
    batch = res.run.to_batch()
    assert batch.turn_ids[0].max() == 1 and batch.turn_ids[2].max() == 1  # two model turns each
    assert "task_idx" not in res.run.trajectories[0].metadata.get("reward_components", {})


def test_aviary_string_input_is_in_the_steps_once(tmp_path):
    # AviaryAgent.responses turns a string input into a user message that starts every step; the logged request
    # keeps the string. The prompt holds it once.
    truth = writer.write_aviary(tmp_path)
    rec = json.loads(truth.path.read_text().splitlines()[1])
    rec["responses_create_params"]["input"] = "Solve it."
    for step in rec["response"]["output"]:
        step.insert(0, {"role": "user", "content": "Solve it.", "type": "message"})
    path = tmp_path / "string_input.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    res = load_run(path)
    assert res.problems == []
    head = truth.prompts[1].split("<|im_start|>user\n")[0]
    question = truth.prompts[1].split("<|im_start|>user\n")[1]
    assert res.run.prompt_text(0) == f"{head}<|im_start|>user\nSolve it.<|im_end|>\n<|im_start|>user\n{question}"
    assert [(s.role, s.text) for s in res.run.trajectories[0].segments] == truth.segments[1]


def test_aviary_step_that_shrinks_is_refused(tmp_path):
    truth = writer.write_aviary(tmp_path)
    rec = json.loads(truth.path.read_text().splitlines()[0])
    rec["response"]["output"].reverse()  # step 1 now holds fewer items than step 0
    path = tmp_path / "shrunk.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match=r"response.output\[1\]: step 1 holds 3 items, fewer than step 0 \(5\)"):
        load_run(path, strict=True)


def test_image_parts_become_placeholders_and_problems(tmp_path):
    truth = writer.write_image_tools(tmp_path)
    res = load_run(truth.path)
    assert_matches(truth, res)
    f = truth.path
    assert [str(p) for p in res.problems] == [
        f"{f}:1: responses_create_params.input[1].content[1]: {IMAGE_NOTE}",
        f"{f}:1: response.output[1].content[1]: {IMAGE_NOTE}",
        f"{f}:2: responses_create_params.input[1].content[1]: {IMAGE_NOTE}",
    ]
    first, second = res.run.trajectories
    assert first.metadata["placeholders"] == [
        "responses_create_params.input[1].content[1]",
        "response.output[1].content[1]",
    ]
    assert first.metadata["synthesized"] == ["input_image"] == second.metadata["synthesized"]
    assert truth.token_ids(0).count(IMAGE_PAD) == 1  # the crop sits in the user segment, not in the action mask
    batch = res.run.to_batch()
    pad = truth.token_ids(0).index(IMAGE_PAD)
    assert batch.token_ids[0, pad] == IMAGE_PAD and batch.action_mask[0, pad] == 0


def test_audio_part_refuses_the_record(tmp_path):
    truth = writer.write_image_tools(tmp_path)
    lines = truth.path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["responses_create_params"]["input"][1]["content"][1] = {"type": "input_audio", "input_audio": {"data": ""}}
    path = tmp_path / "audio.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    res = load_run(path)
    assert len(res.run) == 1
    assert [str(p) for p in res.problems] == [
        f"{path}:1: responses_create_params.input[1].content[1]: {IMAGE_NOTE}",
        f"{path}:1: response.output[1].content[1]: {IMAGE_NOTE}",
        f"{path}:2: responses_create_params.input[1].content[1].type: content part of type 'input_audio' has no "
        "text; its tokens cannot be placed",
    ]


def test_anyswe_mask_sample_excludes_rollouts_from_the_loss(tmp_path):
    truth = writer.write_anyswe(tmp_path)
    res = load_run(truth.path)
    assert truth.excluded == [False, True, True]
    assert_matches(truth, res)
    assert [str(p) for p in res.problems] == [
        f"{truth.path}: mask_sample: 2 of 3 rollouts carry mask_sample=true (lines 2, 3): NeMo Gym excludes them "
        "from the loss, so their action mask is 0 (metadata.exclude_from_loss)"
    ]
    trajs = res.run.trajectories
    assert [t.metadata.get("exclude_from_loss", False) for t in trajs] == [False, True, True]
    for t in trajs:  # a flag, not a reward: never a component
        assert "mask_sample" not in t.metadata["reward_components"]
        assert t.metadata["reward_components"]["resolved"] in (0.0, 1.0)
    batch = res.run.to_batch()
    assert batch.action_mask.sum(1).tolist() == [len(truth.token_ids(0)), 0, 0]
    assert res.run.token_roles(1) == ["model"] * len(truth.token_ids(1))  # the tokens are still shown as generated
    result = compute_credit(batch)
    assert result.loss_mask[1:].sum() == 0 and result.loss_mask[0].sum() == len(truth.token_ids(0))


def test_conversation_sim_mask_sample_in_instance_config(tmp_path):
    truth = writer.write_conversation_sim(tmp_path)
    res = load_run(truth.path)
    assert_matches(truth, res)
    assert [str(p) for p in res.problems] == [
        f"{truth.path}: mask_sample: 1 of 2 rollouts carry mask_sample=true (lines 2): NeMo Gym excludes them "
        "from the loss, so their action mask is 0 (metadata.exclude_from_loss)"
    ]
    assert res.run.to_batch().action_mask.sum(1).tolist() == [len(truth.token_ids(0)), 0]


def test_mask_sample_must_be_a_boolean(tmp_path):
    truth = writer.write_conversation_sim(tmp_path)
    rec = json.loads(truth.path.read_text().splitlines()[0]) | {"mask_sample": "yes"}
    path = tmp_path / "bad_mask.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="mask_sample: expected true or false, got str"):
        load_run(path, strict=True)


def test_no_step_is_written_so_none_is_read(tmp_path):
    """``run_from_config`` writes no step: every row has step None, also under a folder named as other trainers name
    a step's (a load is one step)."""
    truth = writer.write_hermes(tmp_path)
    assert all(t.step is None for t in load_run(truth.path).run.trajectories)
    (tmp_path / "step_5").mkdir()
    truth.path.rename(tmp_path / "step_5" / truth.path.name)
    res = load_run(tmp_path)
    assert len(res.run.trajectories) == 2 and all(t.step is None for t in res.run.trajectories)
    assert res.run.to_batch().steps is None
    assert not [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
