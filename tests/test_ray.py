"""Whole runs on Ray (engine/timeline/raydata.py), on a local Ray started once for this module (this machine's cores,
no dashboard, a 256 MiB object store): the timeline and the per-token dataset written with ``--ray local`` equal
the single-process ones frame for frame; a worker that dies mid-step costs a retry, not the run; a step file that
cannot be read is a problem in the output; the dashboard opens a job's timeline without computing a step."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")  # requirements-dev.txt installs it; the app's requirements do not

from engine import CreditConfig  # noqa: E402
from engine.__main__ import main  # noqa: E402
from engine.timeline import raydata, tokens  # noqa: E402
from engine.timeline.compute import source_timeline, timeline_rows  # noqa: E402
from engine.timeline.store import (  # noqa: E402
    job_timeline_file,
    read_timeline,
    read_timeline_problems,
    to_table,
)

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "sample_runs" / "search_steps"
SCHEME = ["--profile", "search-r1", "--estimator", "grpo"]
CFG = CreditConfig(profile="search-r1", estimator="grpo")
DAMAGED = "step_0005.parquet"


@pytest.fixture(scope="module")
def cluster():
    for name in ("ray", "ray.data"):  # Ray Data's debug records would fill a failure's report
        logging.getLogger(name).setLevel(logging.WARNING)
    raydata.connect("local")
    # the test's failing step functions travel by value: a worker cannot import this test module
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Four steps of the bundled Search-R1 run and a damaged fifth (a Parquet file cut in half), old enough to be
    complete."""
    run = tmp_path_factory.mktemp("ray") / "run"
    run.mkdir()
    for step in (1, 2, 3, 4):
        shutil.copy(STEPS / f"step_{step:04d}.parquet", run)
    data = (STEPS / "step_0006.parquet").read_bytes()
    (run / DAMAGED).write_bytes(data[: len(data) // 2] + b"PAR1")  # footer magic, but no footer
    for f in run.iterdir():
        os.utime(f, (1_700_000_000, 1_700_000_000))
    return run


def test_the_timeline_on_ray_is_the_single_process_timeline(cluster, run_dir, tmp_path):
    here, there = tmp_path / "here.parquet", tmp_path / "ray.parquet"
    assert main(["timeline", str(run_dir), "--out", str(here), *SCHEME]) == 0
    assert main(["timeline", str(run_dir), "--out", str(there), *SCHEME, "--ray", "local"]) == 0
    a, b = pq.read_table(here), pq.read_table(there)
    assert a.num_rows == 4 and a.column("step").to_pylist() == [1, 2, 3, 4]
    same_frames(a, b)  # every row and column
    assert a.schema.metadata == b.schema.metadata  # and the problems kept in the file
    problems = [p for ps in read_timeline_problems(there).values() for p in ps]
    assert [Path(p.file).name for p in problems] == [DAMAGED]
    assert "Parquet" in problems[0].reason or "parquet" in problems[0].reason.lower()


def test_the_credit_dataset_on_ray_is_the_single_process_dataset(cluster, run_dir, tmp_path, capsys):
    here, there = tmp_path / "here", tmp_path / "ray"
    assert main(["compute", str(run_dir), "--out", str(here), *SCHEME]) == 0
    assert main(["compute", str(run_dir), "--out", str(there), *SCHEME, "--ray", "local"]) == 0
    assert f"problem: {run_dir / DAMAGED}" in capsys.readouterr().err  # the damaged step, named, not a failed job
    a, b = tokens.read_credit(here), tokens.read_credit(there)
    assert a.num_rows > 30_000
    same_frames(a, b)  # frame for frame: every token of every step
    assert sorted(p.name for p in there.iterdir()) == ["_creditlens.json", "step=1", "step=2", "step=3", "step=4"]
    ma, mb = tokens.read_manifest(here), tokens.read_manifest(there)
    assert ma.pop("computed_by") == "this process" and mb.pop("computed_by") == "ray local"
    assert ma == mb and ma["scheme"] == CFG.to_dict()
    assert [Path(p["file"]).name for p in ma["problems"]] == [DAMAGED]
    # each step as it was computed alone: step 2's tokens equal a one-step run of that file
    alone = tmp_path / "alone"
    single = tmp_path / "single"
    single.mkdir()
    shutil.copy(run_dir / "step_0002.parquet", single)
    tokens.compute_dataset(single, CFG, alone)
    step2 = a.filter(pa_equal(a, "step", 2))
    same_frames(step2, tokens.read_credit(alone))
    # readable by pandas as a hive dataset; the manifest is not read as data
    frame = pd.read_parquet(there)
    assert len(frame) == a.num_rows and sorted(frame["step"].astype(int).unique()) == [1, 2, 3, 4]


def same_frames(a, b) -> None:
    """Equal tables, value for value (NaN equal to NaN, exact floats), with the same columns and types."""
    assert a.schema.remove_metadata() == b.schema.remove_metadata()
    pd.testing.assert_frame_equal(a.to_pandas(), b.to_pandas(), check_exact=True)


def pa_equal(table, column: str, value: int):
    import pyarrow.compute as pc

    return pc.equal(table.column(column), value)


def die_once(marker: Path):
    """A step function that kills its own worker process the first time it sees ``marker`` (deleted first), on
    step 3, after computing it and before handing it on."""

    def step(job, src, *args):
        part = (source_timeline if len(args) == 1 else tokens.credit_part)(job, src, *args)
        if src.step == 3 and marker.exists():
            marker.unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        return part

    return step


def test_a_worker_that_dies_mid_step_costs_a_retry_not_the_run(cluster, run_dir, tmp_path):
    clean = tmp_path / "clean"
    tokens.compute_dataset(run_dir, CFG, clean, writer=raydata.write_with_ray)
    marker = tmp_path / "die"
    marker.touch()

    def writer(job, sources, cfg, staging):
        raydata.write_with_ray(job, sources, cfg, staging, step=die_once(marker))

    faulty = tmp_path / "faulty"
    manifest = tokens.compute_dataset(run_dir, CFG, faulty, writer=writer)
    assert not marker.exists()  # the worker did die once
    assert manifest["steps"] == [1, 2, 3, 4] and manifest == tokens.read_manifest(clean)
    same_frames(tokens.read_credit(faulty), tokens.read_credit(clean))  # no step missing or written twice
    assert len(list((faulty / "step=3").glob("*.parquet"))) == 1

    marker.touch()
    schemes = {"g": CFG}
    again = timeline_rows(run_dir, schemes, runner=raydata.timeline_runner(step=die_once(marker)))
    assert not marker.exists()
    same_frames(to_table(again.rows), to_table(timeline_rows(run_dir, schemes).rows))


def test_a_step_file_gone_before_its_task_is_a_problem_in_the_output(cluster, run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, copy_function=shutil.copy2)

    def writer(job, sources, cfg, staging):  # the file goes after the index listed it: the worker cannot read it
        (run / "step_0002.parquet").unlink()
        raydata.write_with_ray(job, sources, cfg, staging)

    manifest = tokens.compute_dataset(run, CFG, tmp_path / "out", writer=writer)
    assert manifest["steps"] == [1, 3, 4]
    named = {Path(p["file"]).name: p["reason"] for p in manifest["problems"]}
    assert set(named) == {DAMAGED, "step_0002.parquet"}
    assert "FileNotFoundError" in named["step_0002.parquet"] and "no longer there" in named["step_0002.parquet"]


def test_the_dashboard_opens_a_ray_job_timeline_without_computing(cluster, run_dir, tmp_path, monkeypatch):
    from dashboard import services

    run = tmp_path / "live"
    shutil.copytree(run_dir, run, copy_function=shutil.copy2)
    assert main(["timeline", str(run), *SCHEME, "--ray", "local"]) == 0  # no --out: into the run folder
    written = read_timeline(job_timeline_file(run))
    assert [r["step"] for r in written] == [1, 2, 3, 4]
    monkeypatch.setenv(services.TIMELINE_CACHE_ENV, str(tmp_path / "cache"))
    view = services.folder_timeline(run, CFG)
    assert view.computed == 0 and view.index_sources == 4
    assert view.frame["advantage_p95"].tolist() == [r["advantage_p95"] for r in written]
    assert [Path(p.file).name for p in view.problems] == [DAMAGED]
    json.dumps(written[0]["turn_credit_share"])  # plain lists, as the page draws them


def test_a_step_that_kills_every_worker_is_a_problem_not_a_failed_job(cluster, run_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(raydata, "MAX_RETRIES", 1)  # two deaths, not four: the test's time

    def always_dies(job, src, *args):
        if src.step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return (source_timeline if len(args) == 1 else tokens.credit_part)(job, src, *args)

    manifest = tokens.compute_dataset(
        run_dir, CFG, tmp_path / "out", writer=lambda *a: raydata.write_with_ray(*a, step=always_dies)
    )
    assert manifest["steps"] == [1, 2, 4]
    lost = [p for p in manifest["problems"] if "no result came back" in p["reason"]]
    assert [Path(p["file"]).name for p in lost] == ["step_0003.parquet"]
    tl = timeline_rows(run_dir, {"g": CFG}, runner=raydata.timeline_runner(step=always_dies))
    assert [r["step"] for r in tl.rows] == [1, 2, 4]
    assert [Path(p.file).name for p in tl.problems if "no result came back" in p.reason] == ["step_0003.parquet"]
