"""Checks every trajectory passes after tokenization, whatever format it came from.

A trajectory is rejected (with a ``RecordError`` naming the field) if: a segment has no tokens it should have,
a per-token array's length differs from the segment's token count, a per-token value is NaN/inf, a reward or
``metadata.reward_baseline`` is non-finite or beyond float32 (the batch is float32), a token id (response or
prompt) is outside the tokenizer's vocabulary, the response has zero tokens, or ``metadata.exclude_from_loss``
(it zeroes the row's action mask) is not a boolean.
"""

from __future__ import annotations

import math

import numpy as np

from engine.io.coerce import all_finite, as_float
from engine.io.model import FLOAT_DTYPE, PER_TOKEN_FIELDS, ROLE_CODES, Trajectory
from engine.io.problems import RecordError

FLOAT_MAX = float(np.finfo(FLOAT_DTYPE).max)


def _check_number(v: float, field: str) -> None:
    """A reward the float32 batch can hold: finite and within float32 range."""
    if not math.isfinite(v):
        raise RecordError(field, f"non-finite value {v}")
    if abs(v) > FLOAT_MAX:
        raise RecordError(field, f"value {v} is beyond the float32 range of the batch")


def _check_vocab(ids, field: str, vocab_size: int | None) -> None:
    if vocab_size is not None and len(ids) and int(ids.max()) >= vocab_size:
        raise RecordError(field, f"token id {int(ids.max())} is outside the vocabulary ({vocab_size} ids)")


def validate_trajectory(traj: Trajectory, vocab_size: int | None = None) -> None:
    """Raise ``RecordError`` on the first thing that makes ``traj`` unusable (see the module docstring)."""
    if traj.prompt is None:
        raise RecordError("prompt", "missing prompt text")
    for j, seg in enumerate(traj.segments):
        where = f"segments[{j}]"
        if seg.role not in ROLE_CODES:
            raise RecordError(f"{where}.role", f"unknown role {seg.role!r}")
        if seg.token_ids is None or seg.text is None:
            raise RecordError(where, "segment has neither text nor token ids")
        n = len(seg.token_ids)
        _check_vocab(seg.token_ids, f"{where}.token_ids", vocab_size)
        for name in PER_TOKEN_FIELDS:
            arr = getattr(seg, name)
            if arr is None:
                continue
            if len(arr) != n:
                raise RecordError(f"{where}.{name}", f"has {len(arr)} values for {n} tokens")
            if len(arr) and not all_finite(arr):
                i = int(np.flatnonzero(~np.isfinite(arr))[0])
                raise RecordError(f"{where}.{name}", f"non-finite value {float(arr[i])} at token {i}")
    if traj.num_tokens == 0:
        raise RecordError("segments", "empty trajectory: the response has zero tokens")
    if traj.prompt_token_ids is not None:
        _check_vocab(traj.prompt_token_ids, "prompt_token_ids", vocab_size)
    for k, comps in enumerate(traj.turn_rewards):
        for name, v in comps.items():
            _check_number(v, f"turn_rewards[{k}].{name}")
    for name, v in traj.global_rewards.items():
        _check_number(v, f"global_rewards.{name}")
    baseline = traj.metadata.get("reward_baseline")
    if isinstance(baseline, (int, float)):  # becomes the batch's reward_baselines
        _check_number(as_float(baseline, "metadata.reward_baseline"), "metadata.reward_baseline")
    if not isinstance(traj.metadata.get("exclude_from_loss", False), bool):
        raise RecordError("metadata.exclude_from_loss", "expected true or false")
