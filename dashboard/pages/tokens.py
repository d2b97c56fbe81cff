"""Token view: one trajectory as coloured text, a quantities × positions heatmap, and a per-turn table."""

import streamlit as st

from dashboard import analysis, badges, diagnostics, services, state, tables, tokens_html, widgets
from dashboard.figures.tokens import make_token_heatmap_figure
from dashboard.state import K
from dashboard.tables import QUANTITY_HELP
from dashboard.theme import symmetric_range
from engine.lint.thresholds import LOGGED_ADVANTAGE_TOL

ctx = widgets.require_context()
res = widgets.result_or_stop(ctx)
table = services.token_table(ctx.handle, ctx.config, ctx.traj)
summary = services.trajectory_summary(ctx.handle, ctx.config).iloc[ctx.traj]
widgets.heading(
    "Token view",
    summary["id"],
    f"{ctx.info.name} · group {summary['group']} · {summary['tokens']} tokens · {summary['turns']} turns",
)
metadata = ctx.handle.run.trajectories[ctx.traj].metadata
flags = badges.trajectory_badges(ctx.handle.run, services.trajectory_summary(ctx.handle, ctx.config), ctx.traj)
if flags:
    st.html(badges.pills_html(flags, badges.synthesized_fields(metadata), prefix="This trajectory:"))

row = st.container(horizontal=True, gap="large")  # metrics of their own width: 4 equal columns cut "0.783 ± 0"
row.metric(
    "S" + tables.score_words(ctx.info, ctx.config, res.placement)[1:],
    f"{summary['score']:.3g}",
    help=f"Σ of the token rewards after placement ({res.placement}): what outcome estimators see",
    width="content",
)
row.metric(
    "Advantage",
    f"{summary['advantage']:+.3g}",
    help="trajectory advantage: mean over its loss tokens",
    width="content",
)
group_value, group_note, group_help = badges.group_stat_text(summary)
row.metric(
    "Group mean ± std",
    group_value,
    group_note or None,
    delta_color="off",
    delta_arrow="off",
    help=group_help,
    width="content",
)
row.metric("Info tokens", f"{summary['info tokens']} / {summary['tokens']}", width="content")

if "logged advantage" in table.columns:  # the trainer logged its own advantages: say how far CreditLens is
    gap, logged_mean, own_mean = analysis.logged_comparison(table)
    verdict = "matches this scheme" if gap <= LOGGED_ADVANTAGE_TOL else "differs from this scheme (see Diagnostics)"
    if ctx.config.estimator == "logged":  # nothing recomputed: the loss stage runs on the trainer's own
        verdict = "estimator `logged` takes them as the advantages, so the gradient weights are the trainer's"
    elif ctx.handle.run.metadata.get("no_rewards"):  # nothing to recompute them from (prime-rl's token export)
        verdict = (
            "the run holds no rewards, so a recomputed advantage is 0: estimator `logged` trains on the trainer's own"
        )
    st.caption(
        f"The trainer logged its own advantages: mean over action tokens {logged_mean:+.4g} "
        f"(CreditLens {own_mean:+.4g}), max |difference| {gap:.3g}: {verdict}. Colour by "
        "'logged advantage' or 'advantage − logged' to see where."
    )

quantities = [q for q in QUANTITY_HELP if q in table.columns]
if st.session_state[K.QUANTITY] not in quantities:
    st.session_state[K.QUANTITY] = "advantage"
left, right = st.columns([2, 3])
quantity = left.selectbox(
    "Colour tokens by", quantities, key=K.QUANTITY, help="\n\n".join(f"**{q}**: {QUANTITY_HELP[q]}" for q in quantities)
)
overlays = right.pills(
    "Overlays",
    list(tokens_html.OVERLAYS),
    selection_mode="multi",
    key=K.OVERLAYS,
    format_func=tokens_html.overlay_label,
    help="\n\n".join(f"**{k}**: {v}" for k, v in tokens_html.OVERLAYS.items()),
)

