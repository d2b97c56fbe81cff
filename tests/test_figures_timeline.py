"""The Timeline page's pure figure builders (dashboard/figures/timeline.py) on hand-made rows."""

from __future__ import annotations

import math

import pandas as pd

from dashboard.figures.timeline import (
    lint_frame,
    make_lint_figure,
    make_timeline_figure,
    make_turn_share_figure,
    step_summary,
    timeline_panels,
    turn_share_frame,
)

NAN = math.nan


def rows(scale: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [3, 1, 2],  # out of order: the figure sorts by step
            "score_mean": [0.5 * scale, 0.1 * scale, 0.3 * scale],
            "score_std": [0.1, 0.1, 0.1],
            "solve_rate": [0.5, 0.0, 0.25],
            "zero_variance_group_share": [0.5, 0.0, 0.0],
            "singleton_group_share": [0.0, 0.0, 0.0],
            "advantage_p05": [-1.0, -1.0, -1.0],
            "advantage_p50": [0.0, 0.0, 0.0],
            "advantage_p95": [1.0, 1.0, 1.0],
            "info_weight_share": [0.0, 0.2, 0.0],
            "advantage_length_slope": [NAN, NAN, NAN],  # nothing to show: no panel
            "entropy_mean": [NAN, NAN, NAN],
            "mismatch_mean": [NAN, NAN, NAN],
            "logged_mismatch_share": [NAN, NAN, NAN],
            "turn_credit_share": [[0.5, 0.5], [1.0], [0.2, 0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05]],
            "lint_length_bias": [1, 0, 0],
            "lint_zero_variance_groups": [4, 0, 2],
            "lint_never": [0, 0, 0],
        }
    )


def test_the_timeline_figure_has_a_panel_per_statistic_the_run_has_and_dashes_the_second_scheme():
    frames = {"grpo": rows(), "rloo": rows(2.0)}
    titles = [p[0] for p in timeline_panels(frames)]
    assert titles == [
        "Score and solve rate",
        "Steps that teach nothing",
        "Advantage on trained tokens (p5–p95, median)",
        "Share of |w·A| on tool / info tokens",
    ]
    fig = make_timeline_figure(frames, current=2)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    score = {t.name: t for t in lines if t.name.startswith("score mean")}
    assert list(score["score mean · grpo"].x) == [1, 2, 3]  # sorted by step
    assert list(score["score mean · rloo"].y) == [0.2, 0.6, 1.0]
    assert {t.line.dash for t in lines if t.name.endswith("grpo")} == {"solid"}
    assert {t.line.dash for t in lines if t.name.endswith("rloo")} == {"dash"}
    bands = [t for t in fig.data if t.fill == "tonexty"]
    assert len(bands) == 4  # score ± std and p5–p95, for each scheme
    assert fig.layout.shapes[0].x0 == 2  # the step the pages show
    assert list(fig.layout.xaxis4.tickvals or []) == [] and fig.layout.xaxis4.dtick == 1  # few steps: one tick each


def test_turn_shares_keep_six_turns_and_sum_the_rest():
    long = turn_share_frame(rows())
    step2 = long[long["step"] == 2]
    assert list(step2["turn"]) == ["turn 1", "turn 2", "turn 3", "turn 4", "turn 5", "turn 6", "later turns"]
    assert step2["share"].iloc[-1] == 0.1  # 0.05 + 0.05
    fig = make_turn_share_figure(rows())
    assert {t.stackgroup for t in fig.data} == {"turns"}


def test_the_lint_heatmap_shows_checks_that_flag_something_most_first():
    table = lint_frame(rows())
    assert list(table.index) == ["zero_variance_groups", "length_bias"]  # 6 flagged, then 1; "never" left out
    assert list(table.columns) == [3, 1, 2] and list(table.loc["zero_variance_groups"]) == [4, 0, 2]
    fig = make_lint_figure(rows())
    assert list(fig.data[0].y) == ["zero_variance_groups", "length_bias"]


def test_step_summary_reads_one_row():
    assert step_summary(rows(), 3) == {
        "score_mean": 0.5,
        "solve_rate": 0.5,
        "zero_variance_group_share": 0.5,
        "info_weight_share": 0.0,
    }
    assert step_summary(rows(), 9) == {}
