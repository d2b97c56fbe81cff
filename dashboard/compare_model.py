"""The compare page's model: which schemes the default comparison holds (the sidebar's scheme varied one thing at a
time), what each one is called given what really ran, the rLLM step table, and the token-aligned HTML grid.

Pure except ``step_results`` (computes through the cached ``services``); ``option_label`` fills a scheme's
conventions through ``services.effective_config`` (no engine call)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dashboard import schemes
from dashboard.theme import (
    CARD_BACKGROUND,
    FAINT_TEXT,
    FONT_FAMILY,
    MONO_FAMILY,
    MUTED_TEXT,
    OUT_OF_LOSS_FILL,
    OUT_OF_LOSS_HATCH,
    OUT_OF_LOSS_INK,
    PAGE_BACKGROUND,
    SCHEME_COLORS,
    SECONDARY_TEXT,
    SWATCH_TEXT,
    TABLE_BORDER,
    TABLE_HEAD_RULE,
    TABLE_RULE,
    TOKEN_ROW_BACKGROUND,
    TURN_RULE,
    diverging_css,
)
from dashboard.tokens_html import escape
from engine.config import STEPWISE_MODES, CreditConfig
from engine.registry import ESTIMATORS

MAX_SCHEMES = 6
GRID_WINDOW = 160  # tokens per window of the aligned grid (keeps the page quick on 2,048-token trajectories)
STEP_ROLLOUTS = 8  # rollouts of the group shown in the step table


def uses_values(estimator: str) -> bool:
    return "values" in ESTIMATORS[estimator].requires


# ---------------------------------------------------------------------------------------------- which schemes
def auto_codes(cfg: CreditConfig, has_values: bool) -> list[str]:
    """The default comparison: the sidebar scheme ``cfg`` (its profile, std convention, placement, KL, …) under
    the three rLLM modes, then GAE when the run has critic values (or the sidebar itself runs GAE), so that any
    two columns differ in one thing. A value-based sidebar estimator is replaced by GRPO in the mode columns."""
    est = "grpo" if uses_values(cfg.estimator) else cfg.estimator
    base = cfg.replace(estimator=est, value_source=None)
    codes = [schemes.encode(base.replace(stepwise_mode=m)) for m in STEPWISE_MODES]
    if has_values or uses_values(cfg.estimator):
        vs = None if has_values else cfg.value_source
        codes.append(schemes.encode(base.replace(estimator="gae", stepwise_mode="trajectory", value_source=vs)))
    return codes


def expand(codes: Sequence[str], cfg: CreditConfig, has_values: bool) -> tuple[list[str], str]:
    """``codes`` with ``schemes.AUTO`` replaced by ``auto_codes``, duplicates dropped, at most six; and a note
    when some were left out ("" otherwise)."""
    out: list[str] = []
    for c in codes:
        out += auto_codes(cfg, has_values) if c == schemes.AUTO else [c]
    out = list(dict.fromkeys(out))
    if len(out) > MAX_SCHEMES:
        return out[:MAX_SCHEMES], f"Showing the first {MAX_SCHEMES} of {len(out)} schemes."
    return out, ""


def run_label(code: str, effective: CreditConfig | None, synthesized_values: bool = False) -> str:
    """What ran, in words: the preset's name (or the code in words) when the run computed the code as written;
    the effective scheme in words when the run needed a stand-in ("GAE (values = zeros, no critic)"). A critic the
    loader made up (``synthesized_values``) is called so: "GAE (synthesized critic values)"."""
    return _critic_named(_run_label(code, effective), synthesized_values)


def _critic_named(text: str, synthesized_values: bool) -> str:
    """``text`` (a label or a what-differs line) with "(critic)" said as what it is when the loader made it up."""
    return text.replace("(critic)", "(synthesized critic values)") if synthesized_values else text


def _run_label(code: str, effective: CreditConfig | None) -> str:
    if effective is None or code == schemes.AUTO:
        return schemes.label(code)
    try:
        as_written = schemes.decode(code)
    except ValueError:
        return schemes.label(code)
    if schemes.encode(as_written) == schemes.encode(effective):
        return schemes.label(code)
    return schemes.words(effective)


def synthesized_values(info) -> bool:
    """Whether the loader made up the critic values of any trajectory of the run (a ``tables.RunInfo``)."""
    return any(field == "values" and n > 0 for field, n in info.synthesized)


def option_label(code: str, info=None, value_source: str | None = None) -> str:
    """The Schemes multiselect's ``format_func`` (bound to the run's ``info``, a ``tables.RunInfo``, and the
    sidebar's ``value_source`` with ``functools.partial``): the label of what this run would compute for ``code``.
    Bound, not read from the session, so the label is the same wherever Streamlit formats the value."""
    from dashboard import services

    if code == schemes.AUTO:
        return schemes.AUTO_LABEL
    if info is None:
        return schemes.label(code)
    try:
        eff = services.effective_config(info, schemes.decode(code), value_source)
    except (ValueError, KeyError):
        return schemes.label(code)
    return run_label(code, eff, synthesized_values(info))


def differences_from(configs: Sequence[CreditConfig], ref: int, synthesized_values: bool = False) -> list[str]:
    """One line per scheme: what differs from the reference scheme ``ref`` ("reference" for itself); a critic the
    loader made up is called so."""
    lines = ["reference" if s == ref else schemes.differences(configs[ref], c) for s, c in enumerate(configs)]
    return [_critic_named(x, synthesized_values) for x in lines]


# ---------------------------------------------------------------------------------------------- step table
def step_configs(cfg: CreditConfig) -> dict[str, CreditConfig]:
    """The sidebar scheme's (value-free) estimator under the three rLLM modes, and the same with the opposite
    std normalisation, by column name."""
    est = "grpo" if uses_values(cfg.estimator) else cfg.estimator
    base = cfg.replace(estimator=est, value_source=None)
    other = "no std" if base.norm_adv_by_std_in_grpo else "÷ std"
    out = {}
    for flip, suffix in ((False, ""), (True, f" ({other})")):
        b = base.replace(norm_adv_by_std_in_grpo=not base.norm_adv_by_std_in_grpo) if flip else base
        for m in STEPWISE_MODES:
            out[f"{schemes.MODE_WORDS[m]}{suffix}"] = b.replace(stepwise_mode=m)
    return out


def step_frame(
    table: pd.DataFrame, names: Sequence[str], ids: Sequence[str] | None = None, step_rewards: np.ndarray | None = None
) -> pd.DataFrame:
    """``analysis.step_table``'s frame with readable advantage columns, and the second std convention's columns
    dropped when they equal the first's (the estimator does not divide by a std). ``step_rewards`` ([B, K], the
    per-step result's ``extras["step_rewards"]``, rows named by ``ids``): the step reward column shows the rewards
    the engine placed on each step's tokens, which per-step discounts (under final-token placement the whole
    score sits on the last step), instead of the weighted turn reward."""
    df = table.rename(columns={f"A · {n}": f"A {n}" for n in names})
    if step_rewards is not None and ids is not None and len(df):
        row = {t: j for j, t in enumerate(ids)}
        df["step reward"] = [float(step_rewards[row[r], k - 1]) for r, k in zip(df["rollout"], df["step"], strict=True)]
    flipped = [n for n in names if "(" in n]
    plain = [n for n in names if "(" not in n]
    if flipped and all(
        np.allclose(df[f"A {p}"].to_numpy(), df[f"A {f}"].to_numpy()) for p, f in zip(plain, flipped, strict=False)
    ):
        df = df.drop(columns=[f"A {f}" for f in flipped])
    return df


def _fmt_steps(values: Sequence[float]) -> str:
    return " / ".join(f"{v:+.4g}" for v in values)


def step_sentence(df: pd.DataFrame, rollout: str, gamma: float) -> str:
    """One or two sentences, from the table's numbers, on how broadcast and per-step differ for ``rollout``."""
    me = df[df["rollout"] == rollout]
    if me.empty or "A broadcast" not in me or "A per-step" not in me:
        return ""
    b, p = me["A broadcast"].to_numpy(), me["A per-step"].to_numpy()
    text = (
        f"Broadcast copies one advantage, computed from the whole trajectory's reward, to every step "
        f"({rollout}: {_fmt_steps(b)}); per-step scores each step by its own Monte-Carlo return "
        f"G_k = r_k + γ·G_(k+1) (γ = {gamma:g}) against the other rollouts' k-th steps ({rollout}: {_fmt_steps(p)})."
    )
    if np.allclose(b, p, atol=1e-6):
        text += " Under this scheme the two coincide here: each step group normalises to the same value."
        flipped = [c for c in me.columns if c.startswith("A per-step (")]
        if flipped:
            fb = me[flipped[0].replace("per-step", "broadcast")].to_numpy()
            fp = me[flipped[0]].to_numpy()
            if not np.allclose(fb, fp, atol=1e-6):
                which = flipped[0].removeprefix("A per-step ")
                text += f" With {which.strip('()')} they differ: broadcast {_fmt_steps(fb)}, per-step {_fmt_steps(fp)}."
    return text


