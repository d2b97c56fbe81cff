"""Run overview: sizes, share of info tokens, reward components and scores as distributions, load problems."""

import streamlit as st

from dashboard import badges, bigrun, services, tables, widgets
from dashboard.figures.overview import make_component_histograms_figure, make_distribution_figure
from dashboard.state import md
from dashboard.theme import SCHEME_COLORS, VERDICT_LABELS

ctx = widgets.require_context(allow_empty=True)
info = ctx.info
widgets.heading("Run overview", info.name, f"source format: {info.source}")

# Metrics of their own width in a row that wraps: six equal columns cut "Info / tool tokens" at 1024 px
row = st.container(horizontal=True, gap="large")
row.metric("Trajectories", f"{info.trajectories:,}", width="content")
row.metric("Groups", f"{info.groups:,}", help="prompts; rollouts of one prompt share a group", width="content")
row.metric(
    "Turns",
    f"{info.turns:,}",
    help=f"{info.turns / max(info.trajectories, 1):.2f} per trajectory; "
    f"{info.reward_turns:,} turns carry rewards (KG-R1 placeholder turns of finished samples included)",
    width="content",
)
row.metric("Tokens", f"{info.tokens:,}", help=f"longest trajectory: {info.max_length:,} tokens", width="content")
row.metric(
    "Info / tool tokens",
    f"{info.info_share:.1%}",
    help=f"{info.info_tokens:,} tokens the policy did not generate (tool output, templates)",
    width="content",
)
row.metric("Load problems", len(ctx.handle.problems), width="content")
holds, lacks = badges.holds_text(info)
st.caption(f"{holds} — {lacks}")

problems = ctx.handle.problems
if ctx.traj < 0:
    st.error("No usable trajectory: every record had a problem.")
    widgets.paged_dataframe(tables.problems_frame(problems), "problems", "overview.problems")
    st.stop()

# A big run's plots show trajectories sampled evenly (bigrun.PLOT_ROWS); the tables below page.
plotted = bigrun.even_rows(info.trajectories, bigrun.PLOT_ROWS)
sample_note = bigrun.sampled_note(len(plotted), info.trajectories) if len(plotted) < info.trajectories else ""
st.subheader("Reward components")
components = services.reward_components(ctx.handle, plotted if sample_note else None)
if components.empty:
    st.info("This run has no named reward components (only token scores or none).")
else:
    widgets.chart(
        widgets.cached(make_component_histograms_figure, components), "overview.components", "reward_components"
    )
    if sample_note:
        st.caption(sample_note)

res = widgets.result_or_stop(ctx)
summary = services.trajectory_summary(ctx.handle, ctx.config)
shown = summary.iloc[plotted]
st.subheader("Scores and sizes")
c1, c2, c3 = st.columns(3)
with c1:
    widgets.chart(
        widgets.cached(
            make_distribution_figure, shown["score"].to_numpy(), tables.score_words(ctx.info, ctx.config, res.placement)
        ),
        "overview.scores",
        "scores",
    )
with c2:
    widgets.chart(
        widgets.cached(
            make_distribution_figure, shown["advantage"].to_numpy(), "trajectory advantage", SCHEME_COLORS[0]
        ),
        "overview.advantage",
        "advantages",
    )
with c3:
    widgets.chart(
        widgets.cached(make_distribution_figure, shown["tokens"].to_numpy(), "tokens per trajectory", SCHEME_COLORS[1]),
        "overview.lengths",
        "lengths",
    )
if sample_note:
    st.caption(sample_note + " The counts below are of every trajectory.")
verdicts = summary["verdict"].map(VERDICT_LABELS).value_counts()
st.caption("Rejection-sampling verdicts (rows): " + " · ".join(f"{k} {v}" for k, v in verdicts.items()))
st.markdown("**Data facts** (trajectories per badge; hover a badge for what it means)")
st.html(badges.counts_html(badges.run_counts(info, summary), info.trajectories))
if synth := dict(info.synthesized):
    st.caption(
        "Synthesized by the loader (not the trainer's numbers): "
        + ", ".join(md("{} in {:,} of {:,} trajectories", f, k, info.trajectories) for f, k in synth.items())
    )

st.subheader("Problems the loader reported")
if problems:
    widgets.paged_dataframe(tables.problems_frame(problems), "problems", "overview.problems")
else:
    st.success("None: every record loaded.")

with st.expander("All trajectories"):
    widgets.paged_dataframe(
        summary.assign(badges=badges.summary_badge_column(info, summary)),
        "trajectories",
        "overview.trajectories",
    )

with st.expander("Glossary: the words this dashboard uses"):
    st.markdown(badges.glossary_markdown())
