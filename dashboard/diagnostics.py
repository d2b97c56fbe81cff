"""Credit lints for the Diagnostics page and the token view's highlights: pure tables and HTML (no Streamlit).

``summarize`` turns the engine's ``Finding`` list into ``FindingView``s that are cheap to keep in a cache: a big
run can flag ~10⁶ token positions, so each finding keeps the positions of its first ``MAX_ROWS_KEPT`` rows, at
most ``MAX_HIGHLIGHT`` per row (as int32 arrays), plus every row's uncapped count. A highlight names a finding by
``FindingView.ident`` (check name and ordinal): the token view looks it up again under the scheme it shows, so a
highlight never points at positions of another scheme. Every string from the run or the engine goes through
``tokens_html.escape``: messages quote reward component names and trajectory ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dashboard.theme import (
    CARD_BORDER,
    CODE_BACKGROUND,
    HIGHLIGHT_COLOR,
    HIGHLIGHT_NOTE_BACKGROUND,
    HIGHLIGHT_NOTE_BORDER,
    MUTED_TEXT,
    SEVERITY_COLORS,
)
from dashboard.tokens_html import HIGHLIGHT_CSS, MAX_TEXT_TOKENS, escape
from engine.lint import CHECKS, SEVERITIES
from engine.lint.model import SEVERITY_RANK

MAX_HIGHLIGHT = 2000  # token positions kept (and outlined) per trajectory of a finding
MAX_ROWS_KEPT = 500  # trajectories per finding whose positions are kept; the picker offers these
IDS_SHOWN = 5  # affected trajectory ids written out on a finding's card
SEVERITY_ICON = {"error": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}


@dataclass(frozen=True, eq=False)
class FindingView:
    """One lint finding as the dashboard keeps it (read-only: the cache shares it).

    rows: every affected batch row (= trajectory index), sorted. tokens: row → flagged positions (int32, at most
    ``MAX_HIGHLIGHT``) for the first ``MAX_ROWS_KEPT`` rows that have any. row_tokens: row → number of flagged
    positions, uncapped, for the same rows. num_tokens: flagged positions over all rows."""

    severity: str
    check: str
    ordinal: int  # the k-th finding this check reported (a check may report several)
    message: str
    explanation: str
    description: str
    reference: str
    rows: tuple[int, ...]
    tokens: dict[int, np.ndarray]
    row_tokens: dict[int, int]
    count: int
    num_tokens: int

    @property
    def ident(self) -> str:
        """What a highlight stores: ``check`` or ``check#k`` for the k-th finding of the same check."""
        return self.check if self.ordinal == 0 else f"{self.check}#{self.ordinal}"

    def picker_rows(self) -> list[int]:
        """The rows a user can open: those with kept positions, else (whole-trajectory findings) the first rows."""
        return list(self.tokens) if self.tokens else list(self.rows[:MAX_ROWS_KEPT])


def summarize(findings: Sequence, cap: int = MAX_HIGHLIGHT, rows_kept: int = MAX_ROWS_KEPT) -> list[FindingView]:
    """``engine.lint.Finding``s → ``FindingView``s, most severe first (stable: the engine's check order within a
    severity), token positions capped per row and rows with positions capped per finding."""
    seen: dict[str, int] = {}
    out = []
    for f in sorted(findings, key=lambda f: SEVERITY_RANK[f.severity]):
        ordinal = seen.get(f.check, 0)
        seen[f.check] = ordinal + 1
        check = CHECKS.get(f.check)
        kept = sorted(f.tokens)[:rows_kept]
        out.append(
            FindingView(
                severity=f.severity,
                check=f.check,
                ordinal=ordinal,
                message=f.message,
                explanation=f.explanation or (check.explanation if check else ""),
                description=check.description if check else "",
                reference=check.reference if check else "",
                rows=tuple(int(r) for r in f.rows),
                tokens={int(r): np.asarray(f.tokens[r][:cap], dtype=np.int32) for r in kept},
                row_tokens={int(r): len(f.tokens[r]) for r in kept},
                count=int(f.count),
                num_tokens=int(sum(len(v) for v in f.tokens.values())),
            )
        )
    return out


