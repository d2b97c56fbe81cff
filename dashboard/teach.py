"""The Learn page's worked examples (docs/TUTORIAL.md §7), built from their own numbers and run through the engine.

* A write-up of KG-R1's structured multi-turn reward pipeline (KG-R1 7538a53) writes one reward dict: turn
  rewards {1: 0.15, 2: 0.20, ...}, global rewards {exact_match: 0.3, retrieval_quality: 0.4, _raw_exact_match:
  0.6 (log only)}, total_score 0.65, and the rule total = mean(turn rewards) + Σ global. ``kgr1_run`` puts
  exactly those values on a tiny two-turn trajectory (tokens made up here: the document gives rewards, not text)
  plus two variants that answer wrongly, so GRPO has a group; ``services.kgr1_example`` runs ``compute_credit`` on it.
* Notes on rLLM's three advantage modes (rLLM agent_ppo_trainer.py) write rewards 1.0 / 0.0, trajectory
  advantages ±0.5, the same ±0.5 broadcast to each of the three steps, and per-step Monte-Carlo returns 1.0, 0.95,
  0.9025 (γ = 0.95) and 0, 0, 0. ``rllm_doc_table`` sets those beside the engine's numbers on the sample run.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dashboard.theme import INFO_HATCH, INFO_OUTLINE, MONO_FAMILY, SECONDARY_TEXT, diverging_css, symmetric_range
from dashboard.tokens_html import escape
from engine import CreditConfig, CreditResult, PolicyLoss, list_policy_losses
from engine.batch import TrajectoryBatch
from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.profiles import PROFILES

# ---------------------------------------------------------------------------- KG-R1's structured-reward write-up
DOC_TURN_REWARDS: tuple[float, ...] = (0.15, 0.20)  # turn_rewards {1: 0.15, 2: 0.20, ...}
DOC_GLOBAL_REWARDS: dict[str, float] = {"exact_match": 0.3, "retrieval_quality": 0.4, "_raw_exact_match": 0.6}
RLLM_SAMPLE = "python_tool_two_rollouts"  # the sample run tab (b) computes rLLM's three modes on
DOC_TOTAL_SCORE = 0.65  # total_score as the document writes it
KGR1_EXCLUDE = PROFILES["kg-r1"].conventions["global_exclude_prefixes"]  # KG-R1 leaves out only '_raw_' keys
TURN_COMPONENT = "turn_reward"  # the document gives one number per turn: one component of weight 1

# The example's tokens (one word = one token). Turn 1: think + a KG query, answered by an <information> block;
# turn 2: think + the answer. The answer word is the only thing the group's variants change.
QUESTION = "Which city is the capital of the country of entity m.01?"
TURN1_MODEL = ["<think>", " Which", " country", " is", " m.01", " in?", " </think>", " <kg-query>",
               " get_relations(m.01)", " </kg-query>"]  # fmt: skip
TURN1_INFO = ["<information>", " located_in", " ->", " France", " </information>"]
TURN2_MODEL = ["<think>", " Its", " capital", " is", " {answer}.", " </think>", " <answer>", " {answer}",
               " </answer>"]  # fmt: skip

# (id, answer, global rewards): the document's trajectory first, then two made-up members of its group.
GROUP = (
    ("document", "Paris", DOC_GLOBAL_REWARDS),
    ("wrong-answer", "Lyon", {"exact_match": 0.0, "retrieval_quality": 0.4, "_raw_exact_match": 0.0}),
    ("wrong-answer-poor-retrieval", "Berlin", {"exact_match": 0.0, "retrieval_quality": 0.0, "_raw_exact_match": 0.0}),
)

# KG-R1's trainer as the document describes it: γ = λ = 1, state masking, GAE with final_token_only. The
# document's reward values are used as written (weight 1: they are already the weighted contributions), and
# there is no critic in the example, so GAE's values are zeros.
DOC_CONFIG = CreditConfig(
    profile="kg-r1",
    estimator="gae",
    gamma=1.0,
    lam=1.0,
    state_masking=True,
    placement="final_token_only",
    turn_weights=(),
    global_weights=(),
    value_source="zeros",
)
DOC_DEVICE = "cpu"  # a dozen tokens: no reason to visit a GPU


@dataclass(frozen=True)
class StructuredTotal:
    """total = mean of the turn rewards + Σ of the global rewards not excluded."""

    turn_rewards: tuple[float, ...]
    mean_turn: float
    included: dict[str, float]
    excluded: dict[str, float]
    global_sum: float
    total: float


def structured_total(
    turn_rewards=DOC_TURN_REWARDS, global_rewards=DOC_GLOBAL_REWARDS, exclude=KGR1_EXCLUDE
) -> StructuredTotal:
    """The document's rule in plain Python (the engine computes the same; the page shows both)."""
    turns = tuple(float(v) for v in turn_rewards)
    mean_turn = sum(turns) / len(turns) if turns else 0.0
    inc = {k: float(v) for k, v in global_rewards.items() if not k.startswith(tuple(exclude))}
    exc = {k: float(v) for k, v in global_rewards.items() if k.startswith(tuple(exclude))}
    g = sum(inc.values())
    return StructuredTotal(turns, mean_turn, inc, exc, g, mean_turn + g)


