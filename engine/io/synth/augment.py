"""Synthesize per-token arrays a source did not record (behaviour/reference log-probs, critic values).

Made-up numbers are always declared: each trajectory lists the fields it got in ``metadata["synthesized"]``.
Shapes are what a trainer would have: ``log_probs`` on every response token (verl's actor scores the whole
response, tool tokens included, which are unlikely under the policy), ``ref_log_probs`` close to them, and
``values`` drifting from 0.5 towards the trajectory's outcome.
"""

from __future__ import annotations

import numpy as np

from engine.io.data.model import FLOAT_DTYPE, Trajectory
from engine.io.reading.fields import mark_synthesized

FIELDS = ("log_probs", "ref_log_probs", "values")


def outcome(traj: Trajectory) -> float:
    """A scalar outcome for shaping synthetic values: the first global reward, else the summed turn rewards."""
    if traj.global_rewards:
        return float(next(iter(traj.global_rewards.values())))
    return float(sum(sum(d.values()) for d in traj.turn_rewards))


def synthesize_per_token(traj: Trajectory, rng: np.random.Generator, fields: tuple[str, ...] = FIELDS) -> None:
    """Fill missing ``fields`` on every segment of ``traj`` in place and mark them synthesized."""
    n = traj.num_tokens
    added = []
    base_lp = (
        np.concatenate(
            [
                -rng.exponential(0.35 if s.role == "model" else 2.5, size=s.num_tokens).astype(FLOAT_DTYPE)
                for s in traj.segments
            ]
        )
        if traj.segments
        else np.zeros(0, dtype=FLOAT_DTYPE)
    )
    target = np.clip(outcome(traj), -1.0, 1.0)
    ramp = np.linspace(0.5, 0.5 + 0.45 * (target - 0.5), num=max(n, 1))[:n]
    values = (ramp + rng.normal(0, 0.05, size=n)).astype(FLOAT_DTYPE)
    pos = 0
    for seg in traj.segments:
        k = seg.num_tokens
        lp = seg.log_probs if seg.log_probs is not None else base_lp[pos : pos + k]
        made = {
            "log_probs": lp,
            "ref_log_probs": np.minimum(lp + rng.normal(0, 0.05, size=k), 0).astype(FLOAT_DTYPE),
            "values": values[pos : pos + k],
        }
        for name in fields:
            if getattr(seg, name) is None:  # 3 decimals: plenty for made-up numbers, and small files
                setattr(seg, name, np.round(made[name], 3).astype(FLOAT_DTYPE))
                added.append(name)
        pos += k
    if added:
        mark_synthesized(traj.metadata, *sorted(set(added)))
