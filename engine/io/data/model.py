"""The loaded data model: a Trajectory is a prompt plus a response made of role-tagged Segments.

* ``Segment``: a contiguous piece of the response with one ``role`` (``model`` | ``tool`` | ``user`` | ``system``),
  its ``text`` and ``token_ids`` [n] (int32), and optional per-token float32 arrays [n]: ``log_probs`` (the
  behaviour policy's, verl ``old_log_probs``), ``ref_log_probs``, ``values`` (critic), ``scores`` (per-token
  reward, verl ``token_level_scores``). Chat template tokens live in the non-model segment around them, so
  "the policy generated this token" is exactly ``role == "model"`` (see ``layout.py``).
* ``Trajectory``: ``id``, ``group_id`` (rollouts of one prompt share it), ``prompt`` text, ``segments``,
  ``turn_rewards`` (one dict of named components per turn), ``global_rewards`` (named components for the whole
  trajectory), ``step`` (the training step whose batch it belongs to) and free ``metadata`` (``truncated``,
  ``synthesized`` field names, source details).

Arrays are numpy so that 10k x 2k-token runs stay small and fast; equality compares them element-wise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

ROLES: tuple[str, ...] = ("model", "tool", "user", "system")
ROLE_CODES: dict[str, int] = {r: i for i, r in enumerate(ROLES)}
# Accepted spellings from other formats, mapped to our four roles.
ROLE_ALIASES: dict[str, str] = {
    "assistant": "model",
    "policy": "model",
    "observation": "tool",
    "environment": "tool",
    "env": "tool",
    "function": "tool",
    "ipython": "tool",
    "information": "tool",
    "developer": "system",
    "template": "system",
}
PER_TOKEN_FIELDS: tuple[str, ...] = ("log_probs", "ref_log_probs", "values", "scores", "rollout_log_probs", "entropy")

TOKEN_DTYPE = np.int32
FLOAT_DTYPE = np.float32


def normalize_role(role: str) -> str | None:
    """Our role name for ``role`` (case-insensitive, aliases allowed), or ``None`` if unknown."""
    r = role.strip().lower()
    r = ROLE_ALIASES.get(r, r)
    return r if r in ROLE_CODES else None


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if a is None or b is None:
            return False
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return a == b


@dataclass(eq=False)
class Segment:
    """A run of response tokens with one role.

    Fields: ``role``; ``text`` (the readable text, template glue included); ``token_ids`` [n] int32;
    ``log_probs``, ``ref_log_probs``, ``values``, ``scores``, ``rollout_log_probs``, ``entropy``: [n] float32 or
    ``None`` (``rollout_log_probs``: the rollout engine's log-probs of the sampled tokens, kept beside the trainer's
    ``log_probs`` when a dump has both; the train/inference mismatch is their difference; ``entropy``: the policy's
    entropy at the token, in nats, verl's ``entropys``).
    ``text`` or ``token_ids`` may be ``None`` only while a loader is still filling them in.
    """

    role: str
    text: str | None = None
    token_ids: np.ndarray | None = None
    log_probs: np.ndarray | None = None
    ref_log_probs: np.ndarray | None = None
    values: np.ndarray | None = None
    scores: np.ndarray | None = None
    rollout_log_probs: np.ndarray | None = None
    entropy: np.ndarray | None = None

    @property
    def num_tokens(self) -> int:
        return 0 if self.token_ids is None else len(self.token_ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Segment):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))


@dataclass(eq=False)
class Trajectory:
    """One rollout: prompt, response segments, structured rewards, metadata.

    ``turn_rewards[k]`` holds the named reward components of turn k (0-based; a turn is a maximal run of model
    segments plus the non-model segments that follow it). It may be longer than the number of token turns
    (KG-R1 placeholder turns of finished samples). ``prompt_token_ids`` keeps prompt ids a source gave us.

    ``step``: the training step the trajectory was sampled for, i.e. the batch the trainer computed its advantages
    in (groups, whitening and every batch-wide statistic stay inside one step). Read from where each trainer
    writes it (a record field, the file name, the step folder). ``None``: nothing says a step (a run whose files
    name none is one step); ``load_run`` never mixes the two: a run's trajectories all have an int step, or none has.
    """

    id: str
    group_id: str
    prompt: str
    segments: list[Segment]
    turn_rewards: list[dict[str, float]] = field(default_factory=list)
    global_rewards: dict[str, float] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    prompt_token_ids: np.ndarray | None = None
    step: int | None = None

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.segments)

    @property
    def truncated(self) -> bool:
        return bool(self.metadata.get("truncated", False))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trajectory):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
