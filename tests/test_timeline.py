"""The timeline of a run (engine/timeline): each statistic on hand-made steps with the arithmetic in comments, the
run folder as step sources (shards, pending files), the incremental computation, and the command line."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from test_io_support import native, seg, write_jsonl

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.__main__ import main
from engine.lint.model import Finding
from engine.timeline import stats, store
from engine.timeline.compute import scheme_key, timeline_rows
from engine.timeline.index import index_steps, unfinished
from engine.timeline.stats import StepView
from engine.timeline.store import (
    job_timeline_file,
    job_timelines,
    read_timeline,
    read_timeline_problems,
    read_timeline_schemes,
    update_timeline,
)

GRPO = CreditConfig(profile="verl", estimator="grpo")


def outcome_step(scores: list[float], groups: list[int], lengths: list[int] | None = None, **kw) -> StepView:
    """One step of outcome rewards: row i has ``lengths[i]`` action tokens (default 2) and its score on the last."""
    B = len(scores)
    lengths = lengths or [2] * B
    T = max(lengths)
    mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).float()
    last = torch.tensor(lengths) - 1
    token_scores = torch.zeros(B, T).index_put_((torch.arange(B), last), torch.tensor(scores, dtype=torch.float32))
    batch = TrajectoryBatch.from_tensors(
        response_mask=mask, token_level_scores=token_scores, index=torch.tensor(groups), **kw
    )
    return StepView(batch, compute_credit(batch, GRPO))


def test_scores_and_solve_rate():
    v = outcome_step([1.0, 0.0, 0.5, 1.0], [0, 0, 1, 1])
    assert stats.score_mean(v) == pytest.approx(0.625)  # (1 + 0 + 0.5 + 1) / 4
    assert stats.score_std(v) == pytest.approx(math.sqrt(((0.375**2) * 2 + 0.625**2 + 0.125**2) / 4))
    assert stats.solve_rate(v) == 0.5  # two of four reach 1 (rLLM's solve_all threshold)


def test_zero_variance_and_singleton_groups_are_shares_of_all_groups():
    # groups: 0 = {1, 1} (zero variance), 1 = {0, 1}, 2 = {0} (a singleton), 3 = {0, 0, 0} (zero variance)
    v = outcome_step([1, 1, 0, 1, 0, 0, 0, 0], [0, 0, 1, 1, 2, 3, 3, 3])
    assert stats.zero_variance_group_share(v) == 0.5  # 2 of 4 groups
    assert stats.singleton_group_share(v) == 0.25  # 1 of 4


def test_advantage_quantiles_are_taken_on_trained_tokens():
    # GRPO on groups {1, 0}: ±1/√2 (std 0.7071, ddof 1) broadcast on each row's 2 tokens; verl's ε = 1e-6
    v = outcome_step([1.0, 0.0], [0, 0])
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    p05, p50, p95 = stats.advantage_quantiles(v)
    assert (p05, p50, p95) == pytest.approx((-a, 0.0, a), abs=1e-6)
    empty = StepView(v.batch, v.result.replace(loss_mask=torch.zeros_like(v.result.loss_mask)))
    assert all(math.isnan(q) for q in stats.advantage_quantiles(empty))


def test_info_weight_share_counts_tool_tokens_in_the_loss():
    """Row: 2 action tokens, 2 tool tokens. With state masking the tool tokens get no weight (share 0); without it
    they enter the token-mean loss with the row's advantage: 2 of 4 equal |w·A| → share 0.5."""
    attn = torch.ones(2, 4)
    act = torch.tensor([[1.0, 1.0, 0.0, 0.0]] * 2)
    scores = torch.tensor([[0, 1.0, 0, 0], [0, 0, 0, 0]])
    batch = TrajectoryBatch.from_tensors(
        response_mask=act, attention_mask=attn, token_level_scores=scores, index=torch.tensor([0, 0])
    )
    masked = StepView(batch, compute_credit(batch, GRPO))
    open_ = StepView(batch, compute_credit(batch, GRPO.replace(state_masking=False, advantage_mask="attention")))
    assert stats.info_weight_share(masked) == 0.0
    assert stats.info_weight_share(open_) == pytest.approx(0.5)


def test_advantage_length_slope_is_per_thousand_tokens():
    # two groups of {solved long, failed short}: mean advantage +a on 4 tokens, −a on 2 tokens, so the slope is
    # 2a per 2 tokens = 1000·a per 1,000 tokens
    v = outcome_step([1, 0, 1, 0], [0, 0, 1, 1], lengths=[4, 2, 4, 2])
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert stats.advantage_length_slope(v) == pytest.approx(1000 * a, rel=1e-5)
    same = outcome_step([1, 0], [0, 0], lengths=[3, 3])
    assert math.isnan(stats.advantage_length_slope(same))  # one length: no slope to tell


