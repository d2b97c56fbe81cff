"""Token-view figures: quantities × positions heatmap (all tokens, any length)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.theme import DIVERGING, ROLE_COLORS, ROLE_LABELS, base_layout, symmetric_range
from dashboard.tokens_html import escape

ROLE_ORDER = ("model", "tool", "user", "system")


def turn_starts(turns: np.ndarray) -> np.ndarray:
    """Positions where a new turn begins (excluding 0)."""
    t = np.asarray(turns)
    return np.flatnonzero(np.diff(t) != 0) + 1 if t.size > 1 else np.zeros(0, dtype=int)


def hover_tokens(tokens: Sequence[str], limit: int = 40) -> np.ndarray:
    """Escaped, shortened token texts for Plotly hover labels."""
    return np.array([escape(t if len(t) <= limit else t[: limit - 1] + "…").replace("\n", "↵") for t in tokens])


def make_token_heatmap_figure(table: pd.DataFrame, rows: Sequence[str], height: int | None = None) -> go.Figure:
    """Rows = quantities, columns = token positions. Each row is scaled to its own ±range (so KL and
    advantage are both visible); the hover shows the raw value, the token and its role. A strip on top
    shows each token's role; dotted lines mark turn boundaries."""
    rows = [r for r in rows if r in table.columns]
    pos = table["position"].to_numpy()
    raw = np.stack([table[r].to_numpy(dtype=float) for r in rows]) if rows else np.zeros((0, len(pos)))
    scale = np.array([symmetric_range(r) for r in raw])[:, None] if rows else np.ones((0, 1))
    z = np.clip(raw / scale, -1, 1)
    toks = hover_tokens(table["token"].tolist())
    roles = table["role"].to_numpy()
    text = np.broadcast_to(toks, z.shape)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.1, 0.9], vertical_spacing=0.03)
    role_code = np.array([ROLE_ORDER.index(r) if r in ROLE_ORDER else 0 for r in roles])[None, :]
    role_scale = []
    for k, r in enumerate(ROLE_ORDER):
        lo, hi = k / len(ROLE_ORDER), (k + 1) / len(ROLE_ORDER)
        role_scale += [[lo, ROLE_COLORS[r]], [hi, ROLE_COLORS[r]]]
    fig.add_trace(
        go.Heatmap(
            z=role_code,
            x=pos,
            y=["role"],
            zmin=-0.5,
            zmax=len(ROLE_ORDER) - 0.5,
            colorscale=role_scale,
            showscale=False,
            text=toks[None, :],
            customdata=np.array([ROLE_LABELS.get(r, r) for r in roles])[None, :],
            hovertemplate="#%{x} %{customdata}<br>%{text}<extra></extra>",
            xgap=0,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=pos,
            y=list(rows),
            zmid=0,
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            customdata=raw,
            text=text,
            hovertemplate="#%{x} %{y} = %{customdata:+.4g}<br>token: %{text}<extra></extra>",
            colorbar=dict(
                title=dict(text="per-row<br>scale", side="right"),
                tickvals=[-1, 0, 1],
                ticktext=["−max", "0", "+max"],
                len=0.85,
                y=0.45,
            ),
        ),
        row=2,
        col=1,
    )
    for s in turn_starts(table["turn"].to_numpy()):
        fig.add_vline(x=float(pos[s]) - 0.5, line=dict(color="#37474f", width=1, dash="dot"))
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_xaxes(title_text="token position", row=2, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    return base_layout(fig, height=height or (110 + 44 * max(len(rows), 1)))
