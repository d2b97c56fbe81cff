"""Timeline figures: per-step statistics of a whole run (``engine.timeline``), one or two schemes.

Every builder takes ``frames`` ({scheme label: DataFrame of timeline rows, one per step}); the first scheme is
drawn solid, the second dashed in the same colours, so a row of panels compares them step by step. ``current`` is
the step the pages show (a vertical rule). No ``st.`` in here.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.theme import MUTED_TEXT, SCHEME_COLORS, base_layout, translucent
from dashboard.tokens_html import escape

# (panel title, [(column, label, colour index)], y tick format, what it shows)
PANELS = (
    ("Score and solve rate", [("score_mean", "score mean", 0), ("solve_rate", "solve rate", 2)], None),
    (
        "Steps that teach nothing",
        [("zero_variance_group_share", "zero-variance groups", 5), ("singleton_group_share", "singleton groups", 3)],
        ".0%",
    ),
    ("Advantage on trained tokens (p5–p95, median)", [("advantage_p50", "median advantage", 0)], None),
    ("Share of |w·A| on tool / info tokens", [("info_weight_share", "info-token share", 5)], ".0%"),
    ("Advantage vs length (slope per 1,000 tokens)", [("advantage_length_slope", "slope", 1)], None),
    (
        "Policy: entropy and train/inference mismatch",
        [("entropy_mean", "entropy (nats)", 2), ("mismatch_mean", "|log π − log π_rollout|", 5)],
        None,
    ),
    ("Logged advantages that differ from the recomputed", [("logged_mismatch_share", "share of tokens", 4)], ".0%"),
)
DASHES = ("solid", "dash")


def _has(frames: dict[str, pd.DataFrame], columns: list[str]) -> bool:
    return any(c in df and df[c].notna().any() for df in frames.values() for c in columns)


def timeline_panels(frames: dict[str, pd.DataFrame]) -> list[tuple]:
    """The panels the rows have something to show in (a run without log-probs has no policy panel)."""
    return [p for p in PANELS if _has(frames, [c for c, _, _ in p[1]])]


def make_timeline_figure(frames: dict[str, pd.DataFrame], current: int | None = None) -> go.Figure:
    """A column of panels over the steps (x shared): score mean ± std and solve rate, zero-variance and singleton
    group shares, the advantage band, the info-token share of |w·A|, the advantage-vs-length slope, entropy and
    mismatch, the logged-advantage mismatch. Click a point: its step (``customdata``)."""
    panels = timeline_panels(frames)
    fig = make_subplots(
        rows=max(len(panels), 1),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.045,
        subplot_titles=[p[0] for p in panels],
    )
    for s, (scheme, df) in enumerate(frames.items()):
        df = df.sort_values("step")
        x = df["step"].to_numpy()
        for r, (_, series, _) in enumerate(panels, start=1):
            if r == 1:
                _band(fig, x, df["score_mean"] - df["score_std"], df["score_mean"] + df["score_std"], 0, s, r)
            if series[0][0] == "advantage_p50":
                _band(fig, x, df["advantage_p05"], df["advantage_p95"], 0, s, r)
            for col, label, color in series:
                if col not in df or not df[col].notna().any():
                    continue
                name = f"{label} · {scheme}" if len(frames) > 1 else label
                fig.add_trace(
                    go.Scatter(
                        x=x,
                        y=df[col],
                        mode="lines+markers",
                        name=escape(name),
                        legendgroup=escape(name),
                        showlegend=True,
                        line=dict(color=SCHEME_COLORS[color], dash=DASHES[s % 2], width=2),
                        marker=dict(size=5),
                        customdata=x,
                        hovertemplate=f"step %{{x}}<br>{escape(label)} %{{y:.4g}}<extra>{escape(scheme)}</extra>",
                    ),
                    row=r,
                    col=1,
                )
    for r, (_, _, fmt) in enumerate(panels, start=1):
        if fmt:  # shares: from 0, at least to 5 % (a panel of zeros stays a flat line at the bottom)
            top = max(
                (float(df[c].max()) for df in frames.values() for c, _, _ in panels[r - 1][1] if c in df), default=0
            )
            fig.update_yaxes(tickformat=fmt, range=[0, max(top if top == top else 0, 0.05) * 1.08], row=r, col=1)
    steps = sorted({int(x) for df in frames.values() for x in df["step"]})
    if steps and steps[-1] - steps[0] <= 12:  # few steps: one tick each (no "2.5")
        fig.update_xaxes(tickmode="linear", tick0=steps[0], dtick=1)
    else:
        fig.update_xaxes(tickformat="d")
    if current is not None:
        fig.add_vline(x=current, line=dict(color=MUTED_TEXT, width=1, dash="dot"))
    fig.update_xaxes(title_text="training step", row=len(panels), col=1)
    fig.update_layout(hovermode="x unified", clickmode="event+select")
    return base_layout(fig, height=190 * max(len(panels), 1) + 80)


def _band(fig: go.Figure, x, lo, hi, color: int, scheme: int, row: int) -> None:
    """A shaded band between ``lo`` and ``hi`` (no legend entry, no hover)."""
    fill = translucent(SCHEME_COLORS[color], 0.16 if scheme == 0 else 0.08)
    for y, fill_mode in ((hi, None), (lo, "tonexty")):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                line=dict(width=0),
                fill=fill_mode,
                fillcolor=fill,
                showlegend=False,
                hoverinfo="skip",
            ),  # fmt: skip
            row=row,
            col=1,
        )


TURNS_SHOWN = 6


def turn_share_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Long table (step, turn, share) of ``turn_credit_share``: turns beyond ``TURNS_SHOWN`` summed as "later"."""
    rows = []
    for step, shares in zip(df["step"], df["turn_credit_share"], strict=True):
        shares = list(shares) if shares is not None else []
        for k, v in enumerate(shares[:TURNS_SHOWN]):
            rows.append((step, f"turn {k + 1}", float(v)))
        if len(shares) > TURNS_SHOWN:
            rows.append((step, "later turns", float(sum(shares[TURNS_SHOWN:]))))
    return pd.DataFrame(rows, columns=["step", "turn", "share"])