class WordRun(Run):
    """A ``Run`` whose tokens are the words given (ids are positions, no tokenizer)."""

    def __init__(self, trajectories: list[Trajectory], texts: list[list[str]], name: str):
        super().__init__(trajectories=trajectories, name=name, source="worked example", tokenizer=None)
        self._texts = texts

    def token_texts(self, i: int) -> list[str]:
        return list(self._texts[i])


def _segment(role: str, words: list[str], start: int) -> Segment:
    return Segment(role=role, text="".join(words), token_ids=np.arange(start, start + len(words), dtype=np.int32))


def kgr1_run() -> WordRun:
    """The document's trajectory and its two group members, one word per token."""
    trajs, texts = [], []
    for tid, answer, glob in GROUP:
        t2 = [w.replace("{answer}", answer) for w in TURN2_MODEL]
        parts = [("model", TURN1_MODEL), ("tool", TURN1_INFO), ("model", t2)]
        segs, n = [], 0
        for role, words in parts:
            segs.append(_segment(role, words, n))
            n += len(words)
        trajs.append(
            Trajectory(
                id=tid,
                group_id="m.01",
                prompt=QUESTION,
                segments=segs,
                turn_rewards=[{TURN_COMPONENT: r} for r in DOC_TURN_REWARDS],
                global_rewards=dict(glob),
                metadata={"answer": answer},
            )
        )
        texts.append([w for _, words in parts for w in words])
    return WordRun(trajs, texts, "KG-R1 worked example")


@dataclass(frozen=True)
class KgExample:
    """The worked example and the engine's results: ``gae`` (final_token_only, the document's GAE path),
    ``proportional`` (turn_proportional, its KL path), ``grpo`` (final_token_only, GRPO over the group)."""

    run: WordRun
    batch: TrajectoryBatch
    gae: CreditResult
    proportional: CreditResult
    grpo: CreditResult
    config: CreditConfig


def _np(t) -> np.ndarray:
    return t.detach().to("cpu").numpy().astype(float)


def doc_reward_table(st: StructuredTotal | None = None) -> pd.DataFrame:
    """The document's reward dict, one row per value: where it goes and what it adds to the total."""
    st = st or structured_total()
    n = len(st.turn_rewards)
    rows = [
        {"key": f"turn_rewards[{k + 1}]", "value": v, "enters the total as": f"1/{n} of it (mean of {n} turns)",
         "adds": v / n}
        for k, v in enumerate(st.turn_rewards)
    ]  # fmt: skip
    rows += [{"key": f"global_rewards[{k}]", "value": v, "enters the total as": "all of it", "adds": v}
             for k, v in st.included.items()]  # fmt: skip
    rows += [{"key": f"global_rewards[{k}]", "value": v, "enters the total as": "left out (log only)", "adds": 0.0}
             for k, v in st.excluded.items()]  # fmt: skip
    rows.append({"key": "total", "value": "", "enters the total as": "mean turn reward + G", "adds": st.total})
    df = pd.DataFrame(rows)
    df["value"] = [v if v == "" else f"{v:g}" for v in df["value"]]  # text: the total row has no value of its own
    return df


