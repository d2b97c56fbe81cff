"""One registry of advantage estimators, one signature for all of them.

Every estimator is ``fn(inp: EstimatorInput, cfg: CreditConfig) -> EstimatorOutput`` and is registered with what
the dashboard lists: name, label, LaTeX formula, the inputs it needs, and the reference it reproduces.
Registering a name twice or asking for an unknown name raises ``ValueError`` (as verl's ``register_adv_est``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

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
    normalises them one by one); global_present [B, C] bool: which rows have a value (None: all).
    sum_pi_squared [B, T]: Σ_v π(v)² of the rollout policy at each token and
    rollout_is_weights [B, T]: truncated IS weights (the optimal-token-baseline estimators read these).
    trace_lengths [B, 3]: each row's trace's output tokens, final-sequence tokens and turns (``engine.batch.
    TRACE_LENGTHS``; GRPO's length penalty reads them), or None.
    outcome_tokens: how an outcome estimator's row advantage reaches the tokens (``cfg.outcome_tokens``: broadcast
    or reward_to_go); kl_rewards [B, T]: under reward_to_go, the in-reward KL term −β·KL·m that is added as a
    reward-to-go after the baseline (token_level_rewards then holds the scores before KL), else None.
    reward_clip: (lo, hi) an outcome estimator's row advantage is clamped to before it reaches the tokens.
    logged_advantages [B, T]: the trainer's own advantages (0 where it logged none) and logged_advantage_mask
    [B, T]: where it logged one (the estimator ``logged`` returns them), or None.
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
    global_present: torch.Tensor | None = None
    sum_pi_squared: torch.Tensor | None = None
    rollout_is_weights: torch.Tensor | None = None
    trace_lengths: torch.Tensor | None = None
    outcome_tokens: str = "broadcast"
    kl_rewards: torch.Tensor | None = None
    reward_clip: tuple[float, ...] | None = None
    logged_advantages: torch.Tensor | None = None
    logged_advantage_mask: torch.Tensor | None = None

    def select(self, rows: torch.Tensor, **changes) -> EstimatorInput:
        """A virtual batch: rows ``rows`` of every tensor field (each is [B, …]), with ``changes`` as given."""
        picked = {
            f.name: v[rows] if isinstance(v, torch.Tensor) else v
            for f in fields(self)
            if f.name not in changes
            for v in [getattr(self, f.name)]
        }
        return EstimatorInput(**picked, **changes)


@dataclass(frozen=True)
class EstimatorOutput:
    """advantages, returns [B, T], named intermediates ([B, T] or [B]) that explain them, and notes (e.g. which
    value stand-in GAE used)."""

    advantages: torch.Tensor
    returns: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


EstimatorFn = Callable[[EstimatorInput, "object"], EstimatorOutput]

# What an estimator may need beyond rewards, masks and groups, and where a batch has it: every ``requires`` name is
# one of these (registration refuses others), and this is the only place that says what each one means.
NEEDS: dict[str, str] = {
    "values": "critic values (GAE; value_source can stand in for a missing critic)",
    "turn_rewards": "per-turn reward components (structured rewards)",
    "global_rewards": "global reward components, or per-turn ones (structured rewards)",
    "reward_baselines": "a baseline score per trajectory (ReMax: the greedy rollout's)",
    "old_log_probs": "the rollout policy's log-probs",
    "logged_advantages": "the advantages the trainer logged (verl dumps, prime-rl traces and token exports)",
}
KINDS = ("token", "outcome")
SINGLETON = ("raw", "zero", "nan")


@dataclass(frozen=True)
class Estimator:
    """A registered estimator and what every part of the project knows about it (the lints, the dashboard's
    labels and toggles, the README's table all read it from here).

    label: its name in lists; short: a few words for scheme descriptions. formula: LaTeX. requires: ``NEEDS``
    names. kind: "token" (per-token returns) or "outcome" (one scalar per row, broadcast). reference: what it
    reproduces. singleton: what a row alone in its prompt group gets — "raw" (its own score against a 0
    baseline), "zero", a function of the config for estimators where a convention decides, or None when rows are
    not baselined against their group. std_normalised: divides by the group std when ``norm_adv_by_std_in_grpo``.
    structured_rewards: reads the structured turn/global rewards itself, so the placement does not reach it.
    whitened: whitens its advantages over the batch per ``cfg.whitening`` (``whiten_std`` switches the ÷ std)."""

    name: str
    label: str
    formula: str
    requires: tuple[str, ...]
    kind: str
    reference: str
    fn: EstimatorFn
    short: str = ""
    singleton: str | Callable[[object], str] | None = None
    std_normalised: bool = False
    structured_rewards: bool = False
    whitened: bool = False

    def singleton_gets(self, cfg) -> str | None:
        """ "raw", "zero", "nan", or None (rows are not baselined against their prompt group) under ``cfg``."""
        return self.singleton(cfg) if callable(self.singleton) else self.singleton

    def uses_group_std(self, cfg) -> bool:
        return self.std_normalised and cfg.norm_adv_by_std_in_grpo


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    label: str,
    formula: str,
    reference: str,
    requires: tuple[str, ...] = (),
    kind: str = "outcome",
    short: str = "",
    singleton: str | Callable[[object], str] | None = None,
    std_normalised: bool = False,
    structured_rewards: bool = False,
    whitened: bool = False,
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: add ``fn`` to ``ESTIMATORS`` under ``name`` (see ``Estimator`` for the fields); a second
    registration of the name, a requirement not in ``NEEDS``, an unknown kind or singleton rule raise."""
    if unknown := [r for r in requires if r not in NEEDS]:
        raise ValueError(f"estimator {name!r}: unknown requirement(s) {unknown}; choose from {list(NEEDS)}")
    if kind not in KINDS:
        raise ValueError(f"estimator {name!r}: kind {kind!r} is not one of {list(KINDS)}")
    if singleton is not None and not callable(singleton) and singleton not in SINGLETON:
        raise ValueError(f"estimator {name!r}: singleton {singleton!r} is not one of {list(SINGLETON)}")

    def deco(fn: EstimatorFn) -> EstimatorFn:
        if name in ESTIMATORS and ESTIMATORS[name].fn is not fn:
            raise ValueError(f"estimator {name!r} is already registered")
        spec = Estimator(
            name, label, formula, tuple(requires), kind, reference, fn,
            short or label, singleton, std_normalised, structured_rewards, whitened,
        )  # fmt: skip
        ESTIMATORS[name] = spec
        return fn

    return deco


def batch_provides(batch, need: str) -> bool:
    """Whether ``batch`` (a ``TrajectoryBatch``) has what ``need`` names."""
    if need not in NEEDS:
        raise ValueError(f"unknown requirement {need!r}; choose from {list(NEEDS)}")
    if need == "global_rewards":
        return batch.global_rewards is not None or batch.turn_rewards is not None
    return getattr(batch, need) is not None


def get_estimator(name: str) -> Estimator:
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; registered: {sorted(ESTIMATORS)}")
    return ESTIMATORS[name]


def list_estimators() -> list[Estimator]:
    """Every registered estimator, in registration order (the dashboard lists these)."""
    import engine.estimators  # noqa: F401  (registers the built-ins)

    return list(ESTIMATORS.values())


def estimator_table() -> str:
    """The README's estimator table (Markdown), made from the registry: a test keeps the README equal to it.
    Each row links its code and the golden tests that check it (``engine.doclinks``)."""
    from engine.doclinks import code_link, estimator_tests, tests_links

    def singleton(e: Estimator) -> str:
        if callable(e.singleton):
            return "by profile"
        return {"raw": "raw score", "zero": "0", "nan": "NaN", None: "–"}[e.singleton]

    rows = [
        "| name | label | formula | needs | singleton group | ÷ group std | reference | code | tests |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in list_estimators():
        needs = ", ".join(e.requires) or "–"
        std = "yes" if e.std_normalised else "–"
        links = f"{code_link(e.fn)} | {tests_links(estimator_tests(e.name))}"
        rows.append(f"| `{e.name}` | {e.label} | ${e.formula}$ | {needs} | {singleton(e)} | {std} | {e.reference} | ")
        rows[-1] += f"{links} |"
    return "\n".join(rows)
