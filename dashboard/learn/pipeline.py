"""Learn, tab (c): ``compute_credit`` and its four stages, then every policy loss stage 4 can apply, each with the
engine's own source (``teach.pipeline_code``, ``teach.policy_loss_code``)."""

import streamlit as st

from dashboard import teach
from dashboard.widgets import Context


def draw(ctx: Context) -> None:
    st.markdown(
        "## compute_credit, stage by stage\n"
        "Every number on these pages comes from one call, `compute_credit(batch, config)`, which runs four "
        "stages in order. Each stage is a short function of the engine; its code is below, as the engine runs it."
    )
    st.code(
        "batch ─► (1) place_scores ─► (2) subtract_kl ─► (3) estimate ─► (4) weigh_loss ─► CreditResult",
        language=None,
    )
    for part in teach.pipeline_code():
        st.markdown(f"### {part.title}")  # the engine's own docstrings (reST ``code`` shown as Markdown `code`)
        st.markdown(part.summary.replace("``", "`"))
        with st.expander("Show the code", expanded=False):
            st.code(part.source, language="python")
    st.markdown(
        "## The policy losses stage 4 can apply\n"
        "After the aggregation weights, the policy loss decides each token's gradient: "
        "`grad_weight = −a_t · w_t · g_t`, with g below (ρ = π_θ/π_old, ε the clip range, c the dual clip), a_t the "
        "aggregation weight and w_t the rollout-correction weight. Every loss is one registered function "
        "(`engine/policy_losses.py`); the sidebar's choice is open."
    )
    chosen = ctx.config.policy_loss
    for loss, source in teach.policy_loss_code():
        mark = " · the sidebar's choice" if loss.name == chosen else ""
        with st.expander(f"`{loss.name}` · {loss.label}{mark}", expanded=loss.name == chosen):
            st.latex(loss.formula)
            st.markdown(loss.summary.replace("``", "`"))
            reads = ", ".join(f"`{f}`" for f in loss.reads) or "nothing beyond the advantage"
            checked = ", ".join(f"`{f}`" for f in loss.checked_by)
            st.caption(f"Reproduces {loss.reference}. Reads {reads}. Checked against {checked}.")
            st.code(source, language="python")
