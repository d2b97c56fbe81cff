"""Pure tables from a run and a ``CreditResult``: what the pages show and export (no Streamlit, no caching).

Turns are shown 1-based (both worked examples of docs/TUTORIAL.md §7 count turns from 1); the engine's ``turn_ids``
are 0-based.
A trajectory's *advantage* (one number) is the mean advantage over its loss-mask tokens: for outcome
estimators that is the broadcast scalar, for GAE a token average.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from engine.batch import TrajectoryBatch
from engine.credit import CreditResult
from engine.io.data.logged import logged_advantage_tokens
from engine.runnable import RunHas
from engine.scan import by_row_blocks

QUANTITY_ORDER = (
    "token score", "KL", "reward", "value", "return", "advantage", "effective weight", "gradient weight",
    "PPO ratio", "IS weight", "train/inference mismatch", "entropy",
)  # fmt: skip
QUANTITY_HELP = {
    "token score": "reward placed on the token before KL (placement of the structured rewards)",
    "KL": "per-token KL(old ‖ ref) estimate (masked to the loss tokens)",
    "reward": "token score − β·KL (= token score without in-reward KL)",
    "value": "the value GAE bootstrapped from (critic or stand-in)",
    "return": "the estimator's return",
    "advantage": "the estimator's advantage (under the rLLM mode)",
    "effective weight": "loss-aggregation weight × advantage: how hard and which way the token is pushed",
    "gradient weight": "−∂loss/∂log π of the token under the policy loss: aggregation weight × advantage × the "
    "ratio, clip and rollout-correction factor (0 where the clip or a rejection cuts the token)",
    "PPO ratio": "the ratio the policy loss clips: π_trainer/π_rollout in bypass mode, the row's sequence ratio "
    "under GSPO/GMPO, 1 on the decoupled first mini-batch",
    "IS weight": "the rollout-correction importance weight (truncated, or 0 outside IcePop's bounds)",
    "train/inference mismatch": "log π_trainer − log π_rollout of the sampled token: how differently the trainer "
    "and the rollout engine score it (0 = agree; ±0.69 = 2× apart)",
    "entropy": "the policy's entropy at the token (nats), as the run recorded it: where the policy was unsure "
    "(forking tokens) or certain",
    "logged advantage": "the advantage the trainer itself logged for this token (on action tokens; 0 elsewhere)",
    "advantage − logged": "CreditLens's advantage minus the trainer's: 0 when this scheme is the trainer's",
}


def np_(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy()


def lengths(batch: TrajectoryBatch) -> np.ndarray:
    """Real (attended) tokens per row. (B,)"""
    return np_(batch.attention_mask.sum(-1)).astype(int)


def token_turns(batch: TrajectoryBatch) -> np.ndarray:
    """Turns that have tokens, per row (a KG-R1 run also has placeholder reward turns without tokens). (B,)"""
    if batch.num_tokens == 0:
        return np.zeros(batch.batch_size, dtype=int)
    return np_(batch.turn_ids.max(dim=-1).values + 1).clip(min=0).astype(int)


def quantities(result: CreditResult) -> dict[str, torch.Tensor]:
    """The result's [B, T] quantities in display order."""
    q = result.token_quantities()
    return {name: q[name] for name in QUANTITY_ORDER if name in q}


def row_advantage(result: CreditResult) -> np.ndarray:
    """Mean advantage over each row's loss-mask tokens (0 for a row without any). (B,) The products are summed in
    row blocks: no [B, T] temporary (200 MB at 50,000 × 1,000)."""
    m = result.loss_mask
    s = by_row_blocks(lambda a, w: (a * w).sum(-1), result.advantages, m) / m.sum(-1).clamp(min=1)
    return np_(s)