def test_turn_credit_share_sums_weight_per_turn():
    """One row, turn 0 = 1 action token, turn 1 = 3 action tokens, the same advantage on each: shares 1/4, 3/4."""
    batch = TrajectoryBatch.from_tensors(
        response_mask=torch.ones(2, 4),
        token_level_scores=torch.tensor([[0, 0, 0, 1.0], [0, 0, 0, 0]]),
        turn_ids=torch.tensor([[0, 1, 1, 1], [0, 1, 1, 1]]),
        index=torch.tensor([0, 0]),
    )
    v = StepView(batch, compute_credit(batch, GRPO))
    assert stats.turn_credit_share(v) == pytest.approx([0.25, 0.75])


def test_entropy_and_mismatch_only_where_the_run_has_them():
    v = outcome_step([1.0, 0.0], [0, 0])
    assert math.isnan(stats.entropy_mean(v)) and math.isnan(stats.mismatch_mean(v))
    old = torch.full((2, 2), -1.0)
    w = outcome_step(
        [1.0, 0.0],
        [0, 0],
        old_log_probs=old,
        rollout_log_probs=old + torch.tensor([[0.2, -0.2], [0.0, 0.4]]),
        entropy=torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
    )
    assert stats.entropy_mean(w) == pytest.approx(2.5)  # mean of 1, 2, 3, 4
    assert stats.mismatch_mean(w) == pytest.approx(0.2)  # mean |Δ| of 0.2, 0.2, 0, 0.4


def test_logged_mismatch_share_uses_the_lint_tolerance():
    v = outcome_step([1.0, 0.0], [0, 0])
    assert math.isnan(stats.logged_mismatch_share(v))
    adv = v.result.advantages
    logged = adv.clone()
    logged[0, 0] += 1e-5  # within LOGGED_ADVANTAGE_TOL = 1e-4
    logged[1, 1] += 0.5  # beyond it
    where = torch.ones_like(adv, dtype=torch.bool)
    w = StepView(v.batch, v.result, logged=(logged, where))
    assert stats.logged_mismatch_share(w) == 0.25  # 1 of 4 logged tokens


def test_lint_counts_are_trajectories_per_check():
    v = outcome_step([1.0, 0.0], [0, 0])
    findings = [
        Finding("warning", "length_bias", "m", rows=[0, 1]),
        Finding("error", "info_tokens_in_loss", "m", rows=[1]),
        Finding("info", "length_bias", "m", rows=[0]),
    ]
    counts = stats.lint_counts(StepView(v.batch, v.result, findings))
    assert counts == {"lint_length_bias": 3, "lint_info_tokens_in_loss": 1}


# ---------------------------------------------------------------------------------------------- run folders
MODEL = [seg("model", [9707, 11, 1879, 0])]


def write_step(path: Path, scores: list[float], prompts: str = "ab", age_s: float = 60.0) -> Path:
    """A native step file: for each prompt, rollouts with ``scores``; mtime set ``age_s`` seconds in the past."""
    recs = [
        native(f"{p}-{i}", MODEL, group_id=p, global_rewards={"score": s})
        for p in prompts
        for i, s in enumerate(scores)
    ]
    write_jsonl(path, recs)
    past = time.time() - age_s
    os.utime(path, (past, past))
    return path


def test_index_groups_shards_orders_steps_and_holds_back_unfinished_files(tmp_path):
    run = tmp_path / "run"
    (run / "step_2").mkdir(parents=True)
    write_step(run / "step_2" / "rank_0.jsonl", [1, 0])
    write_step(run / "step_2" / "rank_1.jsonl", [0, 0], prompts="cd")
    write_step(run / "step_10.jsonl", [1, 1])
    write_step(run / "step_3.jsonl", [0, 1])
    (run / "step_11.jsonl").write_text('{"id": "x", "segments": [')  # the trainer is writing it
    write_step(run / "step_12.jsonl", [1, 0], age_s=0)  # complete lines, but modified just now
    index = index_steps(run)
    assert [s.step for s in index.sources] == [2, 3, 10]
    assert [len(s.files) for s in index.sources] == [2, 1, 1]
    assert index.sources[0].key == "step_2/rank_0.jsonl"
    pending = {f.name: why for f, why in index.pending}
    assert sorted(pending) == ["step_11.jsonl", "step_12.jsonl"]
    assert pending["step_11.jsonl"] == "its last line is not finished"
    assert pending["step_12.jsonl"].endswith("s ago: still being written")
    assert unfinished(run / "step_12.jsonl", now=time.time() + 60) is None  # settled a minute later


