"""What makes a credit scheme runnable on a run, decided (and explained) in one place.

A scheme asks for things a run may not have. Three rules, each with its reason in words:

* an estimator that needs critic values (``requires`` "values", e.g. GAE) on a run without them runs with a
  stand-in, ``value_source`` "zeros" (discounted Monte-Carlo returns) or "group_mean";
* in-reward KL needs the rollout's and the reference policy's log-probs: without them it is off;
* placement ``as_given`` places the run's own token scores: without them the placement is ``auto``.

The dashboard's sidebar, Reward designer, Compare page and warm-up all ask ``scheme_fixes``/``runnable``;
``placements`` lists what a run can place. Nothing here changes a scheme the run can already run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config import PLACEMENTS, CreditConfig
from engine.config.scheme import VALUE_STAND_INS
from engine.registry import get_estimator


@dataclass(frozen=True)
class RunHas:
    """What a run carries that a scheme may ask for."""

    values: bool
    log_probs: bool  # both the rollout's (old) and the reference policy's
    token_scores: bool

    @classmethod
    def of(cls, batch) -> RunHas:
        """From a ``TrajectoryBatch``."""
        return cls(
            values=batch.values is not None,
            log_probs=batch.old_log_probs is not None and batch.ref_log_probs is not None,
            token_scores=batch.token_scores is not None,
        )


@dataclass(frozen=True)
class Fix:
    """One field of a scheme changed so that it runs: what was asked, what is used, and why."""

    field: str
    asked: Any
    used: Any
    why: str


def scheme_fixes(values: Mapping[str, Any], has: RunHas, value_source: str | None = "zeros") -> list[Fix]:
    """The fields of ``values`` ({CreditConfig field: value}; fields it lacks are not looked at) that the run
    cannot give, with the value each runs with instead. ``value_source``: the stand-in to use for missing critic
    values when the scheme names none ("zeros" unless it is "group_mean")."""
    fixes = []
    est = values.get("estimator")
    if est is not None and "values" in get_estimator(est).requires and not has.values:
        asked = values.get("value_source")
        if asked not in VALUE_STAND_INS:
            used = value_source if value_source in VALUE_STAND_INS else "zeros"
            why = f"{est} needs critic values and this run has none: value_source = {used} stands in for them"
            fixes.append(Fix("value_source", asked, used, why))
    if values.get("use_kl_in_reward") and not has.log_probs:
        why = "in-reward KL needs the rollout's and the reference policy's log-probs and this run lacks them: off"
        fixes.append(Fix("use_kl_in_reward", True, False, why))
    if values.get("placement") == "as_given" and not has.token_scores:
        why = "placement as_given places the run's own token scores and this run has none: auto instead"
        fixes.append(Fix("placement", "as_given", "auto", why))
    return fixes


def runnable(cfg: CreditConfig, has: RunHas, value_source: str | None = "zeros") -> tuple[CreditConfig, list[Fix]]:
    """``cfg`` made runnable on the run (``scheme_fixes``), and the fixes made (none: ``cfg`` itself)."""
    asked = {f: getattr(cfg, f) for f in ("estimator", "value_source", "use_kl_in_reward", "placement")}
    fixes = scheme_fixes(asked, has, value_source)
    return (cfg.replace(**{f.field: f.used for f in fixes}) if fixes else cfg), fixes


def placements(has: RunHas) -> tuple[str, ...]:
    """The placements a run can use (``as_given`` only with token scores of its own)."""
    return tuple(p for p in PLACEMENTS if p != "as_given" or has.token_scores)