def token_table(run, batch: TrajectoryBatch, result: CreditResult, i: int, texts: list[str]) -> pd.DataFrame:
    """One row per response token of trajectory ``i``: position, turn (1-based), role, token text, the masks
    and every quantity. This is also the CSV/Parquet export."""
    n = int(lengths(batch)[i])
    roles = run.token_roles(i)[:n]
    df = pd.DataFrame(
        {
            "position": np.arange(n),
            "turn": np_(batch.turn_ids[i, :n]) + 1,
            "role": roles,
            "token": texts[:n],
            "attention": np_(batch.attention_mask[i, :n]).astype(np.int8),
            "action": np_(batch.action_mask[i, :n]).astype(np.int8),
            "info": np_(batch.info_mask[i, :n]).astype(np.int8),
            "loss": np_(result.loss_mask[i, :n]).astype(np.int8),
            "advantage_mask": np_(result.advantage_mask[i, :n]).astype(np.int8),
        }
    )
    for name, t in quantities(result).items():
        df[name] = np_(t[i, :n]).astype(np.float64)
    logged = logged_advantage_tokens(run.trajectories[i])
    if logged is not None and len(logged) == n:  # the trainer's own numbers, beside CreditLens's
        on = (df["action"].to_numpy() > 0) & np.isfinite(logged)
        df["logged advantage"] = np.where(on, logged, 0.0)
        df["advantage − logged"] = np.where(on, df["advantage"].to_numpy() - logged, 0.0)
    return df


