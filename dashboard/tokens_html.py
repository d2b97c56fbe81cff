"""Token text as coloured HTML. Every piece of run data that reaches HTML goes through ``escape``.

A run is untrusted input: token text, trajectory ids, metadata and reward component names may contain
``<script>`` or ``</div>``. ``escape`` (``html.escape`` with quotes) is the one way such text enters markup;
the builders here and the pages that write HTML use it and nothing else.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd

from dashboard.theme import (
    HIGHLIGHT_COLOR,
    HIGHLIGHT_GLOW,
    SWATCH_TEXT,
    TEXT_BOX_BACKGROUND,
    TEXT_BOX_BORDER,
    TOKEN_CSS,
    diverging_css,
)

OVERLAYS = {
    "info": "tool/info tokens hatched",
    "loss": "tokens outside the loss mask faded and struck through",
    "attention": "attended tokens outlined",
}
MAX_TEXT_TOKENS = 1000  # tokens drawn as text per window (keeps the browser quick); the heatmap shows all
# Tokens a Diagnostics finding flags: a solid orange outline over any overlay, never faded by the loss overlay.
HIGHLIGHT_CSS = (
    f"<style>.cl-tokens .cl-tk.cl-hl {{ outline: 2px solid {HIGHLIGHT_COLOR}; outline-offset: 0; opacity: 1;"
    f" box-shadow: 0 0 0 3px {HIGHLIGHT_GLOW}; }}</style>"
)


def overlay_label(name: str) -> str:
    """The token view's overlay pill for ``name`` (a key of ``OVERLAYS``): "info" → "info mask"."""
    return f"{name} mask"


def escape(value: object) -> str:
    """HTML-escape anything (``str()`` first), quotes included, so it is safe in text and in attributes."""
    return html.escape(str(value), quote=True)


def _shown(text: str) -> tuple[str, str]:
    """(inside, after): the escaped token text with each newline drawn as ↵, and the line breaks to put after
    the token's box (so a coloured box never spills onto the next line). Empty pieces show ∅."""
    if text == "":
        return "<span class='cl-nl'>∅</span>", ""
    breaks = text.count("\n")
    return escape(text).replace("\n", "<span class='cl-nl'>↵</span>"), "<br>" * breaks


# A newline inside a title attribute, as a character reference: the markup stays one line per turn block, and
# Streamlit dedents every st.html body line by line (a 1,000-token window had 9,000 lines: ~0.1 s of its run).
TITLE_NL = "&#10;"


def _titles(part: pd.DataFrame, qcols: Sequence[str]) -> list[str]:
    """The escaped hover title of each row of ``part``: position, turn, role, masks, every quantity, the token.
    Built column by column (numbers need no escaping; the role and the token's repr are escaped)."""
    nl = TITLE_NL
    cols = [part[c].tolist() for c in ("position", "turn", "role", "attention", "action", "loss", "token")]
    roles = {r: escape(r) for r in set(cols[2])}
    heads = [
        f"#{p} · turn {t} · {roles[r]}{nl}attention {a} · action {x} · loss {lo}"
        for p, t, r, a, x, lo in zip(*cols[:6], strict=True)
    ]
    values = [[f"{nl}{q}: {v:+.5g}" for v in part[q].tolist()] for q in (escape(c) for c in qcols)]
    tails = [f"{nl}token: {escape(repr(tok))}" for tok in cols[6]]
    return ["".join(parts) for parts in zip(heads, *values, tails, strict=True)]


