"""The one typed batch every engine function reads.

A ``TrajectoryBatch`` holds B trajectories padded to T response tokens. Masks follow verl:

* ``attention_mask`` [B, T]: 1 on every real response token (model output **and** tool/info tokens), 0 on padding.
* ``action_mask``    [B, T]: 1 on tokens the policy generated (verl's ``response_mask``); 0 on tool/info tokens
  ("holes") and on padding. Always ``action_mask <= attention_mask``.
* ``turn_ids``       [B, T]: 0-based turn of every real token (a tool/info token belongs to the turn whose
  action it answers), -1 on padding.

Structured rewards (KG-R1 style) are ``turn_rewards`` [B, K, C_turn] with ``turn_mask`` [B, K] (which turns
exist: a KG-R1 placeholder turn exists even without tokens) and ``global_rewards`` [B, C_global], each with
its component names. ``token_scores`` [B, T] holds per-token scores where a run already has them (verl's
``token_level_scores``). ``trace_lengths`` [B, 3] holds what prime-rl's length penalty reads of each row's trace
(``TRACE_LENGTHS``: output tokens and final-sequence tokens from the provider's usage, and turns).
``logged_advantages`` [B, T] holds the advantages the trainer itself logged (verl's ``advantages``, prime-rl's),
with ``logged_advantage_mask`` [B, T] saying which tokens have one (the estimator ``logged`` returns them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

import torch

from engine.scan import TurnSegments

FLOAT = torch.float32
# The columns of ``trace_lengths``, verifiers' ``Trace`` properties of the same names (engine.io.adapters.
# verifiers_traces computes them from the written record).
TRACE_LENGTHS = ("num_output_tokens", "num_total_tokens", "num_turns")


def _fail(name: str, msg: str) -> None:
    raise ValueError(f"TrajectoryBatch.{name}: {msg}")


def _as_float(name: str, x, shape: tuple[int, ...] | None, device) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dtype == torch.bool or not (t.is_floating_point() or t.dtype in _INT_DTYPES):
        _fail(name, f"expected a numeric tensor, got dtype {t.dtype}")
    t = t.to(device=device, dtype=FLOAT)
    if shape is not None and tuple(t.shape) != shape:
        _fail(name, f"expected shape {list(shape)}, got {list(t.shape)}")
    if not torch.isfinite(t).all():
        bad = (~torch.isfinite(t)).nonzero()[0].tolist()
        _fail(name, f"non-finite value {t[tuple(bad)].item()} at index {bad}")
    return t


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _as_mask(name: str, x, shape: tuple[int, ...], device) -> torch.Tensor:
    t = torch.as_tensor(x)
    if tuple(t.shape) != shape:
        _fail(name, f"expected shape {list(shape)}, got {list(t.shape)}")
    if t.is_floating_point() and not torch.isfinite(t).all():
        _fail(name, "mask holds non-finite values")
    t = t.to(device=device)
    ok = (t == 0) | (t == 1)
    if not bool(ok.all()):
        bad = (~ok).nonzero()[0].tolist()
        _fail(name, f"mask values must be 0 or 1, got {t[tuple(bad)].item()} at index {bad}")
    return t.to(FLOAT)


def _as_long(name: str, x, shape: tuple[int, ...], device) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.is_floating_point():
        if not torch.isfinite(t).all() or not bool((t == t.round()).all()):
            _fail(name, "expected integer values")
    elif t.dtype not in _INT_DTYPES:
        _fail(name, f"expected an integer tensor, got dtype {t.dtype}")
    t = t.to(device=device, dtype=torch.long)
    if tuple(t.shape) != shape:
        _fail(name, f"expected shape {list(shape)}, got {list(t.shape)}")
    return t


def factorize(keys) -> torch.Tensor:
    """Map arbitrary hashable group keys (ints, strings, uuids) to dense ids 0..G-1 in first-seen order."""
    if isinstance(keys, torch.Tensor):
        keys = keys.tolist()
    table: dict = {}
    return torch.tensor([table.setdefault(k, len(table)) for k in keys], dtype=torch.long)


@dataclass(frozen=True)
class TrajectoryBatch:
    """B trajectories, T response tokens each (right-padded). See the module docstring for mask meanings.

    Fields (shapes):
        token_ids [B, T] long or int32; attention_mask, action_mask [B, T] float 0/1;
        turn_ids [B, T] long or int32 (-1 = padding; index with ``.long()``);
        group_ids [B] long (rows of one prompt share an id); old_log_probs, ref_log_probs, values [B, T] or None;
        reward_baselines [B] or None (ReMax greedy scores); token_scores [B, T] or None;
        sum_pi_squared [B, T] or None (Σ_v π(v)² of the rollout policy, for the optimal token baseline);
        rollout_is_weights [B, T] or None (truncated importance weights); rollout_log_probs [B, T] or None (the
        rollout engine's log-probs when the trainer's own are ``old_log_probs``: the train/inference mismatch);
        entropy [B, T] or None (the policy's entropy at each token, nats);
        turn_rewards [B, K, C_turn] or None with turn_mask [B, K] and turn_reward_names (C_turn,);
        global_rewards [B, C_global] or None with global_reward_names (C_global,); global_rewards_present
        [B, C_global] bool or None (all present): False where a row has no value for a component (a TRL reward
        function that returned None; its ``global_rewards`` entry is 0);
        trace_lengths [B, 3] or None (``TRACE_LENGTHS``: the row's trace's output tokens, final-sequence tokens
        and turns, each ≥ 0; prime-rl's length penalty);
        logged_advantages [B, T] or None (the trainer's own advantage at each response token, 0 where it logged
        none) with logged_advantage_mask [B, T] float 0/1 (1 where it logged one; within the attention mask;
        default: the attention mask);
        truncated [B] bool (ran into the length limit); trajectory_ids (B,) strings;
        steps [B] long or None (None: one step): the training step of each row. A trainer computes each step's
        batch alone, so ``compute_credit`` on a batch of several steps computes each step alone (``engine.steps``).
    """

    token_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    turn_ids: torch.Tensor
    group_ids: torch.Tensor
    old_log_probs: torch.Tensor | None = None
    ref_log_probs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    reward_baselines: torch.Tensor | None = None
    token_scores: torch.Tensor | None = None
    sum_pi_squared: torch.Tensor | None = None
    rollout_is_weights: torch.Tensor | None = None
    rollout_log_probs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    turn_rewards: torch.Tensor | None = None
    turn_mask: torch.Tensor | None = None
    turn_reward_names: tuple[str, ...] = ()
    global_rewards: torch.Tensor | None = None
    global_reward_names: tuple[str, ...] = ()
    global_rewards_present: torch.Tensor | None = None
    trace_lengths: torch.Tensor | None = None
    logged_advantages: torch.Tensor | None = None
    logged_advantage_mask: torch.Tensor | None = None
    truncated: torch.Tensor | None = None
    trajectory_ids: tuple[str, ...] = field(default=())
    steps: torch.Tensor | None = None

    def __post_init__(self) -> None:
        ids = torch.as_tensor(self.token_ids)
        if ids.dim() != 2:
            _fail("token_ids", f"expected 2 dims [B, T], got shape {list(ids.shape)}")
        B, T = ids.shape
        dev = ids.device
        s = object.__setattr__
        # int32 ids stay int32 (every vocabulary fits; half the memory of a big run's [B, T] ids), others go long
        s(self, "token_ids", ids if ids.dtype == torch.int32 else _as_long("token_ids", ids, (B, T), dev))
        s(self, "attention_mask", _as_mask("attention_mask", self.attention_mask, (B, T), dev))
        s(self, "action_mask", _as_mask("action_mask", self.action_mask, (B, T), dev))
        if bool((self.action_mask > self.attention_mask).any()):
            bad = (self.action_mask > self.attention_mask).nonzero()[0].tolist()
            _fail("action_mask", f"action token outside the attention mask at index {bad}")
        tids = torch.as_tensor(self.turn_ids)  # int32 stays int32, like token_ids (the loader's batches)
        s(self, "turn_ids", tids.to(dev) if tids.dtype == torch.int32 else _as_long("turn_ids", tids, (B, T), dev))
        if tuple(self.turn_ids.shape) != (B, T):
            _fail("turn_ids", f"expected shape {[B, T]}, got {list(self.turn_ids.shape)}")
        if bool((self.turn_ids < -1).any()):
            _fail("turn_ids", "turn ids must be >= 0 on tokens and -1 on padding")
        if bool(((self.turn_ids < 0) & (self.attention_mask > 0)).any()):
            bad = ((self.turn_ids < 0) & (self.attention_mask > 0)).nonzero()[0].tolist()
            _fail("turn_ids", f"real token without a turn (-1) at index {bad}")
        gid = self.group_ids
        if not isinstance(gid, torch.Tensor) or gid.is_floating_point():
            gid = factorize(list(gid)) if not isinstance(gid, torch.Tensor) else gid
        s(self, "group_ids", _as_long("group_ids", gid, (B,), dev))
        for name in (
            "old_log_probs",
            "ref_log_probs",
            "values",
            "token_scores",
            "sum_pi_squared",
            "rollout_is_weights",
            "rollout_log_probs",
            "entropy",
        ):
            if getattr(self, name) is not None:
                s(self, name, _as_float(name, getattr(self, name), (B, T), dev))
        if self.reward_baselines is not None:
            s(self, "reward_baselines", _as_float("reward_baselines", self.reward_baselines, (B,), dev))
        if self.trace_lengths is not None:
            lengths = _as_float("trace_lengths", self.trace_lengths, (B, len(TRACE_LENGTHS)), dev)
            if bool((lengths < 0).any()):
                bad = (lengths < 0).nonzero()[0].tolist()
                _fail("trace_lengths", f"negative count {lengths[tuple(bad)].item()} at index {bad}")
            s(self, "trace_lengths", lengths)
        self._check_logged(B, T, dev)
        self._check_structured(B, dev)
        if self.truncated is None:
            s(self, "truncated", torch.zeros(B, dtype=torch.bool, device=dev))
        else:
            s(self, "truncated", _as_mask("truncated", self.truncated, (B,), dev).bool())
        if self.steps is not None:
            steps = _as_long("steps", self.steps, (B,), dev)
            if bool((steps < 0).any()):
                _fail("steps", f"negative step {int(steps.min())}")
            s(self, "steps", steps)
        tids = tuple(str(t) for t in self.trajectory_ids) or tuple(f"traj-{i}" for i in range(B))
        if len(tids) != B:
            _fail("trajectory_ids", f"expected {B} ids, got {len(tids)}")
        s(self, "trajectory_ids", tids)

    def _check_logged(self, B: int, T: int, dev) -> None:
        """The trainer's logged advantages: finite [B, T], 0 outside their mask, the mask within the attention mask."""
        if self.logged_advantages is None:
            if self.logged_advantage_mask is not None:
                _fail("logged_advantage_mask", "given without logged_advantages")
            return
        s = object.__setattr__
        logged = _as_float("logged_advantages", self.logged_advantages, (B, T), dev)
        mask = self.logged_advantage_mask if self.logged_advantage_mask is not None else self.attention_mask
        mask = _as_mask("logged_advantage_mask", mask, (B, T), dev)
        if bool((mask > self.attention_mask).any()):
            bad = (mask > self.attention_mask).nonzero()[0].tolist()
            _fail("logged_advantage_mask", f"logged advantage outside the attention mask at index {bad}")
        if bool(((logged != 0) & (mask == 0)).any()):
            bad = ((logged != 0) & (mask == 0)).nonzero()[0].tolist()
            _fail("logged_advantages", f"value {logged[tuple(bad)].item()} where none is logged (mask 0) at {bad}")
        s(self, "logged_advantages", logged)
        s(self, "logged_advantage_mask", mask)

    def _check_structured(self, B: int, dev) -> None:
        s = object.__setattr__
        if self.turn_rewards is not None:
            tr = torch.as_tensor(self.turn_rewards)
            if tr.dim() != 3 or tr.shape[0] != B:
                _fail("turn_rewards", f"expected shape [B={B}, K, C_turn], got {list(tr.shape)}")
            s(self, "turn_rewards", _as_float("turn_rewards", tr, tuple(tr.shape), dev))
            K, C = tr.shape[1], tr.shape[2]
            if len(self.turn_reward_names) != C:
                _fail("turn_reward_names", f"expected {C} names, got {len(self.turn_reward_names)}")
            tm = self.turn_mask if self.turn_mask is not None else torch.ones(B, K)
            s(self, "turn_mask", _as_mask("turn_mask", tm, (B, K), dev))
        elif self.turn_mask is not None:
            _fail("turn_mask", "given without turn_rewards")
        if self.global_rewards is not None:
            gr = torch.as_tensor(self.global_rewards)
            if gr.dim() != 2 or gr.shape[0] != B:
                _fail("global_rewards", f"expected shape [B={B}, C_global], got {list(gr.shape)}")
            s(self, "global_rewards", _as_float("global_rewards", gr, tuple(gr.shape), dev))
            if len(self.global_reward_names) != gr.shape[1]:
                _fail("global_reward_names", f"expected {gr.shape[1]} names, got {len(self.global_reward_names)}")
            if self.global_rewards_present is not None:
                present = _as_mask("global_rewards_present", self.global_rewards_present, tuple(gr.shape), dev)
                s(self, "global_rewards_present", present.bool())
        elif self.global_rewards_present is not None:
            _fail("global_rewards_present", "given without global_rewards")
        s(self, "turn_reward_names", tuple(str(n) for n in self.turn_reward_names))
        s(self, "global_reward_names", tuple(str(n) for n in self.global_reward_names))

    # ---------------------------------------------------------------- sizes and views
    @property
    def batch_size(self) -> int:
        return self.token_ids.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.token_ids.shape[1]

    @property
    def device(self) -> torch.device:
        return self.token_ids.device

    @property
    def num_turns(self) -> torch.Tensor:
        """[B] number of turns: turn_mask count if structured rewards exist, else 1 + max turn id."""
        if self.turn_mask is not None:
            return self.turn_mask.sum(-1).long()
        return (self.turn_ids.max(dim=-1).values + 1).clamp(min=0).long()

    @property
    def step_values(self) -> list[int]:
        """The batch's distinct steps in order ([] when ``steps`` is None: one unnumbered step)."""
        return [] if self.steps is None else torch.unique(self.steps).tolist()

    @property
    def info_mask(self) -> torch.Tensor:
        """[B, T] 1 on tool/info tokens: real tokens the policy did not generate."""
        return self.attention_mask - self.action_mask

    # ---------------------------------------------------------------- derived once per batch
    # Computed on first use and kept with the batch (every scheme computed on it reuses them); a batch is never
    # changed after construction, and ``replace``/``select``/``to`` build a new one that computes its own.
    @cached_property
    def turn_segments(self) -> TurnSegments:
        """Runs of equal turn id per row over the turns 0..K−1 (K = turn_rewards' K, else 1 + max turn id)."""
        K = self.turn_rewards.shape[1] if self.turn_rewards is not None else int(self.turn_ids.max()) + 1
        return TurnSegments.of(self.turn_ids, max(K, 1))

    @cached_property
    def _extents(self) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        return {}

    def row_extent(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(position of the last 1 of each row, whether the row has one, number of 1s), each [B], of ``mask``:
        kept for the batch's own ``action_mask`` and ``attention_mask``, computed for any other mask.

        Positions come from a float32 product (exact below 2**24), so no [B, T] int64 temporary is made."""
        name = "action" if mask is self.action_mask else "attention" if mask is self.attention_mask else None
        if name is not None and name in self._extents:
            return self._extents[name]
        T = mask.shape[-1]
        pos1 = torch.arange(1, T + 1, device=mask.device, dtype=torch.float32)  # 1-based: an empty row gives 0
        last = (mask.to(torch.float32) * pos1).amax(-1).long() - 1
        extent = (last.clamp(min=0), last >= 0, mask.sum(-1))
        if name is not None:
            self._extents[name] = extent
        return extent

    def to(self, device) -> TrajectoryBatch:
        """The batch on ``device`` (itself when already there; no re-validation cost)."""
        if torch.device(device) == self.device:
            return self
        moved = {
            f.name: (v.to(device) if isinstance(v, torch.Tensor) else v)
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }
        return TrajectoryBatch(**moved)

    def replace(self, **changes) -> TrajectoryBatch:
        return dataclasses.replace(self, **changes)

    def select(self, rows) -> TrajectoryBatch:
        """Rows `rows` (a list or index tensor) as a new batch."""
        idx = torch.as_tensor(rows, dtype=torch.long, device=self.device)
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                out[f.name] = v[idx]
            elif f.name == "trajectory_ids":
                out[f.name] = tuple(v[i] for i in idx.tolist())
            else:
                out[f.name] = v
        return TrajectoryBatch(**out)

    # ---------------------------------------------------------------- verl interop
    @classmethod
    def from_tensors(cls, **tensors) -> TrajectoryBatch:
        """Build a batch from verl's names (or ours).

        verl → engine: ``responses``/``input_ids`` → token_ids; ``response_mask`` → action_mask;
        ``attention_mask`` (response slice; if it is longer than the response it is cut to its last T columns) →
        attention_mask; ``token_level_scores``/``token_level_rewards`` → token_scores; ``values``;
        ``index``/``uid`` → group_ids; ``old_log_probs``; ``ref_log_prob`` → ref_log_probs;
        ``reward_baselines``; ``advantages`` (the trainer's own) → logged_advantages. Missing ``response_mask`` =
        attention mask (as verl's ``compute_advantage`` does); missing ``turn_ids`` = 0 on every real token; missing
        token ids = zeros.
        """
        alias = {
            "responses": "token_ids",
            "input_ids": "token_ids",
            "response_mask": "action_mask",
            "token_level_scores": "token_scores",
            "token_level_rewards": "token_scores",
            "index": "group_ids",
            "uid": "group_ids",
            "ref_log_prob": "ref_log_probs",
            "old_log_prob": "old_log_probs",
            "advantages": "logged_advantages",
        }
        kw = {}
        for k, v in tensors.items():
            name = alias.get(k, k)
            if name in kw:
                raise ValueError(f"TrajectoryBatch.from_tensors: both {k!r} and another alias of {name!r} given")
            kw[name] = v
        ref = next(
            (kw[k] for k in ("action_mask", "token_scores", "token_ids", "values") if kw.get(k) is not None),
            None,
        )
        if ref is None:
            raise ValueError("TrajectoryBatch.from_tensors: need at least one [B, T] tensor (e.g. response_mask)")
        B, T = torch.as_tensor(ref).shape[:2]
        if "attention_mask" in kw and torch.as_tensor(kw["attention_mask"]).shape[-1] > T:
            kw["attention_mask"] = torch.as_tensor(kw["attention_mask"])[:, -T:]
        if "attention_mask" not in kw:
            kw["attention_mask"] = kw.get("action_mask", torch.ones(B, T))
        kw.setdefault("action_mask", kw["attention_mask"])
        kw.setdefault("token_ids", torch.zeros(B, T, dtype=torch.long))
        if "turn_ids" not in kw:
            kw["turn_ids"] = torch.where(torch.as_tensor(kw["attention_mask"]) > 0, 0, -1)
        kw.setdefault("group_ids", torch.arange(B))
        return cls(**kw)
