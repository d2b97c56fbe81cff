"""TRL GRPOTrainer completion logs (``completions_<step>.parquet``) written the way ``GRPOTrainer.log`` writes
them (``tests/writers/trl.py``), loaded by the ``trl_completions`` adapter: exact re-tokenized ids, action mask,
groups (TRL's blocks of num_generations rows), reward columns, problems, and TRL's logged advantages against
CreditLens's recomputation."""

from __future__ import annotations

import math

import pytest
import torch
from step_support import assert_ids_unique_per_step, assert_step_as_alone, group_sizes
from writers import trl

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.detect import detect_format
from engine.lint import run_lints

G = 4


def accuracy(prompt: str, completion: str) -> float | None:
    if "skip" in completion:
        return None  # a reward function that does not apply returns None (NaN in the log)
    return 1.0 if completion.strip().endswith(("4", "Paris")) else 0.0


def fmt(prompt: str, completion: str) -> float | None:
    if "skip" in completion:
        return None
    return 0.5 if completion.startswith("<think>") else 0.0


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


PROMPTS = [user("What is 2+2?"), user("Capital of France?"), user("Capital of France?"), user("Say hi.")]
COMPLETIONS = [
    ["<think>add</think> 4", "It is 5", "<think>hmm</think> 22", "4"],
    ["Paris", "<think>France</think> Paris", "Lyon", "skip"],  # row 7: both functions return None
    ["<think>x</think> Paris", "Marseille", "Nice", "Paris"],  # same prompt text again, the next block
    ["hi", "hello", "hey", "yo"],
]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("trl_run")
    truncated = [[False] * G, [False] * G, [False, False, True, False], [False] * G]
    return trl.write_completions(
        str(out),
        step=12,
        prompts=PROMPTS,
        completions=COMPLETIONS,
        reward_funcs={"accuracy": accuracy, "format_reward": fmt},
        truncated=truncated,
        extra={"judge_note": lambda c: f"len={len(c)}"},
    )


def test_detected_and_loaded_exactly(written):
    assert detect_format(written.path) == "trl_completions"
    res = load_run(written.path)
    run = res.run
    assert run.source == "trl_completions"
    stem = "completions_00012"
    assert [str(p) for p in res.problems] == [
        f"{written.path}: reward_weights: TRL trains on the weighted sum of the reward columns ['accuracy', "
        "'format_reward']; the file does not hold GRPOConfig.reward_weights, so each column weighs 1.0 (TRL's "
        "default) unless CreditConfig.global_weights names it (numeric log_extra columns would be counted here too)",
        f"{written.path}: accuracy: 1 row(s) are NaN (the reward function returned None); stored as 0, as TRL's "
        "nansum counts them, and left out of the function's own group statistics under normalize_then_sum "
        "(estimator gdpo)",
        f"{written.path}: format_reward: 1 row(s) are NaN (the reward function returned None); stored as 0, as "
        "TRL's nansum counts them, and left out of the function's own group statistics under normalize_then_sum "
        "(estimator gdpo)",
        f"{written.path}: row[4:12].prompt: the same prompt fills 8 consecutive rows, 2 × the smallest group (4); "
        "split into 2 groups of 4 (TRL normalises consecutive blocks of num_generations rows)",
        f"{written.path}: row[7]: every reward function returned None (NaN): TRL leaves this completion out of its "
        "group's baseline and gives it advantage 0; skipped",
    ]
    assert [p.scope for p in res.problems] == ["run"] * 4 + ["record"]  # only the skipped row stops strict=True
    kept = [i for i in range(16) if i != 7]
    assert [t.id for t in run.trajectories] == [f"{stem}/row-{i}" for i in kept]
    batch = run.to_batch()
    for b, i in enumerate(kept):
        traj = run.trajectories[b]
        ids = written.completion_ids[i]
        assert traj.prompt == written.prompts[i] and traj.segments[0].text == written.completions[i]
        assert batch.token_ids[b, : len(ids)].tolist() == ids  # re-tokenized text: the EOS TRL trained on is gone
        assert written.trained_ids[i][: len(ids)] == ids
        assert batch.action_mask[b].tolist() == [1.0] * len(ids) + [0.0] * (batch.num_tokens - len(ids))
        assert traj.group_id == f"{stem}/group-{written.groups[i]}"
        expect = {k: v[i] for k, v in written.rewards.items() if not math.isnan(v[i])}  # None: absent
        assert traj.global_rewards == expect
        assert all(not math.isnan(written.rewards[k][i]) for k in batch.global_reward_names)
        assert batch.global_rewards[b].tolist() == [expect.get(k, 0.0) for k in batch.global_reward_names]
        assert traj.metadata["logged_advantage"] == written.advantages[i]
        assert traj.metadata["step"] == 12
        assert traj.metadata["logged_columns"] == {"judge_note": written.extra["judge_note"][i]}
        assert traj.truncated is False and "truncated" not in traj.metadata  # the log has no truncation flag
    assert batch.truncated.tolist() == [False] * 15
    assert batch.global_rewards_present is None  # the only None rewards were the skipped row's
    # rows 4-7 and 8-11 have the same prompt text but are two TRL blocks, hence two groups
    assert len({t.group_id for t in run.trajectories}) == 4
    assert written.prompts[4] == written.prompts[8] and written.groups[4] != written.groups[8]
    assert written.trained_ids[10][-1] != 151645 and written.trained_ids[9][-1] == 151645  # row 10 length-limited


