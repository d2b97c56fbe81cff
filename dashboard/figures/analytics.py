"""Run-analytics figures: credit on info tokens, length bias per estimator, credit per turn, aggregation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures import marks
from dashboard.theme import ERROR_BAR_COLOR, SCHEME_COLORS, TURN_REWARD_COLOR, base_layout
from dashboard.tokens_html import escape

WEBGL_FROM = 2000


def make_info_credit_figure(df: pd.DataFrame) -> go.Figure:
    """Bars per setting: share of |advantage| and of |effective weight| that lands on info tokens."""
    fig = go.Figure()
    for j, col in enumerate(["info share of |advantage|", "info share of |effective weight|"]):
        fig.add_bar(
            x=df["setting"],
            y=df[col],
            name=col,
            marker_color=SCHEME_COLORS[j],
            text=[f"{v:.1%}" for v in df[col]],
            textposition="outside",
            hovertemplate="%{x}<br>%{y:.2%}<extra>" + col + "</extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="share on info tokens", tickformat=".0%", rangemode="tozero")
    return base_layout(fig, height=340)


def make_length_bias_figure(df: pd.DataFrame, y: str) -> go.Figure:
    """Scatter of ``y`` against response length (loss tokens), one colour per estimator, with its least-squares
    line."""
    fig = go.Figure()
    trace = go.Scattergl if len(df) > WEBGL_FROM else go.Scatter
    for j, (raw_name, part) in enumerate(df.groupby("estimator", sort=False)):
        name = escape(raw_name)
        color = SCHEME_COLORS[j % 8]
        x, v = part["length"].to_numpy(float), part[y].to_numpy(float)
        fig.add_trace(
            trace(
                x=x,
                y=v,
                mode="markers",
                name=name,
                marker=dict(color=color, size=7, opacity=0.7),
                hovertemplate=f"{name}<br>length %{{x}}<br>{y} %{{y:+.4g}}<extra></extra>",
            )
        )
        if x.std() > 0:
            k, b = np.polyfit(x, v, 1)
            xs = np.array([x.min(), x.max()])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=k * xs + b,
                    mode="lines",
                    line=dict(color=color, width=2),
                    showlegend=False,
                    hoverinfo="skip",
                )
            )
    marks.add(fig, marks.hline(0, marks.ZERO_LINE))
    fig.update_xaxes(title_text="response length (loss tokens)")
    fig.update_yaxes(title_text=y)
    return base_layout(fig, height=380)


def make_turn_credit_run_figure(df: pd.DataFrame) -> go.Figure:
    """Per turn index: mean (± std) per-token advantage over the trajectories that have the turn, and the mean
    turn reward."""
    x = [f"turn {t}" for t in df["turn"]]
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=df["mean advantage per token"],
        name="mean advantage per token",
        error_y=dict(type="data", array=df["std"], color=ERROR_BAR_COLOR),
        marker_color=SCHEME_COLORS[0],
        customdata=df["trajectories"],
        hovertemplate="%{x}<br>%{y:+.4g} (%{customdata} trajectories)<extra></extra>",
    )
    fig.add_bar(x=x, y=df["mean turn reward"], name="mean turn reward", marker_color=TURN_REWARD_COLOR)
    fig.update_layout(barmode="group")
    marks.add(fig, marks.hline(0, marks.ZERO_LINE))
    return base_layout(fig, height=340)


def make_agg_weight_figure(df: pd.DataFrame, y: str, lines: bool = True) -> go.Figure:
    """Per aggregation mode: each trajectory's ``y`` against its length, one colour per mode (joined by a line,
    sorted by length, when ``lines``)."""
    fig = go.Figure()
    for j, (mode, part) in enumerate(df.groupby("mode", sort=False)):
        part = part.sort_values("length")
        fig.add_trace(
            go.Scatter(
                x=part["length"],
                y=part[y],
                mode="lines+markers" if lines else "markers",
                name=mode,
                line=dict(color=SCHEME_COLORS[j % 8], width=2),
                marker=dict(size=6 if lines else 8, color=SCHEME_COLORS[j % 8]),
                hovertemplate=f"{mode}<br>length %{{x}}<br>{y} %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="response length (loss tokens)")
    log = bool(len(df)) and bool((df[y] > 0).all())
    fig.update_yaxes(title_text=y, type="log" if log else "linear")
    lo, hi = (float(df[y].min()), float(df[y].max())) if log else (0.0, 0.0)
    if log and hi < 100 * lo:  # 1-2-5 ticks: on a short log range Plotly labels every 0.005 and they overlap
        ticks = log_ticks(lo, hi)
        fig.update_yaxes(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return base_layout(fig, height=380)


def log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 × 10^k from just below ``lo`` to just above ``hi`` (both > 0)."""
    out = []
    for k in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1):
        out += [m * 10.0**k for m in (1, 2, 5)]
    inside = [t for t in out if lo <= t <= hi]
    below = [t for t in out if t < lo][-1:]
    above = [t for t in out if t > hi][:1]
    return [float(f"{t:.6g}") for t in below + inside + above]
