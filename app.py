"""CreditLens: `streamlit run app.py`. The frame only: page config, the shared sidebar, navigation."""

import time

import streamlit as st

from dashboard import sidebar, state
from dashboard.state import K
from engine.perf import tune_allocator

tune_allocator()  # big [B, T] temporaries reuse heap memory instead of fresh mmaps (idempotent, per process)

started = time.perf_counter()
st.set_page_config(page_title="CreditLens", page_icon="🔍", layout="wide", initial_sidebar_state="expanded")
state.init()
state.keep_widget_state()

PAGES = (
    ("dashboard/pages/overview.py", "Run overview", "overview", ":material/dashboard:"),
    ("dashboard/pages/tokens.py", "Token view", "tokens", ":material/text_fields:"),
    ("dashboard/pages/compare.py", "Compare schemes", "compare", ":material/compare_arrows:"),
    ("dashboard/pages/group.py", "Group view", "group", ":material/groups:"),
    ("dashboard/pages/designer.py", "Reward designer", "designer", ":material/tune:"),
    ("dashboard/pages/analytics.py", "Run analytics", "analytics", ":material/insights:"),
    ("dashboard/pages/diagnostics.py", "Diagnostics", "diagnostics", ":material/troubleshoot:"),
    ("dashboard/pages/learn.py", "Learn", "learn", ":material/school:"),
)
landing = st.session_state.get(K.LANDING)
if landing not in {p[2] for p in PAGES}:
    landing = "tokens"
page = st.navigation(
    {
        "CreditLens": [
            st.Page(path, title=t, url_path=url, icon=icon, default=url == landing) for path, t, url, icon in PAGES
        ]
    }
)
ctx = sidebar.draw()
st.session_state[K.CONTEXT] = ctx
status = st.sidebar.empty()
state.write_query_params(page.url_path or landing)
try:
    page.run()
finally:  # also when a page ends early with st.stop()
    sidebar.engine_status(status, ctx, time.perf_counter() - started)