# ---------------------------------------------------------------------------------------------- aligned grid
GRID_CSS = f"""
<style>
.cl-grid-wrap {{ overflow-x: auto; overflow-y: hidden; border: 1px solid {TABLE_BORDER}; border-radius: 6px;
  max-width: 100%; }}
table.cl-grid {{ border-collapse: separate; border-spacing: 0; font-family: {MONO_FAMILY}; font-size: 15px; }}
table.cl-grid th.cl-lab {{ position: sticky; left: 0; z-index: 2; background: {PAGE_BACKGROUND}; text-align: left;
  font-family: {FONT_FAMILY}; font-size: 14px; font-weight: 600; min-width: 240px; max-width: 300px;
  white-space: normal; overflow-wrap: normal; word-break: normal; padding: 4px 10px;
  border-right: 2px solid {TABLE_HEAD_RULE}; border-bottom: 1px solid {TABLE_RULE}; }}
table.cl-grid td {{ white-space: pre; padding: 3px 5px; text-align: center; min-width: 2.2em;
  border-bottom: 1px solid {TABLE_RULE}; }}
table.cl-grid tr.cl-pos td {{ font-size: 11px; color: {FAINT_TEXT}; padding: 1px 4px; }}
table.cl-grid tr.cl-tok td {{ font-weight: 600; background: {TOKEN_ROW_BACKGROUND}; }}
table.cl-grid tr.cl-tok td.cl-tool {{ color: {MUTED_TEXT}; font-style: italic; font-weight: 400; }}
table.cl-grid td.cl-ts {{ border-left: 2px solid {TURN_RULE}; }}
table.cl-grid td.cl-out {{ background-color: {OUT_OF_LOSS_FILL}; color: {OUT_OF_LOSS_INK};
  background-image: repeating-linear-gradient(135deg, {OUT_OF_LOSS_HATCH} 0 2px, transparent 2px 7px); }}
table.cl-grid td.cl-v {{ font-size: 14px; }}
</style>
"""