TRL_SCHEME = CreditConfig(profile="trl", estimator="grpo")  # ε = 1e-4, unbiased std (docs/conventions/trl.md §10)


def test_trl_advantages_equal_creditlens_under_matching_scheme(written):
    run = load_run(written.path).run
    batch = run.to_batch()
    res = compute_credit(batch, TRL_SCHEME, device="cpu")
    logged = torch.tensor([t.metadata["logged_advantage"] for t in run.trajectories])
    first = res.advantages[:, 0]  # GRPO broadcasts one value over the action tokens
    assert torch.allclose(first, logged.to(first.dtype), atol=1e-5, rtol=0)
    assert torch.equal(res.advantages * batch.action_mask, first[:, None] * batch.action_mask)
    assert run_lints(batch, TRL_SCHEME, run=run, checks=["logged_advantage_mismatch"]) == []


def test_lint_reports_mismatching_schemes(written):
    run = load_run(written.path).run
    batch = run.to_batch()
    (f,) = run_lints(batch, CreditConfig(std_ddof=0, epsilon=1e-4), run=run, checks=["logged_advantage_mismatch"])
    # population std: every row of a group with spread moves; the all-tied group (rows 12-15: 0 reward) does not
    moved = [b for b, t in enumerate(run.trajectories) if abs(t.metadata["logged_advantage"]) > 1e-3]
    assert f.rows == moved and f.count == len(moved) == 11
    assert f.message.startswith(f"logged advantages differ from CreditLens's on {len(moved)} trajectories of 15:")
    # verl's ε = 1e-6: |ΔA| = |A|·(1e-4 − 1e-6)/(σ + 1e-6) passes 1e-4 only where |A| > ~0.8: file rows 0, 1, 5, 6,
    # 8, 9, 10 (batch rows 0, 1, 5, 6, 7, 8, 9 once row 7 is skipped); e.g. row 0: σ = 0.645, |A| = 1.16 -> 1.8e-4
    (f,) = run_lints(batch, CreditConfig(), run=run, checks=["logged_advantage_mismatch"])
    assert f.rows == [0, 1, 5, 6, 7, 8, 9] and f.count == 7 and "tolerance 0.0001" in f.message


def test_reward_weights_change_what_matches(tmp_path):
    """A run trained with reward_weights=[1, 0.5]: weights 1 mismatch; passing them as global_weights matches."""
    w = trl.write_completions(
        str(tmp_path),
        step=3,
        prompts=PROMPTS[:2],
        completions=[COMPLETIONS[0], ["Paris", "<think>France</think> Paris", "Lyon", "<think>a</think> Nice"]],
        reward_funcs={"accuracy": accuracy, "format_reward": fmt},
        reward_weights=[1.0, 0.5],
    )
    run = load_run(w.path).run
    batch = run.to_batch()
    (f,) = run_lints(batch, TRL_SCHEME, run=run, checks=["logged_advantage_mismatch"])
    assert f.count == 8
    matched = TRL_SCHEME.replace(global_weights={"accuracy": 1.0, "format_reward": 0.5})
    assert run_lints(batch, matched, run=run, checks=["logged_advantage_mismatch"]) == []
    res = compute_credit(batch, matched, device="cpu")
    assert torch.allclose(res.advantages[:, 0], torch.tensor(w.advantages), atol=1e-5, rtol=0)


def test_a_folder_of_steps_keeps_groups_apart(tmp_path):
    for step in (1, 2):
        trl.write_completions(str(tmp_path), step, PROMPTS[:1], COMPLETIONS[:1], {"accuracy": accuracy}, extra=None)
    res = load_run(tmp_path / "completions")
    assert [str(p) for p in res.problems] == [  # one reward column: no weights question
        f"{tmp_path / 'completions' / f'completions_0000{s}.parquet'}: prompt: every row has the same prompt: kept as "
        "one group of 4 (if num_generations was smaller, TRL normalised consecutive blocks of num_generations rows; "
        "the file does not say)"
        for s in (1, 2)
    ]
    groups = [t.group_id for t in res.run.trajectories]
    assert groups == ["completions_00001/group-0"] * 4 + ["completions_00002/group-0"] * 4


