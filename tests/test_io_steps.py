"""Every loaded trajectory knows its training step (engine/io/reading/steps.py): from the record, the file name or
the step folder; a run folder of steps loads as one run whose steps stay apart, and what is wrong with its steps (a
file whose step cannot be read, two files claiming one step, steps out of order, a record that disagrees with its
file's name) is a problem naming the file while the rest loads."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch
from test_io_support import native, seg, write_jsonl

from engine import CreditConfig, compute_credit
from engine.io import load_run, save_run

MODEL = [seg("model", [9707, 11, 1879, 0])]


def group(step: int | None, prompt: str, scores: list[float], prefix: str = "") -> list[dict]:
    """Rollouts of one prompt (group ``prompt``) with these scores; ids repeat from step to step, as a trainer's
    per-batch counters do."""
    recs = []
    for i, s in enumerate(scores):
        rec = native(f"{prefix}{prompt}-{i}", MODEL, group_id=prompt, global_rewards={"score": s})
        if step is not None:
            rec["step"] = step
        recs.append(rec)
    return recs


def steps_of(res) -> Counter:
    return Counter(t.step for t in res.run.trajectories)


def test_the_native_step_field_round_trips_and_old_files_load_without_one(tmp_path):
    res = load_run(write_jsonl(tmp_path / "run.jsonl", group(3, "a", [1, 0]) + group(4, "a", [0, 0])))
    assert res.ok and steps_of(res) == {3: 2, 4: 2} and res.run.steps == [3, 4]
    for suffix in (".jsonl", ".parquet"):
        save_run(res.run, tmp_path / f"again{suffix}")
        back = load_run(tmp_path / f"again{suffix}")
        assert [t.step for t in back.run.trajectories] == [3, 3, 4, 4]
        assert back.run.content_hash == res.run.content_hash
    old = load_run(write_jsonl(tmp_path / "old.jsonl", group(None, "a", [1, 0])))
    assert old.ok and [t.step for t in old.run.trajectories] == [None, None] and old.run.steps == []
    assert old.run.to_batch().steps is None


def test_a_folder_of_step_files_is_one_run_whose_groups_stay_in_their_step(tmp_path):
    """The issue's example, in the native format: the same prompt at steps 5 and 6 (ids repeat). The folder loads
    as one run; the batch has four groups of two, not two groups of four, and step 5's GRPO and REINFORCE++
    advantages are those of step 5's file alone."""
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "step_5.jsonl", group(None, "a", [1, 0]) + group(None, "b", [1, 1]))
    write_jsonl(run / "step_6.jsonl", group(None, "a", [0, 0]) + group(None, "b", [1, 0]))
    res = load_run(run)
    assert res.ok, res.problems
    assert steps_of(res) == {5: 4, 6: 4} and res.run.steps == [5, 6]
    batch = res.run.to_batch()
    assert batch.steps.tolist() == [5, 5, 5, 5, 6, 6, 6, 6]
    assert torch.unique(batch.group_ids, return_counts=True)[1].tolist() == [2, 2, 2, 2]
    alone = load_run(run / "step_5.jsonl").run.to_batch()
    for estimator in ("grpo", "reinforce_plus_plus"):
        cfg = CreditConfig(profile="verl", estimator=estimator)
        assert torch.equal(compute_credit(batch, cfg).advantages[:4], compute_credit(alone, cfg).advantages)
    assert [len(res.run.step_run(s)) for s in res.run.steps] == [4, 4]
    with pytest.raises(KeyError, match=r"step 7 is not in this run \(its steps: 5, 6\)"):
        res.run.step_run(7)


def test_step_folders_are_read_and_the_shards_of_one_step_share_it(tmp_path):
    """prime-rl-style step folders: rank files of one step are shards (no problem); a step folder nested in the run
    folder is read."""
    run = tmp_path / "rollouts"
    for step, scores in ((1, [1, 0]), (2, [0, 1])):
        (run / f"step_{step}").mkdir(parents=True)
        write_jsonl(run / f"step_{step}" / "rank_0.jsonl", group(None, "a", scores, "r0-"))
        write_jsonl(run / f"step_{step}" / "rank_1.jsonl", group(None, "a", scores, "r1-"))
    (run / "notes").mkdir()  # not a step folder: named, not read
    res = load_run(run)
    assert steps_of(res) == {1: 4, 2: 4}
    (problem,) = res.problems
    assert problem.file == str(run / "notes") and problem.scope == "run"
    assert load_run(run / "step_2").run.steps == [2]  # a step folder opened on its own
    assert load_run(run / "step_2" / "rank_0.jsonl").run.steps == [2]  # a file: its parent folder's step


def test_a_file_whose_step_cannot_be_read_is_skipped_and_named(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "step_1.jsonl", group(None, "a", [1, 0]))
    write_jsonl(run / "extra.jsonl", group(None, "a", [0, 0], "x-"))
    res = load_run(run)
    assert steps_of(res) == {1: 2}
    (problem,) = res.problems
    assert problem.file == str(run / "extra.jsonl") and problem.field == "step" and problem.scope == "record"
    assert "its step cannot be read" in problem.reason and problem.reason.split("; ")[1].startswith("file skipped")
    with pytest.raises(ValueError, match=r"extra.jsonl: step: its step cannot be read"):
        load_run(run, strict=True)