def token_steps_table(ex: KgExample, i: int = 0) -> pd.DataFrame:
    """Every token of trajectory ``i`` and every number the pipeline gives it (steps 3, 5 and 6)."""
    b = ex.batch
    n = int(_np(b.attention_mask[i]).sum())
    return pd.DataFrame(
        {
            "#": np.arange(n),
            "turn": _np(b.turn_ids[i, :n]).astype(int) + 1,
            "role": ex.run.token_roles(i)[:n],
            "token": ex.run.token_texts(i)[:n],
            "in loss": _np(ex.gae.loss_mask[i, :n]).astype(int),
            "final_token_only": _np(ex.gae.token_level_scores[i, :n]),
            "turn_proportional": _np(ex.proportional.token_level_scores[i, :n]),
            "GAE return": _np(ex.gae.returns[i, :n]),
            "GAE A before whitening": _np(ex.gae.extras["advantages_raw"][i, :n]),
            "GAE A (whitened)": _np(ex.gae.advantages[i, :n]),
            "GRPO A": _np(ex.grpo.advantages[i, :n]),
        }
    )


def token_counts(tok: pd.DataFrame) -> tuple[int, int, int]:
    """(tokens, info tokens, loss tokens) of ``token_steps_table``'s rows."""
    return len(tok), int((tok["role"] != "model").sum()), int(tok["in loss"].sum())


def group_stats(ex: KgExample) -> tuple[float, float]:
    """(mean, std) of GRPO's group, the example's one group."""
    return float(ex.grpo.group_mean[0]), float(ex.grpo.group_std[0])


def placement_turn_table(ex: KgExample, i: int = 0) -> pd.DataFrame:
    """turn_proportional, turn by turn: r_k / n_k on the turn's loss tokens plus G / n on every loss token."""
    b, res = ex.batch, ex.proportional
    turn = _np(b.turn_ids[i]).astype(int)
    loss = _np(res.loss_mask[i]) > 0
    tok = _np(res.token_level_scores[i])
    g = float(_np(res.extras["global_reward"])[i])
    n_all = int(loss.sum())
    r = _np(res.turn_rewards[i])
    rows = []
    for k in range(len(r)):
        sel = loss & (turn == k)
        nk = int(sel.sum())
        rows.append(
            {
                "turn": k + 1,
                "loss tokens n_k": nk,
                "turn reward r_k": float(r[k]),
                "r_k / n_k": float(r[k]) / nk if nk else 0.0,
                "G / n": g / n_all if n_all else 0.0,
                "each token gets": float(tok[sel][0]) if nk else 0.0,
                "Σ over the turn": float(tok[sel].sum()),
            }
        )
    return pd.DataFrame(rows)


def group_table(ex: KgExample) -> pd.DataFrame:
    """The example's group: each member's rewards, total, GRPO advantage, and both scores (step 6)."""
    b = ex.batch
    names = list(b.global_reward_names)
    glob = _np(b.global_rewards)
    n_loss = _np(ex.gae.loss_mask.sum(-1)).astype(int)
    rows = []
    for i, tid in enumerate(b.trajectory_ids):
        row = {"trajectory": tid, "answer": ex.run.trajectories[i].metadata["answer"]}
        row |= {n: float(glob[i, c]) for c, n in enumerate(names)}
        row |= {
            "total (Σ token rewards)": float(_np(ex.gae.scores)[i]),
            "GRPO A": float(_np(ex.grpo.extras["row_advantage"])[i]),
            "loss tokens": int(n_loss[i]),
            "GAE score": float(_np(ex.gae.sample_scores)[i]),
            "GRPO score": float(_np(ex.grpo.sample_scores)[i]),
        }
        rows.append(row)
    return pd.DataFrame(rows)


def last_action_token(ex: KgExample, i: int = 0) -> tuple[int, str, float]:
    """(position, text, final_token_only score) of trajectory ``i``'s last loss token."""
    loss = np.flatnonzero(_np(ex.gae.loss_mask[i]) > 0)
    p = int(loss[-1])
    return p, ex.run.token_texts(i)[p], float(_np(ex.gae.token_level_scores[i])[p])


def whitening_stats(ex: KgExample) -> tuple[float, float, int]:
    """(mean, std, tokens) of GAE's raw advantages over the advantage mask of the whole batch: what verl's
    ``masked_whiten`` divides by (unbiased variance, + 1e-8 inside the square root)."""
    m = _np(ex.gae.advantage_mask) > 0
    a = _np(ex.gae.extras["advantages_raw"])[m]
    return float(a.mean()), float(np.sqrt(a.var(ddof=1) + 1e-8)), int(m.sum())


