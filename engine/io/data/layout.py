"""Per-token view of a trajectory: which tokens the policy generated and which turn each token belongs to.

Rules (they decide the numbers downstream):

* ``action`` = 1 exactly on tokens of ``model`` segments (generated content plus its end-of-turn token, e.g.
  ``<|im_end|>``); template and tool/user/system tokens are 0. Every token is attended (attention 1).
* A **turn** is a maximal run of consecutive ``model`` segments plus the non-model segments that follow it
  (the observation answering it). Turn ids are 0-based; non-model segments before the first model segment
  belong to turn 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.io.data.model import FLOAT_DTYPE, ROLE_CODES, ROLES, TOKEN_DTYPE, Trajectory


def segment_turns(roles: Sequence[str]) -> list[int]:
    """Turn index of each segment, e.g. ``[model, tool, model, model, user] -> [0, 0, 1, 1, 1]``."""
    turns: list[int] = []
    turn, prev_model = -1, False
    for role in roles:
        is_model = role == "model"
        if is_model and not prev_model:
            turn += 1
        prev_model = is_model
        turns.append(max(turn, 0))
    return turns


def num_turns(traj: Trajectory) -> int:
    """Number of token turns (turns that have tokens); 0 for a response without segments."""
    turns = segment_turns([s.role for s in traj.segments if s.num_tokens > 0])
    return turns[-1] + 1 if turns else 0


@dataclass(frozen=True)
class TokenLayout:
    """Flattened response of one trajectory, n tokens.

    ``token_ids`` [n] int32; ``role_codes`` [n] int8 (index into ``ROLES``); ``action`` [n] bool;
    ``turn_ids`` [n] int32 (0-based).
    """

    token_ids: np.ndarray
    role_codes: np.ndarray
    action: np.ndarray
    turn_ids: np.ndarray

    @property
    def roles(self) -> list[str]:
        return [ROLES[c] for c in self.role_codes.tolist()]


def token_layout(traj: Trajectory) -> TokenLayout:
    """Concatenate the segments of ``traj`` into per-token arrays (see the module docstring for the rules)."""
    segs = [s for s in traj.segments if s.num_tokens > 0]
    turns = segment_turns([s.role for s in segs])
    lengths = np.array([s.num_tokens for s in segs], dtype=np.int64)
    if not segs:
        empty = np.zeros(0, dtype=TOKEN_DTYPE)
        return TokenLayout(empty, np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool), empty.copy())
    codes = np.array([ROLE_CODES[s.role] for s in segs], dtype=np.int8)
    return TokenLayout(
        token_ids=np.concatenate([s.token_ids for s in segs]).astype(TOKEN_DTYPE, copy=False),
        role_codes=np.repeat(codes, lengths),
        action=np.repeat(codes == ROLE_CODES["model"], lengths),
        turn_ids=np.repeat(np.array(turns, dtype=TOKEN_DTYPE), lengths),
    )


def has_per_token(traj: Trajectory, name: str) -> bool:
    """True if every model segment carries the per-token field ``name`` (non-model segments may lack it)."""
    segs = [s for s in traj.segments if s.num_tokens > 0]
    model = [s for s in segs if s.role == "model"]
    if model:
        return all(getattr(s, name) is not None for s in model)
    return bool(segs) and all(getattr(s, name) is not None for s in segs)


def per_token(traj: Trajectory, name: str) -> np.ndarray:
    """[n] float32 concatenation of a per-token field; segments without it contribute zeros."""
    parts = [
        getattr(s, name) if getattr(s, name) is not None else np.zeros(s.num_tokens, dtype=FLOAT_DTYPE)
        for s in traj.segments
        if s.num_tokens > 0
    ]
    return np.concatenate(parts).astype(FLOAT_DTYPE, copy=False) if parts else np.zeros(0, dtype=FLOAT_DTYPE)
