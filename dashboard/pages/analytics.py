"""Run analytics: credit on info tokens, length bias per estimator, credit per turn, aggregation weights."""

import streamlit as st

from dashboard import analysis, services, widgets
from dashboard.figures.analytics import (
    make_agg_weight_figure,
    make_info_credit_figure,
    make_length_bias_figure,
    make_turn_credit_run_figure,
)
from dashboard.state import K
from engine.config import LOSS_AGG_MODES

ctx = widgets.sampled_context(widgets.require_context(), keep_group=False)  # a big run: an even sample
res = widgets.result_or_stop(ctx)
batch = services.batch(ctx.handle)
widgets.heading(
    "Run analytics",
    ctx.info.name,
    "Across the whole run, under the sidebar scheme unless a chart varies one setting.",
    note=ctx.note,
)

st.subheader("Credit landing on info / tool tokens")
info_df = services.variant_table(
    ctx.handle,
    ctx.config,
    "state_masking",
    (True, False),
    analysis.info_credit,
    {"True": "state masking on", "False": "state masking off"},
)
c1, c2 = st.columns([3, 2])
with c1:
    widgets.chart(widgets.cached(make_info_credit_figure, info_df), "analytics.info", "info_token_credit")
with c2:
    st.caption(
        f"{ctx.info.info_tokens:,} info tokens ({ctx.info.info_share:.1%}). Under state masking they "
        "leave the loss, so no gradient lands on them (effective weight 0); without it they are trained "
        "on. Their advantage depends on the profile's advantage mask (action: holes; attention: "
        "ordinary steps)."
    )
st.dataframe(
    info_df,
    hide_index=True,
    width="stretch",
    column_config={
        "setting": st.column_config.TextColumn("setting", pinned=True, width="medium"),
        "info share of |advantage|": st.column_config.NumberColumn(
            "info share of |A|", format="percent", help="share of Σ|advantage| that lands on info tokens"
        ),
        "info share of |effective weight|": st.column_config.NumberColumn(
            "info share of |w·A|", format="percent", help="share of Σ|effective weight| that lands on info tokens"
        ),
        "info tokens in loss": st.column_config.NumberColumn("info tokens in loss"),
        "Σ|effective weight| on info": st.column_config.NumberColumn(
            "Σ|w·A| on info", format="%.4g", help="Σ|effective weight| over the info tokens"
        ),
    },
)

st.subheader("Length bias: advantage vs response length")
names = [e.name for e in services.available_estimators(ctx.info)]
ss = st.session_state
ss[K.AN_ESTIMATORS] = [n for n in ss[K.AN_ESTIMATORS] if n in names] or names[:3]
chosen = st.multiselect("Estimators", names, key=K.AN_ESTIMATORS, max_selections=6)
lb = services.variant_table(ctx.handle, ctx.config, "estimator", chosen, analysis.length_bias)
if lb.empty:
    st.info("Pick estimators the run supports.")
else:
    c1, c2 = st.columns(2)
    with c1:
        widgets.chart(
            widgets.cached(make_length_bias_figure, lb, "advantage"), "analytics.length_adv", "length_bias_advantage"
        )
    with c2:
        widgets.chart(
            widgets.cached(make_length_bias_figure, lb, "Σ effective weight"),
            "analytics.length_w",
            "length_bias_weight",
        )
    st.dataframe(
        analysis.slopes(lb, "length", "advantage", "estimator").merge(
            analysis.slopes(lb, "length", "Σ effective weight", "estimator"),
            on="estimator",
            suffixes=(" (advantage)", " (Σ eff. weight)"),
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "estimator": st.column_config.TextColumn("estimator", pinned=True, width="medium"),
            "slope per 100 tokens (advantage)": st.column_config.NumberColumn(
                "A: slope /100 tok", help="least-squares slope of the trajectory advantage per 100 loss tokens"
            ),
            "correlation (advantage)": st.column_config.NumberColumn(
                "A: correlation", help="correlation of the trajectory advantage with the length"
            ),
            "slope per 100 tokens (Σ eff. weight)": st.column_config.NumberColumn(
                "Σw·A: slope /100 tok", help="least-squares slope of Σ effective weight per 100 loss tokens"
            ),
            "correlation (Σ eff. weight)": st.column_config.NumberColumn(
                "Σw·A: correlation", help="correlation of Σ effective weight with the length"
            ),
        },
    )

st.subheader("Credit per turn across the run")
widgets.chart(
    widgets.cached(make_turn_credit_run_figure, analysis.turn_credit_across_run(batch, res)),
    "analytics.turns",
    "turn_credit_run",
)

st.subheader("Effective gradient weight per aggregation mode")
agg = services.variant_table(ctx.handle, ctx.config, "loss_agg_mode", LOSS_AGG_MODES, analysis.aggregation_weights)
c1, c2 = st.columns(2)
with c1:
    widgets.chart(widgets.cached(make_agg_weight_figure, agg, "Σ weight"), "analytics.agg_w", "aggregation_weight")
with c2:
    widgets.chart(
        widgets.cached(make_agg_weight_figure, agg, "share of |push|", lines=False),
        "analytics.agg_eff",
        "aggregation_effective",
    )
st.caption(
    "Left: Σ_t w, the trajectory's weight in the aggregated loss (log scale). token-mean and token-sum grow "
    "with length; seq-mean-token-mean gives every response the same. Right: the trajectory's share of the "
    "batch's Σ|w·A|, the gradient push it gets under each mode (modes that differ only by a constant factor "
    "overlap)."
)

if batch.entropy is not None:  # the run records the policy's entropy at each token
    st.subheader("Credit by token entropy")
    ent = services.entropy_credit(ctx.handle, ctx.config, 5)
    top = float(ent["share of |gradient|"].iloc[-1]) if len(ent) else 0.0
    st.caption(
        f"The trained tokens in five equal-count bins of the policy's entropy, lowest first: how much of the batch's "
        f"gradient (Σ|gradient weight|, after the policy loss) lands in each. The most uncertain fifth gets {top:.0%} "
        "of it (20% would be an even spread; GRPO's one advantage per row spreads by length, not by entropy). Lint "
        "entropy_collapse flags a near-zero mean."
    )
    st.dataframe(
        ent,
        hide_index=True,
        width="stretch",
        column_config={
            "share of |gradient|": st.column_config.ProgressColumn(format="percent", min_value=0.0, max_value=1.0),
            "mean gradient weight": st.column_config.NumberColumn(format="%.3g"),
            "entropy from": st.column_config.NumberColumn(format="%.3g"),
            "entropy to": st.column_config.NumberColumn(format="%.3g"),
        },
    )  # fmt: skip