n = len(table)
n_windows = tokens_html.windows(n)
start, stop = 0, n
if n_windows > 1:
    st.session_state[K.WINDOW] = min(max(int(st.session_state[K.WINDOW]), 1), n_windows)
    w = st.columns([1, 3])[0].number_input(
        f"Text window (of {n_windows})",
        min_value=1,
        max_value=n_windows,
        key=K.WINDOW,
        help=f"{tokens_html.MAX_TEXT_TOKENS} tokens per window; the heatmap below shows every token.",
    )
    start, stop = (w - 1) * tokens_html.MAX_TEXT_TOKENS, min(w * tokens_html.MAX_TEXT_TOKENS, n)

turns = services.turn_table(ctx.handle, ctx.config, ctx.traj)
vmax = symmetric_range(table[quantity].to_numpy())
st.html(tokens_html.legend_html(quantity, vmax, overlays))
marked = ()  # positions a Diagnostics finding flags in this trajectory, looked up under the scheme shown
if ident := st.session_state[K.HIGHLIGHT]:
    finding = diagnostics.find(services.lint_findings(ctx.handle, ctx.config), ident)
    marked = finding.tokens.get(ctx.traj, ()) if finding else ()
    note, actions = st.columns([5, 1], vertical_alignment="center")
    note.html(diagnostics.highlight_note_html(finding, ident, ctx.traj, summary["id"], (start, stop)))
    actions.button("Clear highlight", key="tokens.clear_highlight", on_click=state.clear_highlight)
    actions.page_link("dashboard/pages/diagnostics.py", label="Diagnostics", icon=":material/arrow_back:")
turn_labels = {
    int(r["turn"]): f"Turn {int(r['turn'])} · reward {r['turn reward']:+.3g} · mean advantage "
    f"{r['mean advantage (loss tokens)']:+.3g}"
    for _, r in turns.iterrows()
}
with st.container(height=520 if stop - start > 250 else "content", border=True):
    st.html(
        widgets.cached(
            tokens_html.token_html,
            table,
            quantity,
            vmax,
            list(overlays),
            (start, stop),
            turn_labels,
            highlight=sorted(int(p) for p in marked),
        )
    )

if "train/inference mismatch" in table.columns:  # the run has the trainer's and the rollout engine's log-probs
    st.subheader("Train/inference mismatch")
    worst = services.mismatch_table(ctx.handle, ctx.config)
    largest = analysis.largest_abs(table, "train/inference mismatch")
    st.caption(
        f"The action tokens of the whole run where the trainer's and the rollout engine's log-probs of the sampled "
        f"token disagree most (this trajectory's largest |Δ log π| is {largest:.3g}; "
        "colour by 'train/inference mismatch' to see where). Lint train_inference_mismatch flags those more than 2× "
        "apart; the sidebar's policy loss section sets the rollout correction."
    )
    st.dataframe(worst, hide_index=True, width="stretch", height=min(38 + 35 * len(worst), 400))

st.subheader("Every token, every quantity")
# Off by default while the text above shows every token: the chart library's first load holds the page's
# first paint back by about a second. On for trajectories longer than one text window, until toggled.
if st.session_state[K.HEAT_AUTO]:
    st.session_state[K.HEAT_SHOW] = n > tokens_html.MAX_TEXT_TOKENS
show_heat = st.toggle(
    "Heatmap of every quantity at every position",
    key=K.HEAT_SHOW,
    on_change=state.heatmap_toggled,
    help="Rows: the quantities chosen below; columns: token positions (all of them, also past the text window). "
    "Hover a cell for its value.",
)
if show_heat:
    st.session_state[K.HEAT_ROWS] = [r for r in st.session_state[K.HEAT_ROWS] if r in quantities]
    rows = st.multiselect("Heatmap rows", quantities, key=K.HEAT_ROWS)
    widgets.chart(widgets.cached(make_token_heatmap_figure, table, rows), "tokens.heatmap", f"heatmap_{summary['id']}")

st.subheader("Per turn")
st.dataframe(
    turns,
    hide_index=True,
    width="stretch",
    column_config={"turn": st.column_config.NumberColumn("turn", pinned=True)},
)

with st.expander("Prompt and metadata"):
    st.html(tokens_html.text_block(ctx.handle.run.prompt_text(ctx.traj)))
    st.json(ctx.handle.run.trajectories[ctx.traj].metadata, expanded=False)

st.caption("Token table (this trajectory, this scheme)")
widgets.table_downloads(table, "tokens.table", f"{ctx.info.name}_{summary['id']}_tokens")
