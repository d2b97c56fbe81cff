"""Learn: a guided walkthrough for teaching, led by the two worked examples' own numbers (docs/TUTORIAL.md §7).

(a) A write-up of KG-R1's structured multi-turn reward pipeline: its literal reward dict on a tiny trajectory,
every step run by the engine (``dashboard.teach``), then the sidebar's trajectory under the sidebar's scheme.
(b) Notes on rLLM's training flow, its three advantage modes: their table beside the engine's numbers on
python_tool_two_rollouts.
(c) ``compute_credit`` and its four stages, each with the engine's own source (``teach.pipeline_code``).
One module per tab in ``dashboard.learn``, each with ``draw(ctx)``."""

import streamlit as st

from dashboard import widgets
from dashboard.learn import kgr1, pipeline, rllm

ctx = widgets.sampled_context(widgets.require_context())  # a big run: an even sample of whole groups
widgets.big_text_css()
widgets.big_metric_css()
widgets.heading("Learn: how credit reaches the tokens", ctx.info.name, note=ctx.note)

TABS = {
    "(a) KG-R1 structured rewards worked example": kgr1,
    "(b) rLLM three advantage modes worked example": rllm,
    "(c) The pipeline's code": pipeline,
}
for tab, module in zip(st.tabs(list(TABS)), TABS.values(), strict=True):
    with tab:
        module.draw(ctx)
