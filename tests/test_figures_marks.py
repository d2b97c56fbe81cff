"""``dashboard.figures.marks`` draws exactly what Plotly's ``add_vline`` / ``add_hline`` / ``add_vrect`` /
``add_hrect`` drew before it (the same shapes, in the same order, in the same figures), in one assignment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from dashboard.figures import marks
from dashboard.figures.compare import OUT_OF_LOSS_SPAN, make_advantage_lines_figure, make_scheme_rows_figure, spans
from dashboard.figures.groups import make_group_scores_figure
from dashboard.figures.tokens import make_token_heatmap_figure, turn_starts
from dashboard.theme import GROUP_MEAN_COLOR

LINE = dict(color="#37474f", width=1, dash="dot")


def shapes(fig: go.Figure) -> list[dict]:
    return [s.to_plotly_json() for s in fig.layout.shapes]


def two_rows() -> go.Figure:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True)
    fig.add_trace(go.Heatmap(z=[[1, 2]]), row=1, col=1)
    fig.add_trace(go.Heatmap(z=[[3, 4]]), row=2, col=1)
    return fig


@pytest.mark.parametrize(
    "ours, plotly_call",
    [
        (lambda: marks.vline(2.5, LINE), lambda f: f.add_vline(x=2.5, line=LINE)),
        (lambda: marks.hline(-0.25, marks.ZERO_LINE), lambda f: f.add_hline(y=-0.25, line=marks.ZERO_LINE)),
        (
            lambda: marks.vrect(1.5, 4.5, fillcolor=OUT_OF_LOSS_SPAN, layer="below", line=dict(width=0)),
            lambda f: f.add_vrect(x0=1.5, x1=4.5, fillcolor=OUT_OF_LOSS_SPAN, line_width=0, layer="below"),
        ),
        (
            lambda: marks.hrect(0.2, 0.8, fillcolor="#90a4ae", opacity=0.18, line=dict(width=0)),
            lambda f: f.add_hrect(y0=0.2, y1=0.8, fillcolor="#90a4ae", opacity=0.18, line_width=0),
        ),
    ],
)
def test_each_mark_is_the_shape_plotly_adds(ours, plotly_call) -> None:
    ref = go.Figure(go.Scatter(x=[0, 9], y=[-1, 1]))
    plotly_call(ref)
    fig = marks.add(go.Figure(go.Scatter(x=[0, 9], y=[-1, 1])), ours())
    assert shapes(fig) == shapes(ref) and len(shapes(fig)) == 1


def test_a_vline_on_subplots_marks_each_subplot_as_plotly_does() -> None:
    ref = two_rows()
    ref.add_vline(x=7.5, line=LINE)
    ref.add_vline(x=11.5, line=LINE)
    fig = marks.add(
        two_rows(),
        marks.vline(7.5, LINE, (("x", "y"), ("x2", "y2"))),
        marks.vline(11.5, LINE, (("x", "y"), ("x2", "y2"))),
    )
    assert shapes(fig) == shapes(ref)
    assert [s["xref"] for s in shapes(fig)] == ["x", "x2", "x", "x2"]


def test_add_keeps_the_shapes_already_there_and_adds_nothing_for_nothing() -> None:
    fig = marks.add(go.Figure(), marks.hline(0, marks.ZERO_LINE))
    marks.add(fig, marks.vline(1, LINE), [])
    assert [s["type"] + s["xref"] for s in shapes(fig)] == ["linex domain", "linex"]
    assert marks.add(go.Figure()).layout.shapes == ()


def strip_shapes(fig: go.Figure) -> go.Figure:
    out = go.Figure(fig)
    out.layout.shapes = ()
    return out


def test_the_figures_carry_the_shapes_the_plotly_calls_made() -> None:
    """The figures that used the add_* calls, rebuilt from their own output by those calls, in the old order."""
    rng = np.random.default_rng(0)
    n = 300
    turns = np.repeat(np.arange(1, 6), n // 5)
    adv = rng.normal(size=(3, n))
    loss = rng.random((3, n)) > 0.2
    loss[:, 100:140] = False  # a span no scheme trains
    tokens = [f"t{i}" for i in range(n)]

    rows = make_scheme_rows_figure(["a", "b", "c"], adv, tokens, turns, loss=loss)
    ref = strip_shapes(rows)
    for s in turn_starts(turns):
        ref.add_vline(x=float(s) - 0.5, line=LINE)
    assert shapes(rows) == shapes(ref) and len(shapes(rows)) == 4

    lines = make_advantage_lines_figure(["a", "b", "c"], adv, turns, loss=loss)
    ref = strip_shapes(lines)
    for a, b in spans(~loss.any(0)):
        ref.add_vrect(x0=a - 0.5, x1=b - 0.5, fillcolor=OUT_OF_LOSS_SPAN, line_width=0, layer="below")
    for s in turn_starts(turns):
        ref.add_vline(x=float(s) - 0.5, line=dict(color="#90a4ae", width=1, dash="dot"))
    ref.add_hline(y=0, line=dict(color="#455a64", width=1))
    assert shapes(lines) == shapes(ref) and [s["type"] for s in shapes(lines)] == ["rect"] + ["line"] * 5

    table = pd.DataFrame(
        {
            "position": np.arange(n),
            "turn": turns,
            "role": np.where(np.arange(n) % 60 < 40, "model", "tool"),
            "token": tokens,
            "loss": loss[0].astype(int),
            "advantage": adv[0],
        }
    )
    heat = make_token_heatmap_figure(table, ["advantage"])
    ref = strip_shapes(heat)
    for s in turn_starts(turns):
        ref.add_vline(x=float(s) - 0.5, line=LINE)
    assert shapes(heat) == shapes(ref) and len(shapes(heat)) == 8  # 4 boundaries × (strip, heatmap)

    scores = make_group_scores_figure(["r0", "r1", "r2"], np.array([1.0, 0.0, 0.5]), 0.5, 0.4, np.zeros(3), 1)
    ref = strip_shapes(scores)
    ref.add_hrect(y0=0.5 - 0.4, y1=0.5 + 0.4, fillcolor="#90a4ae", opacity=0.18, line_width=0)
    ref.add_hline(y=0.5, line=dict(color=GROUP_MEAN_COLOR, width=2, dash="dash"))
    assert shapes(scores) == shapes(ref)
