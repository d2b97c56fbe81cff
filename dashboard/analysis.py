"""Tables across schemes and across the run: aligned advantages for comparisons, rank changes, the analytics
(info-token credit, length bias, credit per turn, aggregation weights) and the Learn page's step table.
Pure: torch tensors in, numpy arrays and DataFrames out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dashboard.tables import lengths, np_, row_advantage
from engine.batch import TrajectoryBatch
from engine.credit import CreditResult


# ---------------------------------------------------------------------------------------------- compare
def group_members(batch: TrajectoryBatch, i: int) -> np.ndarray:
    """Row indices of trajectory ``i``'s group, in run order."""
    g = np_(batch.group_ids)
    return np.flatnonzero(g == g[i])


def scheme_advantages(batch: TrajectoryBatch, results: Sequence[CreditResult], i: int) -> np.ndarray:
    """Advantage of trajectory ``i``'s real tokens under each scheme. [S, n]"""
    n = int(lengths(batch)[i])
    return np.stack([np_(r.advantages[i, :n]) for r in results]) if results else np.zeros((0, n))


def scheme_turn_credit(batch: TrajectoryBatch, results: Sequence[CreditResult], i: int, per_token: bool) -> np.ndarray:
    """Credit per turn of trajectory ``i`` under each scheme: Σ advantage over the turn's loss tokens, or that
    sum divided by their number (``per_token``). [S, K]"""
    out = []
    K = 0
    for r in results:
        tokens = np_(r.turn_tokens[i])
        total = np_(r.turn_advantage[i])
        if per_token:
            total = total / np.maximum(tokens, 1)
        out.append(total)
        K = max(K, int(np.flatnonzero(tokens > 0).max()) + 1 if (tokens > 0).any() else 0)
    out = [o[:K] for o in out]
    return np.stack([np.pad(o, (0, K - len(o))) for o in out]) if out else np.zeros((0, 0))


def scheme_group_advantages(results: Sequence[CreditResult], rows: np.ndarray) -> np.ndarray:
    """Trajectory advantage of ``rows`` under each scheme. [S, len(rows)]"""
    return np.stack([row_advantage(r)[rows] for r in results]) if results else np.zeros((0, len(rows)))


def group_advantage_matrix(batch: TrajectoryBatch, result: CreditResult, rows: np.ndarray) -> np.ndarray:
    """Advantages of ``rows`` on their real tokens, NaN past each row's end. [len(rows), max length]"""
    n = lengths(batch)[rows]
    T = int(n.max()) if len(n) else 0
    adv = np_(result.advantages[rows, :T]).astype(float)
    adv[np.arange(T)[None, :] >= n[:, None]] = np.nan
    return adv


# ---------------------------------------------------------------------------------------------- designer
def rank_changes(before: pd.DataFrame, after: pd.DataFrame, column: str) -> pd.DataFrame:
    """Rank of every trajectory by ``column`` (1 = highest) before and after, sorted by |change|; ties share
    the lowest rank."""
    rb = before[column].rank(ascending=False, method="min").astype(int)
    ra = after[column].rank(ascending=False, method="min").astype(int)
    df = pd.DataFrame(
        {
            "id": before["id"],
            "group": before["group"],
            f"{column} before": before[column],
            f"{column} after": after[column],
            "rank before": rb,
            "rank after": ra,
            "rank change": rb - ra,
        }
    )
    return df.reindex(df["rank change"].abs().sort_values(ascending=False, kind="stable").index)


# ---------------------------------------------------------------------------------------------- analytics
def info_credit(batch: TrajectoryBatch, results: dict[str, CreditResult]) -> pd.DataFrame:
    """Per setting: share of Σ|advantage| and of Σ|effective weight| that lands on info tokens, and how many
    info tokens are in the loss."""
    info = batch.info_mask
    rows = []
    for name, r in results.items():
        a = r.advantages.abs() * batch.attention_mask
        w = r.effective_weights.abs()
        rows.append(
            {
                "setting": name,
                "info share of |advantage|": float((a * info).sum() / a.sum().clamp(min=1e-12)),
                "info share of |effective weight|": float((w * info).sum() / w.sum().clamp(min=1e-12)),
                "info tokens in loss": int((r.loss_mask * info).sum().item()),
                "Σ|effective weight| on info": float((w * info).sum()),
            }
        )
    return pd.DataFrame(rows)


