"""What a trainer logged about its own credit, as loaders keep it: ``metadata.logged_advantage`` (one float per
trajectory, e.g. TRL's completions log) or ``metadata.logged_advantages`` (one per response token, e.g. verl's
``advantages`` tensor, prime-rl's node advantages). The batch's ``logged_advantages`` (the estimator ``logged``),
the lint ``logged_advantage_mismatch`` and the token view read it through this one function, so all three align
it to the response tokens the same way; ``logged_length_mismatch`` says when a list could not be aligned."""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def logged_length_mismatch(trajs: Sequence[Trajectory]) -> str | None:
    """Why some trajectories' ``logged_advantages`` are not used: a list whose length is not the response's token
    count cannot be aligned to the tokens, so it is left out (the estimator ``logged`` gives those rows 0, the lint
    does not compare them). None when every list fits."""
    bad = [
        (t.id, len(per_token), t.num_tokens)
        for t in trajs
        if isinstance(per_token := t.metadata.get("logged_advantages"), list) and len(per_token) != t.num_tokens
    ]
    if not bad:
        return None
    tid, got, want = bad[0]
    return (
        f"{len(bad)} trajector{'y' if len(bad) == 1 else 'ies'}' logged_advantages cannot be aligned to the response "
        f"tokens (first: {tid} has {got} values for {want} tokens): not used (the estimator logged gives them 0)"
    )