def _tok_text(t: str) -> str:
    return escape(t).replace("\n", "↵").replace("\t", "⇥") if t != "" else "∅"


def aligned_grid_html(
    labels: Sequence[str],
    adv: np.ndarray,
    loss: np.ndarray,
    table: pd.DataFrame,
    window: tuple[int, int],
    vmax: float,
    loss_only: bool = True,
) -> str:
    """One shared horizontal scroll: a column per token (position, token text on top), a row per scheme, each
    cell coloured by that scheme's advantage on one ±``vmax`` scale and showing its value. Cells outside a
    scheme's loss are hatched grey (empty when ``loss_only``, else the value the estimator computed there, which
    no gradient uses). Turn boundaries are a dark rule. adv, loss: [S, n]; ``table``: the token table."""
    start, stop = window
    toks = table["token"].tolist()[start:stop]
    turns = table["turn"].to_numpy()[start:stop]
    roles = table["role"].tolist()[start:stop]
    pos = np.arange(start, stop)
    ts = np.r_[False, np.diff(turns) != 0] if len(turns) else np.zeros(0, bool)
    out = [GRID_CSS, "<div class='cl-grid-wrap'><table class='cl-grid'>"]

    def tscls(j: int) -> str:
        return " cl-ts" if ts[j] else ""

    out.append(f"<tr class='cl-pos'><th class='cl-lab' style='font-weight:400;color:{FAINT_TEXT}'>position · turn</th>")
    out += [
        f"<td class='{tscls(j).strip()}'>{p}{f' · T{turns[j]}' if ts[j] or j == 0 else ''}</td>"
        for j, p in enumerate(pos)
    ]
    out.append("</tr><tr class='cl-tok'><th class='cl-lab'>token</th>")
    for j, t in enumerate(toks):
        cls = ("cl-tool" if roles[j] != "model" else "") + tscls(j)
        out.append(f"<td class='{cls.strip()}' title='{escape(roles[j])}'>{_tok_text(t)}</td>")
    out.append("</tr>")
    for s, name in enumerate(labels):
        a = adv[s, start:stop]
        m = loss[s, start:stop].astype(bool)
        bg, fg = diverging_css(np.where(m, a, 0.0), vmax)
        out.append(f"<tr><th class='cl-lab' style='border-left:6px solid {SCHEME_COLORS[s % 8]}'>{escape(name)}</th>")
        for j in range(len(a)):
            if m[j]:
                out.append(
                    f"<td class='cl-v{tscls(j)}' style='background:{bg[j]};color:{fg[j]}' "
                    f"title='#{pos[j]} advantage {a[j]:+.5g}'>{a[j]:+.3g}</td>"
                )
            else:
                text = "" if loss_only else f"{a[j]:+.3g}"
                out.append(
                    f"<td class='cl-v cl-out{tscls(j)}' title='#{pos[j]} not in the loss: no gradient "
                    f"(computed {a[j]:+.5g})'>{text}</td>"
                )
        out.append("</tr>")
    out.append("</table></div>")
    return "".join(out)


