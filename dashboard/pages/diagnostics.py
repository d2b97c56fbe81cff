"""Diagnostics: the credit lints of the run under the sidebar scheme, most severe first; each finding opens the
token view of an affected trajectory with its flagged tokens outlined."""

import streamlit as st

from dashboard import diagnostics, schemes, services, state, tokens_html, widgets
from dashboard.diagnostics import FindingView
from dashboard.state import K, markdown_escape
from engine.io.text.tokenize import TokenizerError
from engine.lint import CHECKS, SEVERITIES

TOKEN_VIEW = "dashboard/pages/tokens.py"
SEVERITY_LABELS = {"error": "Errors", "warning": "Warnings", "info": "Info"}

ctx = widgets.require_context()
widgets.result_or_stop(ctx)
try:
    views = services.lint_findings(ctx.handle, ctx.config)
except TokenizerError as e:  # the text checks tokenize; the message names the tokenizer (and its cache file)
    st.error(f"The lints need the run's tokenizer, which cannot be loaded: {markdown_escape(str(e))}")
    st.stop()
except (ValueError, NotImplementedError) as e:
    st.error(state.md("The lints cannot run under this scheme: {}", e))
    st.stop()
ids = ctx.info.trajectory_ids
checked = services.lint_rows(ctx.handle)  # a big run's sample (rows of the whole run), or None: every row
n_checked = len(ids) if checked is None else len(checked)
ss = st.session_state


def open_in_token_view(v: FindingView, pick_key: str) -> None:
    """Button callback (runs before the next script run, so the sidebar's trajectory can still be set)."""
    row = ss[pick_key]
    ss[K.TRAJ] = ids[row]
    ss[K.HIGHLIGHT] = v.ident
    positions = v.tokens.get(row, ())
    ss[K.WINDOW] = diagnostics.first_window(positions, tokens_html.MAX_TEXT_TOKENS)


def pick_label(v: FindingView, row: int) -> str:
    n = v.row_tokens.get(row)
    return f"{ids[row]} · {diagnostics.nof(n, 'flagged token')}" if n else ids[row]


def draw_finding(v: FindingView) -> None:
    """One bordered block: the finding's card, a picker of affected trajectories with the link to the token view,
    and the longer explanation."""
    box = st.container(border=True, key=f"diagnostics-finding-{v.check}-{v.ordinal}")  # CSS class st-key-…
    box.html(diagnostics.finding_html(v, ids))
    rows = v.picker_rows()
    if rows:
        pick_key = K.DIAG_PICK_PREFIX + v.ident
        if ss.get(pick_key) not in rows:
            ss[pick_key] = ctx.traj if ctx.traj in rows else rows[0]
        left, right = box.columns([3, 1], vertical_alignment="bottom")
        left.selectbox(
            "Affected trajectory",
            rows,
            key=pick_key,
            format_func=lambda r: pick_label(v, r),
            help=f"Up to {diagnostics.MAX_ROWS_KEPT} affected trajectories are listed.",
        )
        if right.button(
            "Open in token view",
            key=f"diagnostics.open.{v.ident}",
            icon=":material/arrow_forward:",
            on_click=open_in_token_view,
            args=(v, pick_key),
            help="Shows this trajectory in the token view with the flagged tokens outlined.",
            width="stretch",
        ):
            st.switch_page(TOKEN_VIEW)
    with box.expander("Why it matters · reference"):
        st.html(diagnostics.explanation_html(v))


widgets.heading(
    "Diagnostics",
    ctx.info.name,
    f"Credit lints under the sidebar scheme ({schemes.encode(ctx.config)}): {len(CHECKS)} checks of where credit "
    "lands on tokens it should not, or where a convention distorts it. Most severe first.",
    note=""
    if checked is None
    else f"Big run: the lints check {n_checked:,} of {len(ids):,} trajectories (whole groups evenly spaced) with "
    "the run's own credit; the counts and shares below are the sample's.",
)
counts = diagnostics.severity_counts(views)
c = st.columns(4)
for col, sev in zip(c, SEVERITIES, strict=False):
    col.metric(f"{diagnostics.SEVERITY_ICON[sev]} {SEVERITY_LABELS[sev]}", counts[sev])
c[3].metric("Checks run", len(CHECKS), help="engine.lint.CHECKS; `python -m engine lint RUN` runs the same checks")

if not views:  # no st.stop(): the sidebar's engine status is written after the page has run
    st.success("No check fires on this run under this scheme.")
else:
    shown_severities = st.pills(
        "Show",
        list(SEVERITIES),
        selection_mode="multi",
        key=K.DIAG_SEVERITIES,
        format_func=lambda s: f"{SEVERITY_LABELS[s]} ({counts[s]})",
    )
    for v in views:
        if v.severity in shown_severities:
            draw_finding(v)
    st.caption("Findings table (this run, this scheme)")
    widgets.table_downloads(diagnostics.findings_table(views, n_checked), "diagnostics.table", f"{ctx.info.name}_lints")
