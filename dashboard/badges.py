"""Data-fact badges: what a trajectory or a group *is* before any scheme looks at it, said on screen.

A trajectory can be ``truncated`` (it ran into the length limit: ``metadata["truncated"]``), ``synthesized`` (the
loader made some of its fields up: ``metadata["synthesized"]``, see ``engine.io.reading.fields.mark_synthesized``) or
``excluded`` from the loss (``metadata["exclude_from_loss"]``: its action mask is 0). Its group can be a
``singleton`` (one rollout of the prompt: no group baseline) or ``zero-variance`` (every rollout scored the same
under the scheme: group-centred advantages are 0).

Pure functions (no Streamlit): the run's metadata and the trajectory summary (``tables.trajectory_summary``) in,
badge names out; one HTML renderer for rows of pills (escaped, with a tooltip each). Also the estimator labels
that follow the scheme (GRPO / Dr.GRPO with the std toggle; GAE's values) and the glossary (docs/GLOSSARY.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from dashboard.theme import BADGE_COLORS, BADGE_OFF_COLORS, MUTED_TEXT
from dashboard.tokens_html import escape
from engine import get_estimator

GLOSSARY_PATH = Path(__file__).resolve().parent.parent / "docs" / "GLOSSARY.md"


@dataclass(frozen=True)
class Badge:
    name: str  # shown on the pill; also the glossary term
    color: str  # st.badge colour name
    background: str  # pill colours (HTML)
    foreground: str
    tip: str  # what it means, for the tooltip


BADGES: dict[str, Badge] = {
    b.name: b
    for b in (
        Badge(
            "truncated",
            "orange",
            *BADGE_COLORS["truncated"],
            "The rollout ran into the response length limit (metadata.truncated): its end is cut off, and its "
            "reward may be a penalty or missing. Some trainers mask such rows out (mask_truncated_samples).",
        ),
        Badge(
            "synthesized",
            "violet",
            *BADGE_COLORS["synthesized"],
            "The loader made up fields this source did not record (metadata.synthesized): numbers computed from "
            "them (critic values → GAE, log-probs → KL) are illustrative, not the trainer's.",
        ),
        Badge(
            "excluded",
            "gray",
            *BADGE_COLORS["excluded"],
            "The trainer excluded this rollout from the loss (metadata.exclude_from_loss): its action mask is 0, "
            "so no gradient lands on it whatever its advantage.",
        ),
        Badge(
            "singleton",
            "blue",
            *BADGE_COLORS["singleton"],
            "The only rollout of its prompt (a group of 1): there is no group baseline. verl's GRPO then uses "
            "mean 0 and std 1, so the advantage is the raw score; RLOO keeps the raw score too; RLOO-vectorized "
            "gives 0; GRPO pass@k refuses the run.",
        ),
        Badge(
            "zero-variance",
            "red",
            *BADGE_COLORS["zero-variance"],
            "Every rollout of this prompt got the same score under this scheme: group-centred advantages (GRPO, "
            "Dr.GRPO, RLOO, …) are 0, so the prompt teaches nothing under them.",
        ),
    )
}
ORDER = tuple(BADGES)  # display order
TRAJECTORY_BADGES = ("truncated", "synthesized", "excluded")
GROUP_BADGES = ("singleton", "zero-variance")


# ------------------------------------------------------------------------------------------------ facts
def synthesized_fields(metadata: dict) -> tuple[str, ...]:
    """The field names a trajectory's ``metadata["synthesized"]`` lists (sorted; a lone string counts as one)."""
    raw = metadata.get("synthesized") or ()
    if isinstance(raw, str):
        raw = (raw,)
    return tuple(sorted({str(f) for f in raw}))


def metadata_badges(metadata: dict) -> list[str]:
    """The trajectory badges its metadata alone gives: truncated, synthesized, excluded."""
    out = []
    if metadata.get("truncated"):
        out.append("truncated")
    if synthesized_fields(metadata):
        out.append("synthesized")
    if metadata.get("exclude_from_loss") is True:
        out.append("excluded")
    return out


def group_flags(row) -> list[str]:
    """The group badges of a summary row (``tables.trajectory_summary``): singleton, zero-variance."""
    out = []
    if bool(row["singleton"]):
        out.append("singleton")
    if bool(row["zero variance"]):
        out.append("zero-variance")
    return out


def trajectory_badges(run, summary: pd.DataFrame, i: int) -> list[str]:
    """Every badge of trajectory ``i``: its own (metadata) and its group's (under the summary's scheme)."""
    names = metadata_badges(run.trajectories[i].metadata) + group_flags(summary.iloc[i])
    return [n for n in ORDER if n in names]


def rows_badges(run, summary: pd.DataFrame, rows: Sequence[int]) -> list[list[str]]:
    """``trajectory_badges`` of each of ``rows``."""
    return [trajectory_badges(run, summary, int(i)) for i in rows]