def remap_rows(views: Sequence[FindingView], rows: np.ndarray) -> list[FindingView]:
    """Views found on a sample (its row i is row ``rows[i]`` of the whole run) with the run's row indices."""
    m = [int(r) for r in rows]
    return [
        dataclasses.replace(
            v,
            rows=tuple(m[r] for r in v.rows),
            tokens={m[r]: pos for r, pos in v.tokens.items()},
            row_tokens={m[r]: n for r, n in v.row_tokens.items()},
        )
        for v in views
    ]


def nof(n: int, noun: str) -> str:
    """A count with thousands separators and its noun: 1 flagged token, 2,500 flagged tokens, 3 trajectories."""
    plural = noun if n == 1 else (noun[:-1] + "ies" if noun.endswith("y") else noun + "s")
    return f"{n:,} {plural}"


def find(views: Sequence[FindingView], ident: str | None) -> FindingView | None:
    return next((v for v in views if v.ident == ident), None)


def severity_counts(views: Sequence[FindingView]) -> dict[str, int]:
    return {s: sum(v.severity == s for v in views) for s in SEVERITIES}


def findings_table(views: Sequence[FindingView], n_rows: int) -> pd.DataFrame:
    """One row per finding: severity, check, trajectories affected (of ``n_rows``), tokens flagged, message."""
    return pd.DataFrame(
        {
            "severity": [v.severity for v in views],
            "check": [v.check for v in views],
            "trajectories": [f"{len(v.rows)} / {n_rows}" for v in views],
            "tokens": [v.num_tokens if v.num_tokens else None for v in views],
            "message": [v.message for v in views],
        }
    ).astype({"tokens": "Int64"})


def first_window(positions: np.ndarray, window_size: int) -> int:
    """1-based text window of the token view that shows the first flagged position (1 without positions)."""
    return int(positions[0]) // window_size + 1 if len(positions) else 1


# ------------------------------------------------------------------------------------------------ HTML
# (a backslash at a line's end continues the CSS line: the colour names made two lines too long)
CARD_CSS = f"""<style>
.cl-finding {{ border-left: 5px solid {CARD_BORDER}; padding: 2px 0 2px 12px; margin: 0; }}
.cl-sev {{ display: inline-block; border-radius: 4px; padding: 0 7px; font-size: 0.78rem;
  font-weight: 700; letter-spacing: 0.03em; text-transform: uppercase; vertical-align: 1px; }}
.cl-finding .cl-check {{ font-weight: 700; font-size: 1.02rem; margin-left: 6px; }}
.cl-finding .cl-msg {{ margin: 4px 0 2px 0; font-size: 0.95rem; overflow-wrap: anywhere; }}
.cl-finding .cl-meta {{ color: {MUTED_TEXT}; font-size: 0.85rem; overflow-wrap: anywhere; }}
.cl-finding code, .cl-hl-note code {{ font-size: 0.85em; background: {CODE_BACKGROUND}; border-radius: 3px; \
padding: 0 3px; }}
.cl-why {{ font-size: 0.92rem; line-height: 1.5; }}
.cl-why .cl-ref {{ color: {MUTED_TEXT}; margin-top: 6px; }}
.cl-hl-note {{ border: 1px solid {HIGHLIGHT_NOTE_BORDER}; border-left: 6px solid {HIGHLIGHT_COLOR}; \
background: {HIGHLIGHT_NOTE_BACKGROUND}; border-radius: 6px;
  padding: 8px 12px; font-size: 0.93rem; overflow-wrap: anywhere; }}
</style>"""


SWATCH = "<span class='cl-tokens'><span class='cl-tk cl-hl'>Outlined</span></span>"  # drawn as a flagged token


