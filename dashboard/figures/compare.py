"""Compare-schemes figures: aligned token rows, advantage by position, credit per turn, differences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from dashboard.figures import marks
from dashboard.figures.groups import short_ids
from dashboard.figures.tokens import TEXT_CELLS, hover_tokens, turn_starts
from dashboard.theme import (
    DIVERGING,
    OUT_OF_LOSS,
    OUT_OF_LOSS_SPAN,
    SCHEME_COLORS,
    TURN_RULE,
    TURN_RULE_LIGHT,
    base_layout,
    symmetric_range,
)
from dashboard.tokens_html import escape

WEBGL_FROM = 3000  # points per trace above which lines use WebGL
MAX_SPANS = 120  # shaded spans per line chart (beyond that: gaps only)
NOTE_CELLS = 1_500  # difference cells up to which each cell's hover repeats what differs (a line per cell)
DIFF_FLOOR = 0.01  # the difference view's colour range is at least this share of the advantages' range
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0.0)


def cell_text(toks: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """(each cell's token text for a heatmap hover, the hover line that shows it): none above ``TEXT_CELLS``
    cells, where repeating every token once per row made a 2,048-token comparison's figures 700 KiB."""
    if shape[0] * shape[1] > TEXT_CELLS:
        return None, ""
    return np.broadcast_to(toks, shape), "<br>token: %{text}"


def _grey_layer(fig: go.Figure, x: np.ndarray, y: Sequence[str], out: np.ndarray, raw: np.ndarray, toks) -> None:
    """A flat grey heatmap under the value heatmap, on the cells of ``out`` (tokens outside the loss), whose hover
    names the value the estimator computed there and says that no gradient uses it."""
    text, token_line = cell_text(toks, out.shape)
    fig.add_trace(
        go.Heatmap(
            z=np.where(out, 1.0, np.nan).astype(np.float32),
            x=x,
            y=list(y),
            zmin=0,
            zmax=1,
            colorscale=[[0, OUT_OF_LOSS], [1, OUT_OF_LOSS]],
            showscale=False,
            customdata=np.asarray(raw, dtype=np.float32),
            text=text,
            hovertemplate="#%{x} %{y}<br>not in the loss: no gradient<br>(computed %{customdata:+.4g})"
            + token_line
            + "<extra></extra>",
        )
    )


def make_scheme_rows_figure(
    labels: Sequence[str],
    adv: np.ndarray,
    tokens: Sequence[str],
    turns: np.ndarray,
    height: int | None = None,
    loss: np.ndarray | None = None,
) -> go.Figure:
    """One row per scheme, one column per token, coloured by advantage on one shared ±range (so the rows are
    comparable). adv: [S, n]. ``loss`` ([S, n] bool): tokens outside a scheme's loss are drawn grey, not
    coloured, and left out of the range."""
    labels = [escape(x) for x in labels]
    toks = hover_tokens(tokens)
    x = np.arange(adv.shape[1])
    fig = go.Figure()
    z = adv
    if loss is not None:
        out = ~loss.astype(bool) & np.isfinite(adv)
        z = np.where(out, np.nan, adv)
        if out.any():
            _grey_layer(fig, x, labels, out, adv, toks)
    vmax = symmetric_range(z)
    text, token_line = cell_text(toks, adv.shape)
    fig.add_trace(
        go.Heatmap(
            z=np.asarray(z, dtype=np.float32),
            x=x,
            y=list(labels),
            zmid=0,
            zmin=-vmax,
            zmax=vmax,
            colorscale=DIVERGING,
            text=text,
            hovertemplate="#%{x} %{y}<br>advantage %{z:+.4g}" + token_line + "<extra></extra>",
            colorbar=dict(title=dict(text="advantage", side="right")),
        )
    )
    boundary = dict(color=TURN_RULE, width=1, dash="dot")
    marks.add(fig, *(marks.vline(float(s) - 0.5, boundary) for s in turn_starts(turns)))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="token position" + (" · grey: not in the loss" if loss is not None else ""))
    return base_layout(fig, height=height or (90 + 48 * len(labels)))


