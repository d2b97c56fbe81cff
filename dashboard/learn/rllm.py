"""Learn, tab (b): notes on rLLM's training flow, its three advantage modes: the document's table beside the
engine's numbers on the sample run python_tool_two_rollouts (``teach.rllm_doc_table``)."""

import streamlit as st

from dashboard import analysis, loading, services, teach, tokens_html, widgets
from dashboard.figures.compare import make_scheme_rows_figure
from dashboard.learn.common import f, tokens
from dashboard.sources import RunRef
from dashboard.state import K, md
from dashboard.widgets import Context

PYTHON_TOOL_SAMPLE = teach.RLLM_SAMPLE


def draw(ctx: Context) -> None:
    st.markdown(
        "## rLLM's three advantage modes, the document's own example\n"
        "One question, an agent with a python tool, two rollouts: rollout 1 answers **4** (reward **1.0**), "
        "rollout 2 answers **5** (reward **0.0**). Each has three steps. The document's numbers stand beside the "
        f"engine's, computed on the sample run **{PYTHON_TOOL_SAMPLE}**."
    )
    st.caption(
        "Source: notes on rLLM's training flow and its three advantage modes (rLLM agent_ppo_trainer.py), "
        "summarised with its numbers in docs/TUTORIAL.md §7.2."
    )
    try:
        h2 = loading.open_run(RunRef("sample", PYTHON_TOOL_SAMPLE), {})
        info2 = services.run_info(h2)
        if info2.trajectories == 0:
            raise ValueError("no usable trajectory")
    except (KeyError, ValueError, OSError) as e:
        h2, info2 = ctx.handle, ctx.info
        st.info(md("Sample {} is not available ({}); using the sidebar run instead.", PYTHON_TOOL_SAMPLE, e))
    b2 = services.batch(h2)
    rows = analysis.group_members(b2, 0 if h2 is not ctx.handle else ctx.traj)
    norm = st.toggle(
        "Divide by the group std",
        key=K.LEARN_NORM_STD,
        help="Off reproduces the document's ±0.5; on gives rLLM's default (r − mean)/(population std + ε).",
    )
    results, refused = services.rllm_modes(h2, info2, norm)
    for label, e in refused.items():
        st.warning(md("{}: {}", label, e))
    if results:
        doc = teach.rllm_doc_table(analysis.step_table(b2, results, rows[:8]), norm)
        config = {c: st.column_config.NumberColumn(lab, help=hlp) for c, (lab, hlp) in doc.attrs["labels"].items()}
        st.dataframe(doc, hide_index=True, width="stretch", height="content", column_config=config)
        st.caption(
            "(doc) = the document's number; the others are the engine's. A = advantage (mean over the step's loss "
            "tokens), Gₖ = the step's Monte-Carlo return, rₖ = the step's reward. Hover a header for more."
        )
        if doc.attrs["matches_returns"]:
            st.success(
                "MC returns: the engine gives the document's 1.0, 0.95, 0.9025 (γ = 0.95) and 0, 0, 0.",
                icon=":material/check:",
            )
        if doc.attrs["matches_advantages"]:
            st.success(
                "Trajectory and broadcast advantages: the engine gives the document's ±0.5 on every step.",
                icon=":material/check:",
            )
        elif norm:
            t_max, t_min = teach.trajectory_advantage_range(doc)
            st.info(
                f"Std division is on: rewards 1 and 0 have mean 0.5 and population std 0.5, so A = ±0.5 / "
                f"(0.5 + ε) = **{f(t_max, 4)}** / **{f(t_min, 4)}**, rLLM's default. The document's "
                "±0.5 is the advantage without std division (turn the toggle off).",
                icon=":material/info:",
            )
        st.markdown(
            "**Where the document's numbers come from.** *Trajectory*: A = reward − group mean = 1.0 − 0.5 = "
            "**+0.5** and "
            "0.0 − 0.5 = **−0.5** (no std division; the toggle adds it). *Broadcast*: the same scalar copied to "
            "each of the three steps. *Per-step*: each step's Monte-Carlo return Gₖ = rₖ + γ·Gₖ₊₁ "
            "with γ = 0.95: rollout 1's step rewards are 0, 0, 1, so G₃ = 1.0, G₂ = 0.95 × 1.0 = 0.95, "
            "G₁ = 0.95 × 0.95 = 0.9025; rollout 2's are 0, 0, 0. The k-th steps of the two rollouts form "
            "a group, so step k's advantage is Gₖ minus the mean of the two rollouts' Gₖ: ±0.45125, ±0.475, "
            "±0.5 without std (the document gives no per-step advantages; with std each is ±1)."
        )
        st.caption(
            "The sample's three steps are: call python, read its output and verify with a second call, answer. A "
            "step is a model action plus the tool output that answers it (the document lists the tool run as its "
            "own round). Engine columns: the mean advantage on the step's loss tokens."
        )
    st.latex(
        r"\textbf{trajectory:}\ A_i = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R + \epsilon}"
        r"\qquad \textbf{broadcast:}\ A_{i,k} = A_i\ \ \forall k"
    )
    st.latex(
        r"\textbf{per-step:}\ G_{i,k} = r_{i,k} + \gamma\,G_{i,k+1},\quad A_{i,k} = "
        r"\frac{G_{i,k} - \mathrm{mean}_{j} G_{j,k}}{\mathrm{std}_{j} G_{j,k} + \epsilon}\quad(\gamma = 0.95)"
    )
    if results:
        shown = [int(j) for j in rows[:2]]
        grid = teach.mode_rows(b2, results, shown)
        width = grid.advantages.shape[1]
        turns = services.token_table(h2, next(iter(results.values())).config, shown[0])["turn"].to_numpy()
        st.markdown("**Every token under each mode** (rows: mode · rollout; dotted lines: the first rollout's steps)")
        widgets.chart(
            widgets.cached(make_scheme_rows_figure, grid.labels, grid.advantages, [""] * width, turns, loss=grid.loss),
            "learn.modes",
            "rllm_modes",
        )
        last = list(results)[-1]
        st.markdown(f"**{last}**, token by token: each step gets its own advantage")
        for j in shown:
            rid = b2.trajectory_ids[j]
            st.html(tokens_html.big_label_html(rid))
            mine = doc[doc["rollout"] == rid] if "A · per-step" in doc else doc.iloc[:0]
            labels = {
                int(k): f"Step {int(k)} · A = {a:+.4g}"
                for k, a in zip(mine["step"], mine.get("A · per-step", []), strict=True)
            }
            tokens(services.token_table(h2, results[last].config, j), "advantage", vmax=grid.vmax, labels=labels)