def test_records_without_a_step_in_a_file_with_steps_are_skipped_and_named(tmp_path):
    res = load_run(write_jsonl(tmp_path / "mixed.jsonl", group(1, "a", [1, 0]) + group(None, "b", [1, 1])))
    assert steps_of(res) == {1: 2}
    assert [(p.file, p.line, p.field) for p in res.problems] == [
        (str(tmp_path / "mixed.jsonl"), n, "step") for n in (3, 4)
    ]
    assert all(p.reason.startswith("no training step while the file's other records have one") for p in res.problems)
    many = load_run(write_jsonl(tmp_path / "many.jsonl", group(1, "a", [1]) + group(None, "b", [0] * 25)))
    assert [p.line for p in many.problems] == [*range(2, 22), None]  # 20 named, then counted
    assert many.problems[-1].reason == "5 more records without a step skipped" and many.problems[-1].scope == "run"
    array = tmp_path / "array.json"  # in a JSON array a record is named by its index
    array.write_text(json.dumps(group(1, "a", [1]) + group(None, "b", [0])))
    (problem,) = load_run(array).problems
    assert (problem.line, problem.field) == (None, "[1].step")


def test_two_files_claiming_one_step_keep_the_first_and_name_the_second(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "5.jsonl", group(None, "a", [1, 0]))
    write_jsonl(run / "step_5.jsonl", group(None, "a", [0, 0], "copy-"))  # renamed copy: other ids, same step
    write_jsonl(run / "6.jsonl", group(None, "a", [1, 1]))
    res = load_run(run)
    assert steps_of(res) == {5: 2, 6: 2}
    assert [t.id for t in res.run.trajectories if t.step == 5] == ["a-0", "a-1"]
    (problem,) = res.problems
    assert problem.file == str(run / "step_5.jsonl") and problem.scope == "record"
    assert problem.reason.startswith(f"step 5 is also claimed by {run / '5.jsonl'}")


def test_steps_out_of_order_are_noted_and_the_run_is_ordered_by_step(tmp_path):
    recs = group(2, "a", [1, 0]) + group(1, "a", [0, 0]) + group(2, "b", [1, 1], "b")
    res = load_run(write_jsonl(tmp_path / "run.jsonl", recs))
    assert steps_of(res) == {1: 2, 2: 4} and res.run.steps == [1, 2]
    (problem,) = res.problems
    assert (problem.line, problem.field, problem.scope) == (3, "step", "run")
    assert problem.reason.startswith("steps out of order: step 1 after step 2")
    # and each step is still computed alone: step 1's group of two, not a group with step 2's "a" rows
    res_cfg = compute_credit(res.run.to_batch(), CreditConfig(profile="verl", estimator="grpo"))
    assert res_cfg.group_size.tolist() == [2.0] * 6


def test_a_record_that_disagrees_with_its_file_name_keeps_its_own_step(tmp_path):
    res = load_run(write_jsonl(tmp_path / "7.jsonl", group(8, "a", [1, 0])))
    assert steps_of(res) == {8: 2}
    (problem,) = res.problems
    assert problem.scope == "run" and problem.file == str(tmp_path / "7.jsonl") and problem.line == 1
    assert "records say step 8 but the file name '7.jsonl' says step 7" in problem.reason


def test_a_damaged_step_file_is_skipped_and_the_other_steps_load(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "1.jsonl", group(None, "a", [1, 0]))
    (run / "2.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    write_jsonl(run / "3.jsonl", group(None, "a", [0, 1]))
    res = load_run(run)
    assert res.run.steps == [1, 3]
    (problem,) = res.problems
    assert problem.file == str(run / "2.parquet") and problem.reason.endswith("file skipped")


@pytest.mark.parametrize("bad", ["-1", "1.5", "true", '"five"', "[1]"])
def test_a_step_that_is_not_a_step_is_a_problem_naming_the_field(tmp_path, bad):
    line = '{"id": "x", "group_id": "g", "prompt": "p", "segments": [{"role": "model", "token_ids": [1]}], '
    path = tmp_path / "run.jsonl"
    path.write_text(line + f'"step": {bad}}}\n' + line.replace('"x"', '"y"') + '"step": 1}\n')
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["y"]
    (problem,) = res.problems
    assert (problem.line, problem.field) == (1, "step") and "expected a training step" in problem.reason


def test_a_parquet_step_column_of_another_type_is_refused_naming_it(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    save_run(load_run(write_jsonl(tmp_path / "r.jsonl", group(1, "a", [1, 0]))).run, tmp_path / "r.parquet")
    table = pq.read_table(tmp_path / "r.parquet")
    table = table.set_column(table.schema.get_field_index("step"), "step", pa.array(["1", "1"]))
    pq.write_table(
        table.replace_schema_metadata(pq.read_schema(tmp_path / "r.parquet").metadata), tmp_path / "s.parquet"
    )
    with pytest.raises(ValueError, match=r"column 'step' is string, expected int64 \(the training step\)"):
        load_run(tmp_path / "s.parquet")


def test_steps_in_the_sample_runs_are_unchanged(tmp_path):
    """The bundled one-batch samples say no step: one step each, as before."""
    root = Path(__file__).resolve().parents[1] / "sample_runs"
    for name in ("kgqa_multiturn", "search_agent", "python_tool_two_rollouts"):
        assert load_run(root / name).run.steps == []