def windows(n: int, size: int = MAX_TEXT_TOKENS) -> int:
    """How many text windows of ``size`` tokens an ``n``-token trajectory needs."""
    return max(1, -(-n // size))


def token_html(
    table: pd.DataFrame,
    quantity: str | None,
    vmax: float,
    overlays: Sequence[str] = ("info", "loss"),
    window: tuple[int, int] | None = None,
    turn_labels: dict[int, str] | None = None,
    big: bool = False,
    highlight: Collection[int] = (),
) -> str:
    """Coloured tokens of one trajectory (``tables.token_table`` rows ``window``), grouped in turn blocks.

    Background = ``quantity`` on the diverging scale ±``vmax`` (None: no colour); the title (hover) lists every
    quantity.
    ``turn_labels`` maps a 1-based turn to the text shown above its block (escaped here). Tokens at the positions
    in ``highlight`` get class ``cl-hl`` (an orange outline; the page says why). The token view draws it through
    the shared cache (``widgets.cached``): a rerun or another session on the same view reuses the markup."""
    start, stop = window or (0, len(table))
    part = table.iloc[start:stop]
    qcols = [c for c in table.columns if c not in ("position", "turn", "role", "token") and table[c].dtype.kind == "f"]
    values = part[quantity].to_numpy() if quantity is not None else np.zeros(len(part))
    bg, fg = diverging_css(values, vmax)
    classes = "cl-tokens" + "".join(f" cl-show-{o}" for o in overlays if o in OVERLAYS)
    out = [TOKEN_CSS, HIGHLIGHT_CSS if len(highlight) else ""]
    out.append(f"<div class='{'cl-big' if big else ''}'><div class='{classes}'>")
    marked = {int(p) for p in highlight if start <= p < stop}
    turn = None
    titles = _titles(part, qcols)
    cols = zip(*(part[c].tolist() for c in ("position", "turn", "role", "token", "attention", "loss")), strict=True)
    role_cls: dict[str, str] = {}
    for (pos, t, role, token, att, loss), b, f, title in zip(cols, bg, fg, titles, strict=True):
        if t != turn:
            if turn is not None:
                out.append("</div>")
            turn = t
            label = (turn_labels or {}).get(int(turn), f"Turn {turn}")
            out.append(f"<div class='cl-turn'><span class='cl-turn-head'>{escape(label)}</span>")
        if role not in role_cls:
            role_cls[role] = f"cl-tk cl-r-{escape(role)} "
        cls = role_cls[role] + ("cl-loss" if loss else "cl-noloss")
        if att:
            cls += " cl-att"
        if pos in marked:
            cls += " cl-hl"
        inside, after = _shown(token)
        out.append(f"<span class='{cls}' style='background-color:{b};color:{f}' title='{title}'>{inside}</span>{after}")
    if turn is not None:
        out.append("</div>")
    if stop < len(table):
        out.append(f"<div class='cl-pad'>… {len(table) - stop} more tokens in the next windows</div>")
    out.append("</div></div>")
    return "".join(out)


def legend_html(quantity: str, vmax: float, overlays: Sequence[str] = ()) -> str:
    """The colour legend: −vmax … 0 … +vmax for ``quantity``, plus swatches for the overlays shown."""
    lo, mid, hi = (diverging_css(np.array([v]), vmax)[0][0] for v in (-vmax, 0.0, vmax))
    parts = [
        TOKEN_CSS,
        "<div class='cl-legend'>",
        f"<b>{escape(quantity)}</b>",
        f"<span class='cl-swatch' style='background:{lo};color:{SWATCH_TEXT}'>{-vmax:+.3g}</span>",
        "<span class='cl-bar'></span>",
        f"<span class='cl-swatch' style='background:{hi};color:{SWATCH_TEXT}'>{vmax:+.3g}</span>",
        f"<span class='cl-swatch' style='background:{mid}'>0</span>",
    ]
    if "info" in overlays:
        parts.append("<span class='cl-tokens cl-show-info'><span class='cl-tk cl-r-tool'> tool/info </span></span>")
    if "loss" in overlays:
        parts.append("<span class='cl-tokens cl-show-loss'><span class='cl-tk cl-noloss'> not in loss </span></span>")
    if "attention" in overlays:
        parts.append("<span class='cl-tokens cl-show-att'><span class='cl-tk cl-att'> attended </span></span>")
    parts.append("</div>")
    return "".join(parts)


def text_block(text: str, big: bool = False) -> str:
    """Escaped free text (a prompt, metadata) in a readable box."""
    size = "1.2rem" if big else "0.9rem"
    return (
        f"<div style='white-space:pre-wrap;font-size:{size};background:{TEXT_BOX_BACKGROUND};border-radius:6px;"
        f"padding:8px 12px;border:1px solid {TEXT_BOX_BORDER}'>{escape(text)}</div>"
    )


def big_label_html(text: str) -> str:
    """A run's text (a rollout id) as a heading in the Learn page's big type, escaped."""
    return f"<div style='font-size:1.15rem;font-weight:600'>{escape(text)}</div>"


def scheme_line_html(traj_id: str, profile: str, estimator: str, placement: str) -> str:
    """The Learn page's line naming the sidebar's trajectory and scheme, in big type, every name escaped."""
    return (
        "<div style='font-size:1.15rem'>Trajectory <code>"
        + escape(traj_id)
        + "</code> under profile <b>"
        + escape(profile)
        + "</b>, estimator <b>"
        + escape(estimator)
        + "</b>, placement <b>"
        + escape(placement)
        + "</b> (change them in the sidebar).</div>"
    )
