"""What a credit scheme must satisfy beyond each field's type, choices and range.

Three kinds, each declared once:

* **one field's shape**: the ``check`` functions the field declarations name (a threshold's ``'L_U'`` form, a
  tuple's length);
* **what the trainer has**: a scheme that asks the profile's trainer for a mode it lacks is refused, naming the
  profile and the trainer (``REFUSALS``' first block); a saved scheme that still holds one of these (they were
  ``CreditConfig`` fields) is accepted when it says what the profile says (``check_what_the_trainer_has``);
* **fields that rule each other out** (``REFUSALS``' second block).

``REFUSALS`` is one table of (field, applies, message): ``CreditConfig`` raises ``CreditConfig.<field>: <message>``
for the first whose ``applies(cfg)`` holds. The error names a field so that the dashboard can reset it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.policy import check_threshold, kl_ratio_refusal
from engine.profiles import PROFILES

if TYPE_CHECKING:
    from engine.config.scheme import CreditConfig


# ------------------------------------------------------------------------------------------------ one field
def thresholds(name: str, specs: tuple[str, ...]) -> None:
    """Each of ``specs`` is a threshold verl accepts ('U' or 'L_U')."""
    for spec in specs:
        check_threshold(name, spec)


def vespo_params(name: str, params: tuple[float, ...]) -> None:
    if len(params) != 4:
        raise ValueError(f"CreditConfig.{name}: expected (k_pos, λ_pos, k_neg, λ_neg), got {params}")


def dual_clip(name: str, c: float) -> None:
    if not c > 1.0:
        raise ValueError(f"CreditConfig.{name}: the dual clip must be > 1 (verl asserts it), got {c}")


def clip_range(name: str, clip: tuple[float, ...]) -> None:
    if not (len(clip) == 2 and clip[0] < clip[1]):
        raise ValueError(f"CreditConfig.{name}: expected (lo, hi) with lo < hi, got {clip!r}")


def length_weights(name: str, weights: tuple[float, ...]) -> None:
    if len(weights) != 3 or min(weights) < 0:
        raise ValueError(f"CreditConfig.{name}: expected three weights ≥ 0 (w_out, w_in, w_turns), got {weights!r}")


# ------------------------------------------------------------------------------------------------ several fields
@dataclass(frozen=True)
class Refusal:
    """A scheme ``CreditConfig`` refuses: where ``applies(cfg)``, the error ``CreditConfig.<field>: <message>``.
    ``when`` says in words when it applies (docs/CONFIG.md's refusal table); ``message`` is a format string of
    ``cfg`` or a function of it."""

    field: str
    when: str
    applies: Callable[[CreditConfig], bool]
    message: str | Callable[[CreditConfig], str]

    def says(self, cfg: CreditConfig) -> str:
        return self.message(cfg) if callable(self.message) else self.message.format(cfg=cfg)


def _only_skyrl(cfg: CreditConfig) -> str:
    having = " and ".join(repr(p.name) for p in PROFILES.values() if p.prompt_mean_supported)
    return (
        f"'prompt-mean-token-mean' (SkyRL's prompt_mean) does not exist in profile {cfg.profile!r} "
        f"({cfg.trainer.source}: its loss has no per-prompt reduction); profile {having} has it"
    )


REFUSALS: tuple[Refusal, ...] = (
    # ---- what the profile's trainer lacks (engine.profiles.CAPABILITIES)
    Refusal(
        "loss_agg_mode",
        "`loss_agg_mode='token-sum'` where the profile's trainer has no token-sum (`token_sum_supported`)",
        lambda cfg: cfg.loss_agg_mode == "token-sum" and not cfg.trainer.token_sum_supported,
        "'token-sum' does not exist in profile {cfg.profile!r} ({cfg.trainer.source}: token-sum came to verl in "
        "2026-08)",
    ),
    Refusal(
        "loss_agg_mode",
        "a seq-mean `loss_agg_mode` where the trainer's loss is a token mean (`seq_mean_supported`)",
        lambda cfg: cfg.loss_agg_mode.startswith("seq-mean") and not cfg.trainer.seq_mean_supported,
        "{cfg.loss_agg_mode!r} does not exist in profile {cfg.profile!r} ({cfg.trainer.source}: its policy loss is "
        "a token mean)",
    ),
    Refusal(
        "loss_agg_mode",
        "`loss_agg_mode='prompt-mean-token-mean'` outside SkyRL (`prompt_mean_supported`)",
        lambda cfg: cfg.loss_agg_mode == "prompt-mean-token-mean" and not cfg.trainer.prompt_mean_supported,
        _only_skyrl,
    ),
    Refusal(
        "rollout_is",
        "`rollout_is='sequence'` where the trainer has no sequence-level IS weight (`sequence_is_supported`)",
        lambda cfg: cfg.rollout_is == "sequence" and not cfg.trainer.sequence_is_supported,
        "'sequence' (one IS weight per sequence) does not exist in profile {cfg.profile!r} ({cfg.trainer.source}: "
        "its sequence level gates whole rows by their geometric-mean ratio (rollout_rs 'seq_mean_k1') and weighs "
        "each token by its own ratio (rollout_is 'token'))",
    ),
    Refusal(
        "rollout_is",
        "`policy_loss='vespo'` with `rollout_is='sequence'` under profile `trl` (GRPOTrainer.__init__ refuses it)",
        lambda cfg: cfg.policy_loss == "vespo" and cfg.rollout_is == "sequence" and cfg.profile == "trl",
        "profile 'trl' ({cfg.trainer.source}: GRPOTrainer.__init__) refuses VESPO with a sequence-level vLLM IS "
        "mode: 'VESPO loss requires vllm_importance_sampling_mode to be either token_truncate or token_mask'",
    ),
    # ---- fields that rule each other out
    Refusal(
        "kl_loss_ratio_weighted",
        "`kl_loss_ratio_weighted` with a loss whose ratio no trainer weighs a KL by: `geo_mean`, GSPO with "
        "`gspo_gradient='own_token'`",
        lambda cfg: cfg.kl_loss_ratio_weighted and kl_ratio_refusal(cfg) is not None,
        kl_ratio_refusal,
    ),
    Refusal(
        "stepwise_mode",
        "estimator `logged` with a `stepwise_mode` other than `trajectory`",
        lambda cfg: cfg.estimator == "logged" and cfg.stepwise_mode != "trajectory",
        "{cfg.stepwise_mode!r} would recompute the advantages from step rewards; estimator 'logged' returns the "
        "trainer's own per-token advantages: use stepwise_mode 'trajectory'",
    ),
    Refusal(
        "policy_loss",
        "`policy_loss='kl_cov'` under `reduction_on_advantages` (SkyRL) with `rollout_is` or `rollout_rs`",
        lambda cfg: (
            cfg.policy_loss == "kl_cov" and cfg.reduction_on_advantages and bool(cfg.rollout_is or cfg.rollout_rs)
        ),
        "SkyRL's kl_cov (reduction_on_advantages) applies no off-policy correction; rollout_is and rollout_rs have "
        "nothing to act on",
    ),
    Refusal(
        "rollout_rs_threshold",
        "`rollout_rs_threshold` neither one threshold nor one per `rollout_rs` option",
        lambda cfg: bool(cfg.rollout_rs) and len(cfg.rollout_rs_threshold) not in (1, len(cfg.rollout_rs)),
        "one threshold, or one per rollout_rs option",
    ),
    Refusal(
        "length_penalty",
        "`length_penalty` with an estimator other than `grpo`",
        lambda cfg: cfg.length_penalty is not None and cfg.estimator != "grpo",
        "only estimator 'grpo' applies it (prime-rl's GRPOAlgorithm), not {cfg.estimator!r}",
    ),
    Refusal(
        "gdpo_reward_weights",
        "`gdpo_reward_weights` not one per `gdpo_reward_keys` entry",
        lambda cfg: cfg.gdpo_reward_weights is not None and len(cfg.gdpo_reward_weights) != len(cfg.gdpo_reward_keys),
        "need one weight per gdpo_reward_keys entry",
    ),
)


def refuse(cfg: CreditConfig) -> None:
    """Raise the first of ``REFUSALS`` that applies to ``cfg``."""
    for refusal in REFUSALS:
        if refusal.applies(cfg):
            raise ValueError(f"CreditConfig.{refusal.field}: {refusal.says(cfg)}")


# ------------------------------------------------------------------------------------------------ saved schemes
def check_what_the_trainer_has(profile: str, given: Mapping[str, object]) -> None:
    """``given``: {``engine.profiles.CAPABILITIES`` name: value} passed to ``CreditConfig`` (older saved schemes hold
    them: they were fields). Each must say what profile ``profile`` says (or be None); else a ValueError that the
    field describes the trainer and names the profile's value."""
    trainer = PROFILES.get(profile)
    if trainer is None:
        return  # CreditConfig names the unknown profile
    for name, value in given.items():
        has = getattr(trainer, name)
        if value is not None and value != has:
            raise ValueError(
                f"CreditConfig.{name}: describes the trainer, not a choice: profile {profile!r} ({trainer.source}) "
                f"has {name}={has!r}, not {value!r} (PROFILES[{profile!r}].{name}). Leave it out, or choose another "
                "profile."
            )
