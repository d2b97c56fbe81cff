"""Token-view figures: quantities × positions heatmap (all tokens, any length)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import marks
from dashboard.theme import (
    DIVERGING,
    IN_LOSS_FILL,
    OUT_OF_LOSS,
    OUT_OF_LOSS_FILL,
    ROLE_COLORS,
    ROLE_LABELS,
    TURN_RULE,
    base_layout,
    symmetric_range,
)
from dashboard.tokens_html import escape

ROLE_ORDER = ("model", "tool", "user", "system")
# Rows that are credit (what the gradient uses): outside the loss mask they are drawn grey, not coloured.
LOSS_ROWS = ("advantage", "effective weight", "logged advantage", "advantage − logged")
LOSS_COLORS = (IN_LOSS_FILL, OUT_OF_LOSS_FILL)  # the strip's "in the loss" / "not in the loss"
TEXT_CELLS = 4_000  # above this many heatmap cells, token texts only in the strip (see make_token_heatmap_figure)


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
    shows each token's role and whether it is in the loss; credit rows (``LOSS_ROWS``) are grey outside the loss
    (no gradient flows there) and scaled on loss tokens only. Dotted lines mark turn boundaries."""
    rows = [r for r in rows if r in table.columns]
    pos = table["position"].to_numpy()
    raw = np.stack([table[r].to_numpy(dtype=float) for r in rows]) if rows else np.zeros((0, len(pos)))
    in_loss = table["loss"].to_numpy() > 0 if "loss" in table.columns else np.ones(len(pos), bool)
    out = np.array([r in LOSS_ROWS for r in rows], bool)[:, None] & ~in_loss[None, :]
    shown = np.where(out, np.nan, raw)
    scale = np.array([symmetric_range(r) for r in shown])[:, None] if rows else np.ones((0, 1))
    z = np.clip(shown / scale, -1, 1)
    toks = hover_tokens(table["token"].tolist())
    roles = table["role"].to_numpy()
    # The token's text in every cell's hover repeats it once per row: above TEXT_CELLS cells (a 2,048-token
    # trajectory) only the strip on top carries it, so the figure stays small enough to draw at once.
    per_cell = z.size <= TEXT_CELLS
    if per_cell:
        text = np.where(
            out,
            np.char.add(np.broadcast_to(toks, z.shape).astype(str), "<br>not in the loss: no gradient"),
            np.broadcast_to(toks, z.shape),
        )
        hover = "#%{x} %{y} = %{customdata:+.4g}<br>token: %{text}<extra></extra>"
    else:
        text = None
        hover = "#%{x} %{y} = %{customdata:+.4g}<br>(token: hover the strip above)<extra></extra>"
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.14, 0.86], vertical_spacing=0.03)
    n_roles = len(ROLE_ORDER)
    role_code = np.array([ROLE_ORDER.index(r) if r in ROLE_ORDER else 0 for r in roles])
    strip = np.stack([role_code, np.where(in_loss, n_roles, n_roles + 1)])
    colors = [ROLE_COLORS[r] for r in ROLE_ORDER] + list(LOSS_COLORS)
    strip_scale = []
    for k, c in enumerate(colors):
        strip_scale += [[k / len(colors), c], [(k + 1) / len(colors), c]]
    role_words = np.array([ROLE_LABELS.get(r, r) for r in roles])
    loss_words = np.where(in_loss, "in the loss", "not in the loss")
    fig.add_trace(
        go.Heatmap(
            z=strip,
            x=pos,
            y=["role", "in loss"],
            zmin=-0.5,
            zmax=len(colors) - 0.5,
            colorscale=strip_scale,
            showscale=False,
            text=np.stack([np.char.add(np.char.add(role_words.astype(str), ": "), toks.astype(str)), loss_words]),
            hovertemplate="#%{x} %{text}<extra></extra>",
            xgap=0,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=z.astype(np.float32),
            x=pos,
            y=list(rows),
            zmid=0,
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            customdata=raw.astype(np.float32),
            text=text,
            hovertemplate=hover,
            colorbar=dict(
                title=dict(text="per-row<br>scale", side="right"),
                tickvals=[-1, 0, 1],
                ticktext=["−max", "0", "+max"],
                len=0.8,
                y=0.43,
            ),
        ),
        row=2,
        col=1,
    )
    boundary = dict(color=TURN_RULE, width=1, dash="dot")
    both = (("x", "y"), ("x2", "y2"))  # the strip and the heatmap, as add_vline marks every subplot
    marks.add(fig, *(marks.vline(float(pos[s]) - 0.5, boundary, both) for s in turn_starts(table["turn"].to_numpy())))
    fig.update_yaxes(autorange="reversed")
    greyed = bool(out.any())
    fig.update_xaxes(
        title_text="token position" + (" · grey: credit outside the loss (no gradient)" if greyed else ""), row=2, col=1
    )
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    base_layout(fig, height=height or (130 + 44 * max(len(rows), 1)))
    fig.update_layout(plot_bgcolor=OUT_OF_LOSS)  # shows only through the grey (NaN) credit cells
    fig.update_xaxes(showgrid=False)
    fig.update_yaxes(showgrid=False)
    return fig
