"""Compare-schemes figures: aligned token rows, advantage by position, credit per turn, differences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from dashboard.figures.tokens import hover_tokens, turn_starts
from dashboard.theme import DIVERGING, SCHEME_COLORS, base_layout, symmetric_range
from dashboard.tokens_html import escape

WEBGL_FROM = 3000  # points per trace above which lines use WebGL


def make_scheme_rows_figure(
    labels: Sequence[str], adv: np.ndarray, tokens: Sequence[str], turns: np.ndarray, height: int | None = None
) -> go.Figure:
    """One row per scheme, one column per token, coloured by advantage on one shared ±range (so the rows are
    comparable). adv: [S, n]."""
    labels = [escape(x) for x in labels]
    vmax = symmetric_range(adv)
    toks = hover_tokens(tokens)
    fig = go.Figure(
        go.Heatmap(
            z=adv,
            x=np.arange(adv.shape[1]),
            y=list(labels),
            zmid=0,
            zmin=-vmax,
            zmax=vmax,
            colorscale=DIVERGING,
            text=np.broadcast_to(toks, adv.shape),
            hovertemplate="#%{x} %{y}<br>advantage %{z:+.4g}<br>token: %{text}<extra></extra>",
            colorbar=dict(title=dict(text="advantage", side="right")),
        )
    )
    for s in turn_starts(turns):
        fig.add_vline(x=float(s) - 0.5, line=dict(color="#37474f", width=1, dash="dot"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="token position")
    return base_layout(fig, height=height or (90 + 48 * len(labels)))


def make_advantage_lines_figure(labels: Sequence[str], adv: np.ndarray, turns: np.ndarray) -> go.Figure:
    """Advantage by token position, one line per scheme; dotted lines at turn boundaries."""
    labels = [escape(x) for x in labels]
    fig = go.Figure()
    n = adv.shape[1]
    trace = go.Scattergl if n > WEBGL_FROM else go.Scatter
    x = np.arange(n)
    for s, name in enumerate(labels):
        fig.add_trace(
            trace(
                x=x,
                y=adv[s],
                mode="lines",
                name=name,
                line=dict(color=SCHEME_COLORS[s % 8], width=2),
                hovertemplate=f"{name}<br>#%{{x}}: %{{y:+.4g}}<extra></extra>",
            )
        )
    for s in turn_starts(turns):
        fig.add_vline(x=float(s) - 0.5, line=dict(color="#90a4ae", width=1, dash="dot"))
    fig.add_hline(y=0, line=dict(color="#455a64", width=1))
    fig.update_xaxes(title_text="token position")
    fig.update_yaxes(title_text="advantage")
    return base_layout(fig, height=340)


def make_turn_credit_figure(labels: Sequence[str], credit: np.ndarray, ylabel: str) -> go.Figure:
    """Grouped bars: credit per turn (columns of ``credit`` [S, K]) for each scheme."""
    labels = [escape(x) for x in labels]
    fig = go.Figure()
    x = [f"turn {k + 1}" for k in range(credit.shape[1])]
    for s, name in enumerate(labels):
        fig.add_bar(
            x=x,
            y=credit[s],
            name=name,
            marker_color=SCHEME_COLORS[s % 8],
            hovertemplate=f"{name}<br>%{{x}}: %{{y:+.4g}}<extra></extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=ylabel)
    fig.add_hline(y=0, line=dict(color="#455a64", width=1))
    return base_layout(fig, height=320)


def make_difference_figure(labels: Sequence[str], adv: np.ndarray, ref: int, tokens: Sequence[str]) -> go.Figure:
    """Heatmap of advantage(scheme) − advantage(reference) per token, for every other scheme."""
    labels = [escape(x) for x in labels]
    others = [s for s in range(len(labels)) if s != ref]
    diff = adv[others] - adv[ref][None, :] if others else np.zeros((0, adv.shape[1]))
    vmax = symmetric_range(diff)
    toks = hover_tokens(tokens)
    fig = go.Figure(
        go.Heatmap(
            z=diff,
            x=np.arange(adv.shape[1]),
            y=[f"{labels[s]} − {labels[ref]}" for s in others],
            zmid=0,
            zmin=-vmax,
            zmax=vmax,
            colorscale=DIVERGING,
            text=np.broadcast_to(toks, diff.shape),
            hovertemplate="#%{x} %{y}<br>Δ %{z:+.4g}<br>token: %{text}<extra></extra>",
            colorbar=dict(title=dict(text="Δ advantage", side="right")),
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="token position")
    return base_layout(fig, height=90 + 48 * max(len(others), 1))


def make_group_scalar_figure(labels: Sequence[str], ids: Sequence[str], values: np.ndarray, selected: int) -> go.Figure:
    """Each rollout of the group (x) and its trajectory advantage under each scheme (grouped bars)."""
    labels = [escape(x) for x in labels]
    fig = go.Figure()
    x = [("▶ " if j == selected else "") + escape(i) for j, i in enumerate(ids)]
    for s, name in enumerate(labels):
        fig.add_bar(
            x=x,
            y=values[s],
            name=name,
            marker_color=SCHEME_COLORS[s % 8],
            hovertemplate=f"{name}<br>%{{x}}: %{{y:+.4g}}<extra></extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="trajectory advantage")
    fig.add_hline(y=0, line=dict(color="#455a64", width=1))
    return base_layout(fig, height=320)