def turn_table(run, batch: TrajectoryBatch, result: CreditResult, i: int) -> pd.DataFrame:
    """One row per turn of trajectory ``i``: tokens, the weighted turn reward and its raw components, and
    the credit the scheme put on the turn's tokens."""
    n = int(lengths(batch)[i])
    turn = np_(batch.turn_ids[i, :n])
    act = np_(batch.action_mask[i, :n])
    loss = np_(result.loss_mask[i, :n])
    adv = np_(result.advantages[i, :n])
    q = {k: np_(v[i, :n]) for k, v in quantities(result).items()}
    comps = run.trajectories[i].turn_rewards
    tr = np_(result.turn_rewards[i])
    K = max(int(turn.max()) + 1 if n else 0, len(comps))
    rows = []
    for k in range(K):
        sel = turn == k
        in_loss = sel & (loss > 0)
        row = {
            "turn": k + 1,
            "kind": "tokens" if sel.any() else "reward only (no tokens)",
            "tokens": int(sel.sum()),
            "action tokens": int((sel & (act > 0)).sum()),
            "info tokens": int((sel & (act == 0)).sum()),
            "turn reward": float(tr[k]) if k < len(tr) else 0.0,
        }
        for name, v in (comps[k] if k < len(comps) else {}).items():
            row[f"· {name}"] = float(v)
        row["Σ token score"] = float(q["token score"][sel].sum())
        row["Σ KL"] = float(q["KL"][sel].sum())
        row["mean advantage (loss tokens)"] = float(adv[in_loss].mean()) if in_loss.any() else 0.0
        row["Σ effective weight"] = float(q["effective weight"][sel].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def select_rows(result: CreditResult, rows: torch.Tensor) -> CreditResult:
    """The result of trajectories ``rows`` only: every per-row tensor ([B, …], extras too) indexed by ``rows``;
    config, notes and batch-level metrics as they were."""
    B = result.scores.shape[0]

    def pick(v):
        return v[rows.to(v.device)] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == B else v

    picked = {name: pick(v) for name, v in result.quantities().items() if name != "extras"}
    return result.replace(**picked, extras={k: pick(v) for k, v in result.extras.items()})


def trajectory_summary(batch: TrajectoryBatch, result: CreditResult) -> pd.DataFrame:
    """One row per trajectory: sizes, scores, the scheme's advantage, group statistics and verdicts."""
    n = lengths(batch)
    act = np_(batch.action_mask.sum(-1)).astype(int)
    extras = result.extras
    df = pd.DataFrame(
        {
            "id": list(batch.trajectory_ids),
            "group": np_(batch.group_ids),
            "tokens": n,
            "action tokens": act,
            "info tokens": n - act,
            "turns": token_turns(batch),
            "reward turns": np_(batch.num_turns).astype(int),
            "score": np_(result.scores),
            "turn score": np_(extras["turn_score"]) if "turn_score" in extras else 0.0,
            "global reward": np_(extras["global_reward"]) if "global_reward" in extras else 0.0,
            "sample score": np_(result.sample_scores),
            "advantage": row_advantage(result),
            "Σ effective weight": np_(result.effective_weights.sum(-1)),
            "group mean": np_(result.group_mean),
            "group std": np_(result.group_std),
            "group size": np_(result.group_size).astype(int),
            "verdict": np_(result.verdicts).astype(int),
            "kept": np_(result.kept).astype(bool),
            "truncated": np_(batch.truncated).astype(bool),
        }
    )
    df["singleton"] = df["group size"] <= 1
    df["zero variance"] = (df["group size"] > 1) & (df["group std"].abs() < 1e-8)
    return df


def reward_components(run, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Long table of raw reward components: kind (turn | global), component, value, trajectory, turn; of every
    trajectory, or of trajectories ``rows``."""
    trajs = run.trajectories if rows is None else [run.trajectories[i] for i in rows]
    rows = []
    for t in trajs:
        for k, comps in enumerate(t.turn_rewards):
            rows += [("turn", name, float(v), t.id, k + 1) for name, v in comps.items()]
        rows += [("global", name, float(v), t.id, 0) for name, v in t.global_rewards.items()]
    return pd.DataFrame(rows, columns=["kind", "component", "value", "trajectory", "turn"])


def score_words(info: RunInfo, cfg, placement: str) -> str:
    """ "score = …": how this run's trajectory score is made under ``cfg`` with the ``placement`` that ran (a
    ``CreditResult.placement``), shown next to every score so a mean of turn rewards is never read as a sum."""
    from engine.shaping import describe_score

    has_global = info.has_global_rewards or (info.has_token_scores and not info.has_turn_rewards)
    words = describe_score(placement, cfg.turn_score_reduce, info.has_turn_rewards, has_global, cfg.use_kl_in_reward)
    return f"score = {words}"


@dataclass(frozen=True)
class RunInfo:
    """What a run holds, for the sidebar (which controls make sense) and the overview."""

    name: str
    source: str
    trajectories: int
    groups: int
    tokens: int
    action_tokens: int
    info_tokens: int
    turns: int
    reward_turns: int
    max_length: int
    has_values: bool
    has_log_probs: bool
    has_turn_rewards: bool
    has_global_rewards: bool
    has_token_scores: bool
    has_baselines: bool
    trajectory_ids: tuple[str, ...]
    turn_reward_names: tuple[str, ...]
    global_reward_names: tuple[str, ...]
    # field name → trajectories whose field the loader made up (metadata.synthesized), e.g. (("values", 57),)
    synthesized: tuple[tuple[str, int], ...] = ()
    truncated: int = 0  # trajectories that ran into the length limit
    excluded: int = 0  # trajectories the trainer excluded from the loss (metadata.exclude_from_loss)
    # per trajectory, the scheme-free badges (dashboard.badges): truncated, synthesized, excluded, singleton
    flags: tuple[tuple[str, ...], ...] = ()
    # the trainer's and the rollout engine's log-probs both: the policy stage's rollout correction applies
    has_rollout_log_probs: bool = False
    # each row's trace lengths (output tokens, input tokens, turns): prime-rl's length penalty applies
    has_trace_lengths: bool = False
    # the trainer's own advantages (verl dumps, prime-rl traces and token exports): the estimator `logged` applies
    has_logged_advantages: bool = False

    @property
    def info_share(self) -> float:
        return self.info_tokens / self.tokens if self.tokens else 0.0

    @property
    def run_has(self) -> RunHas:
        """What the run carries that a scheme may ask for (``engine.runnable``)."""
        return RunHas(values=self.has_values, log_probs=self.has_log_probs, token_scores=self.has_token_scores)

    def provides(self, requirement: str) -> bool:
        """Whether the run has what an estimator lists in ``requires`` (``engine.registry.NEEDS``; values can be
        stood in for). An unknown name raises: the registry refuses it, so it is a bug here."""
        has = {
            "values": True,
            "turn_rewards": self.has_turn_rewards,
            "global_rewards": self.has_global_rewards or self.has_turn_rewards,
            "reward_baselines": self.has_baselines,
            "old_log_probs": self.has_log_probs,
            "logged_advantages": self.has_logged_advantages,
        }
        if requirement not in has:
            raise KeyError(f"RunInfo.provides: no rule for the requirement {requirement!r}")
        return has[requirement]


def run_info(run, batch: TrajectoryBatch) -> RunInfo:
    n = lengths(batch)
    act = int(batch.action_mask.sum().item())
    return RunInfo(
        name=run.name,
        source=run.source,
        trajectories=batch.batch_size,
        groups=int(torch.unique(batch.group_ids).numel()),
        tokens=int(n.sum()),
        action_tokens=act,
        info_tokens=int(n.sum()) - act,
        turns=int(token_turns(batch).sum()),
        reward_turns=int(batch.num_turns.sum().item()) if batch.num_tokens else 0,  # num_turns needs T > 0
        max_length=int(n.max()) if len(n) else 0,
        has_values=batch.values is not None,
        has_log_probs=batch.old_log_probs is not None and batch.ref_log_probs is not None,
        has_rollout_log_probs=batch.old_log_probs is not None and batch.rollout_log_probs is not None,
        has_trace_lengths=batch.trace_lengths is not None,
        has_logged_advantages=batch.logged_advantages is not None,
        has_turn_rewards=batch.turn_rewards is not None,
        has_global_rewards=batch.global_rewards is not None,
        has_token_scores=batch.token_scores is not None,
        has_baselines=batch.reward_baselines is not None,
        trajectory_ids=tuple(batch.trajectory_ids),
        turn_reward_names=tuple(batch.turn_reward_names),
        global_reward_names=tuple(batch.global_reward_names),
        synthesized=tuple(synthesized_counts(run.trajectories).items()),
        truncated=int(batch.truncated.sum().item()) if batch.truncated is not None else 0,
        excluded=sum(t.metadata.get("exclude_from_loss") is True for t in run.trajectories),
        flags=_flags(run, batch),
    )


def _flags(run, batch: TrajectoryBatch) -> tuple[tuple[str, ...], ...]:
    """Each trajectory's badges that no scheme changes: its metadata's and whether its group is a singleton."""
    from dashboard.badges import metadata_badges

    _, inv, counts = torch.unique(batch.group_ids, return_inverse=True, return_counts=True)
    single = np_(counts[inv] == 1)
    return tuple(
        tuple(metadata_badges(t.metadata)) + (("singleton",) if single[i] else ())
        for i, t in enumerate(run.trajectories)
    )


def synthesized_counts(trajectories) -> dict[str, int]:
    """Field name → how many trajectories list it in ``metadata["synthesized"]``, in name order."""
    counts: dict[str, int] = {}
    for t in trajectories:
        raw = t.metadata.get("synthesized") or ()
        for f in {raw} if isinstance(raw, str) else set(raw):
            counts[str(f)] = counts.get(str(f), 0) + 1
    return dict(sorted(counts.items()))


MISMATCH_COLUMNS = ("trajectory", "position", "role", "Δ log π", "π_trainer / π_rollout", "IS weight", "rejected",
                    "gradient weight")  # fmt: skip


def mismatch_table(run, batch: TrajectoryBatch, result: CreditResult, k: int = 20) -> pd.DataFrame:
    """The run's ``k`` action tokens where the trainer's and the rollout engine's log-probs disagree most
    (|log π_trainer − log π_rollout|, largest first), with what the policy stage does to each. Empty without the
    rollout engine's log-probs."""
    if batch.old_log_probs is None or batch.rollout_log_probs is None:
        return pd.DataFrame(columns=MISMATCH_COLUMNS)
    delta = result.mismatch
    score = torch.where(batch.action_mask.bool(), delta.abs(), -1.0).flatten()
    top = torch.topk(score, min(k, score.numel())).indices
    top = top[score[top] > 0].sort().values  # ties in run order: the first trajectory, the first position
    top = top[torch.sort(score[top], descending=True, stable=True).indices]
    T = delta.shape[1]
    r_idx, c_idx = top // T, top % T
    rows, cols = r_idx.tolist(), c_idx.tolist()

    def flat(t: torch.Tensor) -> np.ndarray:  # the picked tokens (an expanded constant is never materialised)
        return np_(t[r_idx, c_idx])

    d = flat(delta)
    return pd.DataFrame(
        {
            "trajectory": [batch.trajectory_ids[r] if batch.trajectory_ids else str(r) for r in rows],
            "position": cols,
            "role": [run.token_roles(r)[c] for r, c in zip(rows, cols, strict=True)],
            "Δ log π": d,
            "π_trainer / π_rollout": np.exp(d),
            "IS weight": flat(result.is_weight),
            "rejected": flat(result.rejected).astype(bool),
            "gradient weight": flat(result.grad_weight),
        },
        columns=MISMATCH_COLUMNS,
    )


def problems_frame(problems) -> pd.DataFrame:
    """The loader's problems, one row each (their fields as columns)."""
    return pd.DataFrame([vars(p) for p in problems])
