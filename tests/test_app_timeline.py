"""Whole runs in the dashboard (AppTest): a folder of step files opens at its latest step with a step picker, every
page shows that one step, links carry the step, the Timeline page draws every step (a second scheme dashed), a live
run's new step file reaches the picker and the timeline, a half-written file waits, and a file whose records name
several steps gets a picker too."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_io_support import native, seg, write_jsonl

from dashboard.state import K
from engine.io import load_run

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
MODEL = [seg("model", [9707, 11, 1879, 0])]


def write_step(path: Path, scores: list[float], prompts: str = "ab", step: int | None = None) -> Path:
    recs = [
        native(f"{p}-{i}", MODEL, group_id=p, global_rewards={"score": s}, **({"step": step} if step else {}))
        for p in prompts
        for i, s in enumerate(scores)
    ]
    write_jsonl(path, recs)
    past = time.time() - 60
    os.utime(path, (past, past))
    return path


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "data"
    run = root / "myrun"
    run.mkdir(parents=True)
    write_step(run / "step_1.jsonl", [1, 0, 0, 0])
    write_step(run / "step_2.jsonl", [1, 1, 0, 0])
    write_step(run / "step_3.jsonl", [1, 1, 1, 1], prompts="abc")
    monkeypatch.setenv("CREDITLENS_DATA_DIR", str(root))
    monkeypatch.setenv("CREDITLENS_TIMELINE_CACHE", str(tmp_path / "timeline-cache"))
    return run


def app(params: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def values(v) -> list:
    """A Plotly array as a list (a numpy array reaches the spec as a typed array: dtype + base64 bytes)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v)


def main_figure(at: AppTest) -> dict:
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith("timeline.main"))


def step_slider(at: AppTest):
    (slider,) = [s for s in at.select_slider if s.label.startswith("Training step")]
    return slider


def test_a_folder_of_steps_opens_its_latest_step_alone(data_dir):
    at = app({"run": "data:myrun", "page": "overview"})
    no_errors(at)
    slider = step_slider(at)
    assert slider.options == ["1", "2", "3"] and slider.value == 3
    ctx = at.session_state[K.CONTEXT]
    assert ctx.info.trajectories == 12  # step 3 only: 3 prompts × 4 (not the run's 28)
    assert {t.step for t in ctx.handle.run.trajectories} == {3}
    assert "step" not in at.query_params  # following the latest: the link follows it too
    slider.set_value(1).run()
    no_errors(at)
    ctx = at.session_state[K.CONTEXT]
    assert ctx.info.trajectories == 8 and {t.step for t in ctx.handle.run.trajectories} == {1}
    assert at.session_state[K.STEP_FOLLOW] is False and at.query_params["step"] == "1"


def test_a_link_opens_its_step_and_a_missing_step_is_named(data_dir):
    at = app({"run": "data:myrun", "step": "2", "page": "tokens"})
    no_errors(at)
    assert step_slider(at).value == 2 and at.session_state[K.CONTEXT].info.trajectories == 8
    at = app({"run": "data:myrun", "step": "9"})
    assert step_slider(at).value == 3
    assert any("step 9 is not in this run; its latest step (3) opened" in w.value for w in at.warning)


def test_the_timeline_draws_every_step_and_a_second_scheme(data_dir):
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo", "overlay": "rloo"})
    no_errors(at)
    lines = [t for t in main_figure(at)["data"] if t.get("mode") == "lines+markers"]
    assert {t["line"]["dash"] for t in lines} == {"solid", "dash"}  # the sidebar scheme and the overlay
    score = next(t for t in lines if t["name"].startswith("score mean · grpo"))  # the code says its value stand-in
    assert values(score["x"]) == [1, 2, 3]
    zero = next(t for t in lines if t["name"].startswith("zero-variance groups · grpo"))
    assert values(zero["y"]) == [0.0, 0.0, 1.0]  # step 3: every group solved by all four


def test_a_live_run_shows_new_steps_and_waits_for_a_half_written_one(data_dir):
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo"})
    no_errors(at)
    write_step(data_dir / "step_4.jsonl", [0, 0, 0, 1])
    (data_dir / "step_5.jsonl").write_text('{"id": "a-0", "segments": [')  # the trainer is writing it
    at.run()
    no_errors(at)
    slider = step_slider(at)
    assert slider.options == ["1", "2", "3", "4"] and slider.value == 4  # followed the latest
    assert any("step_5.jsonl: its last line is not finished" in c.value for c in at.sidebar.caption)
    assert any("1 step file(s) computed now; the other 3 came from the timeline cache" in c.value for c in at.caption)


def test_open_a_step_from_the_timeline(data_dir):
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo"})
    (pick,) = [s for s in at.selectbox if s.label == "Step"]
    pick.set_value(2).run()
    next(b for b in at.button if b.label == "Open in the Group view").click().run()
    no_errors(at)
    assert at.session_state[K.STEP] == 2 and at.session_state[K.STEP_FOLLOW] is False
    assert at.session_state[K.CONTEXT].info.trajectories == 8


def test_a_file_whose_records_name_steps_gets_a_picker(tmp_path):
    path = write_jsonl(
        tmp_path / "run.jsonl",
        [native(f"a-{i}", MODEL, group_id="a", global_rewards={"score": i % 2}, step=7) for i in range(4)]
        + [native(f"a-{i}", MODEL, group_id="a", global_rewards={"score": 1}, step=8) for i in range(2)],
    )
    load = load_run(path)
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[K.UPLOADS] = {load.run.content_hash: load}
    at.session_state[K.RUN_SOURCE] = "Upload"
    at.session_state[K.RUN] = f"upload:{load.run.content_hash}"
    at.query_params["page"] = "timeline"
    at.run()
    no_errors(at)
    assert step_slider(at).value == 8 and at.session_state[K.CONTEXT].info.trajectories == 2
    assert values(next(t for t in main_figure(at)["data"] if t.get("name") == "score mean")["x"]) == [7, 8]


def test_the_timeline_opens_a_jobs_timeline_without_computing_and_names_a_scheme_that_differs(data_dir):
    from engine.__main__ import main

    # the job runs the page's own scheme (the sidebar's export): its rows are the page's
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo"})
    sidebar = at.session_state[K.CONTEXT].config
    scheme = data_dir.parent.parent / "scheme.json"
    scheme.write_text(json.dumps(sidebar.to_dict()))
    assert main(["timeline", str(data_dir), "--scheme", str(scheme)]) == 0  # into myrun/.creditlens/
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo"})
    no_errors(at)
    assert any("Nothing computed now: all 3 step file(s)" in c.value for c in at.caption)
    assert not [i for i in at.info if "A job wrote" in i.value]
    assert values(main_figure(at)["data"][0]["x"]) == [1, 2, 3]
    # a job under another scheme: its scheme is offered as the second one, and the page says how they differ
    assert (
        main(["timeline", str(data_dir), "--estimator", "rloo", "--out", str(data_dir / ".creditlens" / "t.parquet")])
        == 0
    )
    (data_dir / ".creditlens" / "timeline.parquet").unlink()
    at = app({"run": "data:myrun", "page": "timeline", "scheme": "grpo"})
    no_errors(at)
    (note,) = [i.value for i in at.info if "A job wrote" in i.value]
    assert "estimator\\: 'grpo' here, 'rloo' there" in note  # md() escapes the colon
    assert "rloo" in at.selectbox(key=K.TL_OVERLAY).options
