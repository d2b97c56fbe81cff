"""What a trainer logged about its own credit, as loaders keep it: ``metadata.logged_advantage`` (one float per
trajectory, e.g. TRL's completions log) or ``metadata.logged_advantages`` (one per response token, e.g. verl's
``advantages`` tensor, prime-rl's node advantages). The lint ``logged_advantage_mismatch`` and the token view
read it through this one function."""

from __future__ import annotations

import math

import numpy as np

from engine.io.data.model import Trajectory


def logged_advantage_tokens(traj: Trajectory) -> np.ndarray | None:
    """The trainer's advantage at each response token [n] float64 (NaN where it logged none), or None.

    A per-trajectory ``logged_advantage`` stands on every token (GRPO-style broadcast; callers restrict it to the
    action tokens); a per-token ``logged_advantages`` list must have one value per response token, else it is
    not used (None)."""
    md, n = traj.metadata, traj.num_tokens
    one, per_token = md.get("logged_advantage"), md.get("logged_advantages")
    if isinstance(one, (int, float)) and not isinstance(one, bool) and math.isfinite(one):
        return np.full(n, float(one))
    if isinstance(per_token, list) and len(per_token) == n:
        try:
            return np.asarray(per_token, dtype=np.float64)
        except (TypeError, ValueError):
            return None
    return None