def length_bias(batch: TrajectoryBatch, results: dict[str, CreditResult]) -> pd.DataFrame:
    """Long table: estimator, trajectory, response length (loss tokens), trajectory advantage, Σ effective
    weight (the trajectory's total push)."""
    frames = []
    for name, r in results.items():
        frames.append(
            pd.DataFrame(
                {
                    "estimator": name,
                    "id": list(batch.trajectory_ids),
                    "length": np_(r.loss_mask.sum(-1)).astype(int),
                    "advantage": row_advantage(r),
                    "Σ effective weight": np_(r.effective_weights.sum(-1)),
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def slopes(df: pd.DataFrame, x: str, y: str, by: str) -> pd.DataFrame:
    """Least-squares slope of ``y`` on ``x`` per ``by`` (0 when x does not vary), and the correlation."""
    rows = []
    for key, part in df.groupby(by, sort=False):
        xs, ys = part[x].to_numpy(float), part[y].to_numpy(float)
        ok = xs.std() > 0 and ys.std() > 0
        rows.append(
            {
                by: key,
                "slope per 100 tokens": float(np.polyfit(xs, ys, 1)[0] * 100) if xs.std() > 0 else 0.0,
                "correlation": float(np.corrcoef(xs, ys)[0, 1]) if ok else 0.0,
            }
        )
    return pd.DataFrame(rows)


def turn_credit_across_run(batch: TrajectoryBatch, result: CreditResult) -> pd.DataFrame:
    """Per turn index (1-based): mean and std over trajectories of the per-token advantage on the turn's loss
    tokens, the turn reward's mean, and how many trajectories have that turn."""
    per_tok = np_(result.turn_advantage) / np.maximum(np_(result.turn_tokens), 1)
    has = np_(result.turn_tokens) > 0
    rw = np_(result.turn_rewards)
    rows = []
    for k in range(per_tok.shape[1]):
        sel = has[:, k]
        v = per_tok[sel, k]
        rows.append(
            {
                "turn": k + 1,
                "trajectories": int(sel.sum()),
                "mean advantage per token": float(v.mean()) if v.size else 0.0,
                "std": float(v.std()) if v.size else 0.0,
                "mean turn reward": float(rw[sel, k].mean()) if sel.any() and k < rw.shape[1] else 0.0,
            }
        )
    return pd.DataFrame(rows)


def aggregation_weights(batch: TrajectoryBatch, results: dict[str, CreditResult]) -> pd.DataFrame:
    """Long table per loss_agg_mode: each trajectory's length, Σ_t w (its share of the loss) and Σ_t w·A."""
    frames = []
    for mode, r in results.items():
        frames.append(
            pd.DataFrame(
                {
                    "mode": mode,
                    "id": list(batch.trajectory_ids),
                    "length": np_(r.loss_mask.sum(-1)).astype(int),
                    "Σ weight": np_(r.agg_weights.sum(-1)),
                    "Σ effective weight": np_(r.effective_weights.sum(-1)),
                    "share of |push|": np_(
                        r.effective_weights.abs().sum(-1) / r.effective_weights.abs().sum().clamp(min=1e-12)
                    ),
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---------------------------------------------------------------------------------------------- learn
def turn_components(
    turn_rewards: list[dict], weights: dict[str, float], engine_turn_rewards: np.ndarray
) -> pd.DataFrame:
    """Per turn (1-based): each raw component, and the weighted turn reward r_k = Σ_c w_c x_{k,c} as the engine
    computed it."""
    rows = []
    for k, comps in enumerate(turn_rewards):
        row = {"turn": k + 1}
        row |= {f"{n} (w={weights.get(n, 1.0):g})": float(v) for n, v in comps.items()}
        row["r_k"] = float(engine_turn_rewards[k]) if k < len(engine_turn_rewards) else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def global_components(global_rewards: dict, weights: dict[str, float], included: dict[str, bool]) -> pd.DataFrame:
    """Per global component: value, weight, whether the profile includes it, and w·value if it does."""
    rows = []
    for n, v in global_rewards.items():
        w = weights.get(n, 1.0)
        inc = included.get(n, True)
        rows.append(
            {
                "component": n,
                "value": float(v),
                "weight": w,
                "included": inc,
                "contribution": float(v) * w if inc else 0.0,
            }
        )
    return pd.DataFrame(rows, columns=["component", "value", "weight", "included", "contribution"])


def step_table(batch: TrajectoryBatch, results: dict[str, CreditResult], rows: np.ndarray) -> pd.DataFrame:
    """rLLM modes, per rollout and step (turn): the step's reward, and each mode's mean advantage on the step's
    loss tokens (plus the per-step Monte-Carlo return when a result has it)."""
    out = []
    first = next(iter(results.values()))
    for i in rows:
        K = int(np_(first.turn_tokens[i] > 0).sum())
        for k in range(K):
            row = {
                "rollout": batch.trajectory_ids[i],
                "step": k + 1,
                "step reward": float(np_(first.turn_rewards[i])[k]),
            }
            for name, r in results.items():
                if "step_mc_returns" in r.extras:
                    row["MC return G_k"] = float(np_(r.extras["step_mc_returns"][i])[k])
                tok = max(float(np_(r.turn_tokens[i])[k]), 1.0)
                row[f"A · {name}"] = float(np_(r.turn_advantage[i])[k]) / tok
            out.append(row)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------- loss masks (compare)
def scheme_loss_masks(batch: TrajectoryBatch, results: Sequence[CreditResult], i: int) -> np.ndarray:
    """Which of trajectory ``i``'s real tokens enter each scheme's loss (the result's loss mask). [S, n] bool"""
    n = int(lengths(batch)[i])
    return np.stack([np_(r.loss_mask[i, :n]) > 0 for r in results]) if results else np.zeros((0, n), bool)


def group_loss_matrix(batch: TrajectoryBatch, result: CreditResult, rows: np.ndarray) -> np.ndarray:
    """Loss mask of ``rows`` on their real tokens, False past each row's end (the shape of
    ``group_advantage_matrix``). [len(rows), max length] bool"""
    n = lengths(batch)[rows]
    T = int(n.max()) if len(n) else 0
    return np_(result.loss_mask[rows, :T]) > 0


def changed_rows(before: pd.DataFrame, after: pd.DataFrame, column: str, tol: float = 1e-9) -> int:
    """How many rows' ``column`` differs by more than ``tol`` between two tables of the same rows."""
    return int((np.abs(after[column] - before[column]) > tol).sum())


def logged_comparison(table: pd.DataFrame) -> tuple[float, float, float]:
    """(max |advantage − logged|, mean logged advantage, mean advantage) over a token table's action tokens."""
    on = table["action"] > 0
    gap = float(table.loc[on, "advantage − logged"].abs().max()) if on.any() else 0.0
    return gap, table.loc[on, "logged advantage"].mean(), table.loc[on, "advantage"].mean()


def largest_abs(table: pd.DataFrame, column: str) -> float:
    """max |``column``| over a token table's action tokens (0 without one)."""
    here = table.loc[table["action"] > 0, column].abs()
    return here.max() if len(here) else 0.0