def test_the_timeline_computes_each_step_alone_and_reuses_unchanged_steps(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_1.jsonl", [1, 0, 0, 0])
    write_step(run / "step_2.jsonl", [1, 1, 1, 1])  # every group solved: zero variance
    schemes = {"grpo": GRPO, "rloo": GRPO.replace(estimator="rloo")}
    first = timeline_rows(run, schemes)
    assert (first.computed, first.reused) == (2, 0)
    assert [(r["step"], r["scheme"]) for r in first.rows] == [(1, "grpo"), (1, "rloo"), (2, "grpo"), (2, "rloo")]
    by = {(r["step"], r["scheme"]): r for r in first.rows}
    assert by[1, "grpo"]["zero_variance_group_share"] == 0.0 and by[2, "grpo"]["zero_variance_group_share"] == 1.0
    assert by[1, "grpo"]["solve_rate"] == 0.25 and by[1, "grpo"]["trajectories"] == 8
    # each step alone: step 1's groups are {1,0,0,0}, not merged with step 2's rows of the same prompts
    alone = compute_credit(load_step(run / "step_1.jsonl"), GRPO)
    trained = alone.advantages[alone.loss_mask.bool()].double()
    assert by[1, "grpo"]["advantage_p95"] == pytest.approx(float(torch.quantile(trained, 0.95)))
    write_step(run / "step_3.jsonl", [0, 0, 1, 1])
    again = timeline_rows(run, schemes, previous=first.rows)
    assert (again.computed, again.reused) == (1, 2) and [r["step"] for r in again.rows][-2:] == [3, 3]
    write_step(run / "step_1.jsonl", [1, 1, 0, 0], age_s=30)  # rewritten: a new stamp
    third = timeline_rows(run, schemes, previous=again.rows)
    assert (third.computed, third.reused) == (1, 2)


def load_step(path: Path):
    from engine.io import load_run

    return load_run(path).run.to_batch()


def test_a_damaged_step_and_a_scheme_that_cannot_run_are_reported_and_the_rest_is_computed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_1.jsonl", [1, 0])
    bad = run / "step_2.parquet"
    bad.write_bytes(b"PAR1 not really parquet PAR1")
    os.utime(bad, (time.time() - 60,) * 2)
    write_step(run / "step_3.jsonl", [1, 0, 0], prompts="a")
    with open(run / "step_3.jsonl", "a") as f:  # prompt b has one rollout: groups of 3 and 1
        f.write('{"id": "b-0", "group_id": "b", "prompt": "p", "segments": [{"role": "model", "token_ids": [1, 0]}], '
                '"global_rewards": {"score": 1}}\n')  # fmt: skip
    os.utime(run / "step_3.jsonl", (time.time() - 60,) * 2)
    openrlhf = CreditConfig(profile="openrlhf", estimator="grpo")
    tl = timeline_rows(run, {"verl": GRPO, "openrlhf": openrlhf})
    assert sorted({r["step"] for r in tl.rows}) == [1, 3]
    assert [p.file for p in tl.problems] == [str(bad)] and tl.problems[0].reason.endswith("file skipped")
    by = {(r["step"], r["scheme"]): r for r in tl.rows}
    assert all(by[s, "verl"]["error"] == "" for s in (1, 3)) and by[1, "openrlhf"]["error"] == ""
    assert "prompt groups of one size" in by[3, "openrlhf"]["error"]  # OpenRLHF refuses; the row says why
    assert math.isnan(by[3, "openrlhf"].get("score_mean", math.nan)) and by[3, "openrlhf"]["trajectories"] == 4


def test_the_command_line_writes_the_columns_and_is_incremental(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_1.jsonl", [1, 0])
    write_step(run / "step_2.jsonl", [1, 1])
    out = tmp_path / "timeline.parquet"
    assert main(["timeline", str(run), "--out", str(out), "--profile", "verl", "--estimator", "grpo"]) == 0
    assert "2 step source(s) computed, 0 reused" in capsys.readouterr().out
    table = pq.read_table(out)
    for column in ("step", "scheme", "trajectories", "score_mean", "score_std", "zero_variance_group_share",
                   "singleton_group_share", "solve_rate", "advantage_p05", "advantage_p95", "info_weight_share",
                   "advantage_length_slope", "turn_credit_share", "entropy_mean", "mismatch_mean",
                   "logged_mismatch_share"):  # fmt: skip
        assert column in table.column_names
    assert table.column("step").to_pylist() == [1, 2] and table.column("scheme").to_pylist() == ["verl/grpo"] * 2
    write_step(run / "step_3.jsonl", [0, 0])
    assert main(["timeline", str(run), "--out", str(out), "--profile", "verl", "--estimator", "grpo"]) == 0
    assert "1 step source(s) computed, 2 reused" in capsys.readouterr().out
    assert [r["step"] for r in read_timeline(out)] == [1, 2, 3]


def test_update_timeline_reads_back_what_it_wrote(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_4.jsonl", [1, 0])
    out = tmp_path / "t.parquet"
    first = update_timeline(run, {"g": GRPO}, out)
    back = read_timeline(out)
    assert [r["step"] for r in back] == [4] and back[0]["score_mean"] == first.rows[0]["score_mean"]
    assert math.isnan(back[0]["entropy_mean"])
    assert update_timeline(run, {"g": GRPO}, out).reused == 1


def test_the_timeline_file_keeps_each_steps_problems_and_reports_them_when_reused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_1.jsonl", [1, 0])
    with open(run / "step_1.jsonl", "a") as f:  # a record without segments: refused, the rest of the step is read
        f.write('{"id": "z", "group_id": "a", "prompt": "p"}\n')
    os.utime(run / "step_1.jsonl", (time.time() - 60,) * 2)
    (run / "step_2.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    os.utime(run / "step_2.parquet", (time.time() - 60,) * 2)
    out = tmp_path / "t.parquet"
    first = update_timeline(run, {"g": GRPO}, out)
    assert sorted(Path(p.file).name for p in first.problems) == ["step_1.jsonl", "step_2.parquet"]
    kept = read_timeline_problems(out)
    assert sorted(kept) == [("", ""), ("step_1.jsonl", first.rows[0]["stamp"])]
    assert read_timeline_schemes(out) == {scheme_key(GRPO): GRPO}  # what the rows were computed under
    again = update_timeline(run, {"g": GRPO}, out)
    assert again.reused == 1 and again.computed == 0
    assert [(p.file, p.reason) for p in again.problems] == [(p.file, p.reason) for p in first.problems]


def test_rows_of_a_jobs_timeline_are_reused_and_a_file_that_is_not_one_is_passed_over(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    write_step(run / "step_1.jsonl", [1, 0])
    write_step(run / "step_2.jsonl", [1, 1])
    assert main(["timeline", str(run), "--profile", "verl", "--estimator", "grpo"]) == 0  # into run/.creditlens/
    job = job_timeline_file(run)
    assert job_timelines(run) == [job] and [r["step"] for r in read_timeline(job)] == [1, 2]
    tl = update_timeline(run, {"mine": GRPO}, tmp_path / "cache.parquet", seeds=job_timelines(run))
    assert (tl.computed, tl.reused) == (0, 2) and {r["scheme"] for r in tl.rows} == {"mine"}

    def unread(files):
        raise AssertionError("a job's timeline is read only when the cache lacks a step")

    monkeypatch.setattr(store, "seed_rows", unread)
    assert update_timeline(run, {"mine": GRPO}, tmp_path / "cache.parquet", seeds=[job]).reused == 2
    monkeypatch.undo()
    monkeypatch.setattr(store, "SEED_MAX_BYTES", 1_000)  # a job's file larger than the budget, decoded: not read
    assert update_timeline(run, {"mine": GRPO}, tmp_path / "c4.parquet", seeds=[job]).computed == 2
    monkeypatch.undo()
    other = update_timeline(run, {"rloo": GRPO.replace(estimator="rloo")}, tmp_path / "c2.parquet", seeds=[job])
    assert other.computed == 2  # another scheme: the job's rows are not its rows
    table = pq.read_table(job)
    bad = table.set_column(0, "step", table.column("step").cast("string"))  # a file with the columns, wrong types
    pq.write_table(bad, job)
    assert read_timeline(job) == []
    assert update_timeline(run, {"g": GRPO}, tmp_path / "c3.parquet", seeds=[job]).computed == 2


def test_a_shard_gone_since_the_index_listed_it_is_a_problem_and_the_other_shard_loads(tmp_path):
    from engine.io import load_run

    run = tmp_path / "run"
    (run / "step_2").mkdir(parents=True)
    a = write_step(run / "step_2" / "rank_0.jsonl", [1, 0])
    b = write_step(run / "step_2" / "rank_1.jsonl", [0, 0], prompts="cd")
    b.unlink()
    res = load_run(run, files=[a, b])
    assert len(res.run.trajectories) == 4  # rank_0's two prompts × two rollouts
    assert [(p.file, p.reason) for p in res.problems] == [(str(b), "no longer there (asked for by name); not read")]
    a.unlink()
    with pytest.raises(FileNotFoundError, match="no longer there"):
        load_run(run, files=[a, b])
