"""CreditLens: `streamlit run app.py`. The frame only: page config, the shared sidebar, navigation.

Streamlit runs this file as ``__main__`` for every page run (``main`` below). ``streamlit run app.py`` first
imports it as the module ``app`` and finds ``app = st.App(...)``: that serves this same file and, while the
server starts, warms the engine up in the background (``dashboard/warmup.py``), so the first page paints fast.
"""

import time

import streamlit as st

from dashboard.theme import STARTUP_TEXT  # imports numpy here, in the main thread, before the warm-up thread

PAGES = (
    ("dashboard/pages/overview.py", "Run overview", "overview", ":material/dashboard:"),
    ("dashboard/pages/timeline.py", "Timeline", "timeline", ":material/timeline:"),
    ("dashboard/pages/tokens.py", "Token view", "tokens", ":material/text_fields:"),
    ("dashboard/pages/compare.py", "Compare schemes", "compare", ":material/compare_arrows:"),
    ("dashboard/pages/group.py", "Group view", "group", ":material/groups:"),
    ("dashboard/pages/designer.py", "Reward designer", "designer", ":material/tune:"),
    ("dashboard/pages/analytics.py", "Run analytics", "analytics", ":material/insights:"),
    ("dashboard/pages/diagnostics.py", "Diagnostics", "diagnostics", ":material/troubleshoot:"),
    ("dashboard/pages/learn.py", "Learn", "learn", ":material/school:"),
)


HOME = "tokens"  # the page "/" shows
STARTING = (
    f'<p style="color:{STARTUP_TEXT}">Starting CreditLens: loading the engine (PyTorch) and computing the first'
    " view…</p>"
)


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
    home_path = next(path for path, _, url, _ in PAGES if url == HOME)
    # "/" is the token view's script under a hidden page of its own, so a first visit paints without a second run;
    # "/?page=group" (the links written before every page had a path) switches to the page it names.
    home = st.Page(home_path, title="CreditLens", url_path="home", default=True, visibility="hidden")
    page = st.navigation({"CreditLens": [home, *pages.values()]})
    if page is home and (landing := state.landing_page(set(pages))) != HOME:
        st.switch_page(pages[landing])
    ctx = sidebar.draw()
    st.session_state[K.CONTEXT] = ctx
    status = st.sidebar.empty()
    state.write_query_params(HOME if page is home else page.url_path)
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
