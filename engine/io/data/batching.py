"""Run -> ``TrajectoryBatch``: pad B trajectories to T response tokens and stack every named tensor.

Shapes: token_ids (int32), attention_mask, action_mask, turn_ids [B, T] (padding: 0, 0, 0, -1); old_log_probs,
ref_log_probs, values, token_scores [B, T] or None; turn_rewards [B, K, C_turn] + turn_mask [B, K];
global_rewards [B, C_global]; group_ids [B] (factorized (step, group id) pairs, first-seen order: the same prompt in
two steps is two groups); steps [B] (each trajectory's training step) or None when no trajectory has one; truncated [B];
reward_baselines [B] and trace_lengths [B, 3] when every trajectory's metadata has ``reward_baseline`` /
``trace_lengths`` (``engine.batch.TRACE_LENGTHS``); logged_advantages and logged_advantage_mask [B, T] when any
trajectory carries the trainer's advantages (``engine.io.data.logged.logged_advantage_tokens``: a per-token list of
the response's length, or one value per trajectory on every token; NaN, a list of another length, or a row without
any: mask 0, value 0).

Optional per-token tensors follow "all or nothing": present only if every trajectory has them (every model
segment carries the array; tool segments without one count as 0). ``token_scores`` is the exception: present
if any trajectory has scores, zeros elsewhere. Reward components are the union of names in first-seen order;
a missing component is 0.

A trajectory whose ``metadata["exclude_from_loss"]`` is true (a trainer dropped it from the loss, e.g. NeMo Gym's
``mask_sample``) gets an all-zero action mask row; its tokens, turns and rewards stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from engine.batch import TRACE_LENGTHS, TrajectoryBatch, factorize
from engine.io.data.layout import has_per_token, per_token, token_layout
from engine.io.data.logged import logged_advantage_tokens
from engine.io.data.model import TOKEN_DTYPE, Trajectory
from engine.io.reading.problems import Problem
from engine.perf import release_free_memory

BATCH_FIELDS = {
    "log_probs": "old_log_probs",
    "ref_log_probs": "ref_log_probs",
    "values": "values",
    "rollout_log_probs": "rollout_log_probs",
    "entropy": "entropy",
}
SHARE_RELEASE_ROWS = 2048  # with share_memory, freed loader memory is handed back every this many rows


def _names(dicts: Sequence[dict[str, float]]) -> list[str]:
    seen: dict[str, None] = {}
    for d in dicts:
        for k in d:
            seen.setdefault(k, None)
    return list(seen)


def _stack_rewards(trajs: Sequence[Trajectory]):
    """turn_rewards [B, K, C], turn_mask [B, K], names; global_rewards [B, C], names (None when nobody has any) and
    which rows have each component [B, C] (None when every row has every one; a missing value is stored as 0)."""
    B = len(trajs)
    turn_names = _names([d for t in trajs for d in t.turn_rewards])
    K = max((len(t.turn_rewards) for t in trajs), default=0)
    turn = mask = None
    if K:
        col = {n: c for c, n in enumerate(turn_names)}
        turn = np.zeros((B, K, len(turn_names)), dtype=np.float32)
        mask = np.zeros((B, K), dtype=np.float32)
        for b, t in enumerate(trajs):
            mask[b, : len(t.turn_rewards)] = 1
            for k, comps in enumerate(t.turn_rewards):
                for n, v in comps.items():
                    turn[b, k, col[n]] = v
    global_names = _names([t.global_rewards for t in trajs])
    glob = present = None
    if global_names:
        col = {n: c for c, n in enumerate(global_names)}
        glob = np.zeros((B, len(global_names)), dtype=np.float32)
        present = np.zeros((B, len(global_names)), dtype=bool)
        for b, t in enumerate(trajs):
            for n, v in t.global_rewards.items():
                glob[b, col[n]] = v
                present[b, col[n]] = True
        if present.all():
            present = None  # the usual case: every row has every component
    return turn, mask, tuple(turn_names), glob, tuple(global_names), present


def missing_field_problems(trajs: Sequence[Trajectory], file: str) -> list[Problem]:
    """A Problem for each trajectory lacking old/ref log-probs or values while some other trajectory has them."""
    out = []
    for name, batch_name in BATCH_FIELDS.items():
        have = [has_per_token(t, name) for t in trajs]
        if any(have) and not all(have):
            out += [
                Problem(
                    file,
                    None,
                    f"{t.id}.{name}",
                    f"missing while other trajectories have it; {batch_name} is left out of the batch",
                )
                for t, h in zip(trajs, have, strict=True)
                if not h
            ]
    return out


def build_batch(
    trajs: Sequence[Trajectory], device: torch.device | str | None = None, share_memory: bool = False
) -> TrajectoryBatch:
    """Pad and stack ``trajs`` into one validated ``TrajectoryBatch`` (see the module docstring).

    Rows are filled one trajectory at a time, so no per-trajectory layout outlives its row. Token ids stay int32
    (the loaders' dtype). ``share_memory``: afterwards every segment's token ids and per-token arrays are
    read-only views of its row in the batch's (CPU) arrays, so a program that keeps the trajectories and the
    batch (the dashboard) holds one copy; the values do not change. Off by default: it rebinds the segments'
    arrays."""
    if not trajs:
        raise ValueError("to_batch: the run has no trajectories (every record was rejected; see the load problems)")
    B, T = len(trajs), max((t.num_tokens for t in trajs), default=0)
    token_ids = np.zeros((B, T), dtype=TOKEN_DTYPE)
    attention = np.zeros((B, T), dtype=np.float32)
    action = np.zeros((B, T), dtype=np.float32)
    turn_ids = np.full((B, T), -1, dtype=np.int32)  # half the memory of int64; the engine indexes with .long()
    fields = [name for name in BATCH_FIELDS if all(has_per_token(t, name) for t in trajs)]
    fields += ["scores"] if any(has_scores(t) for t in trajs) else []
    padded = {name: np.zeros((B, T), dtype=np.float32) for name in fields}
    shared = {"token_ids": token_ids} | padded
    logged: np.ndarray | None = None  # (B, T) the trainer's advantages, allocated at the first row that has them
    logged_mask: np.ndarray | None = None
    for b, t in enumerate(trajs):
        lay = token_layout(t)
        n = len(lay.token_ids)
        token_ids[b, :n] = lay.token_ids
        attention[b, :n] = 1
        action[b, :n] = 0 if t.metadata.get("exclude_from_loss") else lay.action
        turn_ids[b, :n] = lay.turn_ids
        for name, out in padded.items():
            out[b, :n] = per_token(t, name)
        row = logged_advantage_tokens(t)
        if row is not None and len(row) == n:
            if logged is None:
                logged, logged_mask = np.zeros((B, T), dtype=np.float32), np.zeros((B, T), dtype=np.float32)
            with np.errstate(over="ignore"):
                row = row.astype(np.float32)  # beyond float32's range: inf, not logged
            ok = np.isfinite(row)
            logged[b, :n] = np.where(ok, row, 0.0)
            logged_mask[b, :n] = ok
        if share_memory:  # row by row, so the loader's arrays are freed while the batch fills
            _share_row(t, b, shared)
            if b % SHARE_RELEASE_ROWS == SHARE_RELEASE_ROWS - 1:
                release_free_memory()  # pyarrow's pool keeps freed buffers until asked
    turn, mask, turn_names, glob, global_names, present = _stack_rewards(trajs)
    baselines = [t.metadata.get("reward_baseline") for t in trajs]
    lengths = [t.metadata.get("trace_lengths") for t in trajs]
    optional = {batch_name: _tensor(padded.get(name)) for name, batch_name in BATCH_FIELDS.items()}
    batch = TrajectoryBatch(
        token_ids=torch.from_numpy(token_ids),
        attention_mask=torch.from_numpy(attention),
        action_mask=torch.from_numpy(action),
        turn_ids=torch.from_numpy(turn_ids),
        group_ids=factorize([(t.step, t.group_id) for t in trajs]),
        steps=_steps(trajs),
        reward_baselines=torch.tensor(baselines, dtype=torch.float32)
        if all(isinstance(x, (int, float)) for x in baselines)
        else None,
        token_scores=_tensor(padded.get("scores")),
        turn_rewards=None if turn is None else torch.from_numpy(turn),
        turn_mask=None if mask is None else torch.from_numpy(mask),
        turn_reward_names=turn_names,
        global_rewards=None if glob is None else torch.from_numpy(glob),
        global_reward_names=global_names,
        global_rewards_present=None if present is None else torch.from_numpy(present),
        trace_lengths=torch.tensor([[x[k] for k in TRACE_LENGTHS] for x in lengths], dtype=torch.float32)
        if all(isinstance(x, dict) for x in lengths)
        else None,
        logged_advantages=_tensor(logged),
        logged_advantage_mask=_tensor(logged_mask),
        truncated=torch.tensor([t.truncated for t in trajs], dtype=torch.bool),
        trajectory_ids=tuple(t.id for t in trajs),
        **optional,
    )
    return batch if device is None else batch.to(device)


def _steps(trajs: Sequence[Trajectory]) -> torch.Tensor | None:
    """[B] each trajectory's step, or None when none has one (a run of one step); ``ValueError`` for a mix, which
    ``load_run`` never returns (it would put the unnumbered rows in some step by guessing)."""
    steps = [t.step for t in trajs]
    if all(s is None for s in steps):
        return None
    if any(s is None for s in steps):
        bad = next(t.id for t in trajs if t.step is None)
        raise ValueError(f"to_batch: trajectory {bad!r} has no step while others have one; give every one a step")
    return torch.tensor(steps, dtype=torch.long)


def _tensor(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(a)


def _share_row(traj: Trajectory, b: int, rows: dict[str, np.ndarray]) -> None:
    """Point the segment arrays named in ``rows`` (segment field -> [B, T] array) at their slices of row ``b``."""
    start = 0
    for seg in traj.segments:
        n = seg.num_tokens
        if n == 0:
            continue
        for name, arr in rows.items():
            if getattr(seg, name) is not None:
                view = arr[b, start : start + n]
                view.flags.writeable = False
                setattr(seg, name, view)
        start += n


def has_scores(traj: Trajectory) -> bool:
    return any(s.scores is not None for s in traj.segments)