def value_tokens_html(tokens, roles, values, vmax: float, digits: int = 4, labels=None) -> str:
    """Each token with its value printed under it (projector-sized), coloured on the diverging scale ±``vmax``;
    tool/info tokens hatched and marked "info". ``labels``: texts printed instead of the values. Every text is
    escaped. No box height: every token shows."""
    vals = np.asarray(values, dtype=float)
    bg, fg = diverging_css(vals, vmax)
    out = [
        "<div style='display:flex;flex-wrap:wrap;gap:6px 4px;align-items:flex-start;"
        f"font-family:{MONO_FAMILY};font-size:1.15rem'>"
    ]
    labels = list(labels) if labels is not None else [None] * len(vals)
    for tok, role, v, b, f, lab in zip(tokens, roles, vals, bg, fg, labels, strict=True):
        info = role != "model"
        hatch = (
            f"background-image:repeating-linear-gradient(135deg,{INFO_HATCH} 0 2px,transparent 2px 6px);"
            f"outline:1px dashed {INFO_OUTLINE};outline-offset:-1px;"
            if info
            else ""
        )
        num = lab if lab is not None else ("0" if abs(v) < 0.5 * 10**-digits else f"{v:+.{digits}g}")
        out.append(
            "<div style='display:inline-flex;flex-direction:column;align-items:center'>"
            f"<span style='background-color:{b};color:{f};{hatch}border-radius:3px;padding:1px 4px;"
            f"white-space:pre'>{escape(tok)}</span>"
            f"<span style='font-size:0.85rem;color:{SECONDARY_TEXT}'>"
            f"{escape(num)}{' info' if info else ''}</span></div>"
        )
    out.append("</div>")
    return "".join(out)


# ------------------------------------------------------------------------- the same steps on the sidebar's run
@dataclass(frozen=True)
class TrajectoryRewards:
    """Trajectory ``i``'s structured rewards under a scheme, as the Learn page reads them out: the per-turn and
    global component tables (``analysis``), the engine's turn score and G, how many turns it has (``turns``) and
    how many of them have tokens, and the global components that leak into G (``_`` names the profile keeps) or
    that it leaves out (not ``_raw_``), each with their weighted sum."""

    turn: pd.DataFrame
    glob: pd.DataFrame
    turn_score: float
    G: float
    turns: int
    turns_with_tokens: int
    leaks: list[str]
    leak_sum: float
    kept_out: list[str]
    kept_out_sum: float


def trajectory_rewards(traj, cfg: CreditConfig, res: CreditResult, i: int, included: dict[str, bool], n_turns: int):
    """``TrajectoryRewards`` of ``traj`` (row ``i`` of ``res``); ``included``: global name → whether the profile
    counts it; ``n_turns``: the turns with tokens."""
    from dashboard import analysis, tables

    weights_g = dict(cfg.global_weights)
    turn_df = analysis.turn_components(traj.turn_rewards, dict(cfg.turn_weights), tables.np_(res.turn_rewards[i]))
    glob_df = analysis.global_components(traj.global_rewards, weights_g, included)
    leaks = [n for n, inc in included.items() if inc and n.startswith("_") and n in traj.global_rewards]
    kept_out = [n for n, inc in included.items() if not inc and not n.startswith("_raw_") and n in traj.global_rewards]

    def weighted(names: list[str]) -> float:
        return sum(float(traj.global_rewards[n]) * weights_g.get(n, 1.0) for n in names)

    return TrajectoryRewards(
        turn=turn_df,
        glob=glob_df,
        turn_score=float(tables.np_(res.extras["turn_score"])[i]) if "turn_score" in res.extras else 0.0,
        G=float(tables.np_(res.extras["global_reward"])[i]) if "global_reward" in res.extras else 0.0,
        turns=len(traj.turn_rewards),
        turns_with_tokens=int((turn_df["turn"] <= n_turns).sum()) if len(turn_df) else 0,
        leaks=leaks,
        leak_sum=weighted(leaks),
        kept_out=kept_out,
        kept_out_sum=weighted(kept_out),
    )