def make_turn_share_figure(df: pd.DataFrame) -> go.Figure:
    """Stacked areas: each turn's share of Σ|w·A| per step (where credit lands within the trajectory)."""
    long = turn_share_frame(df)
    fig = go.Figure()
    for j, (turn, part) in enumerate(long.groupby("turn", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["step"],
                y=part["share"],
                name=turn,
                stackgroup="turns",
                mode="lines",
                line=dict(width=0.5, color=SCHEME_COLORS[j % len(SCHEME_COLORS)]),
                hovertemplate=f"step %{{x}}<br>{turn} %{{y:.1%}}<extra></extra>",
            )
        )
    fig.update_yaxes(title_text="share of |w·A|", tickformat=".0%", range=[0, 1])
    fig.update_xaxes(title_text="training step")
    return base_layout(fig, height=320)


def lint_frame(df: pd.DataFrame) -> pd.DataFrame:
    """(lint check × step) trajectories flagged, checks that flag something in some step, most flagged first."""
    cols = [c for c in df.columns if c.startswith("lint_") and df[c].fillna(0).sum() > 0]
    table = df.set_index("step")[cols].fillna(0).T
    table.index = [c.removeprefix("lint_") for c in table.index]
    return table.loc[table.sum(axis=1).sort_values(ascending=False).index]


def make_lint_figure(df: pd.DataFrame) -> go.Figure:
    """Heatmap: trajectories each lint check flags, step by step."""
    table = lint_frame(df)
    fig = go.Figure(
        go.Heatmap(
            z=table.to_numpy(),
            x=table.columns,
            y=[escape(c) for c in table.index],
            colorscale="Oranges",
            colorbar=dict(title="flagged"),
            hovertemplate="step %{x}<br>%{y}: %{z} trajectories<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="training step")
    return base_layout(fig, height=max(160, 28 * len(table) + 110))


def step_summary(df: pd.DataFrame, step: int) -> dict[str, float]:
    """The numbers of one step's row (for the caption under the figure)."""
    row = df[df["step"] == step]
    if row.empty:
        return {}
    r = row.iloc[0]
    keys = ("trajectories", "score_mean", "solve_rate", "zero_variance_group_share", "info_weight_share")
    return {k: float(r[k]) for k in keys if k in r and not (isinstance(r[k], float) and math.isnan(r[k]))}
