"""Timeline: how credit changes over a whole run, step by step, under the sidebar scheme (and a second one)."""

import streamlit as st

from dashboard import loading, schemes, services, state, widgets
from dashboard import steps as run_steps
from dashboard.figures.timeline import (
    lint_frame,
    make_lint_figure,
    make_timeline_figure,
    make_turn_share_figure,
    step_summary,
)
from dashboard.sources import RunRef
from dashboard.state import K, md

ctx = widgets.require_context(allow_empty=True)
ss = st.session_state
ref = RunRef.parse(ss[K.RUN])
folder = run_steps.run_folder(ref)
widgets.heading(
    "Timeline",
    folder.name if folder is not None else ctx.info.name,
    "Each step computed alone, as the trainer computed its batch, under the sidebar scheme. Click a point to open "
    "its step.",
)

sidebar_code = schemes.encode(ctx.config)
unmasked = schemes.encode(ctx.config.replace(state_masking=not ctx.config.state_masking))  # the info-mask question
jobs = services.job_schemes(folder) if folder is not None else {}  # timelines a job wrote into the run folder
job_codes = [schemes.encode(c) for c in jobs.values()]
overlays = [
    "",
    *dict.fromkeys(c for c in [ss[K.TL_OVERLAY], unmasked, *job_codes, *ss[K.SCHEMES]] if c and c != sidebar_code),
]
st.selectbox(
    "Second scheme (dashed)",
    overlays,
    key=K.TL_OVERLAY,
    format_func=state.overlay_label,
    help="Drawn dashed over the sidebar scheme, step by step. The list holds the sidebar scheme with state masking "
    "flipped (does credit land on tool tokens without it?), the schemes of a timeline a job wrote into the run "
    "folder (python -m engine timeline) and the Compare page's schemes.",
)
chosen = {sidebar_code: ctx.config}
if ss[K.TL_OVERLAY]:
    chosen[ss[K.TL_OVERLAY]] = schemes.decode(ss[K.TL_OVERLAY])

bar = st.empty()


def progress(fraction: float, message: str) -> None:
    bar.progress(min(max(fraction, 0.0), 1.0), text=md("Computing the timeline: {}", message))


if folder is not None:
    views = {code: services.folder_timeline(folder, cfg, progress) for code, cfg in chosen.items()}
else:  # a file or an upload: its steps are its records' (one step when they name none)
    whole = loading.open_run(ref, ss[K.UPLOADS])
    views = {code: services.run_timeline(whole, cfg) for code, cfg in chosen.items()}
bar.empty()
first = views[sidebar_code]
frames = {c: v.frame[v.frame["error"] == ""] for c, v in views.items() if not v.frame.empty}
if not frames or all(f.empty for f in frames.values()):
    st.warning("No step of this run could be computed under this scheme; the messages below say why.")
for code, v in views.items():
    if not v.frame.empty and (v.frame["error"] != "").any():
        bad = v.frame[v.frame["error"] != ""]
        st.warning(
            md(
                "{} cannot run on {} step(s), e.g. step {}: {}",
                code,
                len(bad),
                bad["step"].iloc[0],
                bad["error"].iloc[0],
            )
        )
frames = {c: f for c, f in frames.items() if not f.empty}
if not frames:
    st.stop()
steps_shown = sorted(set().union(*(set(f["step"]) for f in frames.values())))
if len(steps_shown) == 1:
    st.info(
        "This run is one step: its whole timeline is the point below. A run folder of step files (verl's "
        "`<step>.jsonl`, TRL's `completions_<step>.parquet`, prime-rl's `step_N/`, …) shows how credit changes over "
        "training: try the sample `search_steps`."
    )

event = st.plotly_chart(
    widgets.cached(make_timeline_figure, frames, ss.get(K.STEP)),
    key="timeline.main",
    on_select="rerun",
    selection_mode="points",
    config=widgets.PLOTLY_CONFIG,
    width="stretch",
)
points = getattr(getattr(event, "selection", None), "points", None) or []
picked = int(points[0]["x"]) if points else (ss.get(K.STEP) if ss.get(K.STEP) in steps_shown else steps_shown[-1])
row = st.container(horizontal=True, vertical_alignment="bottom")
with row:
    step = st.selectbox("Step", steps_shown, index=steps_shown.index(picked), key=f"timeline.step.{picked}")
    summary = step_summary(frames[sidebar_code] if sidebar_code in frames else next(iter(frames.values())), step)
    if st.button("Open in the Token view", icon=":material/text_fields:", on_click=state.show_step, args=(step,)):
        st.switch_page("dashboard/pages/tokens.py")
    if st.button("Open in the Group view", icon=":material/groups:", on_click=state.show_step, args=(step,)):
        st.switch_page("dashboard/pages/group.py")
if summary:
    st.caption(
        f"Step {step}: {summary.get('trajectories', 0):,.0f} trajectories, score mean "
        f"{summary.get('score_mean', float('nan')):.3g}, solve rate {summary.get('solve_rate', float('nan')):.0%}, "
        f"{summary.get('zero_variance_group_share', float('nan')):.0%} of groups with zero variance, "
        f"{summary.get('info_weight_share', float('nan')):.0%} of |w·A| on tool tokens."
    )

main = frames.get(sidebar_code, next(iter(frames.values())))
c1, c2 = st.columns(2)
with c1:
    st.subheader("Where in the trajectory the credit lands")
    widgets.chart(widgets.cached(make_turn_share_figure, main), "timeline.turns", "timeline_turn_share")
with c2:
    st.subheader("Lint findings per step")
    if lint_frame(main).empty:
        st.success("No lint check flags any step under this scheme.")
    else:
        widgets.chart(widgets.cached(make_lint_figure, main), "timeline.lint", "timeline_lint")

if st.toggle(f"The numbers ({len(main):,} steps)", key="timeline.numbers"):  # the table's grid loads on demand
    shown = main.drop(columns=["scheme_key", "stamp", "error"], errors="ignore")
    st.dataframe(shown, hide_index=True, width="stretch")
problems = [p for v in views.values() for p in v.problems]
pending = first.pending
if problems or pending:
    with st.expander(f"Skipped and still being written ({len(problems) + len(pending)})"):
        for file, why in pending:
            st.markdown(md("- {}: {}; read once it is complete", file, why))
        for p in problems[:200]:
            st.markdown(md("- {}", p))
if (job_cfg := services.other_job_scheme(jobs, ctx.config)) is not None:  # a job's timeline, another scheme
    st.info(
        md(
            "A job wrote this run's timeline (`.creditlens/`) under {}, not under the sidebar's scheme ({}), so "
            "the sidebar's steps were computed here. Pick the job's scheme as the second scheme to see its rows as "
            "they are, or run the job with the sidebar's scheme (⤓ Scheme JSON, then `--scheme`).",
            schemes.encode(job_cfg),
            services.scheme_difference(ctx.config, job_cfg),
        )
    )
if any(v.computed for v in views.values()):
    computed = max(v.computed for v in views.values())
    cached = first.index_sources - computed
    rest = f"the other {cached} came from the timeline cache" if cached > 0 else "kept in the timeline cache"
    st.caption(f"{computed} step file(s) computed now; {rest}.")
elif first.index_sources:
    n = first.index_sources
    st.caption(f"Nothing computed now: all {n} step file(s) came from the timeline cache or a job's timeline.")