def group_badges(summary: pd.DataFrame, rows: Sequence[int]) -> list[str]:
    """The badges of the group made of ``rows`` (its rows share group size and std): singleton, zero-variance."""
    return group_flags(summary.iloc[int(rows[0])]) if len(rows) else []


def run_counts(info, summary: pd.DataFrame) -> dict[str, int]:
    """How many trajectories of the run carry each badge (every badge listed, 0 included), from the cached
    ``RunInfo.flags`` and the summary's zero-variance column (milliseconds at 50,000 trajectories)."""
    counts = Counter(n for flags in info.flags for n in flags)
    counts["zero-variance"] = int(summary["zero variance"].sum())
    return {n: int(counts[n]) for n in ORDER}


def group_stat_text(row) -> tuple[str, str, str]:
    """(metric value, delta note, help) for a summary row's group statistics: "μ ± σ", or, for a singleton, no
    statistics at all (not verl's stand-ins 0 ± 1), and for a zero-variance group a note saying so."""
    n = int(row["group size"])
    if bool(row["singleton"]):
        return (
            "none",
            "singleton (1 rollout)",
            "Only rollout of its prompt: no group mean or std exists. verl's GRPO stands in mean 0 and std 1, "
            "so its GRPO advantage is its raw score; RLOO-vectorized gives 0.",
        )
    mean, std = float(row["group mean"]), float(row["group std"])
    if bool(row["zero variance"]):
        return (
            f"{mean:.3g} ± 0",
            "zero variance",
            f"All {n} rollouts of this prompt scored {mean:.4g}: group-centred advantages (GRPO, RLOO, …) are 0.",
        )
    return f"{mean:.3g} ± {std:.3g}", "", f"mean and std of the scores of the {n} rollouts of this prompt"


# ------------------------------------------------------------------------------------------------ rendering
def badge_text(names: Iterable[str], fields: Sequence[str] = ()) -> str:
    """Plain text for a table cell: "truncated · synthesized" (with ``fields``: "synthesized (log_probs, values)");
    "" for none."""
    parts = []
    for n in names:
        parts.append(f"{n} ({', '.join(fields)})" if n == "synthesized" and fields else n)
    return " · ".join(parts)


def tip(name: str, fields: Sequence[str] = ()) -> str:
    """The tooltip of badge ``name`` (a synthesized badge names its fields)."""
    text = BADGES[name].tip
    if name == "synthesized" and fields:
        text = f"Synthesized here: {', '.join(fields)}. " + text
    return text


def pills_html(names: Iterable[str], fields: Sequence[str] = (), prefix: str = "") -> str:
    """Small coloured pills, one per badge, each with its explanation as a tooltip; escaped. "" for none."""
    names = list(names)
    if not names:
        return ""
    pills = []
    for n in names:
        b = BADGES[n]
        label = f"{n}: {', '.join(fields)}" if n == "synthesized" and fields else n
        pills.append(
            f"<span class='cl-badge' title='{escape(tip(n, fields))}' style='display:inline-block;"
            f"background:{b.background};color:{b.foreground};border:1px solid {b.foreground}33;border-radius:999px;"
            f"padding:1px 9px;margin:0 4px 2px 0;font-size:0.8rem;font-weight:600;line-height:1.5;cursor:help'>"
            f"{escape(label)}</span>"
        )
    lead = (
        f"<span style='color:{MUTED_TEXT};font-size:0.85rem;margin-right:6px'>{escape(prefix)}</span>" if prefix else ""
    )
    return f"<div class='cl-badges' style='margin:2px 0 6px 0'>{lead}{''.join(pills)}</div>"


def counts_html(counts: dict[str, int], total: int) -> str:
    """One pill per badge with its count over the run ("truncated 4 / 57"); badges with 0 are greyed."""
    pills = []
    for n, k in counts.items():
        b = BADGES[n]
        bg, fg = (b.background, b.foreground) if k else BADGE_OFF_COLORS
        pills.append(
            f"<span class='cl-badge' title='{escape(BADGES[n].tip)}' style='display:inline-block;background:{bg};"
            f"color:{fg};border-radius:999px;padding:2px 10px;margin:0 6px 4px 0;font-size:0.85rem;"
            f"font-weight:600;cursor:help'>{escape(n)} {k:,} / {total:,}</span>"
        )
    return f"<div class='cl-badges'>{''.join(pills)}</div>"


