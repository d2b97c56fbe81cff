"""Group view: every rollout of one prompt — scores, group mean and std, advantages, rejection verdicts."""

import streamlit as st

from dashboard import analysis, services, widgets
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

c = st.columns(5)
c[0].metric("Rollouts", len(rows))
c[1].metric("Group mean", f"{me['group mean']:.4g}")
c[2].metric(
    "Group std",
    f"{me['group std']:.4g}",
    help=f"std_ddof = {ctx.config.std_ddof} ({'unbiased, verl' if ctx.config.std_ddof == 1 else 'population, rLLM'})",
)
c[3].metric(
    "Verdict",
    VERDICT_LABELS[int(me["verdict"])],
    help="rLLM rejection sampling on Σ token scores: solve_none (all ≤ 0), solve_all (all ≥ 1), else partial.",
)
c[4].metric("Kept in the loss", "yes" if me["kept"] else "no")
if me["singleton"]:
    st.warning("Singleton group: GRPO/RLOO keep the raw score as the advantage (0 baseline); some estimators give 0.")
if me["zero variance"]:
    st.warning(
        "Zero-variance group: every rollout scored the same, so group-normalised advantages are 0 — "
        "this prompt teaches nothing under GRPO-style estimators."
    )

est = get_estimator(ctx.config.estimator)
with st.expander(f"Estimator: {est.label}", expanded=False):
    st.latex(est.formula)
    st.caption(est.reference)

c1, c2 = st.columns(2)
with c1:
    st.subheader("Scores")
    fig = make_group_scores_figure(
        group["id"].tolist(),
        group["score"].to_numpy(),
        float(me["group mean"]),
        float(me["group std"]),
        group["verdict"].to_numpy(),
        selected,
    )
    widgets.chart(fig, "group.scores", "group_scores")
with c2:
    st.subheader("Advantage")
    widgets.chart(
        make_group_advantage_figure(group["id"].tolist(), group["advantage"].to_numpy(), selected),
        "group.advantage",
        "group_advantage",
    )

st.subheader("Advantage by token, every rollout")
adv = analysis.group_advantage_matrix(batch, res, rows)
widgets.chart(make_group_heatmap_figure(group["id"].tolist(), adv, selected), "group.heatmap", "group_heatmap")

st.subheader("Rollouts")
shown = group.assign(verdict=group["verdict"].map(VERDICT_LABELS))
st.dataframe(
    shown[
        [
            "id",
            "score",
            "advantage",
            "tokens",
            "info tokens",
            "turns",
            "verdict",
            "kept",
            "singleton",
            "zero variance",
            "truncated",
        ]
    ],
    hide_index=True,
    width="stretch",
)
