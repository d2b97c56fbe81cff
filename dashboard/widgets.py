"""Small Streamlit helpers the pages share: the page context, a chart with its export buttons, error display."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import exports, figcache, services
from dashboard.cache import RunHandle
from dashboard.state import K, md
from dashboard.tables import RunInfo
from dashboard.theme import MUTED_TEXT
from engine import CreditConfig, CreditResult

PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}


@dataclass(frozen=True)
class Context:
    """What the sidebar decided for this run: the run, what it holds, the scheme, the trajectory."""

    handle: RunHandle
    info: RunInfo
    config: CreditConfig
    traj: int
    note: str = ""  # what a sampled context (``sampled_context``) shows instead of the whole run


def context() -> Context | None:
    """This run's context; None when the sidebar could not open a run (it already said why)."""
    return st.session_state.get(K.CONTEXT)


def require_context(allow_empty: bool = False) -> Context:
    """The page context; ends the page with a note when there is no run (or, unless ``allow_empty``, when the
    run has no trajectory)."""
    ctx = context()
    if ctx is None:
        st.info("Choose a run in the sidebar.")
        st.stop()
    if ctx.traj < 0 and not allow_empty:
        st.warning("This run has no usable trajectory; the Run overview lists what the loader reported.")
        st.stop()
    return ctx


def result_or_stop(ctx: Context, cfg: CreditConfig | None = None) -> CreditResult:
    """The scheme's result, or an error box and the end of the page when the engine refuses the scheme. A big
    run's first computation of a scheme shows a spinner (seconds at 50,000 trajectories)."""
    cfg = cfg or ctx.config
    try:
        if services.is_cached(ctx.handle, cfg) or not services.is_big(ctx.info):
            return services.compute(ctx.handle, cfg)
        with st.spinner(f"Computing the credit of {ctx.info.trajectories:,} trajectories…", show_time=True):
            return services.compute(ctx.handle, cfg)
    except (ValueError, NotImplementedError) as e:
        st.error(md("The engine cannot compute this scheme on this run: {}", e))
        st.stop()


def sampled_context(ctx: Context, keep_group: bool = True) -> Context:
    """The page context on a big run's sample (``services.sampled``: whole groups evenly spaced, plus the
    sidebar trajectory's group when ``keep_group``), with a ``note`` saying so for ``heading``; ``ctx`` itself
    otherwise."""
    handle, traj = services.sampled(ctx.handle, ctx.info, ctx.traj if keep_group else None)
    if handle is ctx.handle:
        return ctx
    info = services.run_info(handle)
    plus = " plus the sidebar trajectory's group" if keep_group else ""
    note = (
        f"Big run: this page works on {info.trajectories:,} of {ctx.info.trajectories:,} trajectories "
        f"({info.groups:,} whole groups evenly spaced{plus}). Group statistics are the run's own; batch-wide ones "
        "(GAE and REINFORCE++ whitening, token-mean weights) are the sample's."
    )
    return Context(handle, info, ctx.config, traj if traj is not None else 0, note)


def add_scheme(code: str) -> None:
    """Compare page callback: add scheme ``code`` (up to six)."""
    ss = st.session_state
    if code not in ss[K.SCHEMES] and len(ss[K.SCHEMES]) < 6:
        ss[K.SCHEMES] = [*ss[K.SCHEMES], code]


def add_custom_scheme() -> None:
    """Compare page callback: add the scheme of its "Add a scheme" controls (the sidebar's, those fields set)."""
    from dashboard import schemes
    from dashboard.state import sidebar_config

    ss = st.session_state
    cfg = sidebar_config().replace(profile=ss[K.CMP_NEW_PROFILE])
    cfg = cfg.replace(
        estimator=ss[K.CMP_NEW_ESTIMATOR], placement=ss[K.CMP_NEW_PLACEMENT], stepwise_mode=ss[K.CMP_NEW_MODE]
    )
    add_scheme(schemes.encode(cfg))


def cached(build, *args, **kwargs):
    """``build(*args, **kwargs)`` (a figure, token markup) through ``figcache``: built once per distinct input and
    shared across sessions, except for what is built from an upload, which stays in this session. Read-only."""
    ctx = context()
    return figcache.cached(build, *args, session_only=ctx is None or ctx.handle.session_only, **kwargs)


