"""Compare schemes: the same trajectory and its group under 2–6 credit schemes, side by side."""

import functools

import streamlit as st

from dashboard import analysis, compare_model, schemes, services, state, widgets
from dashboard.figures.compare import (
    difference_matrix,
    make_advantage_lines_figure,
    make_difference_figure,
    make_group_scalar_figure,
    make_scheme_rows_figure,
    make_turn_credit_figure,
)
from dashboard.state import K
from dashboard.theme import symmetric_range
from engine.config import PLACEMENTS, STEPWISE_MODES
from engine.profiles import PROFILES

ctx = widgets.sampled_context(widgets.require_context())  # a big run: an even sample of whole groups
ss = st.session_state
widgets.heading(
    "Compare schemes",
    ctx.info.trajectory_ids[ctx.traj],
    "The same trajectory and its group under each scheme. Default: the sidebar's scheme under rLLM's three modes "
    "(trajectory, broadcast, per-step), plus GAE when the run has critic values or the sidebar runs GAE — one "
    "change at a time.",
    note=ctx.note,
)

sidebar_code = schemes.encode(ctx.config)
options = list(dict.fromkeys([schemes.AUTO, *schemes.PRESETS, *ss[K.SCHEMES], sidebar_code]))
st.multiselect(
    "Schemes (2–6)",
    options,
    key=K.SCHEMES,
    # bound to the run, not read from the session: a callback module's function keeps no page globals alive
    format_func=functools.partial(compare_model.option_label, info=ctx.info, value_source=ctx.config.value_source),
    max_selections=6,
    help="'Sidebar scheme, one change at a time' follows the sidebar (its profile, std convention, placement, KL) "
    "and varies only the rLLM mode, then the estimator (GAE, on runs with a critic). Presets and your own schemes "
    "(below) are fixed codes that travel in the URL.",
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

codes, too_many = compare_model.expand(ss[K.SCHEMES], ctx.config, ctx.info.has_values)
if too_many:
    st.caption(too_many)
runs = services.compute_codes(ctx.handle, ctx.info, codes, ctx.config.value_source)
for r in runs:
    if r.error:
        st.warning(state.md("{}: not computable on this run — {}", compare_model.run_label(r.code, None), r.error))
    for why in r.fixes:
        st.caption(state.md("{}: {}", compare_model.run_label(r.code, None), why))
runs = [r for r in runs if r.result is not None]
if len(runs) < 2:
    st.info("Pick at least two schemes the run supports.")
    st.stop()

batch = services.batch(ctx.handle)
fake_critic = compare_model.synthesized_values(ctx.info)
labels = [compare_model.run_label(r.code, r.config, fake_critic) for r in runs]
export_title = widgets.export_title(labels)  # exported figures name the run, trajectory and schemes
configs = [r.config for r in runs]
results = [r.result for r in runs]
table = services.token_table(ctx.handle, runs[0].config, ctx.traj)
tokens, turns = table["token"].tolist(), table["turn"].to_numpy()
adv = analysis.scheme_advantages(batch, results, ctx.traj)
in_loss = analysis.scheme_loss_masks(batch, results, ctx.traj)
n_tok = adv.shape[1]

c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
if ss[K.CMP_REF] >= len(runs):
    ss[K.CMP_REF] = 0
ref = c1.selectbox(
    "Reference scheme",
    range(len(runs)),
    format_func=labels.__getitem__,
    key=K.CMP_REF,
    help="Each column says what differs from this scheme; the difference view subtracts it.",
)
c2.toggle(
    "Loss tokens only",
    key=K.CMP_LOSS_ONLY,
    help="On: tokens outside a scheme's loss mask (tool/info output, masked or rejected rows) are grey in every "
    "chart and left out of the differences — no gradient flows there. Off: every token's computed value.",
)
loss_only = bool(ss[K.CMP_LOSS_ONLY])
loss = in_loss if loss_only else None
notes = compare_model.differences_from(configs, ref, fake_critic)

st.html(compare_model.scheme_cards_html(labels, notes, ref, in_loss))
if loss_only:
    st.caption(
        f"Loss tokens only: grey cells, gaps and bands mark tokens outside a scheme's loss (no gradient flows "
        f"there); {int(in_loss.any(0).sum())} of {n_tok} tokens of this trajectory are in at least one scheme's loss."
    )
else:
    st.caption(
        f"Every token's computed value, including {int((~in_loss).any(0).sum())} of {n_tok} tokens outside some "
        "scheme's loss: no gradient flows through those values."
    )

st.subheader("Aligned token rows")
vmax = symmetric_range(adv[in_loss] if loss_only and in_loss.any() else adv)
win = compare_model.GRID_WINDOW
if n_tok > win:
    if ss[K.CMP_GRID_START] > n_tok - 1:
        ss[K.CMP_GRID_START] = 0
    st.slider("First token shown", 0, n_tok - 1, step=1, key=K.CMP_GRID_START)
start = int(ss[K.CMP_GRID_START]) if n_tok > win else 0
stop = min(n_tok, start + win)
st.html(compare_model.aligned_grid_html(labels, adv, in_loss, table, (start, stop), vmax, loss_only))
st.html(compare_model.grid_legend_html(vmax))
if n_tok > win:
    st.caption(f"Tokens {start}–{stop - 1} of {n_tok} ({win} at a time: move the slider); the heatmap below shows all.")
widgets.chart(
    widgets.cached(make_scheme_rows_figure, labels, adv, tokens, turns, loss=loss),
    "compare.rows",
    "compare_rows",
    title=export_title,
)

rows = analysis.group_members(batch, ctx.traj)
n_turns = int(turns.max()) if len(turns) else 0
if n_turns >= 2:
    st.subheader("Steps × rollouts: trajectory, broadcast and per-step")
    step_cfgs = compare_model.step_configs(ctx.config)
    step_results = {}
    for name, cfg in step_cfgs.items():
        try:
            eff = services.effective_config(ctx.info, cfg, ctx.config.value_source)
            step_results[name] = services.compute(ctx.handle, eff)
        except (ValueError, NotImplementedError):
            continue
    shown_rows = rows[: compare_model.STEP_ROLLOUTS]
    if {"trajectory", "broadcast", "per-step"} <= set(step_results):
        base = step_cfgs["trajectory"]
        placed = step_results["per-step"].extras.get("step_rewards")
        frame = compare_model.step_frame(
            analysis.step_table(batch, step_results, shown_rows),
            list(step_results),
            batch.trajectory_ids,
            None if placed is None else placed.cpu().numpy(),
        )
        st.caption(
            f"{schemes.words(base)}, computed by the engine under each rLLM mode; a step is a turn. "
            "Step reward = the rewards placed on the step's tokens (what per-step discounts); A = mean advantage on "
            "the step's loss tokens. Columns in brackets: the other std convention."
        )
        me = batch.trajectory_ids[ctx.traj]
        st.html(compare_model.step_table_html(frame, me))
        sentence = compare_model.step_sentence(frame, me, base.stepwise_gamma)
        st.html(compare_model.sentence_html(sentence))
        if len(rows) > len(shown_rows):
            st.caption(f"First {len(shown_rows)} of the group's {len(rows)} rollouts.")

st.subheader("Advantage by position")
widgets.chart(
    widgets.cached(make_advantage_lines_figure, labels, adv, turns, loss=loss),
    "compare.lines",
    "compare_lines",
    title=export_title,
)

st.subheader("Difference view")
others, _, valid = difference_matrix(adv, ref, loss)
counts = sorted({int(v.sum()) for v in valid})
span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
st.caption(
    f"Differences over loss tokens only ({span} of {n_tok} tokens: those both schemes train)."
    if loss_only
    else f"Differences over all {n_tok} tokens, including tokens outside the loss (switch on 'Loss tokens only')."
)
widgets.chart(
    widgets.cached(make_difference_figure, labels, adv, ref, tokens, loss=loss, notes=notes),
    "compare.diff",
    "compare_difference",
    title=export_title,
)

st.subheader("Credit per turn")
mode = st.segmented_control("Per turn", ["per token", "total"], key=K.CMP_TURN_MODE) or "per token"
credit = analysis.scheme_turn_credit(batch, results, ctx.traj, per_token=mode == "per token")
ylabel = "mean advantage per loss token" if mode == "per token" else "Σ advantage over loss tokens"
widgets.chart(
    widgets.cached(make_turn_credit_figure, labels, credit, ylabel),
    "compare.turns",
    "compare_turns",
    title=export_title,
)

st.subheader("The group")
ids = [batch.trajectory_ids[j] for j in rows]
group_adv = analysis.scheme_group_advantages(results, rows)
selected = int((rows == ctx.traj).nonzero()[0][0])
widgets.chart(
    widgets.cached(make_group_scalar_figure, labels, ids, group_adv, selected),
    "compare.group",
    "compare_group",
    title=export_title,
)
with st.expander("Scheme details"):
    for name, r in zip(labels, runs, strict=True):
        st.html(compare_model.scheme_detail_html(name, r.code, r.result.placement, r.config.profile))
