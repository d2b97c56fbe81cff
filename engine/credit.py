"""``compute_credit``: the whole pipeline, one call (the KG-R1 reward walkthrough's flow in order,
docs/TUTORIAL.md §7.1).

batch ─► (1) token scores: structured turn/global rewards placed on tokens  (``stages.place_scores``)
      ─► (2) in-reward KL: rewards = scores − β·KL(old‖ref)·m         (``stages.subtract_kl``)
      ─►     verl's rollout rejection out of the advantage mask         (``stages.reject_before_advantages``)
      ─► (3) advantages: registered estimator, under an rLLM mode      (``stages.estimate``)
      ─► (4) loss mask, aggregation weights, effective weights         (``stages.weigh_loss``)
      ─► CreditResult (every intermediate, [B, T] or [B])

Stages 1–3 run inside ``compute_credit``: they are what a trainer needs (the advantages). Stage 4 and the KL
shown beside the rewards (when it is not subtracted) are what a person looks at; a result computes them, all
together, the first time one of them is read (``CreditResult.VIEWS``), and keeps them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from engine.batch import TrajectoryBatch
from engine.config import CreditConfig
from engine.registry import EstimatorOutput
from engine.stages import (
    LossWeights,
    Masks,
    Rewards,
    TokenScores,
    aggregation_config,
    estimate,
    masks_for,
    place_scores,
    reject_before_advantages,
    shown_kl,
    subtract_kl,
    weigh_loss,
)
from engine.steps import StepParts, is_expanded_constant, merge_steps, split_steps


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass(frozen=True)
class _Pending:
    """What a result's views are computed from, until they are (then the result lets go of it)."""

    batch: TrajectoryBatch
    masks: Masks
    scores: TokenScores
    rewards: Rewards
    out: EstimatorOutput  # advantages and returns only
    lock: threading.Lock = field(default_factory=threading.Lock)

    def views(self, cfg: CreditConfig) -> dict[str, torch.Tensor]:
        # the shown KL first: its [B, T] temporary is gone before stage 4 allocates (a big run's peak)
        kl = self.rewards.kl if self.rewards.kl is not None else shown_kl(self.batch, cfg, self.scores, self.masks)
        loss = weigh_loss(self.batch, cfg, self.scores, self.rewards, self.out, self.masks)  # (4)
        shown = Shown(kl, loss, self.scores, self.batch)
        return {name: getattr(CreditResult, name).of(shown) for name in CreditResult.VIEWS}


@dataclass(frozen=True)
class Shown:
    """What the views are read from: the KL shown beside the rewards [B, T], stage 4's ``LossWeights``, stage 1's
    ``TokenScores`` and the batch."""

    kl: torch.Tensor
    loss: LossWeights
    scores: TokenScores
    batch: TrajectoryBatch


class View:
    """Declares a view of ``CreditResult``, once: its name (the attribute's), how it is read from the computed stage
    (``of``, a function of ``Shown``) and what it is (``doc``). Reading a view computes every view, once and
    thread-safely (``CreditResult.views``); the views' names, in declaration order, are ``CreditResult.VIEWS``."""

    def __init__(self, of: Callable[[Shown], torch.Tensor], doc: str) -> None:
        self.of = of
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, res: CreditResult | None, owner: type | None = None):
        return self if res is None else res.views()[self.name]

    def __set__(self, res: CreditResult, value) -> None:
        raise AttributeError(f"CreditResult.{self.name} is a view: use replace({self.name}=...)")


def _no_entropy(s: Shown) -> torch.Tensor:
    return torch.zeros((), device=s.loss.loss_mask.device).expand_as(s.loss.loss_mask)


