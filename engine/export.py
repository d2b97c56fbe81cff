"""Per-token credit as a flat table (one row per real response token), for the CLI, notebooks and the
dashboard's CSV/Parquet export. Uses pyarrow only; ``table.to_pandas()`` gives a DataFrame."""

from __future__ import annotations

import pyarrow as pa
import torch

from engine.batch import TrajectoryBatch
from engine.credit import CreditResult

TOKEN_COLUMNS = (
    "token_score",
    "kl",
    "reward",
    "value",
    "return",
    "advantage",
    "agg_weight",
    "effective_weight",
)


def token_table(
    batch: TrajectoryBatch,
    result: CreditResult,
    token_texts: list[list[str]] | None = None,
    group_names: list[str] | None = None,
) -> pa.Table:
    """Rows: every attended token of every trajectory, in order. Columns: ids, position, turn, masks, and each
    credit quantity of ``result`` (``value`` is null when GAE did not run on values)."""
    keep = batch.attention_mask.bool().cpu()
    rows, pos = keep.nonzero(as_tuple=True)

    def col(x: torch.Tensor | None):
        return None if x is None else x.detach().cpu()[rows, pos].tolist()

    data = {
        "trajectory_id": [batch.trajectory_ids[i] for i in rows.tolist()],
        "group": ([group_names[i] for i in rows.tolist()] if group_names else batch.group_ids.cpu()[rows].tolist()),
        "position": pos.tolist(),
        "token_id": col(batch.token_ids),
        "turn": col(batch.turn_ids),
        "action": [bool(v) for v in col(batch.action_mask)],
        "loss_mask": [bool(v) for v in col(result.loss_mask)],
    }
    if batch.steps is not None:  # a run of several steps: each row's training step
        data = {"step": batch.steps.cpu()[rows].tolist()} | data
    if token_texts is not None:
        data["text"] = [token_texts[i][p] for i, p in zip(rows.tolist(), pos.tolist(), strict=True)]
    values = {
        "token_score": result.token_level_scores,
        "kl": result.kl,
        "reward": result.token_level_rewards,
        "value": result.values,
        "return": result.returns,
        "advantage": result.advantages,
        "agg_weight": result.agg_weights,
        "effective_weight": result.effective_weights,
    }
    for name in TOKEN_COLUMNS:
        v = col(values[name])
        data[name] = pa.array(v if v is not None else [None] * len(data["position"]), type=pa.float64())
    return pa.table(data)
