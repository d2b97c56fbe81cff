"""``CreditConfig``: every choice and every convention of the credit pipeline, as a named field.

Field names follow verl's where verl has one (``estimator`` = ``algorithm.adv_estimator``, ``gamma``, ``lam``,
``norm_adv_by_std_in_grpo``, ``kl_penalty``, ``kl_coef``, ``use_kl_in_reward``, ``loss_agg_mode``). Conventions
that differ between the reference trainers (std ddof, hole handling, which mask advantages use, …) default to
``None`` and are filled from the named **profile** (``PROFILES``); a value passed explicitly always wins.
The docstrings in ``FIELD_HELP`` are reused by the dashboard as widget help.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# KG-R1's KGFormatMultiTurnRewardManager defaults (CONVENTIONS.md §3.2, §7.1).
KGR1_TURN_WEIGHTS = (("format_score", 0.15), ("kg_query_validity", 0.1), ("is_answer_score", 0.1))
KGR1_GLOBAL_WEIGHTS = (("exact_match", 0.3), ("retrieval_quality", 0.4))

PLACEMENTS = ("auto", "as_given", "final_token_only", "turn_proportional", "turn_final_token", "uniform")
STEPWISE_MODES = ("trajectory", "broadcast", "per_step")
LOSS_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)
VALUE_SOURCES = ("critic", "zeros", "group_mean")

# Conventions each reference trainer fixes. Keys are CreditConfig field names.
_VERL_HEAD = dict(
    advantage_mask="action",
    gae_skip_holes=True,
    gae_value_mask="none",
    reinforce_hole_mode="carry",
    std_ddof=1,
    grpo_var_floor=0.0,
    rloo_singleton="raw",
    rfpp_baseline_scope="token",
    kl_plus_variants=True,
    sum_norm_divides_by_seqs=True,
    token_sum_supported=True,
    otb_handle_zero_tail=True,
    global_exclude_prefixes=("_",),
    turn_score_reduce="mean",
    broadcast_group_key="prompt",
    broadcast_reward="last_step",
    broadcast_read="first",
)
# Search-R1 and KG-R1 vendor an old verl: no '+' KL variants, old sum-norm, no token-sum, no hole skipping.
_OLD_VERL = _VERL_HEAD | dict(
    advantage_mask="attention",
    gae_skip_holes=False,
    kl_plus_variants=False,
    sum_norm_divides_by_seqs=False,
    token_sum_supported=False,
    otb_handle_zero_tail=False,
)
# rLLM: trajectory reward = Σ step rewards; the broadcast scalar is the mean over the last step's tokens.
_RLLM = dict(turn_score_reduce="sum", broadcast_reward="trajectory", broadcast_read="mean")

PROFILES: dict[str, dict] = {
    "verl": _VERL_HEAD,
    "verl-legacy": _VERL_HEAD
    | dict(
        reinforce_hole_mode="reset",
        grpo_var_floor=1e-6,
        kl_plus_variants=False,
        sum_norm_divides_by_seqs=False,
        token_sum_supported=False,
        otb_handle_zero_tail=False,
    ),
    "search-r1": _OLD_VERL | dict(gae_value_mask="attention_shifted"),
    "kg-r1": _OLD_VERL | dict(gae_value_mask="attention", global_exclude_prefixes=("_raw_",)),
    # rLLM's unified trainer: rLLM-native estimators on trajectory rewards, per TrajectoryGroup (task).
    "rllm": _VERL_HEAD | _RLLM | dict(std_ddof=0, rfpp_baseline_scope="trajectory_popstd"),
    # rLLM's AgentWorkflowPPOTrainer: verl's estimators; uid = step id, so broadcast groups split by last step.
    "rllm-workflow": _VERL_HEAD | _RLLM | dict(broadcast_group_key="prompt_and_last_step"),
    # rLLM's legacy AgentPPOTrainer: verl's estimators; broadcast groups are the prompt uid.
    "rllm-legacy": _VERL_HEAD | _RLLM,
}

PROFILE_HELP = {
    "verl": "verl-project/verl 1dda039b (2026-08): hole-skipping GAE, REINFORCE++ carries returns through holes; "
    "v1 multi-row sessions broadcast the final row's GRPO advantage.",
    "verl-legacy": "volcengine/verl b178a3c (2026-01): REINFORCE++ resets at holes, old sum-norm, no token-sum, var "
    "floor, no k1+, OTB without zero-tail handling.",
    "search-r1": "Search-R1 a14dc3a: advantages over the attention mask (info tokens included), GAE without hole "
    "skipping, last token bootstraps from the first padding value.",
    "kg-r1": "KG-R1 7538a53: old-verl GAE over the attention mask, '_otc_scaling_factor'/'_kg_turns_used' leak "
    "into the global reward, mean turn reward.",
    "rllm": "rLLM 9beb6e0 unified trainer: rLLM-native estimators (population std, RF++-baseline over centred "
    "trajectory rewards), one scalar per trajectory grouped by task, trajectory reward = Σ step rewards.",
    "rllm-workflow": "rLLM 9beb6e0 AgentWorkflowPPOTrainer: verl's estimators (unbiased std); stepwise broadcast "
    "grouped by (task, last-step index) because uid = step id, so rollouts of different lengths split.",
    "rllm-legacy": "rLLM 7982c508 AgentPPOTrainer: verl's estimators; stepwise broadcast grouped by the prompt "
    "uid, per-step groups = k-th steps of a prompt's rollouts (its engine passed stepwise_gamma = 0.2).",
}

FIELD_HELP: dict[str, str] = {
    "profile": "Which reference trainer's conventions fill every field left unset.",
    "estimator": "Advantage estimator (verl algorithm.adv_estimator); see engine.list_estimators().",
    "gamma": "Discount γ (verl algorithm.gamma; REINFORCE++ reads it from the config, as verl does).",
    "lam": "GAE λ (verl algorithm.lam): 1 = Monte-Carlo returns minus values, 0 = one-step TD error.",
    "norm_adv_by_std_in_grpo": "Divide group-centred scores by the group std (off = Dr.GRPO advantage).",
    "epsilon": "ε added to the std in GRPO-style normalisation (verl: always 1e-6).",
    "placement": "How structured turn/global rewards become token rewards: final_token_only (mean turn reward + "
    "global on the last action token), turn_proportional (each turn's reward spread over its action tokens, "
    "global over all), turn_final_token (each turn's reward on its last action token), uniform (the score "
    "spread over every action token), as_given (the run's own token scores); auto = as_given when the run has "
    "token scores, else KG-R1's rule (turn_proportional with in-reward KL, final_token_only without).",
    "turn_weights": "Weight of each per-turn reward component (KG-R1 defaults; unlisted components weigh 1).",
    "global_weights": "Weight of each global reward component (KG-R1 defaults; unlisted components weigh 1).",
    "global_exclude_prefixes": "Global components whose name starts with one of these are left out of the "
    "global reward. KG-R1 skips only '_raw_', so its '_otc_scaling_factor' and '_kg_turns_used' bookkeeping "
    "keys are added to the reward (CONVENTIONS.md §3.5).",
    "turn_score_reduce": "How turn rewards combine into the trajectory score: mean (KG-R1) or sum (rLLM).",
    "use_kl_in_reward": "Subtract β·KL(old ‖ ref) from the token rewards (verl algorithm.use_kl_in_reward).",
    "kl_penalty": "KL estimator: kl/k1, abs, mse/k2, low_var_kl/k3, and '+' variants (value of the estimator, "
    "gradient of k2).",
    "kl_coef": "β, the in-reward KL coefficient (initial value for the adaptive controller).",
    "kl_ctrl_type": "fixed or adaptive KL controller (verl algorithm.kl_ctrl.type).",
    "kl_target": "Target KL of the adaptive controller.",
    "kl_horizon": "Horizon of the adaptive controller.",
    "state_masking": "Keep tool/info tokens out of the loss and the in-reward KL (Search-R1 actor.state_masking; "
    "verl multi-turn response_mask). Off = train on every attended token.",
    "advantage_mask": "Mask the estimator sees: action (verl: tool tokens are holes) or attention (Search-R1, "
    "KG-R1: info tokens are ordinary steps).",
    "gae_skip_holes": "GAE bootstraps from the next *valid* token and applies γ, λ once across a hole (verl PR "
    "#2337); off = every column is a TD step (old verl, Search-R1, KG-R1).",
    "gae_value_mask": "How the critic's values are masked before GAE: none, attention (KG-R1: padding values are "
    "0) or attention_shifted (Search-R1: the last token bootstraps from the first padding value).",
    "value_source": "Values for GAE: critic (the run's values), zeros (discounted Monte-Carlo returns) or "
    "group_mean (the mean score of the row's group, a critic-free baseline). None = critic if the run has "
    "values, else an error that asks you to choose.",
    "reinforce_hole_mode": "REINFORCE++ at holes: carry the return through (verl ≥ PR #7278) or reset it to 0 "
    "(older verl: turns before a tool call see no outcome reward).",
    "std_ddof": "Std degrees of freedom: 1 = unbiased (verl torch.std), 0 = population (rLLM np.std).",
    "grpo_var_floor": "grpo_vectorized: variance floor (older verl floored var at 1e-6, so σ ≥ 1e-3).",
    "rloo_singleton": "RLOO on a singleton group: raw score (verl rloo loop) or zero (rloo_vectorized).",
    "rfpp_baseline_scope": "REINFORCE++-baseline whitening: token (verl: batch-wide token-weighted whitening) or "
    "trajectory_popstd (rLLM: divide by the population std of the centred trajectory rewards; singletons 0).",
    "kl_plus_variants": "Accept 'k1+', 'low_var_kl+', … (verl ≥ PR #6058); older verl raised NotImplementedError.",
    "gpg_f_norm": "GPG: A = α(s − μ)/f_norm (verl's trainer always passes 1.0; the function's own parameter).",
    "gdpo_reward_keys": "GDPO: the global reward components normalised one by one (verl algorithm."
    "gdpo_reward_keys); empty = one dimension, the token-level rewards.",
    "gdpo_reward_weights": "GDPO: weight of each key's GRPO advantage before batch whitening (verl algorithm."
    "gdpo_reward_weights); None = all 1.",
    "otb_sum_pi_squared": "Optimal token baseline's Σ_v π(v)² per token: actor (the run's own, as verl's actor "
    "computes it) or sampled_token (stand-in π_t², the sampled token's share: a lower bound, so w = (1 − π_t)²). "
    "None = actor when the run has it, else the stand-in (named in the result's notes).",
    "otb_handle_zero_tail": "Optimal token baseline: zero the baseline where a group's strictly longest trajectory "
    "runs past the second longest (verl ≥ PR #5615 default; older verl: off).",
    "sum_norm_divides_by_seqs": "seq-mean-token-sum-norm divides by the number of sequences too (verl ≥ PR "
    "#5366) and dp_size > 1 needs the global counts; older verl: Σ_i S_i / loss_scale_factor, no dp factor, no "
    "checks.",
    "loss_agg_mode": "How token losses aggregate (verl actor.loss_agg_mode); sets each token's effective weight.",
    "loss_scale_factor": "Denominator of seq-mean-token-sum-norm (default: the padded length T).",
    "token_sum_supported": "Whether loss_agg_mode='token-sum' exists (added to verl in 2026-08; older verl raised "
    "ValueError for it).",
    "stepwise_mode": "rLLM: trajectory (one advantage per trajectory), broadcast (the last step's advantage copied "
    "to every step) or per_step (each step's Monte-Carlo return, grouped by step index).",
    "stepwise_gamma": "γ of rLLM's per-step Monte-Carlo returns (compute_mc_return default 0.95; the legacy "
    "engine passed 0.2).",
    "normalize_by_steps": "rLLM broadcast: divide the trajectory's advantage by its number of steps.",
    "broadcast_group_key": "rLLM broadcast grouping of last steps: prompt (legacy AgentPPOTrainer) or "
    "prompt_and_last_step (workflow trainer: uid = step id, so rollouts with different step counts split).",
    "broadcast_reward": "Stepwise broadcast: the reward the last step is scored with — trajectory (Σ of every "
    "step's rewards, rLLM's trajectory reward) or last_step (the last step's own rewards only, verl v1 "
    "multi-row sessions).",
    "broadcast_read": "Stepwise broadcast: how the last step's advantage becomes the scalar copied to earlier "
    "steps — mean over its masked tokens (rLLM) or its value at the first masked token (verl v1).",
    "rejection_sample": "rLLM rejection sampling: drop groups that are all solved (scores ≥ 1) or all unsolved "
    "(scores ≤ 0) from the loss; statistics are always reported.",
    "mask_truncated_samples": "rLLM: drop truncated trajectories from the loss.",
    "multiturn_turn_coef": "KG-R1 grpo_multiturn: A = coef · A_turn + A_global (KG-R1: 0.5).",
    "device": "cuda, cpu, or None (CUDA when available).",
}


@dataclass(frozen=True)
class CreditConfig:
    """A complete, hashable credit scheme. Unset conventions come from ``PROFILES[profile]``."""

    profile: str = "verl"
    estimator: str = "grpo"
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std_in_grpo: bool = True
    epsilon: float = 1e-6
    # reward shaping
    placement: str = "auto"
    turn_weights: tuple[tuple[str, float], ...] = KGR1_TURN_WEIGHTS
    global_weights: tuple[tuple[str, float], ...] = KGR1_GLOBAL_WEIGHTS
    global_exclude_prefixes: tuple[str, ...] | None = None
    turn_score_reduce: str | None = None
    # KL in reward
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_coef: float = 0.001
    kl_ctrl_type: str = "fixed"
    kl_target: float = 0.1
    kl_horizon: float = 10000.0
    # masks
    state_masking: bool = True
    advantage_mask: str | None = None
    # estimator conventions
    gae_skip_holes: bool | None = None
    gae_value_mask: str | None = None
    value_source: str | None = None
    reinforce_hole_mode: str | None = None
    std_ddof: int | None = None
    grpo_var_floor: float | None = None
    rloo_singleton: str | None = None
    rfpp_baseline_scope: str | None = None
    kl_plus_variants: bool | None = None
    multiturn_turn_coef: float = 0.5
    gpg_f_norm: float = 1.0
    gdpo_reward_keys: tuple[str, ...] = ()
    gdpo_reward_weights: tuple[float, ...] | None = None
    otb_handle_zero_tail: bool | None = None
    otb_sum_pi_squared: str | None = None
    # loss aggregation
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None
    sum_norm_divides_by_seqs: bool | None = None
    token_sum_supported: bool | None = None
    # rLLM
    stepwise_mode: str = "trajectory"
    stepwise_gamma: float = 0.95
    normalize_by_steps: bool = False
    broadcast_group_key: str | None = None
    broadcast_reward: str | None = None
    broadcast_read: str | None = None
    rejection_sample: bool = False
    mask_truncated_samples: bool = False
    device: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"CreditConfig.profile: unknown profile {self.profile!r}; choose from {list(PROFILES)}")
        for name, value in PROFILES[self.profile].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        for name in ("turn_weights", "global_weights"):
            w = getattr(self, name)
            if isinstance(w, dict):
                w = tuple(w.items())
            object.__setattr__(self, name, tuple((str(k), float(v)) for k, v in w))
        object.__setattr__(self, "global_exclude_prefixes", tuple(self.global_exclude_prefixes))
        object.__setattr__(self, "gdpo_reward_keys", tuple(str(k) for k in self.gdpo_reward_keys))
        if self.gdpo_reward_weights is not None:
            object.__setattr__(self, "gdpo_reward_weights", tuple(float(w) for w in self.gdpo_reward_weights))
        self._validate()

    def _validate(self) -> None:
        from engine.registry import ESTIMATORS  # late import: the registry imports this module

        def check(name: str, allowed) -> None:
            if getattr(self, name) not in allowed:
                raise ValueError(f"CreditConfig.{name}: {getattr(self, name)!r} is not one of {list(allowed)}")

        check("estimator", ESTIMATORS)
        check("placement", PLACEMENTS)
        check("stepwise_mode", STEPWISE_MODES)
        check("loss_agg_mode", LOSS_AGG_MODES)
        check("advantage_mask", ("action", "attention"))
        check("gae_value_mask", ("none", "attention", "attention_shifted"))
        check("reinforce_hole_mode", ("carry", "reset"))
        check("rloo_singleton", ("raw", "zero"))
        check("rfpp_baseline_scope", ("token", "trajectory_popstd"))
        check("turn_score_reduce", ("mean", "sum"))
        check("broadcast_group_key", ("prompt", "prompt_and_last_step"))
        check("broadcast_reward", ("trajectory", "last_step"))
        check("broadcast_read", ("mean", "first"))
        check("kl_ctrl_type", ("fixed", "adaptive"))
        check("std_ddof", (0, 1))
        if self.value_source is not None:
            check("value_source", VALUE_SOURCES)
        if self.otb_sum_pi_squared is not None:
            check("otb_sum_pi_squared", ("actor", "sampled_token"))
        for name in ("gamma", "lam", "stepwise_gamma"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"CreditConfig.{name}: must be in [0, 1], got {v}")
        if self.epsilon < 0 or self.kl_coef < 0:
            raise ValueError("CreditConfig: epsilon and kl_coef must be ≥ 0")
        if self.loss_agg_mode == "token-sum" and not self.token_sum_supported:
            raise ValueError(f"CreditConfig.loss_agg_mode: 'token-sum' does not exist in profile {self.profile!r}")
        if self.gdpo_reward_weights is not None and len(self.gdpo_reward_weights) != len(self.gdpo_reward_keys):
            raise ValueError("CreditConfig.gdpo_reward_weights: need one weight per gdpo_reward_keys entry")

    def replace(self, **changes) -> CreditConfig:
        """A copy with ``changes``; conventions not named keep their resolved values unless the profile changes."""
        if "profile" in changes and changes["profile"] != self.profile:
            base = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
            for name in PROFILES[self.profile]:
                base[name] = None
            base.update(changes)
            return CreditConfig(**base)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """JSON-ready dict (the dashboard's scheme export; ``CreditConfig.from_dict`` reads it back)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("turn_weights", "global_weights"):
                v = dict(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict) -> CreditConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"CreditConfig: unknown field(s) {sorted(unknown)}")
        kw = dict(d)
        for k in ("global_exclude_prefixes",):
            if isinstance(kw.get(k), list):
                kw[k] = tuple(kw[k])
        return cls(**kw)
