"""CreditLens: `streamlit run app.py`. The frame only: page config, the shared sidebar, navigation.

Streamlit runs this file as ``__main__`` for every page run (``main`` below). ``streamlit run app.py`` first
imports it as the module ``app`` and finds ``app = st.App(...)``: that serves this same file and, while the
server starts, warms the engine up in the background (``dashboard/warmup.py``), so the first page paints fast.
"""

import time

import streamlit as st

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


STARTING = (
    '<p style="color:#57606a">Starting CreditLens: loading the engine (PyTorch) and computing the first view…</p>'
)


def _home() -> None:
    """The page at "/": never drawn, ``main`` switches to the page the link names (token view by default).
    Every visible page has its own path (``/group``, ``/tokens``…), so a reload or a pasted link opens it."""


def main() -> None:
    started = time.perf_counter()  # the sidebar's "page run" time counts the first run's imports too
    st.set_page_config(page_title="CreditLens", page_icon="🔍", layout="wide", initial_sidebar_state="expanded")
    from dashboard import warmup

    if warmup.importing():  # a server's first seconds: say so rather than show a blank page
        note = st.empty()
        note.html(STARTING)  # the browser also loads its HTML element now, before the token view needs it
        warmup.wait_for_imports()  # never import the engine from two threads at once
        note.empty()
    from dashboard import sidebar, state
    from dashboard.state import K
    from engine.perf import tune_allocator

    tune_allocator()  # big [B, T] temporaries reuse heap memory instead of fresh mmaps (idempotent, per process)
    state.init()
    state.keep_widget_state()
    pages = {url: st.Page(path, title=t, url_path=url, icon=icon) for path, t, url, icon in PAGES}
    home = st.Page(_home, title="CreditLens", url_path="home", default=True, visibility="hidden")
    page = st.navigation({"CreditLens": [home, *pages.values()]})
    if page is home:  # "/" (or "/?page=group", a link from before pages had paths): open the page it names
        st.switch_page(pages[state.landing_page(set(pages))])
    ctx = sidebar.draw()
    st.session_state[K.CONTEXT] = ctx
    status = st.sidebar.empty()
    state.write_query_params(page.url_path)
    state.show_link_problems()
    try:
        page.run()
    finally:  # also when a page ends early with st.stop()
        sidebar.engine_status(status, ctx, time.perf_counter() - started)
        warmup.page_run_ended()


if __name__ == "__main__":
    main()
else:  # imported by `streamlit run app.py` (or `uvicorn app:app`): the server, warmed up in the background
    from dashboard.warmup import lifespan

    app = st.App(__file__, lifespan=lifespan)
