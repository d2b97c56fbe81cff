"""The figure cache (dashboard/figcache.py): a figure is reused only for inputs equal by value, and an input
it cannot digest raises instead of being ignored."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

from dashboard import figcache
from engine import CreditConfig


def _bars(values, name="x"):
    return go.Figure(go.Bar(y=list(values), name=name))


def _other(values, name="x"):
    return go.Figure(go.Scatter(y=list(values), name=name))


def key(*args, build=_bars, **kwargs) -> str:
    return figcache.digest(build, args, kwargs)


def test_equal_values_give_equal_keys() -> None:
    a = np.arange(2048, dtype=np.float32).reshape(2, 1024)
    df = pd.DataFrame({"token": ["a", "b", "c"] * 4, "advantage": np.linspace(-1, 1, 12)})
    assert key(a, df, ["x"] * 20, loss=a > 3) == key(a.copy(), df.copy(), ["x"] * 20, loss=a.copy() > 3)
    assert key(CreditConfig(estimator="grpo")) == key(CreditConfig(estimator="grpo"))


@pytest.mark.parametrize(
    "left, right",
    [
        (np.zeros(4096, dtype=np.float32), np.r_[np.zeros(4095), 1e-7].astype(np.float32)),  # one element, far in
        (np.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.float64)),  # dtype
        (np.zeros((2, 3)), np.zeros((3, 2))),  # shape
        (["ab", "c"] + ["x"] * 9, ["a", "bc"] + ["x"] * 9),  # the same characters split differently
        (["a"] * 9, ["a"] * 10),
        ([1, 2], (1, 2)),
        (1, 1.0),
        (0.0, -0.0),
        (float("nan"), float("inf")),
        ("1", 1),
        (None, "None"),
        (np.array(["a", "b"], dtype=object), np.array(["a", "c"], dtype=object)),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])),
        (CreditConfig(estimator="grpo"), CreditConfig(estimator="grpo", norm_adv_by_std_in_grpo=False)),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # order matters: a legend follows it
    ],
)
def test_different_values_give_different_keys(left, right) -> None:
    assert key(left) != key(right)


def test_frames_differ_by_any_cell_column_name_or_index() -> None:
    df = pd.DataFrame({"token": [f"t{i}" for i in range(3000)], "advantage": np.linspace(-1, 1, 3000)})
    cell = df.copy()
    cell.loc[2999, "advantage"] = 0.5  # Streamlit's own hashing samples frames this long; this module does not
    text = df.copy()
    text.loc[1500, "token"] = "t1500 "
    renamed = df.rename(columns={"advantage": "score"})
    reindexed = df.set_axis(np.arange(1, 3001))
    keys = {key(df), key(cell), key(text), key(renamed), key(reindexed), key(df["advantage"])}
    assert len(keys) == 6


def test_builder_and_keyword_arguments_are_part_of_the_key() -> None:
    assert key([1, 2]) != key([1, 2], build=_other)
    assert key([1, 2], name="a") != key([1, 2], name="b")
    assert key([1, 2], name="a") != key([1, 2], "a")


def test_an_undigestable_argument_raises() -> None:
    class Opaque:
        pass

    with pytest.raises(figcache.Undigestable, match="Opaque"):
        key(Opaque())
    with pytest.raises(figcache.Undigestable):
        key([1, {2: Opaque()}])


def test_figure_is_built_once_per_distinct_input_and_shared() -> None:
    calls = []

    def build(values, name="x"):
        calls.append((tuple(values), name))
        return _bars(values, name)

    build.__qualname__ = "test_figure_is_built_once.build"  # a unique builder name for this test's cache entries
    values = np.random.default_rng(0).normal(size=50)
    first = figcache.cached(build, values, name="run-1")
    again = figcache.cached(build, values.copy(), name="run-1")
    assert again is first and len(calls) == 1
    changed = values.copy()
    changed[-1] += 1e-9
    other = figcache.cached(build, changed, name="run-1")
    assert other is not first and len(calls) == 2
    assert list(other.data[0].y) == pytest.approx(list(changed), abs=0) and list(first.data[0].y)[-1] == values[-1]


# ------------------------------------------------------------------------------------------------ base layout
def _reference_base_layout(fig: go.Figure, height: int = 360, title: str | None = None, big: bool = False):
    """theme.base_layout as it was written with Plotly's update methods (3× slower): the fast one must give the
    same layout."""
    from dashboard.theme import FONT_FAMILY, GRID_COLOR, MONO_FAMILY

    size = 17 if big else 14
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=48 if title else 20, b=10),
        font=dict(family=FONT_FAMILY, size=size, color="#212121"),
        title=dict(text=title, font=dict(size=size + 2), x=0.01, xanchor="left") if title else None,
        paper_bgcolor="white",
        plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1.0),
        hoverlabel=dict(font=dict(family=MONO_FAMILY, size=13)),
    )
    fig.update_xaxes(gridcolor=GRID_COLOR, zerolinecolor=GRID_COLOR, linecolor=GRID_COLOR, automargin=True)
    fig.update_yaxes(gridcolor=GRID_COLOR, zerolinecolor=GRID_COLOR, linecolor=GRID_COLOR, automargin=True)
    return fig


def _figures():
    from plotly.subplots import make_subplots

    plain = go.Figure(go.Bar(y=[1, -2, 3]))
    plain.update_layout(legend=dict(x=0.2), margin=dict(b=40))  # set before: kept where base_layout is silent
    stacked = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.2, 0.8])
    stacked.add_trace(go.Heatmap(z=np.arange(6).reshape(2, 3)), row=2, col=1)
    stacked.add_trace(go.Heatmap(z=[[0, 1, 2]]), row=1, col=1)
    stacked.add_vline(x=1.5, line=dict(dash="dot"))
    stacked.update_xaxes(title_text="token position", row=2, col=1)
    stacked.update_yaxes(autorange="reversed")
    grid = make_subplots(rows=1, cols=3, subplot_titles=["a", "b", "c"])
    for c in range(3):
        grid.add_trace(go.Histogram(x=np.arange(10) * c), row=1, col=c + 1)
    return {"plain": plain, "stacked": stacked, "grid": grid}


@pytest.mark.parametrize("kwargs", [{}, {"title": "a <b>title</b>", "height": 500}, {"big": True, "title": "t"}])
@pytest.mark.parametrize("name", ["plain", "stacked", "grid"])
def test_base_layout_gives_the_layout_plotlys_update_methods_give(name, kwargs) -> None:
    from dashboard.theme import base_layout

    fast = base_layout(_figures()[name], **kwargs).to_dict()
    slow = _reference_base_layout(_figures()[name], **kwargs).to_dict()
    assert fast["data"] == slow["data"]
    fast_layout, slow_layout = fast["layout"], slow["layout"]
    if "title" not in kwargs:  # update_layout(title=None) leaves an empty title object; plotly.js draws neither
        assert fast_layout.pop("title", {}) == {} and slow_layout.pop("title", {}) == {}
    assert fast_layout == slow_layout
    axes = [k for k in fast_layout if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == {"plain": 2, "stacked": 4, "grid": 6}[name]
    assert all(fast_layout[a]["gridcolor"] and fast_layout[a]["automargin"] for a in axes)
