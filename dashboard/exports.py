"""Exports: token tables (CSV, Parquet), figures (PNG, SVG via kaleido + the system Chromium), schemes (JSON).

Kaleido ≥ 1 drives a Chromium through choreographer. We always hand it the system browser (``BROWSER_PATH``
or ``/usr/bin/chromium``) and never let it fetch one; MathJax is off, so nothing is loaded from the network.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from engine.config import CreditConfig

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
IMAGE_FORMATS = {"png": "image/png", "svg": "image/svg+xml"}
MISSING_BROWSER = (
    "Figure export needs Chromium (Debian: `apt-get install chromium`, or set BROWSER_PATH). "
    "The chart's own camera button still saves a PNG from your browser."
)


def chromium_path() -> str | None:
    """The browser kaleido will use: ``BROWSER_PATH`` if it points at an executable, else the system Chromium."""
    env = os.environ.get("BROWSER_PATH")
    for cand in ([env] if env else []) + list(CHROMIUM_CANDIDATES) + [shutil.which("chromium") or ""]:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def figure_image(
    fig: go.Figure, fmt: str = "png", width: int = 1400, height: int | None = None, scale: float = 2
) -> bytes:
    """``fig`` rendered to PNG or SVG bytes with the system Chromium; ``RuntimeError`` if there is none."""
    import kaleido

    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"figure format {fmt!r}: choose png or svg")
    path = chromium_path()
    if path is None:
        raise RuntimeError(MISSING_BROWSER)
    height = height or int(fig.layout.height or 500)
    opts = {"format": fmt, "width": width, "height": height, "scale": scale if fmt == "png" else 1}
    return kaleido.calc_fig_sync(fig.to_dict(), opts, kopts={"path": path, "mathjax": False})


def titled(fig: go.Figure, title: str) -> go.Figure:
    """A copy of ``fig`` headed by ``title`` (plain text: escaped for Plotly's HTML subset), for export: a saved
    figure says which run, trajectory and scheme it shows."""
    from dashboard.tokens_html import escape

    out = go.Figure(fig)
    top = max(int(out.layout.margin.t or 0), 70)
    out.update_layout(
        title=dict(text=escape(title), x=0.01, xanchor="left", y=0.98, yanchor="top", font=dict(size=15)),
        margin=dict(t=top),
    )
    return out


def table_csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def table_parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def scheme_json(cfg: CreditConfig) -> str:
    """The scheme as ``CreditConfig.to_dict()`` JSON (the CLI reads it back with ``CreditConfig.from_dict``)."""
    return json.dumps(cfg.to_dict(), indent=2, sort_keys=False)


def safe_filename(*parts: str) -> str:
    """A file name from free text (run names, trajectory ids): letters, digits, '-', '_' and '.' only."""
    raw = "_".join(p for p in parts if p)
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in raw)[:120] or "creditlens"