def chart(fig: go.Figure, key: str, name: str, export: bool = True, title: str | None = None) -> None:
    """A Plotly chart, with PNG/SVG download buttons that render with kaleido only when clicked. The exported
    figure is headed by ``title`` (default ``export_title()``: run, trajectory, scheme); with Chromium present the
    chart's own camera button is removed, so every saved figure carries its title."""
    has_browser = exports.chromium_path() is not None
    config = PLOTLY_CONFIG
    if export and has_browser:
        config = {**config, "modeBarButtonsToRemove": [*config["modeBarButtonsToRemove"], "toImage"]}
    st.plotly_chart(fig, key=key, config=config, width="stretch")
    if not export:
        return
    if not has_browser:
        st.caption(exports.MISSING_BROWSER)
        return
    fname = exports.safe_filename(name)
    heading = title if title is not None else export_title()
    row = st.container(horizontal=True, gap="small")
    for fmt in ("png", "svg"):
        row.download_button(
            f"⤓ {fmt.upper()}",
            data=lambda fmt=fmt: exports.figure_image(exports.titled(fig, heading), fmt),
            file_name=f"{fname}.{fmt}",
            mime=exports.IMAGE_FORMATS[fmt],
            key=f"export.{key}.{fmt}",
            on_click="ignore",
            type="tertiary",
            help=f"Save this figure as {fmt.upper()}, titled with the run, trajectory and scheme (rendered by the "
            "system Chromium)",
        )


def export_title(schemes: list[str] | None = None) -> str:
    """What an exported figure shows, in one line: the run, the sidebar trajectory and the scheme (``schemes``:
    the labels of the schemes a comparison shows, instead of the sidebar's)."""
    from dashboard import schemes as scheme_codes

    ctx = context()
    if ctx is None:
        return "CreditLens"
    parts = [f"run {ctx.info.name}"]
    if 0 <= ctx.traj < len(ctx.info.trajectory_ids):
        parts.append(f"trajectory {ctx.info.trajectory_ids[ctx.traj]}")
    parts.append("schemes " + " vs ".join(schemes) if schemes else f"scheme {scheme_codes.encode(ctx.config)}")
    return "CreditLens · " + " · ".join(parts)


def paged_dataframe(df: pd.DataFrame, noun: str, key: str) -> None:
    """``df`` as a table; above ``bigrun.TABLE_ROWS`` rows one page at a time, with a page number and a note
    ("Page 3 of 25: trajectories 4,001–6,000 of 50,000.")."""
    from dashboard import bigrun

    rows = slice(None)
    if len(df) > bigrun.TABLE_ROWS:
        n_pages = bigrun.pages(len(df), bigrun.TABLE_ROWS)
        page = st.number_input(f"Page (1–{n_pages:,})", min_value=1, max_value=n_pages, value=1, key=f"page.{key}")
        rows = bigrun.page_slice(page, len(df), bigrun.TABLE_ROWS)
        st.caption(bigrun.paged_note(page, len(df), bigrun.TABLE_ROWS, noun))
    st.dataframe(df.iloc[rows], hide_index=True, width="stretch")


def table_downloads(df: pd.DataFrame, key: str, name: str) -> None:
    """CSV and Parquet download buttons for a table."""
    fname = exports.safe_filename(name)
    row = st.container(horizontal=True, gap="small")
    row.download_button(
        "⤓ CSV",
        data=lambda: exports.table_csv(df),
        file_name=f"{fname}.csv",
        mime="text/csv",
        key=f"export.{key}.csv",
        on_click="ignore",
    )
    row.download_button(
        "⤓ Parquet",
        data=lambda: exports.table_parquet(df),
        file_name=f"{fname}.parquet",
        mime="application/vnd.apache.parquet",
        key=f"export.{key}.parquet",
        on_click="ignore",
    )


def big_text_css() -> None:
    """Larger type for the teaching page (projector)."""
    st.html(
        "<style>.stMainBlockContainer [data-testid='stMarkdownContainer'] p,"
        " .stMainBlockContainer [data-testid='stMarkdownContainer'] li {font-size: 1.22rem; line-height: 1.55;}"
        " .stMainBlockContainer [data-testid='stMetricValue'] {font-size: 2.2rem;}"
        " .stMainBlockContainer .katex {font-size: 1.35em;}</style>"
    )


def big_metric_css() -> None:
    """Metric values as big as the projector needs (the value's own element carries the font size)."""
    st.html(
        "<style>.stMainBlockContainer [data-testid='stMetricValue'],"
        " .stMainBlockContainer [data-testid='stMetricValue'] * {font-size: 2.2rem !important;}</style>"
    )


def heading(title: str, detail: str = "", caption: str = "", note: str = "") -> None:
    """A page heading whose ``detail`` is run data (a trajectory id …), escaped, never parsed as markdown; then
    ``note`` (a sampled context's, see ``sampled_context``) in an info box."""
    from dashboard.tokens_html import escape

    detail_html = f" <code style='font-size:0.8em'>{escape(detail)}</code>" if detail else ""
    cap = f"<div style='color:{MUTED_TEXT};font-size:0.95rem;margin-top:2px'>{escape(caption)}</div>" if caption else ""
    st.html(
        f"<div style='margin:0 0 6px 0'><span style='font-size:1.7rem;font-weight:700'>{escape(title)}</span>"
        f"{detail_html}{cap}</div>"
    )
    if note:
        st.info(note, icon=":material/filter_alt:")