def spans(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) runs of True in a 1-D mask."""
    m = np.r_[False, np.asarray(mask, bool), False].astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def make_advantage_lines_figure(
    labels: Sequence[str], adv: np.ndarray, turns: np.ndarray, loss: np.ndarray | None = None
) -> go.Figure:
    """Advantage by token position, one line per scheme; dotted lines at turn boundaries. ``loss`` ([S, n]
    bool): each line has a gap where its scheme does not train, and positions no scheme trains are shaded grey."""
    labels = [escape(x) for x in labels]
    fig = go.Figure()
    n = adv.shape[1]
    trace = go.Scattergl if n > WEBGL_FROM else go.Scatter
    x = np.arange(n)
    for s, name in enumerate(labels):
        y = adv[s] if loss is None else np.where(loss[s], adv[s], np.nan)
        fig.add_trace(
            trace(
                x=x,
                y=y,
                mode="lines",
                name=name,
                connectgaps=False,
                line=dict(color=SCHEME_COLORS[s % 8], width=2),
                hovertemplate=f"{name}<br>#%{{x}}: %{{y:+.4g}}<extra></extra>",
            )
        )
    bands = []
    if loss is not None:
        runs = spans(~loss.astype(bool).any(0))
        bands = [
            marks.vrect(a - 0.5, b - 0.5, fillcolor=OUT_OF_LOSS_SPAN, layer="below", line=dict(width=0))
            for a, b in (runs if len(runs) <= MAX_SPANS else [])
        ]
    boundary = dict(color=TURN_RULE_LIGHT, width=1, dash="dot")
    marks.add(
        fig,
        *bands,
        *(marks.vline(float(s) - 0.5, boundary) for s in turn_starts(turns)),
        marks.hline(0, marks.ZERO_LINE),
    )
    fig.update_xaxes(
        title_text="token position" + (" · grey bands and gaps: not in the loss" if loss is not None else "")
    )
    fig.update_yaxes(title_text="advantage")
    base_layout(fig, height=360 + 22 * max(0, len(labels) - 3))
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(b=40))
    return fig


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
    marks.add(fig, marks.hline(0, marks.ZERO_LINE))
    base_layout(fig, height=340 + 22 * max(0, len(labels) - 3))
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(b=40))
    return fig


def difference_matrix(
    adv: np.ndarray, ref: int, loss: np.ndarray | None = None
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(other schemes, Δ = advantage(scheme) − advantage(reference) [S−1, n], the cells it counts [S−1, n]).
    With ``loss`` a cell counts only where both schemes train the token; elsewhere Δ is NaN."""
    others = [s for s in range(adv.shape[0]) if s != ref]
    diff = adv[others] - adv[ref][None, :] if others else np.zeros((0, adv.shape[1]))
    valid = np.ones(diff.shape, bool) if loss is None else loss[others].astype(bool) & loss[ref].astype(bool)[None]
    return others, np.where(valid, diff, np.nan), valid


def make_difference_figure(
    labels: Sequence[str],
    adv: np.ndarray,
    ref: int,
    tokens: Sequence[str],
    loss: np.ndarray | None = None,
    notes: Sequence[str] | None = None,
) -> go.Figure:
    """Heatmap of advantage(scheme) − advantage(reference) per token, one row per other scheme, full width and
    48 px a row. ``loss`` ([S, n] bool): Δ only on tokens both schemes train; other cells grey. ``notes``: per
    scheme, what differs from the reference (shown in the hover)."""
    labels = [escape(x) for x in labels]
    others, diff, valid = difference_matrix(adv, ref, loss)
    raw = adv[others] - adv[ref][None, :] if others else diff
    # floor: float noise (1e-7 between two ways to the same ±1) must not fill the scale; 1% of the advantages' range
    scale = adv[loss.astype(bool)] if loss is not None and loss.any() else adv
    vmax = max(symmetric_range(diff), DIFF_FLOOR * symmetric_range(scale))
    toks = hover_tokens(tokens)
    x = np.arange(adv.shape[1])
    y = [f"{labels[s]} − ref." for s in others]
    fig = go.Figure()
    if loss is not None and (~valid).any():
        _grey_layer(fig, x, y, ~valid, raw, toks)
    text, token_line = cell_text(toks, diff.shape)
    note, note_line = None, ""
    if notes and diff.size <= NOTE_CELLS:  # what differs, in each cell's hover (on longer ones: the cards say it)
        note = np.broadcast_to(np.array([escape(notes[s]) for s in others], dtype=object)[:, None], diff.shape)
        note_line = "<br>%{customdata}"
    fig.add_trace(
        go.Heatmap(
            z=np.asarray(diff, dtype=np.float32),
            x=x,
            y=y,
            zmid=0,
            zmin=-vmax,
            zmax=vmax,
            colorscale=DIVERGING,
            text=text,
            customdata=note,
            hovertemplate="#%{x} %{y}<br>Δ %{z:+.4g}" + token_line + note_line + "<extra></extra>",
            colorbar=dict(title=dict(text="Δ advantage", side="right")),
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="token position" + (" · grey: not in both schemes' loss" if loss is not None else ""))
    return base_layout(
        fig, height=110 + 52 * max(len(others), 1), title=f"Δ advantage against the reference: {labels[ref]}"
    )


def make_group_scalar_figure(labels: Sequence[str], ids: Sequence[str], values: np.ndarray, selected: int) -> go.Figure:
    """Each rollout of the group (x) and its trajectory advantage under each scheme (grouped bars)."""
    labels = [escape(x) for x in labels]
    fig = go.Figure()
    x = [("▶ " if j == selected else "") + escape(i) for j, i in enumerate(short_ids(ids))]
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
    marks.add(fig, marks.hline(0, marks.ZERO_LINE))
    base_layout(fig, height=340 + 22 * max(0, len(labels) - 3))
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(b=40))
    return fig
