"""`python -m engine compute`: the per-token table it writes equals compute_credit's tensors, for Parquet and
CSV, with scheme options and with a JSON scheme (the dashboard's export)."""

import json
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import torch

from engine import CreditConfig, compute_credit
from engine.__main__ import main
from engine.io import load_run

ROOT = Path(__file__).resolve().parents[1]
KGQA = ROOT / "sample_runs" / "kgqa_multiturn"


def _expected(cfg: CreditConfig):
    run = load_run(KGQA).run
    batch = run.to_batch()
    return run, batch, compute_credit(batch, cfg)


def _check_table(table, batch, result):
    keep = batch.attention_mask.bool()
    assert table.num_rows == int(keep.sum())
    rows, pos = keep.nonzero(as_tuple=True)
    for column, tensor in [
        ("advantage", result.advantages),
        ("return", result.returns),
        ("reward", result.token_level_rewards),
        ("kl", result.kl),
        ("effective_weight", result.effective_weights),
    ]:
        got = torch.tensor(table.column(column).to_pylist(), dtype=torch.float64)
        want = tensor[rows, pos].double()
        assert torch.allclose(got, want, atol=1e-7), column
    assert table.column("position").to_pylist() == pos.tolist()
    ids = table.column("trajectory_id").to_pylist()
    assert ids[0] == batch.trajectory_ids[0] and ids[-1] == batch.trajectory_ids[-1]


def test_compute_parquet_matches_engine(tmp_path):
    out = tmp_path / "credit.parquet"
    argv = ["compute", str(KGQA), "--out", str(out), "--estimator", "gae", "--gamma", "0.99", "--lam", "0.95"]
    assert main(argv + ["--use-kl-in-reward", "true", "--kl-coef", "0.05"]) == 0
    cfg = CreditConfig(estimator="gae", gamma=0.99, lam=0.95, use_kl_in_reward=True, kl_coef=0.05)
    _run, batch, result = _expected(cfg)
    _check_table(pq.read_table(out), batch, result)


def test_compute_csv_with_json_scheme_reproduces_the_scheme(tmp_path):
    cfg = CreditConfig(profile="rllm-legacy", estimator="grpo", stepwise_mode="per_step", stepwise_gamma=0.9)
    scheme = tmp_path / "scheme.json"
    scheme.write_text(json.dumps(cfg.to_dict()))
    assert CreditConfig.from_dict(json.loads(scheme.read_text())) == cfg  # the JSON round trip is exact
    out = tmp_path / "credit.csv"
    assert main(["compute", str(KGQA), "--out", str(out), "--scheme", str(scheme)]) == 0
    _run, batch, result = _expected(cfg)
    _check_table(pacsv.read_csv(out), batch, result)


def test_command_line_option_overrides_the_json_scheme(tmp_path):
    scheme = tmp_path / "scheme.json"
    scheme.write_text(json.dumps(CreditConfig(estimator="rloo").to_dict()))
    out = tmp_path / "credit.parquet"
    assert main(["compute", str(KGQA), "--out", str(out), "--scheme", str(scheme), "--estimator", "grpo"]) == 0
    _run, batch, result = _expected(CreditConfig(estimator="grpo"))
    _check_table(pq.read_table(out), batch, result)


def test_bad_scheme_value_is_a_clear_error(tmp_path, capsys):
    assert main(["compute", str(KGQA), "--out", str(tmp_path / "x.parquet"), "--estimator", "nope"]) == 2
    assert "CreditConfig.estimator: 'nope' is not one of" in capsys.readouterr().err


def test_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["compute", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "x.parquet")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


STEPS = ROOT / "sample_runs" / "search_steps"


def test_compute_into_a_folder_writes_each_step_alone_partitioned_by_step(tmp_path, capsys):
    import os
    import shutil

    import pandas as pd

    from engine.timeline import tokens

    run = tmp_path / "run"
    run.mkdir()
    for step in (3, 4):
        shutil.copy(STEPS / f"step_{step:04d}.parquet", run)
    (run / "step_0005.parquet").write_bytes(b"PAR1\x15\x04")  # a trainer still writing it: no footer yet
    for f in run.iterdir():
        os.utime(f, (1_700_000_000, 1_700_000_000))
    out = tmp_path / "credit"
    assert main(["compute", str(run), "--out", str(out), "--profile", "search-r1", "--estimator", "grpo"]) == 0
    err = capsys.readouterr().err
    assert "step_0005.parquet" in err and "Parquet footer is not written yet" in err
    assert sorted(p.name for p in out.iterdir()) == ["_creditlens.json", "step=3", "step=4"]
    table = tokens.read_credit(out)
    cfg = CreditConfig(profile="search-r1", estimator="grpo")
    for step in (3, 4):  # each step's tokens are compute_credit's on that step's file alone
        part = table.filter(table.column("step").to_numpy() == step).drop_columns(["step", "row"])
        run_s = load_run(STEPS / f"step_{step:04d}.parquet").run
        batch = run_s.to_batch()
        _check_table(part, batch, compute_credit(batch, cfg))
    manifest = tokens.read_manifest(out)
    assert manifest["tokens"] == {"3": 9545, "4": 8793} and manifest["computed_by"] == "this process"
    assert [p["file"] for p in manifest["problems"]] == [str(run / "step_0005.parquet")]
    assert len(pd.read_parquet(out)) == table.num_rows  # pandas reads the hive dataset, not the manifest
    # a second run replaces the dataset whole: nothing of the first is left beside it
    (run / "step_0003.parquet").unlink()
    assert main(["compute", str(run), "--out", str(out), "--estimator", "grpo"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["_creditlens.json", "step=4"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_ray_needs_a_folder_not_a_csv(tmp_path, capsys):
    assert main(["compute", str(STEPS), "--out", str(tmp_path / "x.csv"), "--ray", "local"]) == 2
    assert "--ray writes a Parquet dataset" in capsys.readouterr().err


def test_token_texts_are_picked_as_a_per_token_loop_would_with_or_without_holes():
    import numpy as np

    from engine.export import _texts_at

    rng = np.random.default_rng(0)
    texts = [[f"{r}:{p}" for p in range(12)] for r in range(6)]
    keep = rng.random((6, 12)) < 0.7
    keep[1, :] = False  # a row with no attended token
    keep[2, :5], keep[2, 5:] = True, False  # a right-padded row: the slice path
    rows, pos = np.nonzero(keep)
    assert _texts_at(texts, rows, pos) == [texts[r][p] for r, p in zip(rows, pos, strict=True)]
    assert _texts_at(texts, rows[:0], pos[:0]) == []


def test_a_run_with_no_complete_step_writes_nothing_and_says_why(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "step_0001.jsonl").write_text('{"id": "a", "segments": [')  # the trainer is writing it
    assert main(["compute", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "its last line is not finished" in err and "no step could be computed" in err
