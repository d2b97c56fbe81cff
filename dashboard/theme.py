"""Colours, token styles and the shared figure layout: defined here once, used by every page and figure.

One diverging scale (red < 0 < blue, white at 0) colours every signed quantity, in token HTML and in Plotly
heatmaps alike; one qualitative palette tells schemes apart; each token role has one overlay style.
Every colour the dashboard writes is a constant here, named by what it marks (tests/test_theme.py checks that
no other file writes one); two places that mean the same thing share one constant.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

# Diverging scale centred at 0 (ColorBrewer RdBu, colour-blind safe, reads on a projector).
DIVERGING_STOPS: tuple[tuple[float, str], ...] = (
    (0.0, "#b2182b"),
    (0.25, "#ef8a62"),
    (0.5, "#f7f7f7"),
    (0.75, "#67a9cf"),
    (1.0, "#2166ac"),
)
DIVERGING = [[p, c] for p, c in DIVERGING_STOPS]  # Plotly colorscale
TEXT_ON_DARK = "#ffffff"  # text on a saturated background (the scale's ends, severity badges)
TEXT_ON_LIGHT = "#111111"  # text on a pale background (the scale's middle)
SWATCH_TEXT = "#fff"  # text on the legends' end swatches: TEXT_ON_DARK written short (same colour)

# Okabe–Ito: one colour per scheme in comparisons (up to 6 schemes, plus two spares).
SCHEME_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

# Token roles and group verdicts.
ROLE_COLORS = {"model": "#cfe0ef", "tool": "#8d8d8d", "user": "#9575cd", "system": "#7986cb"}
ROLE_LABELS = {
    "model": "model (action)",
    "tool": "tool / info",
    "user": "user",
    "system": "system / template",
}
VERDICT_LABELS = {0: "solve_none", 1: "partial", 2: "solve_all"}
VERDICT_COLORS = {0: "#d6604d", 1: "#78909c", 2: "#4d9f6f"}
UNKNOWN_COLOR = "#777"  # a category without a colour of its own (an unknown verdict or reward kind)

# Text and surfaces of the pages' own HTML.
TEXT_COLOR = "#212121"  # figure text (base_layout)
SECONDARY_TEXT = "#37474f"  # a line under a heading: a scheme card's note, a value under its token
MUTED_TEXT = "#5f6b73"  # captions, prefixes, meta lines; tool tokens in the aligned grid
FAINT_TEXT = "#78909c"  # the least: position numbers, token counts
STARTUP_TEXT = "#57606a"  # app.py's note while the engine is imported
PAGE_BACKGROUND = "#ffffff"  # what a sticky table column paints over the cells that scroll under it
CARD_BACKGROUND = "#f7f9fa"  # a scheme's card on the compare page
CARD_BORDER = "#d0d7de"  # a finding card's rule before its severity colours it
CODE_BACKGROUND = "#eef1f4"  # inline code on finding cards and highlight notes
TEXT_BOX_BACKGROUND = "#f5f7f9"  # free text (a prompt, metadata) in a box
TEXT_BOX_BORDER = "#e0e6ea"
TABLE_BORDER = "#cfd8dc"  # around a scrolling table
TABLE_HEAD_RULE = "#90a4ae"  # under a table's head, right of its label column
TABLE_RULE = "#eceff1"  # between a table's rows
TOKEN_ROW_BACKGROUND = "#fafafa"  # the aligned grid's row of token texts

# Lint severities: (badge background, badge text, card border).
SEVERITY_COLORS = {
    "error": ("#b71c1c", TEXT_ON_DARK, "#e57373"),
    "warning": ("#e65100", TEXT_ON_DARK, "#ffb74d"),
    "info": ("#1565c0", TEXT_ON_DARK, "#90caf9"),
}
# Tokens a Diagnostics finding flags: an orange outline with a soft glow; the note that says why, in orange too.
HIGHLIGHT_COLOR = "#f57c00"
HIGHLIGHT_GLOW = "rgba(245,124,0,0.25)"  # HIGHLIGHT_COLOR at 25%
HIGHLIGHT_NOTE_BORDER = "#ffcc80"
HIGHLIGHT_NOTE_BACKGROUND = "#fff8e1"

# Data-fact badges (dashboard/badges.py): (pill background, pill text) per badge; a badge no row has is greyed.
BADGE_COLORS = {
    "truncated": ("#fde6cc", "#8a4b00"),
    "synthesized": ("#ece3fb", "#5b2a9e"),
    "excluded": ("#e6e8eb", "#3d464d"),
    "singleton": ("#dcebf7", "#0b4f82"),
    "zero-variance": ("#fbe0de", "#9b1c14"),
}
BADGE_OFF_COLORS = ("#f3f4f5", "#8a949b")

# Tokens the loss leaves out (no gradient flows there) and tool/info tokens.
OUT_OF_LOSS = "#cfd4d9"  # heatmap cells of tokens outside the loss
OUT_OF_LOSS_SPAN = "rgba(120,130,140,0.13)"  # line charts: positions no scheme trains
IN_LOSS_FILL = "#37474f"  # the token strip's "in the loss"
OUT_OF_LOSS_FILL = "#e4e7ea"  # the token strip's "not in the loss"; the aligned grid's cells outside a loss
OUT_OF_LOSS_INK = "#607d8b"  # a value outside the loss (aligned grid); the strike-through of such a token
OUT_OF_LOSS_HATCH = "rgba(70,70,70,0.28)"  # the aligned grid's hatching of those cells
INFO_HATCH = "rgba(60,60,60,0.22)"  # hatching of tool/info tokens
INFO_OUTLINE = "#757575"  # their dashed outline

# Figure marks.
GRID_COLOR = "#e3e8ec"
ZERO_LINE_COLOR = "#455a64"  # y = 0 on advantage charts
TURN_RULE = "#37474f"  # a turn boundary: dotted line on heatmaps, rule in the aligned grid
TURN_RULE_LIGHT = "#90a4ae"  # a turn boundary on line charts (the lines stay readable over it)
GROUP_MEAN_COLOR = "#333333"
GROUP_STD_BAND = "#90a4ae"  # group mean ± std
MEAN_LINE_COLOR = "#333"  # a distribution's mean: GROUP_MEAN_COLOR written short (same colour)
LABEL_BACKGROUND = "rgba(255,255,255,0.8)"  # behind a label written over the data
BAR_OUTLINE = "#455a64"  # rollout bars coloured by advantage
SELECTED_OUTLINE = "#000"  # the selected rollout's bar
MARKER_OUTLINE = "#333"  # scatter points
ERROR_BAR_COLOR = "#546e7a"  # ± std on bars
TURN_REWARD_COLOR = "#9e9e9e"  # mean turn reward beside the advantages
UNCHANGED_LINE = "#9e9e9e"  # the designer's y = x (before = after)
RANK_CHANGE_COLORS = {"up": "#1a9850", "down": "#b2182b"}  # the designer's slope chart: moved up / down

FONT_FAMILY = "Inter, 'Source Sans Pro', 'Segoe UI', Helvetica, Arial, sans-serif"
MONO_FAMILY = "'JetBrains Mono', 'Fira Code', Menlo, Consolas, monospace"

# Token view CSS. Classes: cl-tk (one token), cl-r-<role> (role overlay), cl-loss / cl-noloss (in or out of
# the loss mask; out is faded under the loss overlay), cl-att (attended), cl-turn (a turn block), cl-turn-head.
TOKEN_CSS = f"""
<style>
.cl-tokens {{ font-family: {MONO_FAMILY}; font-size: 0.92rem; line-height: 1.95; overflow-wrap: anywhere; }}
.cl-big .cl-tokens {{ font-size: 1.35rem; line-height: 2.0; }}
.cl-turn {{ border-left: 4px solid #cfd8dc; padding: 2px 0 4px 10px; margin: 0 0 8px 0; }}
.cl-turn-head {{ display: block; font-family: {FONT_FAMILY}; font-size: 0.8rem; color: #455a64;
  font-weight: 600; letter-spacing: 0.02em; margin-bottom: 2px; }}
.cl-big .cl-turn-head {{ font-size: 1.05rem; }}
.cl-tk {{ white-space: pre-wrap; border-radius: 3px; padding: 1px 0; box-decoration-break: clone;
  -webkit-box-decoration-break: clone; }}
.cl-nl {{ color: #90a4ae; }}
.cl-show-info .cl-r-tool, .cl-show-info .cl-r-user, .cl-show-info .cl-r-system {{
  background-image: repeating-linear-gradient(135deg, {INFO_HATCH} 0 2px, transparent 2px 6px);
  outline: 1px dashed {INFO_OUTLINE}; outline-offset: -1px; }}
.cl-show-info .cl-r-user, .cl-show-info .cl-r-system {{ outline-color: #5c6bc0; }}
.cl-show-loss .cl-noloss {{ opacity: 0.42; text-decoration: line-through; text-decoration-color: {OUT_OF_LOSS_INK}; }}
.cl-show-att .cl-att {{ outline: 1px dotted #263238; outline-offset: -1px; }}
.cl-legend {{ font-family: {FONT_FAMILY}; font-size: 0.85rem; display: flex; align-items: center; gap: 10px;
  flex-wrap: wrap; margin: 4px 0 10px 0; }}
.cl-legend .cl-bar {{ width: 220px; height: 14px; border-radius: 3px; border: 1px solid #bbb;
  background: linear-gradient(90deg, {", ".join(c for _, c in DIVERGING_STOPS)}); }}
.cl-legend .cl-swatch {{ display: inline-block; min-width: 46px; text-align: center; border-radius: 3px;
  padding: 0 4px; font-family: {MONO_FAMILY}; }}
.cl-pad {{ color: #90a4ae; font-style: italic; font-family: {FONT_FAMILY}; font-size: 0.8rem; }}
.cl-big {{ font-size: 1.2rem; }}
</style>
"""


def _hex_to_rgb(c: str) -> np.ndarray:
    return np.array([int(c[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


_STOP_POS = np.array([p for p, _ in DIVERGING_STOPS])
_STOP_RGB = np.stack([_hex_to_rgb(c) for _, c in DIVERGING_STOPS])  # (S, 3)


def diverging_rgb(values: np.ndarray, vmax: float) -> np.ndarray:
    """RGB [n, 3] (0–255) of ``values`` on the diverging scale, ±``vmax`` at the ends, 0 white."""
    v = np.asarray(values, dtype=float)
    x = 0.5 + 0.5 * np.clip(v / vmax, -1.0, 1.0) if vmax > 0 else np.full(v.shape, 0.5)
    x = np.where(np.isfinite(x), x, 0.5)
    return np.stack([np.interp(x, _STOP_POS, _STOP_RGB[:, c]) for c in range(3)], axis=-1)


def diverging_css(values: np.ndarray, vmax: float) -> tuple[list[str], list[str]]:
    """(background, text colour) CSS strings per value: white text on saturated backgrounds."""
    rgb = diverging_rgb(values, vmax)
    luminance = rgb @ np.array([0.299, 0.587, 0.114])
    bg = [f"#{int(r):02x}{int(g):02x}{int(b):02x}" for r, g, b in rgb.round()]
    fg = [TEXT_ON_DARK if lum < 120 else TEXT_ON_LIGHT for lum in luminance]
    return bg, fg


def symmetric_range(values: np.ndarray, quantile: float = 0.99) -> float:
    """A robust ± range for a diverging scale: the ``quantile`` of |values| (max if that is 0); 1 if all 0."""
    a = np.abs(np.asarray(values, dtype=float))
    a = a[np.isfinite(a)]
    if a.size == 0:
        return 1.0
    v = float(np.quantile(a, quantile))
    if v <= 0:
        v = float(a.max())
    return v if v > 0 else 1.0


AXIS_STYLE = dict(gridcolor=GRID_COLOR, zerolinecolor=GRID_COLOR, linecolor=GRID_COLOR, automargin=True)


def _merged(base: dict, extra: dict) -> dict:
    """``base`` with ``extra`` written over it, nested dicts merged key by key (as ``update_layout`` merges)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def base_layout(fig: go.Figure, height: int = 360, title: str | None = None, big: bool = False) -> go.Figure:
    """The one layout every figure shares: readable fonts, tight margins, white background, light grid lines on
    every axis (automargin: Streamlit's chart theme turns it on in the page; exported images need it set here)."""
    size = 17 if big else 14
    ours = dict(
        height=height,
        margin=dict(l=10, r=10, t=48 if title else 20, b=10),
        font=dict(family=FONT_FAMILY, size=size, color=TEXT_COLOR),
        title=dict(text=title, font=dict(size=size + 2), x=0.01, xanchor="left") if title else {},
        paper_bgcolor="white",
        plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1.0),
        hoverlabel=dict(font=dict(family=MONO_FAMILY, size=13)),
    )
    # One assignment of the merged layout, not update_layout + update_xaxes + update_yaxes: each of those goes
    # through Plotly's change dispatch (18-35 ms a figure, the largest part of building one; this takes ~8 ms).
    # Not template="plotly_white" either: resolving a template deep-copies it (~30 ms a figure).
    # Without the template: assigning a layout puts Plotly's default template back in place unvalidated
    # (``BaseFigure._initialize_layout_template``), whereas passing it along validated its ~7 KB of settings again,
    # 70% of this function's time (12 -> 6 ms a figure). No figure here sets a template of its own.
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)
    for name in {"xaxis", "yaxis", *(k for k in layout if k.startswith(("xaxis", "yaxis")))}:
        ours[name] = AXIS_STYLE
    fig.layout = _merged(layout, ours)
    return fig


def translucent(hex_color: str, alpha: float) -> str:
    """``hex_color`` (``#rrggbb``) at opacity ``alpha``, as CSS ``rgba(...)`` (a band behind a line of that colour)."""
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"