def _list(numbers: list[int], shown: int = 8) -> str:
    return ", ".join(map(str, numbers[:shown])) + (" …" if len(numbers) > shown else "")


def _badge(severity: str) -> str:
    bg, fg, _ = SEVERITY_COLORS[severity]
    return f"<span class='cl-sev' style='background:{bg};color:{fg}'>{escape(severity)}</span>"


def _ids(rows: Sequence[int], ids: Sequence[str], shown: int = IDS_SHOWN) -> str:
    names = ", ".join(f"<code>{escape(ids[r])}</code>" for r in rows[:shown])
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return names + more


def finding_html(v: FindingView, ids: Sequence[str]) -> str:
    """A finding's card: severity, check, the one-line message, and what it affects (trajectory ids escaped)."""
    n = len(ids)
    tokens = f" · {nof(v.num_tokens, 'flagged token')}" if v.num_tokens else " · whole trajectories (no single tokens)"
    affected = f"{len(v.rows):,} of {nof(n, 'trajectory')}{tokens}" + (f": {_ids(v.rows, ids)}" if v.rows else "")
    return (
        f"{CARD_CSS}<div class='cl-finding' style='border-left-color:{SEVERITY_COLORS[v.severity][2]}'>"
        f"{_badge(v.severity)}<span class='cl-check'>{escape(v.check)}</span>"
        f"<div class='cl-msg'>{escape(v.message)}</div><div class='cl-meta'>{affected}</div></div>"
    )


def explanation_html(v: FindingView) -> str:
    """The longer explanation with the check's description and its reference (docs/conventions/ section,
    upstream issue, paper)."""
    return (
        f"{CARD_CSS}<div class='cl-why'><div><b>{escape(v.description)}</b></div>"
        f"<div>{escape(v.explanation)}</div>"
        f"<div class='cl-ref'>Reference: {escape(v.reference or '–')}</div></div>"
    )


def highlight_note_html(
    v: FindingView | None, ident: str, row: int, traj_id: str, window: tuple[int, int] | None = None
) -> str:
    """Why tokens of trajectory ``row`` are outlined (or why none are), for the token view.

    ``window`` is the (start, stop) of the text shown, to say where flagged tokens outside it are."""
    if v is None:
        return (
            f"{CARD_CSS}<div class='cl-hl-note'>Highlight: the finding <code>{escape(ident)}</code> does not fire on "
            "this run under the current scheme, so nothing is outlined.</div>"
        )
    head = f"{_badge(v.severity)} <b>{escape(v.check)}</b>: {escape(v.message)}"
    total = v.row_tokens.get(row, 0)
    if row not in v.rows:
        what = f"Trajectory <code>{escape(traj_id)}</code> is not among the {len(v.rows):,} it flags: nothing outlined."
    elif row in v.tokens:
        pos = v.tokens[row]
        kept = (
            f"the first {len(pos):,} of {nof(total, 'flagged token')}"
            if total > len(pos)
            else nof(total, "flagged token")
        )
        what = f"{SWATCH} in orange: {kept} of this trajectory."
        if window is not None:
            inside = int(((pos >= window[0]) & (pos < window[1])).sum())
            if inside < len(pos):
                here = sorted({int(p) // MAX_TEXT_TOKENS + 1 for p in pos} - {window[0] // MAX_TEXT_TOKENS + 1})
                where = f"window{'s' if len(here) > 1 else ''} {_list(here)}"
                what += f" This text window shows {inside:,} of them; the others are in {where}."
    elif v.num_tokens:
        what = f"Flagged, but only the first {MAX_ROWS_KEPT} trajectories' tokens are kept: nothing outlined here."
    else:
        what = "The finding concerns this whole trajectory (no single tokens to outline)."
    return f"{CARD_CSS}{HIGHLIGHT_CSS}<div class='cl-hl-note'>Highlight from Diagnostics · {head}<br>{what}</div>"
