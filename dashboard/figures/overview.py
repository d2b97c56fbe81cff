"""Run-overview figures: reward components and scores as distributions."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.theme import LABEL_BACKGROUND, MEAN_LINE_COLOR, SCHEME_COLORS, UNKNOWN_COLOR, base_layout
from dashboard.tokens_html import escape

KIND_COLORS = {"turn": SCHEME_COLORS[0], "global": SCHEME_COLORS[1]}


def make_component_histograms_figure(components: pd.DataFrame, cols: int = 3) -> go.Figure:
    """One histogram per reward component (long table: kind, component, value), turn components in blue,
    global ones in orange."""
    keys = list(dict.fromkeys(zip(components["kind"], components["component"], strict=True)))
    if not keys:
        return base_layout(go.Figure().add_annotation(text="this run has no reward components", showarrow=False))
    rows = math.ceil(len(keys) / cols)
    titles = [f"{kind}: {escape(name)}" for kind, name in keys]
    # about 80 px between rows of the 210 px each gets: a fixed fraction (0.16) exceeds plotly's limit of
    # 1 / (rows - 1) from 8 rows on (22 components), and the page raised ValueError
    spacing = min(0.16, 80 / (60 + 210 * rows)) if rows > 1 else 0.1
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, vertical_spacing=spacing)
    for j, (kind, name) in enumerate(keys):
        v = components.loc[(components["kind"] == kind) & (components["component"] == name), "value"]
        fig.add_trace(
            go.Histogram(
                x=v,
                marker_color=KIND_COLORS.get(kind, UNKNOWN_COLOR),
                name=escape(name),
                showlegend=False,
                nbinsx=20,
                hovertemplate="%{x}: %{y} values<extra></extra>",
            ),
            row=j // cols + 1,
            col=j % cols + 1,
        )
    fig.update_annotations(font_size=12)  # long component names side by side in a 1024 px window
    return base_layout(fig, height=60 + 210 * rows)


def make_distribution_figure(values: np.ndarray, xlabel: str, color: str = SCHEME_COLORS[2]) -> go.Figure:
    """A histogram of one per-trajectory quantity with its mean marked."""
    v = np.asarray(values, dtype=float)
    fig = go.Figure(go.Histogram(x=v, nbinsx=30, marker_color=color, hovertemplate="%{x}: %{y}<extra></extra>"))
    if v.size:  # the mean on the dashed line itself: a long axis title is cut off in a narrow column
        fig.add_vline(
            x=float(v.mean()),
            line=dict(color=MEAN_LINE_COLOR, dash="dash"),
            annotation=dict(text=f"mean {v.mean():.3g}", font_size=12, bgcolor=LABEL_BACKGROUND),
            annotation_position="top",
        )
    fig.update_xaxes(title_text=xlabel, title_standoff=6)
    fig.update_yaxes(title_text="trajectories", title_standoff=4)
    fig = base_layout(fig, height=280)
    fig.update_layout(margin=dict(t=28))  # room for the mean's label above the plot
    return fig