# ------------------------------------------------------------------------------------------------ run holds
def holds_text(info) -> tuple[str, str]:
    """("Run holds: …", "lacks: …") for a ``tables.RunInfo``: a field the loader synthesized says so, with how
    many trajectories ("critic values (synthesized: all 57 trajectories)")."""
    synth = dict(info.synthesized)
    n = info.trajectories

    def made_up(*fields: str) -> str:
        k = max((synth.get(f, 0) for f in fields), default=0)
        if not k:
            return ""
        return f" (synthesized: all {n:,} trajectories)" if k == n else f" (synthesized in {k:,} of {n:,} trajectories)"

    has = {
        "critic values": (info.has_values, made_up("values")),
        "old & ref log-probs": (info.has_log_probs, made_up("log_probs", "ref_log_probs")),
        "turn rewards": (info.has_turn_rewards, made_up("turn_rewards")),
        "global rewards": (info.has_global_rewards, made_up("global_rewards")),
        "token scores": (info.has_token_scores, made_up("token_scores")),
        "ReMax baselines": (info.has_baselines, ""),
        "logged advantages": (getattr(info, "has_logged_advantages", False), ""),
    }
    holds = ", ".join(k + note for k, (v, note) in has.items() if v) or "nothing optional"
    lacks = ", ".join(k for k, (v, _) in has.items() if not v) or "nothing"
    return f"Run holds: {holds}", f"lacks: {lacks}"


# ------------------------------------------------------------------------------------------------ estimator labels
VALUE_SOURCE_WORDS = {"zeros": "zero values", "group_mean": "group-mean values"}


def estimator_label(name: str, label: str, norm_by_std: bool = True, info=None, value_source: str | None = None) -> str:
    """The estimator's name as the scheme makes it: GRPO with the std toggle on, Dr.GRPO-style without; GAE
    without a critic names its stand-in values, with synthesized values says so. ``label`` is the registry's."""
    if get_estimator(name).std_normalised and not norm_by_std:  # the registry label names the std-on estimator
        return "Dr.GRPO (GRPO without ÷ std)" if name == "grpo" else f"{label}, without ÷ std (Dr.GRPO-style)"
    if name == "gae" and info is not None:
        if not info.has_values:
            return f"GAE (no critic: {VALUE_SOURCE_WORDS.get(value_source or 'zeros', 'stand-in values')})"
    return label  # synthesized critic values: the picker keeps the registry label, ``estimator_note`` says so


def estimator_option(
    name: str, *, labels: dict[str, str], norm_by_std: bool, info=None, value_source: str | None = None
) -> str:
    """``estimator_label`` as a selectbox ``format_func`` (bind the keywords with ``functools.partial``)."""
    return estimator_label(name, labels[name], norm_by_std, info, value_source)


def estimator_note(name: str, info, value_source: str | None = None) -> str:
    """A caption under the estimator picker when its input is not the trainer's ("" otherwise)."""
    if name != "gae" or info is None:
        return ""
    if not info.has_values:
        words = VALUE_SOURCE_WORDS.get(value_source or "zeros", "stand-in values")
        return f"This run has no critic: GAE bootstraps from {words}, not from a trained critic."
    k = dict(info.synthesized).get("values", 0)
    if k:
        return (
            f"The critic values GAE reads were synthesized by the loader in {k:,} of {info.trajectories:,} "
            "trajectories: its advantages are illustrative, not the trainer's."
        )
    return ""


def log_prob_note(info) -> str:
    """What the in-reward KL toggle's help adds about the run's log-probs ("" when they are the trainer's)."""
    if not info.has_log_probs:
        return " (this run has no log-probs)"
    synth = dict(info.synthesized)
    k = max(synth.get("log_probs", 0), synth.get("ref_log_probs", 0))
    return f" (this run's log-probs are synthesized in {k:,} of {info.trajectories:,} trajectories)" if k else ""


def css_key_class(key: str) -> str:
    """The CSS class Streamlit gives a keyed element: ``st-key-`` + the key with every character outside
    [A-Za-z0-9_-] replaced by "-" (Streamlit 1.67's frontend)."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


# ------------------------------------------------------------------------------------------------ glossary
@cache
def glossary_text() -> str:
    return GLOSSARY_PATH.read_text(encoding="utf-8") if GLOSSARY_PATH.is_file() else ""


def glossary_markdown() -> str:
    """The glossary for the page: docs/GLOSSARY.md without its title and intro paragraph."""
    text = glossary_text()
    start = text.find("\n## ")
    return text[start + 1 :] if start >= 0 else text


def glossary() -> dict[str, str]:
    """Term → entry of docs/GLOSSARY.md (lines "- **term**: text")."""
    return {
        m.group(1).strip().lower(): m.group(2).strip()
        for m in re.finditer(r"^- \*\*(.+?)\*\*[:：]\s*(.+)$", glossary_text(), flags=re.M)
    }


def summary_badge_column(info, summary: pd.DataFrame) -> list[str]:
    """The "badges" text column of the whole summary, one cell per trajectory, from the cached
    ``RunInfo.flags`` and the summary's zero-variance column (no per-row ``iloc``)."""
    zero = summary["zero variance"].to_numpy(bool)
    return [badge_text([*flags, "zero-variance"] if z else flags) for flags, z in zip(info.flags, zero, strict=True)]


def rollouts_html(members: Sequence[str]) -> str:
    """The group's rollout badges in words ("solved 3 of 8 · …"), muted, escaped; "" for none."""
    if not members:
        return ""
    return f"<div style='color:{MUTED_TEXT};font-size:0.9rem'>Rollouts: {escape(' · '.join(members))}</div>"