@dataclass(frozen=True)
class CreditResult:
    """Everything ``compute_credit`` computed. Token tensors are [B, T], row tensors [B], turn tensors [B, K].

    Stages 1–3 (fields): token_level_scores: rewards placed on tokens, before KL. token_level_rewards: scores −
    β·kl when in-reward KL is on, else the scores. values: the values GAE used (or None). returns, advantages: the
    estimator's (under the rLLM mode). advantage_mask: the mask the estimator saw (less the tokens verl's
    decoupled rollout rejection drops before the advantages, ``rollout_rs_masks_advantages``). extras: estimator
    intermediates (TD errors, advantages before whitening, baselines, step returns, …). notes: strings such as
    the value stand-in used and the placement resolved. metrics: floats (current KL, β after the update, …).
    seconds: the time spent computing so far (stages 1–3, then also the views once they are computed).
    step_rows: for a batch of several training steps, ``(step, rows)`` of each, computed alone (``engine.steps``);
    empty for one step.

    Views (``View``, declared below the fields, each with what it is): stage 4 (``stages.weigh_loss``: the loss
    mask, aggregation and policy-loss weights, row and turn summaries) and the KL shown beside the rewards,
    computed together the first time one is read (``views``), then kept; ``VIEWS``: their names.
    """

    VIEWS: ClassVar[tuple[str, ...]]  # the views' names, in declaration order (set below the class)

    config: CreditConfig
    device: str
    seconds: float
    placement: str
    token_level_scores: torch.Tensor
    token_level_rewards: torch.Tensor
    values: torch.Tensor | None
    returns: torch.Tensor
    advantages: torch.Tensor
    advantage_mask: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    step_rows: tuple[tuple[int, torch.Tensor], ...] = ()
    _views: dict[str, torch.Tensor] | None = field(default=None, repr=False, compare=False)
    _pending: _Pending | StepParts | None = field(default=None, repr=False, compare=False)

    kl = View(lambda s: s.kl, "[B, T] per-token KL(old‖ref) on the state mask (zeros without log-probs).")
    loss_mask = View(lambda s: s.loss.loss_mask, "[B, T] the tokens that enter the loss.")
    count_mask = View(
        lambda s: s.loss.count_mask,
        "[B, T] the tokens the aggregation counted: loss_mask, or the mask before rollout rejection where the "
        "trainer still counts a rejected token (bypass mode, ``rejected_tokens_counted``).",
    )
    agg_weights = View(lambda s: s.loss.agg_weights, "[B, T] each token's weight in the aggregated loss.")
    effective_weights = View(lambda s: s.loss.effective_weights, "[B, T] agg_weights · advantages on the loss mask.")
    scores = View(lambda s: s.loss.scores, "[B] Σ_t token_level_rewards (what outcome estimators see).")
    sample_scores = View(
        lambda s: s.loss.sample_scores, "[B] Σ_t returns · state mask (the dump score, docs/TUTORIAL.md §7.1 step 6)."
    )
    group_mean = View(lambda s: s.loss.groups.mean, "[B] the mean score of the row's prompt group.")
    group_std = View(lambda s: s.loss.groups.std, "[B] the std of the row's prompt group's scores (``std_ddof``).")
    group_size = View(lambda s: s.loss.groups.size, "[B] the number of rows in the row's prompt group.")
    kept = View(lambda s: s.loss.kept, "[B] rows kept by rejection sampling and the truncation mask.")
    verdicts = View(lambda s: s.loss.verdicts, "[B] rLLM's rejection verdict: 0 solve_none / 1 partial / 2 solve_all.")
    turn_rewards = View(
        lambda s: s.scores.turn_rewards if s.scores.turn_rewards is not None else s.loss.turn_sums[..., 1],
        "[B, K] each turn's reward: the weighted turn components, or Σ of the turn's rewards without them.",
    )
    turn_advantage = View(lambda s: s.loss.turn_sums[..., 0], "[B, K] Σ of each turn's trained advantages.")
    turn_tokens = View(lambda s: s.loss.turn_sums[..., 2], "[B, K] each turn's loss-mask tokens.")
    mismatch = View(
        lambda s: s.loss.policy.mismatch, "[B, T] log π_trainer − log π_rollout (docs/conventions/policy-stage.md §14)."
    )
    ratio = View(lambda s: s.loss.policy.ratio, "[B, T] the ratio the policy loss clips (``engine.policy``).")
    pg_clipped = View(lambda s: s.loss.policy.pg_clipped, "[B, T] the policy loss cuts the token's gradient.")
    is_weight = View(lambda s: s.loss.policy.is_weight, "[B, T] the rollout-correction IS weight (1 when off).")
    rejected = View(lambda s: s.loss.policy.rejected, "[B, T] dropped by rollout rejection sampling.")
    grad_weight = View(
        lambda s: s.loss.policy.grad_weight, "[B, T] −∂L/∂log π per token: the gradient each token actually gets."
    )
    entropy = View(
        lambda s: s.batch.entropy if s.batch.entropy is not None else _no_entropy(s),
        "[B, T] the policy's entropy at each token when the run carries it (0 otherwise).",
    )

    def views(self) -> dict[str, torch.Tensor]:
        """Every view by name, computed (once, thread-safely) the first time any is asked for."""
        pending = self._pending  # read first: it is cleared only after the views are set
        if self._views is not None:
            return self._views
        with pending.lock:
            if self._views is None:
                start = time.perf_counter()
                views = pending.views(self.config)
                if views["loss_mask"].device.type == "cuda":
                    torch.cuda.synchronize()
                object.__setattr__(self, "seconds", self.seconds + time.perf_counter() - start)
                object.__setattr__(self, "_views", views)
                object.__setattr__(self, "_pending", None)  # the batch and the stages are no longer needed
        return self._views

    def materialize(self) -> CreditResult:
        """Compute the views now (a program that keeps the result, or measures what it holds); returns self."""
        self.views()
        return self

    def quantities(self) -> dict[str, Any]:
        """Every field and view by name (views computed), ``extras`` included as one dict."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}
        return own | self.views()

    def replace(self, **changes) -> CreditResult:
        """A copy with ``changes`` to fields or views (the other views as computed here)."""
        views = dict(self.views())
        fields = {f.name for f in dataclasses.fields(self)}
        for name in [n for n in changes if n in self.VIEWS]:
            views[name] = changes.pop(name)
        if unknown := set(changes) - fields:
            raise TypeError(f"CreditResult.replace: unknown names {sorted(unknown)}")
        return dataclasses.replace(self, **changes, _views=views, _pending=None)

    def token_quantities(self) -> dict[str, torch.Tensor]:
        """The [B, T] quantities a token view can colour by, by display name."""
        q = {
            "token score": self.token_level_scores,
            "KL": self.kl,
            "reward": self.token_level_rewards,
            "return": self.returns,
            "advantage": self.advantages,
            "effective weight": self.effective_weights,
        }
        if self.values is not None:
            q["value"] = self.values
        q["gradient weight"] = self.grad_weight
        for name, t in (
            ("PPO ratio", self.ratio),
            ("IS weight", self.is_weight),
            ("train/inference mismatch", self.mismatch),
            ("entropy", self.entropy),
        ):
            if not is_expanded_constant(t):  # shown where the run and the scheme make them vary
                q[name] = t
        return q


CreditResult.VIEWS = tuple(name for name, v in vars(CreditResult).items() if isinstance(v, View))


def compute_credit(
    batch: TrajectoryBatch,
    cfg: CreditConfig | None = None,
    device: str | torch.device | None = None,
    token_extras: bool = True,
) -> CreditResult:
    """Run the credit pipeline of ``cfg`` on ``batch``: stages 1–3 of ``engine.stages`` now (the advantages),
    stage 4 (loss mask, weights, summaries) the first time the result is asked for one of them.

    ``device`` is where to compute ("cuda", "cpu"; None = CUDA when available): a setting of the machine, not
    of the scheme, so two results of one ``cfg`` on different devices carry equal configs.

    ``token_extras=False`` leaves the estimator's [B, T] intermediates (GAE's TD errors and raw advantages, …)
    out of ``extras``, dropped as soon as the estimator returns: for programs that keep results of big batches
    (the dashboard). Row and turn intermediates stay; every other field is the same.

    A batch of several training steps (``batch.steps``) is computed one step at a time, each alone, as the trainer
    computed it, and put back in row order (``engine.steps``): no group, whitening, batch statistic, KL controller
    or loss count crosses a step."""
    cfg = cfg or CreditConfig()
    if batch.batch_size == 0 or batch.num_tokens == 0:
        raise ValueError(
            f"compute_credit: the batch is empty ({batch.batch_size} trajectories × {batch.num_tokens} tokens)"
        )
    if parts := split_steps(batch):
        steps = [s for s, _ in parts]
        rows = [r for _, r in parts]
        results = [compute_credit(batch.select(r), cfg, device, token_extras) for r in rows]
        return merge_steps(batch.batch_size, steps, [r.to(results[0].advantages.device) for r in rows], results)
    start = time.perf_counter()
    dev = resolve_device(device)
    batch = batch.to(dev)
    masks = masks_for(batch, cfg)
    scores = place_scores(batch, cfg, masks)  # (1)
    rewards = subtract_kl(batch, cfg, scores, masks)  # (2)
    masks = reject_before_advantages(batch, cfg, masks)  # verl's decoupled rollout rejection, before (3)
    out = estimate(batch, cfg, scores, rewards, masks)  # (3)
    values = out.extras.get("values", batch.values)  # the values GAE used (critic or stand-in)
    extras = out.extras
    if not token_extras:  # dropped as soon as the estimator returns
        extras = {k: v for k, v in extras.items() if v.shape != rewards.rewards.shape}
    extras = dict(extras)
    if scores.global_reward is not None:
        extras["global_reward"] = scores.global_reward
    extras["turn_score"] = scores.turn_score
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return CreditResult(
        config=cfg,
        device=str(dev),
        seconds=time.perf_counter() - start,
        placement=scores.placement,
        token_level_scores=scores.scores,
        token_level_rewards=rewards.rewards,
        values=values,
        returns=out.returns,
        advantages=out.advantages,
        advantage_mask=masks.advantage,
        extras=extras,
        notes=dict(out.notes) | {"placement": scores.placement, "profile": cfg.profile},
        metrics=rewards.metrics,
        _pending=_Pending(batch, masks, scores, rewards, EstimatorOutput(out.advantages, out.returns)),
    )


def with_loss_agg_mode(res: CreditResult, mode: str) -> CreditResult:
    """``res`` as ``compute_credit`` gives it under ``loss_agg_mode=mode``: stages 1–3 as they are (no stage before
    the loss reads the mode), stage 4 (``stages.weigh_loss``: the aggregation, the policy loss, every view) run
    again under the new mode, each training step alone, by the same code ``compute_credit`` runs. Run analytics
    varies the mode: one estimator call instead of one per mode.

    ``res`` keeps stage 4's inputs until its views are first read; once they are (and it let go of the batch), a
    mode that changes the aggregation raises ``ValueError``: compute the scheme under it instead. A mode that leaves
    the loss's aggregation as it is (``stages.aggregation_config``: verl's SAPO, OpenRLHF's GSPO) gives ``res``'s own
    views. Raises the ``ValueError`` the config raises for a mode the profile lacks."""
    cfg = res.config.replace(loss_agg_mode=mode)
    pending = res._pending
    if pending is None:
        if aggregation_config(cfg).loss_agg_mode == aggregation_config(res.config).loss_agg_mode:
            return res.replace(config=cfg)
        raise ValueError(
            f"with_loss_agg_mode: the result's views are computed and stage 4's inputs let go; compute the scheme "
            f"under loss_agg_mode={mode!r} instead"
        )
    if isinstance(pending, StepParts):
        pending = dataclasses.replace(pending, results=tuple(with_loss_agg_mode(r, mode) for r in pending.results))
    fresh = dataclasses.replace(pending, lock=threading.Lock())  # its own lock: the two compute their views apart
    return dataclasses.replace(res, config=cfg, _views=None, _pending=fresh)
