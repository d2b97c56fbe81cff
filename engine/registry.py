"""One registry of advantage estimators, one signature for all of them.

Every estimator is ``fn(inp: EstimatorInput, cfg: CreditConfig) -> EstimatorOutput`` and is registered with what
the dashboard lists: name, label, LaTeX formula, the inputs it needs, and the reference it reproduces.
Registering a name twice or asking for an unknown name raises ``ValueError`` (as verl's ``register_adv_est``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class EstimatorInput:
    """What an estimator may read. Shapes: [B, T] unless noted.

    token_level_rewards: rewards after placement and in-reward KL.
    response_mask: the mask this estimator sees (action or attention mask, per ``cfg.advantage_mask``).
    group_ids [B]: prompt groups. values / old_log_probs: critic values, rollout log-probs (or None).
    reward_baselines [B]: ReMax greedy scores (or None). turn_ids: 0-based turn per token, −1 on padding.
    action_mask: tokens the policy generated. turn_rewards [B, K]: weighted per-turn reward; turn_mask [B, K];
    global_reward [B]: weighted global reward (KG-R1 structured estimators read these three).
    global_components [B, C] with global_component_names (C,): the unweighted global reward components (GDPO
    normalises them one by one). sum_pi_squared [B, T]: Σ_v π(v)² of the rollout policy at each token and
    rollout_is_weights [B, T]: truncated IS weights (the optimal-token-baseline estimators read these).
    """

    token_level_rewards: torch.Tensor
    response_mask: torch.Tensor
    group_ids: torch.Tensor
    turn_ids: torch.Tensor
    action_mask: torch.Tensor
    values: torch.Tensor | None = None
    old_log_probs: torch.Tensor | None = None
    reward_baselines: torch.Tensor | None = None
    turn_rewards: torch.Tensor | None = None
    turn_mask: torch.Tensor | None = None
    global_reward: torch.Tensor | None = None
    global_components: torch.Tensor | None = None
    global_component_names: tuple[str, ...] = ()
    sum_pi_squared: torch.Tensor | None = None
    rollout_is_weights: torch.Tensor | None = None


@dataclass(frozen=True)
class EstimatorOutput:
    """advantages, returns [B, T], named intermediates ([B, T] or [B]) that explain them, and notes (e.g. which
    value stand-in GAE used)."""

    advantages: torch.Tensor
    returns: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


EstimatorFn = Callable[[EstimatorInput, "object"], EstimatorOutput]


@dataclass(frozen=True)
class Estimator:
    name: str
    label: str
    formula: str
    requires: tuple[str, ...]
    kind: str  # "token" (per-token returns) or "outcome" (one scalar per row, broadcast)
    reference: str
    fn: EstimatorFn


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str, *, label: str, formula: str, requires: tuple[str, ...] = (), kind: str = "outcome", reference: str
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: add ``fn`` to ``ESTIMATORS`` under ``name``; a second registration of the name raises."""

    def deco(fn: EstimatorFn) -> EstimatorFn:
        if name in ESTIMATORS and ESTIMATORS[name].fn is not fn:
            raise ValueError(f"estimator {name!r} is already registered")
        ESTIMATORS[name] = Estimator(name, label, formula, tuple(requires), kind, reference, fn)
        return fn

    return deco


def get_estimator(name: str) -> Estimator:
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; registered: {sorted(ESTIMATORS)}")
    return ESTIMATORS[name]


def list_estimators() -> list[Estimator]:
    """Every registered estimator, in registration order (the dashboard lists these)."""
    import engine.estimators  # noqa: F401  (registers the built-ins)

    return list(ESTIMATORS.values())
