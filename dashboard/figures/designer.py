"""Reward-designer figures: before vs after per trajectory, and who moved in the ranking."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.theme import MARKER_OUTLINE, RANK_CHANGE_COLORS, SCHEME_COLORS, UNCHANGED_LINE, base_layout
from dashboard.tokens_html import escape


def make_before_after_figure(
    ids: Sequence[str], groups: np.ndarray, before: np.ndarray, after: np.ndarray, quantity: str
) -> go.Figure:
    """Scatter: ``quantity`` per trajectory under the baseline (x) and the designed scheme (y); points off the
    diagonal changed. Colour = group."""
    lo = float(np.nanmin(np.concatenate([before, after]))) if len(before) else 0.0
    hi = float(np.nanmax(np.concatenate([before, after]))) if len(before) else 1.0
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            line=dict(color=UNCHANGED_LINE, dash="dot"),
            name="unchanged",
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=before,
            y=after,
            mode="markers",
            marker=dict(
                size=9, color=[SCHEME_COLORS[int(g) % 8] for g in groups], line=dict(width=1, color=MARKER_OUTLINE)
            ),
            text=[escape(i) for i in ids],
            hovertemplate="%{text}<br>before %{x:+.4g}<br>after %{y:+.4g}<extra></extra>",
            name="trajectory",
        )
    )
    fig.update_xaxes(title_text=f"{quantity} — baseline (sidebar scheme)")
    fig.update_yaxes(title_text=f"{quantity} — designed")
    fig.update_layout(showlegend=False)
    return base_layout(fig, height=380)


def make_rank_change_figure(changes: pd.DataFrame, limit: int = 20) -> go.Figure:
    """Slope chart of the ``limit`` trajectories whose rank moved most (rank 1 at the top)."""
    moved = changes[changes["rank change"] != 0].head(limit)
    fig = go.Figure()
    for _, r in moved.iterrows():
        up = r["rank change"] > 0
        fig.add_trace(
            go.Scatter(
                x=["baseline", "designed"],
                y=[r["rank before"], r["rank after"]],
                mode="lines+markers+text",
                line=dict(color=RANK_CHANGE_COLORS["up" if up else "down"], width=2),
                text=["", escape(r["id"])],
                textposition="middle right",
                hovertemplate=f"{escape(r['id'])}<br>rank %{{y}}<extra></extra>",
                showlegend=False,
            )
        )
    if moved.empty:
        fig.add_annotation(text="no trajectory changed rank", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_yaxes(autorange="reversed", title_text="rank (1 = best)")
    fig.update_xaxes(range=[-0.3, 1.7])
    return base_layout(fig, height=380)