def grid_legend_html(vmax: float) -> str:
    lo, mid, hi = (diverging_css(np.array([v]), vmax)[0][0] for v in (-vmax, 0.0, vmax))
    sw = "display:inline-block;padding:1px 8px;border-radius:3px;margin:0 4px;font-family:" + MONO_FAMILY
    return (
        GRID_CSS + f"<div style='font-family:{FONT_FAMILY};font-size:0.9rem;margin:4px 0 8px 0'>advantage, one scale "
        f"for every row: <span style='{sw};background:{lo};color:{SWATCH_TEXT}'>{-vmax:+.3g}</span>"
        f"<span style='{sw};background:{mid}'>0</span>"
        f"<span style='{sw};background:{hi};color:{SWATCH_TEXT}'>{vmax:+.3g}</span>"
        f" · <table class='cl-grid' style='display:inline-table;vertical-align:middle'><tr>"
        f"<td class='cl-out' style='min-width:3em'>&nbsp;</td></tr></table> not in the loss (no gradient)"
        " · dark rule: a new turn · italic grey: tool / info tokens</div>"
    )


def step_table_html(df: pd.DataFrame, selected: str) -> str:
    """The step table as an HTML table (readable on a projector, copyable): numbers to 4 significant digits,
    the selected rollout's rows bold; every cell escaped."""
    head = "".join(f"<th>{escape(c)}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, int | float | np.number) and not isinstance(v, bool):
                text = f"{float(v):.4g}"
                cells.append(f"<td class='cl-num'>{'0' if text == '-0' else text}</td>")
            else:
                cells.append(f"<td>{escape(v)}</td>")
        bold = " style='font-weight:700'" if row[0] == selected else ""
        body.append(f"<tr{bold}>{''.join(cells)}</tr>")
    return (
        f"<style>table.cl-steps {{ border-collapse: collapse; font-family: {FONT_FAMILY}; font-size: 15px; }}"
        " table.cl-steps th { text-align: left; font-weight: 600; padding: 5px 10px;"
        f" border-bottom: 2px solid {TABLE_HEAD_RULE}; white-space: nowrap; }}"
        f" table.cl-steps td {{ padding: 4px 10px; border-bottom: 1px solid {TABLE_RULE}; }}"
        f" table.cl-steps td.cl-num {{ text-align: right; font-family: {MONO_FAMILY}; }}</style>"
        f"<div style='overflow-x:auto'><table class='cl-steps'><tr>{head}</tr>{''.join(body)}</table></div>"
    )


# ---------------------------------------------------------------------------------------------- the page's HTML
def scheme_cards_html(labels: Sequence[str], notes: Sequence[str], ref: int, in_loss: np.ndarray) -> str:
    """One card per scheme, in its colour: its name, how it differs from the reference, its tokens in the loss.
    ``in_loss``: (schemes, T) bool of the trajectory shown."""
    n_tok = in_loss.shape[1]
    cards = []
    for s, (name, note) in enumerate(zip(labels, notes, strict=True)):
        trained = int(in_loss[s].sum())
        cards.append(
            f"<div style='flex:1 1 230px;max-width:420px;border-top:6px solid {SCHEME_COLORS[s % 8]};"
            f"background:{CARD_BACKGROUND};border-radius:4px;padding:6px 10px'>"
            f"<div style='font-weight:700;font-size:1.02rem'>{escape(name)}</div>"
            f"<div style='color:{SECONDARY_TEXT};font-size:0.92rem;margin-top:2px'>"
            f"{'' if s == ref else 'vs. reference: '}{escape(note)}</div>"
            f"<div style='color:{FAINT_TEXT};font-size:0.82rem;margin-top:2px'>"
            f"{trained} of {n_tok} tokens in the loss</div>"
            "</div>"
        )
    return f"<div style='display:flex;flex-wrap:wrap;gap:10px;font-family:{FONT_FAMILY}'>{''.join(cards)}</div>"


def sentence_html(sentence: str) -> str:
    """A sentence about the step table, in the page's reading size, escaped."""
    return f"<div style='font-family:{FONT_FAMILY};font-size:1.05rem;line-height:1.5'>{escape(sentence)}</div>"


def scheme_detail_html(name: str, code: str, placement: str, profile: str) -> str:
    """One scheme's line in "Scheme details": its name, code, placement and profile, escaped."""
    return (
        f"<div><b>{escape(name)}</b> — code <code>{escape(code)}</code> · placement "
        f"{escape(placement)} · profile {escape(profile)}</div>"
    )