def test_a_reward_function_that_returned_none_is_marked_absent(tmp_path):
    """A kept row whose one function returned None: 0 in the reward (nansum), absent from that function's
    statistics (global_rewards_present False), which normalize_then_sum (gdpo under trl) reads."""
    written = trl.write_completions(
        str(tmp_path),
        1,
        [[{"role": "user", "content": "2+2?"}]],
        [["4", "5", "four"]],
        {"accuracy": lambda p, c: 1.0 if c == "4" else 0.0, "length": lambda p, c: None if c == "5" else len(c) / 4},
    )
    batch = load_run(written.path).run.to_batch()
    assert batch.global_reward_names == ("accuracy", "length")
    assert batch.global_rewards_present.tolist() == [[True, True], [True, False], [True, True]]
    assert batch.global_rewards[1].tolist() == [0.0, 0.0]


# Steps: GRPOTrainer.log writes the step twice, as the ``step`` column and in the file name (completions_{:05d}).
STEP_COMPLETIONS = [
    [["4", "5", "<think>x</think> 4", "22"], ["Paris", "Lyon", "Nice", "<think>a</think> Paris"]],
    [["4", "4", "5", "four"], ["Lyon", "Lyon", "Paris", "Marseille"]],  # the same prompts, the next epoch
]


def test_every_row_has_the_step_the_file_states(written):
    run = load_run(written.path).run
    assert [t.step for t in run.trajectories] == [12] * 15
    assert written.path.endswith("completions/completions_00012.parquet")


def test_two_steps_of_the_same_prompts_stay_two_batches(tmp_path):
    paths = [
        trl.write_completions(str(tmp_path), step, PROMPTS[:2], STEP_COMPLETIONS[k], {"accuracy": accuracy}).path
        for k, step in enumerate((7, 8))
    ]
    assert [p.rsplit("/", 1)[-1] for p in paths] == ["completions_00007.parquet", "completions_00008.parquet"]
    res = load_run(tmp_path / "completions")
    assert res.problems == []
    run = res.run
    assert [t.step for t in run.trajectories] == [7] * 8 + [8] * 8
    assert len(run.trajectories) == 16  # nothing de-duplicated across steps
    assert_ids_unique_per_step(run)
    assert group_sizes(run) == {7: [4, 4], 8: [4, 4]}  # the same prompt in two steps: two groups, never one of 8
    assert run.trajectories[0].prompt == run.trajectories[8].prompt
    assert run.to_batch().steps.tolist() == [7] * 8 + [8] * 8
    for step, path in zip((7, 8), paths, strict=True):
        assert_step_as_alone(run, step, path, TRL_SCHEME)
    logged = torch.tensor([t.metadata["logged_advantage"] for t in run.trajectories])
    res = compute_credit(run.to_batch(), TRL_SCHEME, device="cpu")
    assert torch.allclose(res.advantages[:, 0], logged.to(res.advantages.dtype), atol=1e-5, rtol=0)


def test_a_renamed_file_keeps_the_step_its_rows_state(tmp_path, written):
    """A copy of step 12's log renamed to step 13: the rows say 12 and keep it, with a note naming the file; in a
    folder beside the original, the copy's step-12 rows are skipped (two files holding one step)."""
    import shutil

    folder = tmp_path / "completions"
    folder.mkdir()
    renamed = folder / "completions_00013.parquet"
    shutil.copy(written.path, renamed)
    res = load_run(renamed)
    assert {t.step for t in res.run.trajectories} == {12}
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(p.file, p.scope, p.reason) for p in notes] == [
        (
            str(renamed),
            "run",
            "records say step 12 but the file name 'completions_00013.parquet' says step 13; each record keeps the "
            "step it states (was the file renamed or copied from another step?)",
        )
    ]
    shutil.copy(written.path, folder / "completions_00012.parquet")
    res = load_run(folder)
    assert [t.id.split("/")[0] for t in res.run.trajectories] == ["completions_00012"] * 15
    claimed = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step" and p.scope == "record"]
    assert [(p.file, p.reason) for p in claimed] == [
        (
            str(renamed),
            f"step 12 is also claimed by {folder / 'completions_00012.parquet'}; two files holding one step would "
            "merge two batches into one, so this file's step-12 trajectories are skipped",
        )
    ]


def test_a_null_step_column_takes_the_file_name(tmp_path):
    """A row whose ``step`` is null (an edited file) gets the step TRL's file name gives."""
    import pandas as pd

    w = trl.write_completions(str(tmp_path), 5, PROMPTS[:1], STEP_COMPLETIONS[0][:1], {"accuracy": accuracy})
    df = pd.read_parquet(w.path)
    df["step"] = pd.array([None] * len(df), dtype="Int64")
    df.to_parquet(w.path)
    res = load_run(w.path)
    assert [t.step for t in res.run.trajectories] == [5] * 4
    df["step"] = ["five"] * len(df)
    df.to_parquet(w.path)
    res = load_run(w.path)
    assert res.run.trajectories == []
    assert str(res.problems[-1]) == (
        f"{w.path}: row[3].step: expected a training step (a non-negative integer), got str 'five'"
    )