@dataclass(frozen=True)
class ScoreReading:
    """How trajectory ``i``'s score comes about: its loss tokens, their mean return, the score, and whether the
    estimator's returns are its advantages (GRPO family) on this trajectory."""

    loss_tokens: int
    mean_return: float
    score: float
    returns_are_advantages: bool


def score_reading(table: pd.DataFrame, res: CreditResult, i: int) -> ScoreReading:
    """``ScoreReading`` of token table ``table`` (trajectory ``i`` of ``res``)."""
    from dashboard import tables

    loss_mask = table["loss"].to_numpy() > 0
    n_l = int(loss_mask.sum())
    same = bool(n_l and np.allclose(table.loc[loss_mask, "return"], table.loc[loss_mask, "advantage"], atol=1e-6))
    return ScoreReading(
        loss_tokens=n_l,
        mean_return=float(table.loc[loss_mask, "return"].mean()) if n_l else 0.0,
        score=float(tables.np_(res.sample_scores)[i]),
        returns_are_advantages=same,
    )


def loss_token_values(table: pd.DataFrame, column: str) -> pd.Series:
    """``column`` of a token table on its loss tokens."""
    return table.loc[table["loss"] > 0, column]


def last_loss_token(table: pd.DataFrame) -> int | None:
    """Position of a token table's last loss token (None without one)."""
    loss = np.flatnonzero(table["loss"].to_numpy() > 0)
    return int(loss[-1]) if len(loss) else None


# ------------------------------------------------------------------------- rLLM's three advantage modes, noted
RLLM_GAMMA = 0.95
DOC_RLLM_REWARDS = (1.0, 0.0)  # rollout 1 answers "4" (correct), rollout 2 answers "5"
DOC_RLLM_TRAJ_ADV = (0.5, -0.5)  # trajectory-level, and broadcast to each of the 3 steps
DOC_RLLM_MC = ((0.9025, 0.95, 1.0), (0.0, 0.0, 0.0))  # steps 1, 2, 3 (the document lists 3, 2, 1)


# Short headers for the projector (the table keeps its full column names): column → (header, help).
RLLM_LABELS = {
    "outcome reward (document)": ("R (doc)", "The rollout's outcome reward as the document writes it"),
    "step reward": ("rₖ", "The step's own reward in the sample (the outcome arrives on the last step)"),
    "A trajectory/broadcast (document, no std)": ("A (doc)", "The document's trajectory advantage, ±0.5"),
    "A · trajectory": ("A traj.", "Engine, trajectory mode: mean advantage on the step's loss tokens"),
    "A · broadcast": ("A bcast", "Engine, broadcast mode: the last step's advantage copied to this step"),
    "MC return (document)": ("Gₖ (doc)", "The document's per-step Monte-Carlo return (γ = 0.95)"),
    "MC return G_k": ("Gₖ", "Engine: Gₖ = rₖ + γ·Gₖ₊₁, γ = 0.95"),
    "A · per-step": ("A per-step", "Engine, per-step mode: Gₖ − mean of the k-th steps' returns (÷ std if on)"),
}


def mc_returns(step_rewards, gamma: float = RLLM_GAMMA) -> list[float]:
    """G_k = r_k + γ G_{k+1}, from the last step back (rLLM's compute_mc_return), in plain Python."""
    out, g = [], 0.0
    for r in reversed(list(step_rewards)):
        g = float(r) + gamma * g
        out.append(g)
    return out[::-1]


