"""Reward designer: reweight reward components, move placement, KL, estimator, γ, λ — the run recomputes live,
against the sidebar scheme as the baseline."""

import functools

import streamlit as st

from dashboard import analysis, badges, exports, schemes, services, state, tables, widgets
from dashboard.figures.compare import make_scheme_rows_figure
from dashboard.figures.designer import make_before_after_figure, make_rank_change_figure
from dashboard.state import K
from engine import config, runnable
from engine.config import FIELD_HELP

ctx = widgets.sampled_context(widgets.require_context())  # a big run: an even sample of whole groups
ss = st.session_state
base = ctx.config
widgets.heading(
    "Reward designer",
    ctx.info.name,
    "Every control recomputes the whole run. Baseline = the sidebar scheme; the designed scheme starts from it.",
    note=ctx.note,
)


state.init_designer(base, ctx.info.turn_reward_names, ctx.info.global_reward_names)
labels = {  # names as the designed scheme makes them: Dr.GRPO-style with its std toggle off, GAE's value stand-in
    e.name: badges.estimator_label(e.name, e.label, bool(ss[K.DS_NORM_STD]), ctx.info, base.value_source)
    for e in services.available_estimators(ctx.info)
}
placements = list(runnable.placements(ctx.info.run_has))
if ss[K.DS_ESTIMATOR] not in labels:
    ss[K.DS_ESTIMATOR] = base.estimator
if ss[K.DS_PLACEMENT] not in placements:
    ss[K.DS_PLACEMENT] = base.placement

left, right = st.columns([2, 3], gap="medium")  # [1, 2] cut the button and toggle labels at 1024 px
with left:
    st.button("Reset to sidebar", on_click=state.reset_designer, help="Start again from the sidebar scheme.")
    if ctx.info.turn_reward_names:
        st.markdown("**Turn components** (weight × value, per turn)")
        for name in ctx.info.turn_reward_names:
            st.slider(state.markdown_escape(name), 0.0, 2.0, step=0.01, key=state.weight_key("turn", name))
    if ctx.info.global_reward_names:
        st.markdown("**Global components** (weight × value, per trajectory)")
        included = services.global_components_included(ctx.info, base)
        for name, inc in zip(ctx.info.global_reward_names, included, strict=True):
            st.slider(
                state.markdown_escape(name) + ("" if inc else " (left out by the profile)"),
                0.0,
                2.0,
                step=0.01,
                key=state.weight_key("global", name),
                disabled=not inc,
                help=None if inc else FIELD_HELP["global_exclude_prefixes"],
            )
    if not (ctx.info.turn_reward_names or ctx.info.global_reward_names):
        st.info("This run has no named reward components; the other controls still apply.")
    st.markdown("**Scheme**")
    st.selectbox(
        "Placement",
        placements,
        key=K.DS_PLACEMENT,
        help=FIELD_HELP["placement"],
    )
    st.selectbox("Estimator", list(labels), key=K.DS_ESTIMATOR, format_func=labels.get, help=FIELD_HELP["estimator"])
    st.slider(
        "KL coefficient β (0 = no in-reward KL)",
        0.0,
        0.5,
        step=0.005,
        key=K.DS_KL_COEF,
        disabled=not ctx.info.has_log_probs,
        help=FIELD_HELP["kl_coef"],
    )
    st.slider("γ", *config.bounds("gamma"), step=0.01, key=K.DS_GAMMA, help=FIELD_HELP["gamma"])
    st.slider("λ", *config.bounds("lam"), step=0.01, key=K.DS_LAM, help=FIELD_HELP["lam"])
    st.toggle("Divide by group std", key=K.DS_NORM_STD, help=FIELD_HELP["norm_adv_by_std_in_grpo"])
    st.toggle("State masking", key=K.DS_MASKING, help=FIELD_HELP["state_masking"])

designed = services.effective_config(
    ctx.info,
    state.designer_config(base, ctx.info.turn_reward_names, ctx.info.global_reward_names),
    base.value_source,
)
with right:
    results = [widgets.result_or_stop(ctx, base), widgets.result_or_stop(ctx, designed)]
    before = services.trajectory_summary(ctx.handle, base)
    after = services.trajectory_summary(ctx.handle, designed)
    changed = analysis.changed_rows(before, after, "advantage")
    row = st.container(horizontal=True, gap="large")  # metrics of their own width: a 1024 px window cut labels
    row.metric(
        "Advantage changed",
        f"{changed} / {len(before)}",
        help="Trajectories whose advantage differs between the baseline and the designed scheme (by > 1e-9).",
        width="content",
    )
    row.metric(
        "Mean score",
        f"{after['score'].mean():.4g}",
        f"{after['score'].mean() - before['score'].mean():+.3g}",
        help="Mean trajectory score under the designed scheme; the change is against the baseline.",
        width="content",
    )
    row.metric("Rows kept", f"{int(after['kept'].sum())}", width="content")
    st.caption(tables.score_words(ctx.info, designed, results[1].placement))
    quantity = st.segmented_control("Compare", ["advantage", "score"], key=K.DS_VIEW) or "advantage"
    fig = widgets.cached(
        make_before_after_figure,
        before["id"].tolist(),
        before["group"].to_numpy(),
        before[quantity].to_numpy(),
        after[quantity].to_numpy(),
        quantity,  # short: the axis titles add "— baseline (sidebar scheme)" and must fit a narrow column
    )
    widgets.chart(fig, "designer.scatter", "designer_before_after")
    changes = analysis.rank_changes(before, after, quantity)
    st.markdown(f"**Rank changes by {quantity}** — {int((changes['rank change'] != 0).sum())} trajectories moved")
    moved = changes[changes["rank change"] != 0]
    if len(moved):
        widgets.chart(widgets.cached(make_rank_change_figure, changes), "designer.ranks", "designer_rank_changes")
        st.dataframe(moved, hide_index=True, width="stretch", height=240)
    st.markdown("**This trajectory, token by token** (advantage, shared scale)")
    if flags := badges.trajectory_badges(ctx.handle.run, before, ctx.traj):
        meta = ctx.handle.run.trajectories[ctx.traj].metadata
        st.html(badges.pills_html(flags, badges.synthesized_fields(meta), prefix=str(before.iloc[ctx.traj]["id"])))
    batch = services.batch(ctx.handle)
    adv = analysis.scheme_advantages(batch, results, ctx.traj)
    table = services.token_table(ctx.handle, base, ctx.traj)
    loss = analysis.scheme_loss_masks(batch, results, ctx.traj)  # grey where no gradient flows
    widgets.chart(
        widgets.cached(
            make_scheme_rows_figure,
            ["baseline", "designed"],
            adv,
            table["token"].tolist(),
            table["turn"].to_numpy(),
            loss=loss,
        ),
        "designer.rows",
        "designer_rows",
    )
    st.caption(f"Designed scheme code `{schemes.encode(designed)}` (weights are in the JSON)")
    st.download_button(
        "⤓ Designed scheme JSON",
        data=functools.partial(exports.scheme_json, designed),  # a page lambda would keep this run's tables alive
        file_name="designed_scheme.json",
        mime="application/json",
        key="designer_export.json",
        on_click="ignore",
    )
