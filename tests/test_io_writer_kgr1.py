"""KG-R1 files written the way KG-R1 writes them (``tests/writers/kgr1.py``): the evaluator's detailed results
load with their prompt groups and exact tokens; the trainer's generation dump is refused with what to export."""

from __future__ import annotations

import json

import pytest
from writers import kgr1 as writer

from engine.io import load_run
from engine.io.adapters.kgr1 import DUMP_REFUSAL, GROUP_NOTE, NO_REWARD_NOTE
from engine.io.detect import detect_format
from engine.io.reading.problems import Problem
from engine.io.text.tokenize import get_tokenizer

IM_END = 151645
Q_A, Q_B = "Who wrote Dracula?", "Which river flows through Cairo?"


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


@pytest.fixture(scope="module")
def batches(tok):
    """Two batches, n_rollout_eval = 2, interleaved; batch 1 asks Q_A again (another uuid, another group)."""
    q = '<think>Find the author.</think>\n<kg-query>get_tail_entities("Dracula", "book.written_work.author")</kg-query>'
    a0 = writer.rollout(tok, Q_A, [q + "<|im_end|>", "<answer>Bram Stoker</answer><|im_end|>"], ["Bram Stoker"])
    a1 = writer.rollout(tok, Q_A, ["<answer>Mary Shelley</answer> as I recall<|im_end|>"], [])
    b0 = writer.rollout(
        tok,
        Q_B,
        ['<kg-query>get_head_relations("Cairo")</kg-query> then more<|im_end|>', "<answer>Nile</answer><|im_end|>"],
        ["location.location.containedby, geography.river.cities"],
    )
    b1 = writer.rollout(tok, Q_B, ["<think>I need to look up the rivers of"], [])  # cut by the length limit
    a2 = writer.rollout(tok, Q_A, ["<answer>Bram Stoker</answer><|im_end|>"], [])
    a3 = writer.rollout(tok, Q_A, [q + "<|im_end|>", "<answer>Stoker</answer><|im_end|>"], ["Bram Stoker"])
    return [[a0, a1, b0, b1], [a2, a3]]


def check_eval_run(res, batches) -> None:
    samples = [s for batch in batches for s in batch]
    run = res.run
    assert run.source == "kgr1_eval"
    assert [t.id for t in run.trajectories] == [
        f"test_batch{b:03d}_sample{i:03d}" for b, batch in enumerate(batches) for i in range(len(batch))
    ]
    batch = run.to_batch()
    for i, (traj, sample) in enumerate(zip(run.trajectories, samples, strict=True)):
        n = len(sample.response_ids)
        assert batch.token_ids[i, :n].tolist() == sample.response_ids
        assert batch.action_mask[i].tolist() == sample.action_mask + [0] * (batch.action_mask.shape[1] - n)
        assert IM_END not in batch.token_ids[i].tolist()  # KG-R1's loop strips it before training: none to restore
        assert "synthesized" not in traj.metadata and traj.metadata.get("truncated") is None
        assert traj.prompt == tok_free_prompt(sample.question)
    assert batch.group_ids.tolist() == [0, 0, 1, 1, 2, 2]
    assert batch.truncated.tolist() == [False] * 6


def tok_free_prompt(question: str) -> str:
    """The prompt as the evaluator decodes it (special tokens skipped)."""
    return (
        f"system\n{writer.QWEN_SYSTEM}\nuser\nAnswer with <kg-query> calls and <answer>.\nQuestion: {question}\n"
        "assistant\n"
    )


def test_evaluator_results_with_placeholder_scores(tmp_path, tok, batches):
    path = writer.write_eval_results(tok, tmp_path, batches)
    assert detect_format(path) == "kgr1_eval"
    res = load_run(path)
    assert res.problems == [
        Problem(str(path), 1, "uid", GROUP_NOTE, scope="run"),
        Problem(str(path), 1, "score", NO_REWARD_NOTE, scope="run"),
    ]
    check_eval_run(res, batches)
    assert all(t.global_rewards == {} and t.turn_rewards == [] for t in res.run.trajectories)
    assert res.run.to_batch().global_rewards is None
    assert res.run.trajectories[0].metadata["score_as_written"] == 0.0


