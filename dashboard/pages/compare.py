"""Compare schemes: the same trajectory and its group under 2–6 credit schemes, side by side."""

import streamlit as st

from dashboard import analysis, schemes, services, tokens_html, widgets
from dashboard.figures.compare import (
    make_advantage_lines_figure,
    make_difference_figure,
    make_group_scalar_figure,
    make_scheme_rows_figure,
    make_turn_credit_figure,
)
from dashboard.state import K
from dashboard.theme import SCHEME_COLORS, symmetric_range
from engine.config import PLACEMENTS, PROFILES, STEPWISE_MODES

ctx = widgets.sampled_context(widgets.require_context())  # a big run: an even sample of whole groups
ss = st.session_state
widgets.heading(
    "Compare schemes",
    ctx.info.trajectory_ids[ctx.traj],
    "The same trajectory and its group under each scheme. Default: GAE vs GRPO vs rLLM broadcast vs rLLM per-step.",
    note=ctx.note,
)


sidebar_code = schemes.encode(ctx.config)
options = list(dict.fromkeys([*schemes.PRESETS, *ss[K.SCHEMES], sidebar_code]))
st.multiselect(
    "Schemes (2–6)",
    options,
    key=K.SCHEMES,
    format_func=schemes.label,
    max_selections=6,
    help="Presets, the sidebar's scheme, or your own (below). Codes travel in the URL.",
)
with st.expander("Add a scheme"):
    est_names = [e.name for e in services.available_estimators(ctx.info)]
    c = st.columns(4)
    c[0].selectbox("Estimator", est_names, key=K.CMP_NEW_ESTIMATOR)
    c[1].selectbox("Profile", list(PROFILES), key=K.CMP_NEW_PROFILE)
    c[2].selectbox("Placement", PLACEMENTS, key=K.CMP_NEW_PLACEMENT)
    c[3].selectbox("rLLM mode", STEPWISE_MODES, key=K.CMP_NEW_MODE)
    b1, b2, _ = st.columns([1, 1, 3])
    # callbacks from another module: one defined here would keep this page's results alive until it runs again
    b1.button("Add this scheme", on_click=widgets.add_custom_scheme, disabled=len(ss[K.SCHEMES]) >= 6)
    b2.button(
        "Add the sidebar scheme", on_click=widgets.add_scheme, args=(sidebar_code,), disabled=len(ss[K.SCHEMES]) >= 6
    )

runs = services.compute_codes(ctx.handle, ctx.info, list(ss[K.SCHEMES]), ctx.config.value_source)
for r in runs:
    if r.error:
        st.warning(f"{r.label}: not computable on this run — {r.error}")
runs = [r for r in runs if r.result is not None]
if len(runs) < 2:
    st.info("Pick at least two schemes the run supports.")
    st.stop()

batch = services.batch(ctx.handle)
labels = [r.label for r in runs]
results = [r.result for r in runs]
table = services.token_table(ctx.handle, runs[0].config, ctx.traj)
tokens, turns = table["token"].tolist(), table["turn"].to_numpy()
adv = analysis.scheme_advantages(batch, results, ctx.traj)

st.subheader("Aligned token rows")
vmax = symmetric_range(adv)
n_show = min(len(table), 400)
cols = st.columns(len(runs))
for s, (col, run) in enumerate(zip(cols, runs, strict=True)):
    with col:
        st.html(
            f"<div style='border-top:5px solid {SCHEME_COLORS[s % 8]};font-weight:700;padding-top:4px'>"
            f"{tokens_html.escape(run.label)}</div>"
        )
        sub = table.iloc[:n_show].copy()
        sub["advantage"] = adv[s, :n_show]
        with st.container(height=360, border=True):
            st.html(tokens_html.token_html(sub, "advantage", vmax, ("info",)))
if n_show < len(table):
    st.caption(f"Text shows the first {n_show} of {len(table)} tokens; the rows below show all of them.")
st.html(tokens_html.legend_html("advantage (shared scale)", vmax, ("info",)))
widgets.chart(make_scheme_rows_figure(labels, adv, tokens, turns), "compare.rows", "compare_rows")

st.subheader("Advantage by position")
widgets.chart(make_advantage_lines_figure(labels, adv, turns), "compare.lines", "compare_lines")

c1, c2 = st.columns(2)
with c1:
    st.subheader("Credit per turn")
    mode = st.segmented_control("Per turn", ["per token", "total"], key=K.CMP_TURN_MODE) or "per token"
    credit = analysis.scheme_turn_credit(batch, results, ctx.traj, per_token=mode == "per token")
    ylabel = "mean advantage per loss token" if mode == "per token" else "Σ advantage over loss tokens"
    widgets.chart(make_turn_credit_figure(labels, credit, ylabel), "compare.turns", "compare_turns")
with c2:
    st.subheader("Difference view")
    if ss[K.CMP_REF] >= len(runs):
        ss[K.CMP_REF] = 0
    ref = st.selectbox("Reference scheme", range(len(runs)), format_func=labels.__getitem__, key=K.CMP_REF)
    widgets.chart(make_difference_figure(labels, adv, ref, tokens), "compare.diff", "compare_difference")

st.subheader("The group")
rows = analysis.group_members(batch, ctx.traj)
ids = [batch.trajectory_ids[j] for j in rows]
group_adv = analysis.scheme_group_advantages(results, rows)
selected = int((rows == ctx.traj).nonzero()[0][0])
widgets.chart(make_group_scalar_figure(labels, ids, group_adv, selected), "compare.group", "compare_group")
with st.expander("Scheme details"):
    for r in runs:
        st.markdown(f"**{r.label}** — code `{r.code}` · placement {r.result.placement} · profile {r.config.profile}")
