"""Reference lines and bands on a figure (turn boundaries, zero lines, out-of-loss spans), added in one layout
assignment.

Plotly's ``add_vline`` / ``add_hline`` / ``add_vrect`` / ``add_hrect`` re-validate the figure's whole tuple of
shapes on every call (~3 ms each, growing with the count): a 2,048-token trajectory's turn boundaries and
out-of-loss spans cost Compare and Learn 0.05–0.3 s of each first visit. These build the same shape dicts those
calls make (``tests/test_figures_marks.py`` compares them) and ``add`` sets them in one assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import plotly.graph_objects as go

from dashboard.theme import ZERO_LINE_COLOR

PLAIN = (("x", "y"),)  # the axes of a figure without subplots
ZERO_LINE = dict(color=ZERO_LINE_COLOR, width=1)  # y = 0 on advantage charts


def vline(x: float, line: dict, axes: Sequence[tuple[str, str]] = PLAIN) -> list[dict]:
    """A vertical line at data ``x`` across the full height of each subplot in ``axes`` ((xref, yref) pairs)."""
    return [dict(type="line", x0=x, x1=x, xref=xr, y0=0, y1=1, yref=f"{yr} domain", line=line) for xr, yr in axes]


def hline(y: float, line: dict) -> list[dict]:
    """A horizontal line at data ``y`` across the full width."""
    return [dict(type="line", x0=0, x1=1, xref="x domain", y0=y, y1=y, yref="y", line=line)]


def vrect(x0: float, x1: float, **style) -> list[dict]:
    """A band from data ``x0`` to ``x1`` over the full height (``style``: fillcolor, opacity, layer, line)."""
    return [dict(type="rect", x0=x0, x1=x1, xref="x", y0=0, y1=1, yref="y domain", **style)]


def hrect(y0: float, y1: float, **style) -> list[dict]:
    """A band from data ``y0`` to ``y1`` over the full width."""
    return [dict(type="rect", x0=0, x1=1, xref="x domain", y0=y0, y1=y1, yref="y", **style)]


def add(fig: go.Figure, *groups: Iterable[dict]) -> go.Figure:
    """Append every shape of ``groups`` (each a list from the functions above), in order, in one assignment."""
    new = [shape for group in groups for shape in group]
    if new:
        fig.layout.shapes = (*fig.layout.shapes, *new)
    return fig
