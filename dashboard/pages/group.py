"""Group view: every rollout of one prompt — scores, group mean and std, advantages, rejection verdicts."""

import streamlit as st

from dashboard import analysis, badges, services, tables, widgets
from dashboard.figures.groups import (
    make_group_advantage_figure,
    make_group_heatmap_figure,
    make_group_scores_figure,
)
from dashboard.theme import VERDICT_LABELS
from engine import get_estimator

ctx = widgets.require_context()
res = widgets.result_or_stop(ctx)
batch = services.batch(ctx.handle)
summary = services.trajectory_summary(ctx.handle, ctx.config)
rows = analysis.group_members(batch, ctx.traj)
group = summary.iloc[rows].reset_index(drop=True)
selected = int((rows == ctx.traj).nonzero()[0][0])
me = group.iloc[selected]
widgets.heading(
    "Group view",
    me["id"],
    f"The {len(rows)} rollouts of this trajectory's prompt (group {int(me['group'])}) under the sidebar scheme.",
)

run = ctx.handle.run
flags = badges.group_badges(summary, rows)
member_flags = badges.rows_badges(run, summary, rows)
counts = {n: sum(n in f for f in member_flags) for n in badges.TRAJECTORY_BADGES}
pills = badges.pills_html(flags, prefix="This group:") if flags else ""
synth = sorted({f for i in rows for f in badges.synthesized_fields(run.trajectories[int(i)].metadata)})
members = [
    f"{n} {k} of {len(rows)}" + (f" ({', '.join(synth)})" if n == "synthesized" else "") for n, k in counts.items() if k
]
if pills or members:
    st.html(pills + badges.rollouts_html(members))

ddof_help = f"std_ddof = {ctx.config.std_ddof} ({'unbiased, verl' if ctx.config.std_ddof == 1 else 'population, rLLM'})"
row = st.container(horizontal=True, gap="large")  # metrics of their own width: 5 columns cut "solve_none"
row.metric("Rollouts", len(rows), width="content")
if me["singleton"]:  # verl's stand-ins (mean 0, std 1) are no statistics of this group: do not show them as such
    row.metric("Group mean", "none", help="A singleton group has no mean: verl's GRPO stands in 0.", width="content")
    row.metric(
        "Group std",
        "none",
        help="A singleton group has no std: verl's GRPO stands in 1. " + ddof_help,
        width="content",
    )
else:
    row.metric("Group mean", f"{me['group mean']:.4g}", width="content")
    row.metric(
        "Group std",
        f"{me['group std']:.4g}",
        "zero variance" if me["zero variance"] else None,
        delta_color="off",
        delta_arrow="off",
        help=ddof_help,
        width="content",
    )
row.metric(
    "Verdict",
    VERDICT_LABELS[int(me["verdict"])],
    help="rLLM rejection sampling on Σ token scores: solve_none (all ≤ 0), solve_all (all ≥ 1), else partial.",
    width="content",
)
row.metric("Kept in the loss", "yes" if me["kept"] else "no", width="content")
if me["singleton"]:
    st.warning(
        "Singleton group (1 rollout): no group baseline. GRPO uses mean 0 and std 1 (verl), so the advantage "
        "is the raw score; RLOO keeps the raw score too; RLOO-vectorized gives 0."
    )
if me["zero variance"]:
    st.warning(
        "Zero-variance group: every rollout scored the same, so group-normalised advantages are 0 — "
        "this prompt teaches nothing under GRPO-style estimators."
    )

est = get_estimator(ctx.config.estimator)
est_label = badges.estimator_label(
    est.name, est.label, ctx.config.norm_adv_by_std_in_grpo, ctx.info, ctx.config.value_source
)
with st.expander(f"Estimator: {est_label}", expanded=False):
    st.latex(est.formula)
    st.caption(est.reference)

c1, c2 = st.columns(2)
with c1:
    st.subheader("Scores")
    st.caption(tables.score_words(ctx.info, ctx.config, res.placement))
    if me["singleton"]:  # the dashed line is verl's stand-in mean 0, the baseline GRPO subtracts
        title = "singleton: GRPO's baseline 0 (dashed)"
    elif me["zero variance"]:
        title = f"all scored {float(me['group mean']):.3g}: zero variance"
    else:  # shorter than the figure's own title, which a 1024 px window cuts off
        title = f"mean {float(me['group mean']):.3g} (dashed) ± std {float(me['group std']):.3g}"
    fig = widgets.cached(
        make_group_scores_figure,
        group["id"].tolist(),
        group["score"].to_numpy(),
        float(me["group mean"]),
        0.0 if me["singleton"] else float(me["group std"]),  # no band for verl's stand-in std 1
        group["verdict"].to_numpy(),
        selected,
        title=title,
    )
    widgets.chart(fig, "group.scores", "group_scores")
with c2:
    st.subheader("Advantage")
    # long rollout ids (tick labels) leave a short plot, and "trajectory advantage" overran it at 1024 px
    adv_fig = widgets.cached(
        make_group_advantage_figure, group["id"].tolist(), group["advantage"].to_numpy(), selected, ytitle="advantage"
    )
    widgets.chart(adv_fig, "group.advantage", "group_advantage")

st.subheader("Advantage by token, every rollout")
adv = analysis.group_advantage_matrix(batch, res, rows)
loss = analysis.group_loss_matrix(batch, res, rows)  # grey where no gradient flows
widgets.chart(
    widgets.cached(make_group_heatmap_figure, group["id"].tolist(), adv, selected, loss=loss),
    "group.heatmap",
    "group_heatmap",
)

st.subheader("Rollouts")
shown = group.assign(
    verdict=group["verdict"].map(VERDICT_LABELS),
    badges=[badges.badge_text(f) for f in member_flags],
)
st.dataframe(
    shown[["id", "badges", "score", "advantage", "tokens", "info tokens", "turns", "verdict", "kept"]],
    hide_index=True,
    width="stretch",
    column_config={
        "id": st.column_config.TextColumn("id", pinned=True),
        "badges": st.column_config.TextColumn(
            "badges",
            width="medium",
            help="; ".join(f"{n}: {b.tip}" for n, b in badges.BADGES.items()),
        ),
    },
)
