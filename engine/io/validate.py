"""Checks every trajectory passes after tokenization, whatever format it came from.

A trajectory is rejected (with a ``RecordError`` naming the field) if: a segment has no tokens it should have,
a per-token array's length differs from the segment's token count, a per-token value is NaN/inf, a reward is
non-finite, a token id is outside the tokenizer's vocabulary, or the response has zero tokens.
"""

from __future__ import annotations

import math

import numpy as np

from engine.io.coerce import all_finite
from engine.io.model import PER_TOKEN_FIELDS, ROLE_CODES, Trajectory
from engine.io.problems import RecordError


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
        if vocab_size is not None and n and int(seg.token_ids.max()) >= vocab_size:
            raise RecordError(
                f"{where}.token_ids",
                f"token id {int(seg.token_ids.max())} is outside the vocabulary ({vocab_size} ids)",
            )
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
    for k, comps in enumerate(traj.turn_rewards):
        for name, v in comps.items():
            if not math.isfinite(v):
                raise RecordError(f"turn_rewards[{k}].{name}", f"non-finite value {v}")
    for name, v in traj.global_rewards.items():
        if not math.isfinite(v):
            raise RecordError(f"global_rewards.{name}", f"non-finite value {v}")
