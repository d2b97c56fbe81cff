"""SkyRL's eval dump (dumped_evals/*.jsonl), written the way SkyRL writes it (``writers.skyrl``), loads exactly."""

from __future__ import annotations

import json

import pytest
import torch
from step_support import advantages_of_step
from test_io_support import write_jsonl
from writers import skyrl

from engine import CreditConfig
from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.text.tokenize import get_tokenizer


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


@pytest.fixture
def dump(tmp_path, tok):
    rollouts = skyrl.sample_rollouts(tok)
    return skyrl.write_eval_dump(tok, tmp_path, rollouts), rollouts


def test_skyrl_eval_dump_loads_exact_tokens_mask_rewards(dump, tok):
    folder, truth = dump
    assert detect_format(folder / "searchR1_nq.jsonl") == "skyrl_eval"
    assert detect_format(folder / "aggregated_results.jsonl") == "skyrl_eval"
    res = load_run(folder)
    assert res.problems == []
    run = res.run
    assert run.metadata["skyrl_eval_metrics"] == {"eval/all/avg_score": 0.5, "eval/all/pass_at_2": 1.0}
    batch = run.to_batch()
    assert len(run.trajectories) == len(truth)
    for i, (traj, r) in enumerate(zip(run.trajectories, truth, strict=True)):
        n = len(r.response_ids)
        assert batch.token_ids[i, :n].tolist() == r.response_ids
        assert batch.action_mask[i, :n].tolist() == r.loss_mask
        assert batch.attention_mask[i].sum().item() == n
        assert batch.token_scores[i, :n].tolist() == r.rewards  # SkyRL's own per-token placement, as given
        assert traj.global_rewards == {}
        assert traj.metadata["truncated"] is (r.stop_reason == "length")
        assert traj.prompt == tok.decode(r.prompt_ids)
    assert batch.truncated.tolist() == [False, False, True, False]
    rows = [r.row for r in truth]
    assert [batch.group_ids[i].item() == batch.group_ids[j].item() for i in range(4) for j in range(4)] == [
        rows[i] == rows[j] for i in range(4) for j in range(4)
    ]
    assert [s.role for s in run.trajectories[0].segments] == ["model", "user", "model"]
    assert run.trajectories[0].segments[1].text == (
        "\n<|im_start|>user\n<information>Doc: Bob wrote it.</information><|im_end|>\n<|im_start|>assistant\n"
    )


def test_skyrl_float_score_and_unplaceable_token_rewards(tmp_path):
    base = {"input_prompt": "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", "stop_reason": "stop"}
    base |= {"env_class": "gsm8k", "env_extras": {"data_source": "gsm8k"}, "data_source": "gsm8k"}
    rows = [
        base | {"output_response": "<answer> 4 </answer><|im_end|>", "score": 1.0},  # batched generation: a float
        base | {"output_response": "<answer> 5 </answer><|im_end|>", "score": [0.0, 0.0, 1.0]},  # wrong length
    ]
    path = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    res = load_run(path)
    t0, t1 = res.run.trajectories
    assert t0.global_rewards == {"score": 1.0} and t0.segments[0].scores is None
    assert t1.global_rewards == {"score": 1.0} and t1.metadata["token_rewards"] == [0.0, 0.0, 1.0]
    assert t0.group_id == t1.group_id
    assert [str(p) for p in res.problems] == [
        f"{path}:2: score: 3 per-token rewards but the re-tokenized response has 9 tokens: their sum 1 is the "
        "outcome reward `score` (placement lost)"
    ]


def test_skyrl_sniff_is_narrow(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"input_prompt": "p", "output_response": "r", "score": 1.0}) + "\n")
    with pytest.raises(ValueError, match="cannot detect"):
        detect_format(path)


# ------------------------------------------------------------------------------------------------------- steps
SKYRL_GRPO = CreditConfig(profile="skyrl", estimator="grpo")


def test_step_is_the_global_step_folder(dump):
    folder, truth = dump
    assert folder.name == "global_step_5_evals"
    for path in (folder, folder / "searchR1_nq.jsonl", folder.parent):
        res = load_run(path)
        assert [t.step for t in res.run.trajectories] == [5] * len(truth), path
        assert res.problems == []


def test_two_steps_of_the_same_prompts(tmp_path, tok):
    """Evaluations at global steps 5 and 10 of the same two dataset rows (same prompts, same env_extras, so the
    same group keys and the same record ids); at step 10 the second rollout of row 0 is right too. dumped_evals/
    reads both folders; each step keeps its groups, its advantages and its aggregated metrics."""
    s5, s10 = skyrl.sample_rollouts(tok), skyrl.sample_rollouts(tok)
    s10[1].rewards[-1] = 1.0
    skyrl.write_eval_dump(tok, tmp_path, s5, global_step=5)
    skyrl.write_eval_dump(tok, tmp_path, s10, global_step=10, metrics={"eval/all/avg_score": 0.75})
    root = tmp_path / "dumped_evals"
    both = load_run(root)
    assert both.problems == []
    run = both.run
    # folders load in name order (global_step_10_evals before global_step_5_evals); compute_credit takes steps by number
    assert [t.step for t in run.trajectories] == [10] * 4 + [5] * 4
    assert [t.id for t in run.trajectories[:4]] == [t.id for t in run.trajectories[4:]]  # unique within a step
    assert [t.group_id for t in run.trajectories[:4]] == [t.group_id for t in run.trajectories[4:]]
    assert run.to_batch().group_ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]  # 2 per group and step, not 4
    assert run.metadata["skyrl_eval_metrics_step_5"] == {"eval/all/avg_score": 0.5, "eval/all/pass_at_2": 1.0}
    assert run.metadata["skyrl_eval_metrics_step_10"] == {"eval/all/avg_score": 0.75}
    adv = {}
    for step in (5, 10):
        alone = load_run(root / f"global_step_{step}_evals")
        assert {t.step for t in alone.run.trajectories} == {step}
        adv[step] = advantages_of_step(both, alone, step, SKYRL_GRPO)
    assert adv[5][:2].any() and not adv[10][:2].any()  # row 0 scores 1, 1 at step 10
    assert not torch.equal(adv[5], adv[10])