def rllm_doc_table(steps: pd.DataFrame, norm_by_std: bool) -> pd.DataFrame:
    """``analysis.step_table``'s rows for the two rollouts with the document's own numbers beside the
    engine's: outcome reward, trajectory/broadcast advantage (±0.5, written without std division) and the
    per-step MC return. The engine's columns keep their names (A · trajectory, A · broadcast, MC return G_k,
    A · per-step)."""
    df = steps.copy()
    rollouts = list(dict.fromkeys(df["rollout"]))
    r_idx = df["rollout"].map({r: j for j, r in enumerate(rollouts)}).to_numpy()
    k_idx = df["step"].to_numpy() - 1
    doc_ok = (r_idx < 2) & (k_idx < 3)
    out = pd.DataFrame({"rollout": df["rollout"], "step": df["step"]})
    cells = list(zip(r_idx, k_idx, doc_ok, strict=True))
    out["outcome reward (document)"] = [DOC_RLLM_REWARDS[r] if ok else np.nan for r, _, ok in cells]
    out["step reward"] = df["step reward"]
    out["A trajectory/broadcast (document, no std)"] = [DOC_RLLM_TRAJ_ADV[r] if ok else np.nan for r, _, ok in cells]
    for c in ("A · trajectory", "A · broadcast"):
        if c in df:
            out[c] = df[c]
    out["MC return (document)"] = [DOC_RLLM_MC[r][k] if ok else np.nan for r, k, ok in cells]
    for c in ("MC return G_k", "A · per-step"):
        if c in df:
            out[c] = df[c]
    eng = [c for c in ("A · trajectory", "A · broadcast") if c in out]
    same_adv = all(np.allclose(out[c][doc_ok], out["A trajectory/broadcast (document, no std)"][doc_ok], atol=1e-5)
                   for c in eng)  # fmt: skip
    same_mc = "MC return G_k" not in out or np.allclose(
        out["MC return G_k"][doc_ok], out["MC return (document)"][doc_ok], atol=1e-6
    )
    out.attrs["labels"] = RLLM_LABELS
    out.attrs["matches_advantages"] = bool(same_adv and doc_ok.all())
    out.attrs["matches_returns"] = bool(same_mc and doc_ok.all())
    out.attrs["norm_by_std"] = norm_by_std
    return out


def trajectory_advantage_range(doc: pd.DataFrame) -> tuple[float, float]:
    """(max, min) of the engine's trajectory-mode advantage in ``rllm_doc_table``'s rows (0, 0 without it)."""
    a = doc["A · trajectory"].to_numpy() if "A · trajectory" in doc else np.zeros(1)
    return float(a.max()), float(a.min())


@dataclass(frozen=True)
class ModeRows:
    """Every token of the rollouts shown under each rLLM mode, one row per (mode, rollout), padded to the longest:
    ``advantages`` (NaN past a row's end), ``loss`` (False there) and ``vmax``, the symmetric colour range."""

    labels: list[str]
    advantages: np.ndarray  # (modes × rollouts, T)
    loss: np.ndarray  # (modes × rollouts, T) bool
    vmax: float


def mode_rows(batch: TrajectoryBatch, results: dict[str, CreditResult], shown: list[int]) -> ModeRows:
    """``ModeRows`` of trajectories ``shown`` under each mode's result (label → result)."""
    from dashboard import analysis

    labels, mats, losses = [], [], []
    for label, r in results.items():
        for j in shown:
            labels.append(f"{label} · {batch.trajectory_ids[j]}")
            mats.append(analysis.group_advantage_matrix(batch, r, np.array([j]))[0])
            losses.append(analysis.group_loss_matrix(batch, r, np.array([j]))[0])
    width = max(len(m) for m in mats)
    adv = np.stack([np.pad(m, (0, width - len(m)), constant_values=np.nan) for m in mats])
    loss = np.stack([np.pad(m, (0, width - len(m)), constant_values=False) for m in losses])
    return ModeRows(labels, adv, loss, symmetric_range(adv[np.isfinite(adv)]))


@dataclass(frozen=True)
class StageCode:
    """One function of the pipeline as the Learn page shows it: title, the docstring's first paragraph, source."""

    title: str
    summary: str
    source: str


@functools.cache
def pipeline_code() -> tuple[StageCode, ...]:
    """``compute_credit`` and its four stages (``engine.stages``), read from the engine's own source files."""
    from engine import credit, stages

    parts = (
        ("compute_credit: the four stages in order", credit.compute_credit),
        ("(1) place_scores: rewards onto tokens", stages.place_scores),
        ("(2) subtract_kl: the in-reward KL", stages.subtract_kl),
        ("(3) estimate: the advantage estimator", stages.estimate),
        ("(4) weigh_loss: what the loss does with the advantages", stages.weigh_loss),
    )
    return tuple(StageCode(title, inspect.getdoc(fn).split("\n\n")[0], inspect.getsource(fn)) for title, fn in parts)


@functools.cache
def policy_loss_code() -> tuple[tuple[PolicyLoss, str], ...]:
    """Every registered policy loss (``engine.policy_losses``: label, formula, fields, reference, golden files,
    summary), in registration order, with its function's own source."""

    return tuple((loss, inspect.getsource(loss.fn)) for loss in list_policy_losses())
