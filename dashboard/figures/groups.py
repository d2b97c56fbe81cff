"""Group-view figures: every rollout of one prompt, its score against the group mean ± std, its advantage."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from dashboard.figures import marks
from dashboard.theme import (
    BAR_OUTLINE,
    DIVERGING,
    GROUP_MEAN_COLOR,
    GROUP_STD_BAND,
    OUT_OF_LOSS,
    SELECTED_OUTLINE,
    UNKNOWN_COLOR,
    VERDICT_COLORS,
    VERDICT_LABELS,
    base_layout,
    diverging_css,
    symmetric_range,
)
from dashboard.tokens_html import escape

SEPARATORS = "/:|"  # path-like parts only: "rollout-1" stays whole


def short_ids(ids: Sequence[str]) -> list[str]:
    """The group's rollout ids without the prefix they share, cut at a separator ("…/rollout-1" for
    "competitive_coding_challenges/task-0/rollout-1"): long shared prefixes left the bar charts a sliver at 1024 px.
    Ids stay distinct; one id alone is kept whole."""
    ids = [str(i) for i in ids]
    if len(ids) < 2:
        return ids
    common = len(os.path.commonprefix(ids))
    cut = max((k + 1 for k in range(common) if ids[0][k] in SEPARATORS), default=0)
    return ["…" + i[cut:] for i in ids] if cut > 3 else ids


def _labels(ids: Sequence[str], selected: int) -> list[str]:
    return [("▶ " if j == selected else "") + escape(i) for j, i in enumerate(short_ids(ids))]


def make_group_scores_figure(
    ids: Sequence[str],
    scores: np.ndarray,
    mean: float,
    std: float,
    verdicts: np.ndarray,
    selected: int,
    title: str | None = None,
) -> go.Figure:
    """Bars = each rollout's score, coloured by its group's rejection-sampling verdict; a line at the group
    mean and a band of ± one std; ``title`` replaces the default one (mean and std)."""
    x = _labels(ids, selected)
    colors = [VERDICT_COLORS.get(int(v), UNKNOWN_COLOR) for v in verdicts]
    fig = go.Figure(
        go.Bar(
            x=x,
            y=scores,
            marker_color=colors,
            marker_line=dict(width=[3 if j == selected else 0 for j in range(len(x))], color=SELECTED_OUTLINE),
            customdata=[VERDICT_LABELS.get(int(v), "?") for v in verdicts],
            hovertemplate="%{x}<br>score %{y:.4g}<br>verdict %{customdata}<extra></extra>",
            name="score",
        )
    )
    marks.add(
        fig,
        marks.hrect(mean - std, mean + std, fillcolor=GROUP_STD_BAND, opacity=0.18, line=dict(width=0)),
        marks.hline(mean, dict(color=GROUP_MEAN_COLOR, width=2, dash="dash")),
    )
    fig.update_yaxes(title_text="score")
    return base_layout(fig, height=340, title=title or f"group mean {mean:.3g} (dashed) ± std {std:.3g} (band)")


def make_group_advantage_figure(
    ids: Sequence[str], adv: np.ndarray, selected: int, ytitle: str = "trajectory advantage"
) -> go.Figure:
    """Each rollout's trajectory advantage (mean over its loss tokens), on the diverging colour scale."""
    vmax = symmetric_range(adv, 1.0)
    colors, _ = diverging_css(adv, vmax)
    fig = go.Figure(
        go.Bar(
            x=_labels(ids, selected),
            y=adv,
            marker_color=colors,
            marker_line=dict(width=1, color=BAR_OUTLINE),
            hovertemplate="%{x}<br>advantage %{y:+.4g}<extra></extra>",
        )
    )
    marks.add(fig, marks.hline(0, marks.ZERO_LINE))
    fig.update_yaxes(title_text=ytitle)
    return base_layout(fig, height=320)


def make_group_heatmap_figure(
    ids: Sequence[str], adv: np.ndarray, selected: int, loss: np.ndarray | None = None
) -> go.Figure:
    """Rows = rollouts, columns = positions, colour = advantage (blank past each rollout's end). adv: [n, T]
    with NaN padding. ``loss`` ([n, T] bool, ``analysis.group_loss_matrix``): tokens outside the loss are grey
    (no gradient flows there; the hover still names the value computed) and left out of the colour range."""
    labels = _labels(ids, selected)
    z = adv
    fig = go.Figure()
    if loss is not None:
        out = ~loss.astype(bool) & np.isfinite(adv)
        z = np.where(out, np.nan, adv)
        if out.any():
            fig.add_trace(
                go.Heatmap(
                    z=np.where(out, 1.0, np.nan),
                    y=labels,
                    zmin=0,
                    zmax=1,
                    colorscale=[[0, OUT_OF_LOSS], [1, OUT_OF_LOSS]],
                    showscale=False,
                    customdata=adv,
                    hovertemplate="%{y} #%{x}<br>not in the loss: no gradient<br>(computed %{customdata:+.4g})"
                    "<extra></extra>",
                )
            )
    finite = z[np.isfinite(z)]
    vmax = symmetric_range(finite) if finite.size else 1.0
    fig.add_trace(
        go.Heatmap(
            z=z,
            y=labels,
            zmid=0,
            zmin=-vmax,
            zmax=vmax,
            colorscale=DIVERGING,
            hovertemplate="%{y} #%{x}<br>advantage %{z:+.4g}<extra></extra>",
            colorbar=dict(title=dict(text="advantage", side="right")),
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(
        title_text="token position" + (" · grey: not in the loss (no gradient)" if loss is not None else "")
    )
    return base_layout(fig, height=80 + 34 * len(ids))