def test_evaluator_folder_skips_the_passatk_summary(tmp_path, tok, batches):
    results = writer.write_eval_results(tok, tmp_path, batches)
    summary = writer.write_passatk_results(tmp_path, [1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    res = load_run(tmp_path)
    assert res.problems == [
        Problem(str(results), 1, "uid", GROUP_NOTE, scope="run"),
        Problem(str(results), 1, "score", NO_REWARD_NOTE, scope="run"),
        Problem(
            str(summary),
            None,
            None,
            "skipped: summary, not rollouts (KG-R1 evaluator pass@k results: means over all samples)",
        ),
    ]
    check_eval_run(res, batches)


def test_evaluator_results_with_a_reward_tensor(tmp_path, tok, batches):
    rewards = [[1.0, 0.0, 0.7, 0.0], [1.0, 0.3]]
    path = writer.write_eval_results(tok, tmp_path, batches, reward_tensor=rewards)
    res = load_run(path)
    assert res.problems == [Problem(str(path), 1, "uid", GROUP_NOTE, scope="run")]
    check_eval_run(res, batches)
    flat = [r for batch in rewards for r in batch]
    assert [t.global_rewards for t in res.run.trajectories] == [{"score": pytest.approx(r)} for r in flat]


def test_metrics_are_shown_never_summed(tmp_path, tok, batches):
    path = writer.write_eval_results(tok, tmp_path, batches[1:])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["metrics"] = {"f1": 0.5, "exact_match": True, "binary_vector": [1, 0], "predicted_answer": "Stoker"}
    lines[1]["score"] = 0.8  # a writer that fills the score: taken as it is
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    res = load_run(path)
    t0, t1 = res.run.trajectories
    assert t0.global_rewards == {} and t0.metadata["reward_components"] == {"f1": 0.5, "exact_match": 1.0}
    assert t0.metadata["ignored"] == ["metrics.binary_vector", "metrics.predicted_answer"]
    assert t1.global_rewards == {"score": pytest.approx(0.8)} and "reward_components" not in t1.metadata
    assert t0.group_id == t1.group_id


def test_prompt_must_end_with_its_response(tmp_path, tok, batches):
    path = writer.write_eval_results(tok, tmp_path, batches[1:])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["prompt"] = lines[1]["prompt"][:-3]
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["test_batch000_sample000"]
    assert [(p.line, p.field, p.reason) for p in res.problems if p.field == "prompt"] == [
        (2, "prompt", "does not end with the response (the evaluator decodes prompt + response ids into it)")
    ]


def test_generation_dump_is_refused(tmp_path, tok, batches):
    samples = batches[0]
    dump = writer.write_generation_dump(tok, tmp_path / "val", samples, [(1, 1), (0, 0), (1, 1), (0, 0)], step=40)
    first = json.loads(dump.read_text().splitlines()[0])
    assert first["turn_format_score"] == 1.0 and first["num_turns"] == 2 and first["score"] == first["total_score"]
    assert detect_format(dump) == "kgr1_rollout_dump"
    with pytest.raises(ValueError) as err:
        load_run(dump)
    assert str(err.value) == f"{dump}: {DUMP_REFUSAL}"
    # beside evaluator results in one folder: the dump is named and skipped, the results load
    writer.write_eval_results(tok, tmp_path / "val", batches)
    res = load_run(tmp_path / "val")
    assert [str(p) for p in res.problems][0] == f"{dump}: {DUMP_REFUSAL}; file skipped"  # the file named once
    assert len(res.run.trajectories) == 6


# ------------------------------------------------------------------------------------------------ training steps
def test_evaluator_results_state_no_step(tmp_path, tok, batches):
    """``_save_batch_details`` writes no step and names the file after the dataset: one unnumbered step."""
    path = writer.write_eval_results(tok, tmp_path, batches)
    assert all("step" not in json.loads(line) for line in path.read_text().splitlines())
    run = load_run(path).run
    assert [t.step for t in run.trajectories] == [None] * 6
    assert run.to_batch().steps is None


def test_generation_dumps_of_two_steps_are_refused_not_read_as_verl(tmp_path, tok, batches):
    """``_dump_generations`` names each step's file ``{global_steps}.jsonl`` and writes ``step`` on each line, as
    verl does; the same prompts a step later are still KG-R1's dump, refused, never read as a verl rollout dump
    (whose reader now takes the step from the same name and field)."""
    outcomes = [(1, 1), (0, 0), (1, 1), (0, 0)]
    five = writer.write_generation_dump(tok, tmp_path / "rollout", batches[0], outcomes, step=5)
    six = writer.write_generation_dump(tok, tmp_path / "rollout", batches[0], outcomes[::-1], step=6)
    assert [five.name, six.name] == ["5.jsonl", "6.jsonl"]
    assert [json.loads(line)["step"] for line in six.read_text().splitlines()] == [6] * 4
    assert detect_format(six) == "kgr1_rollout_dump"
    with pytest.raises(ValueError, match="KG-R1 generation dump"):
        load_run(tmp_path / "rollout", strict=True)
    res = load_run(tmp_path / "rollout")
    assert len(res.run) == 0
    assert [str(p) for p in res.problems] == [f"{f}: {DUMP_REFUSAL}; file skipped" for f in (five, six)]


def test_tagged_transcripts_have_no_step_even_in_a_step_named_file(tmp_path):
    """No trainer writes ``tagged_text`` (Search-R1 a14dc3a writes no rollout file): neither a ``step`` key nor a
    ``<N>.jsonl`` name is taken as a training step."""
    rec = {"prompt": "Who wrote Dracula?", "response": "<search>Dracula</search><information>Stoker</information>"}
    path = tmp_path / "5.jsonl"
    path.write_text(json.dumps(rec | {"reward": 1.0, "step": 5}) + "\n" + json.dumps(rec | {"reward": 0.0}) + "\n")
    assert detect_format(path) == "tagged_text"
    run = load_run(path).run
    assert [t.step for t in run.trajectories] == [None, None]
