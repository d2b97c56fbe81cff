"""``CreditConfig``: every choice and every convention of the credit pipeline, as a named field.

Fields are grouped by the pipeline stage that reads them (``engine.stages``: 1 rewards & placement, 2 in-reward
KL, 3 advantage estimator, 4 loss), the loss-specific ones with their loss, then rLLM's stepwise modes. Each is
declared once (``engine.config.fields``): validation, ``FIELD_HELP`` (the dashboard's widget help), the command
line's ``--field`` options (``engine.cli_compute``), the sidebar's widgets (``widget``: kind, label, order, when
shown; with ``choices`` and ``bounds``), scheme codes (``code``) and docs/CONFIG.md (``engine.config.docs``) are
derived from the declarations. Field names follow verl's where verl has one (``estimator`` =
``algorithm.adv_estimator``, ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``, ``kl_penalty``, ``kl_coef``,
``use_kl_in_reward``, ``loss_agg_mode``).

Conventions that differ between the reference trainers (std ddof, hole handling, which mask advantages use, …)
are declared with ``convention(...)``: they default to ``None`` and are filled from the named **profile**, one
row of ``engine.profiles.PROFILES``; a value passed explicitly always wins. What a trainer *has* (token-sum, the
seq-mean modes, …) is no field: ``cfg.trainer`` (the ``Profile``) says it, and a scheme that asks for what it
lacks is refused (``engine.config.rules``). Where to compute (``device``) is not part of a scheme either:
``compute_credit(batch, cfg, device=...)`` takes it.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from engine.config import rules
from engine.config.fields import FRACTION, NON_NEGATIVE, POSITIVE, UNIT, Rule, convention, option, rules_of
from engine.config.fields import Widget as W
from engine.kl import KL_NAMES
from engine.policy import POLICY_LOSSES, RS_OPTIONS, check_threshold
from engine.policy_losses import list_policy_losses
from engine.profiles import CAPABILITIES, PROFILES, Profile

# KG-R1's KGFormatMultiTurnRewardManager defaults (docs/conventions/kg-r1.md §3.2, docs/TUTORIAL.md §7.1).
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
    "prompt-mean-token-mean",
)
VALUE_SOURCES = ("critic", "zeros", "group_mean")
VALUE_STAND_INS = ("zeros", "group_mean")  # what stands in for critic values a run lacks (engine.runnable)
# Every name verl's kl_penalty dispatches on: 'full' and the '+' variants pass the config and fail (as in verl)
# when computed, the '+' ones only where the profile's trainer predates them (engine.kl.check_kl_penalty).
KL_PENALTY_NAMES = (*KL_NAMES, "full", *(n + "+" for n in (*KL_NAMES, "full")))


def _estimators():
    from engine.registry import ESTIMATORS  # late import: the estimators the registry holds import this module

    return ESTIMATORS


def _accepts_what_the_trainer_has(cls):
    """Let ``cls(...)`` take the ``Profile`` attributes that were once fields (older saved schemes hold them): each
    is dropped where it says what the profile says, refused otherwise (``rules.check_what_the_trainer_has``)."""
    init = cls.__init__
    default_profile = cls.__dataclass_fields__["profile"].default

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        given = {name: kwargs.pop(name) for name in CAPABILITIES if name in kwargs}
        if given:
            rules.check_what_the_trainer_has(args[0] if args else kwargs.get("profile", default_profile), given)
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


@_accepts_what_the_trainer_has
@dataclass(frozen=True)
class CreditConfig:
    """A complete, hashable credit scheme. Unset conventions come from ``PROFILES[profile]``."""

    profile: str = option(
        "verl",
        "Which reference trainer's conventions fill every field left unset.",
        choices=tuple(PROFILES),
        widget=W("select", "Profile", 10),
        code="p",
    )

    # ==== 1. rewards & placement (engine.stages.place_scores): which tokens are the policy's, and their scores
    state_masking: bool = option(
        True,
        "Keep tool/info tokens out of the loss and the in-reward KL (Search-R1 actor.state_masking; verl "
        "multi-turn response_mask). Off = train on every attended token.",
        label="state masking",
        widget=W("toggle", "State masking (tool tokens out of the loss)", 80),
        code="ms",
    )
    placement: str = option(
        "auto",
        "How structured turn/global rewards become token rewards: final_token_only (mean turn reward + global on "
        "the last action token), turn_proportional (each turn's reward spread over its action tokens, global over "
        "all), turn_final_token (each turn's reward on its last action token), uniform (the score spread over "
        "every action token), as_given (the run's own token scores); auto = as_given when the run has token "
        "scores, else KG-R1's rule (turn_proportional with in-reward KL, final_token_only without).",
        choices=PLACEMENTS,
        widget=W("select", "Reward placement", 30),
        code="pl",
    )
    turn_weights: tuple[tuple[str, float], ...] = option(
        KGR1_TURN_WEIGHTS, "Weight of each per-turn reward component (KG-R1 defaults; unlisted components weigh 1)."
    )
    global_weights: tuple[tuple[str, float], ...] = option(
        KGR1_GLOBAL_WEIGHTS,
        "Weight of each global reward component (KG-R1 defaults; unlisted components weigh 1).",
    )
    global_exclude_prefixes: tuple[str, ...] | None = convention(
        "Global components whose name starts with one of these are left out of the global reward. KG-R1 skips "
        "only '_raw_', so its '_otc_scaling_factor' and '_kg_turns_used' bookkeeping keys are added to the reward "
        "(docs/conventions/kg-r1.md §3.5).",
        label="global keys left out",
    )
    turn_score_reduce: str | None = convention(
        "How turn rewards combine into the trajectory score: mean (KG-R1) or sum (rLLM).",
        choices=("mean", "sum"),
        label="trajectory reward",
    )

    # ==== 2. in-reward KL (engine.stages.subtract_kl; kl_clamp holds for the KL loss too)
    use_kl_in_reward: bool = option(
        False,
        "Subtract β·KL(old ‖ ref) from the token rewards (verl algorithm.use_kl_in_reward).",
        label="in-reward KL",
        widget=W("toggle", "In-reward KL", 110, enabled=("run.has_log_probs",)),
        code="kl",
    )
    kl_penalty: str = option(
        "kl",
        "KL estimator: kl/k1, abs, mse/k2, low_var_kl/k3, and '+' variants (value of the estimator, gradient of k2).",
        choices=KL_PENALTY_NAMES,
        label="KL estimator",
        widget=W(
            "select",
            "KL estimator",
            120,
            row="kl",
            options=(*KL_NAMES, "k1+", "low_var_kl+"),  # "+": the estimator's value, k2's gradient (verl ≥ #6058)
            when=("use_kl_in_reward",),
        ),
        code="kp",
    )
    kl_coef: float = option(
        0.001,
        "β, the in-reward KL coefficient (initial value for the adaptive controller).",
        within=NON_NEGATIVE,
        label="β",
        widget=W(
            "number",
            "β (kl_coef)",
            121,
            row="kl",
            min_value=0.0,
            max_value=10.0,
            step=0.001,
            format="%.4f",
            when=("use_kl_in_reward",),
        ),
        code="b",
    )
    kl_ctrl_type: str = option(
        "fixed", "fixed or adaptive KL controller (verl algorithm.kl_ctrl.type).", choices=("fixed", "adaptive")
    )
    kl_target: float = option(0.1, "Target KL of the adaptive controller.", within=POSITIVE)
    kl_horizon: float = option(10000.0, "Horizon of the adaptive controller.", within=POSITIVE)
    kl_clamp: str | None = convention(
        "Which KL estimators are clamped to [−10, 10]: k3 (verl: low_var_kl only), all (OpenRLHF "
        "compute_approx_kl clamps k1 and k2 too) or none (TRL: k3 = exp(ref − log π) − (ref − log π) − 1, "
        "unclamped).",
        choices=("k3", "all", "none"),
        label="KL clamp",
    )

    # ==== 3. advantage estimator (engine.stages.estimate)
    # -- shared by the estimators
    estimator: str = option(
        "grpo",
        "Advantage estimator (verl algorithm.adv_estimator); see engine.list_estimators().",
        choices=_estimators,
        label="estimator",
        widget=W("select", "Estimator", 20),
    )
    advantage_mask: str | None = convention(
        "Mask the estimator sees: action (verl: tool tokens are holes) or attention (Search-R1, KG-R1: info tokens "
        "are ordinary steps).",
        choices=("action", "attention"),
        label="advantage mask",
    )
    gamma: float = option(
        1.0,
        "Discount γ (verl algorithm.gamma; REINFORCE++ reads it from the config, as verl does).",
        within=UNIT,
        label="γ",
        widget=W("slider", "γ", 50, row="discount", step=0.01),
        code="g",
    )
    lam: float = option(
        1.0,
        "GAE λ (verl algorithm.lam): 1 = Monte-Carlo returns minus values, 0 = one-step TD error.",
        within=UNIT,
        label="λ",
        widget=W("slider", "λ", 51, row="discount", step=0.01),
        code="l",
    )
    std_ddof: int | None = convention(
        "Std degrees of freedom: 1 = unbiased (verl torch.std), 0 = population (rLLM np.std).",
        choices=(0, 1),
        label="std",
    )
    epsilon: float | None = convention(
        "ε added to the std in GRPO-style normalisation (verl, KG-R1, Search-R1 and rLLM hard-code 1e-6; TRL "
        "1e-4; OpenRLHF 1e-9).",
        within=NON_NEGATIVE,
        label="ε",
    )
    outcome_tokens: str | None = convention(
        "How an outcome estimator's per-row advantage a_i reaches the tokens: broadcast (verl: a_i on every "
        "masked token, in-reward KL already summed into the score) or reward_to_go (OpenRLHF: the group baseline "
        "is taken on the score before KL; a_i sits on the row's last masked token and every position up to it, "
        "holes included, gets a_i plus the reward-to-go of −β·KL).",
        choices=("broadcast", "reward_to_go"),
        label="outcome advantage on tokens",
    )
    reward_clip: tuple[float, ...] | None = option(
        None,
        "OpenRLHF --reward.clip_range (its default is (-10, 10)): the reward, after the group baseline, is "
        "clamped to [lo, hi] before the KL is added (outcome estimators: each row's advantage; token estimators: "
        "each token's score). None = no clamp, as verl.",
        check=rules.clip_range,
        label="reward clip",
    )
    # -- GAE
    value_source: str | None = option(
        None,
        "Values for GAE: critic (the run's values), zeros (discounted Monte-Carlo returns) or group_mean (the mean "
        "score of the row's group, a critic-free baseline). None = critic if the run has values, else an error "
        "that asks you to choose.",
        choices=VALUE_SOURCES,
        widget=W(
            "select", "Values for GAE (run has no critic)", 100, options=VALUE_STAND_INS, when=("not run.has_values",)
        ),
        code="vs",
    )
    gae_skip_holes: bool | None = convention(
        "GAE bootstraps from the next *valid* token and applies γ, λ once across a hole (verl PR #2337); off = "
        "every column is a TD step (old verl, Search-R1, KG-R1).",
        label="GAE skips holes",
    )
    gae_value_mask: str | None = convention(
        "How the critic's values are masked before GAE: none, attention (KG-R1: padding values are 0), "
        "attention_shifted (Search-R1: the last token bootstraps from the first padding value) or action "
        "(OpenRLHF: values and rewards off the action mask, tool tokens included, are 0).",
        choices=("none", "attention", "attention_shifted", "action"),
        label="GAE value mask",
    )
    # -- batch whitening (GAE, REINFORCE++) and REINFORCE++
    whiten_std: bool = option(
        True,
        "GAE and REINFORCE++ batch whitening divides by the std; off = centre only (OpenRLHF --no_std_norm).",
        label="whitening ÷ std",
        widget=W("toggle", "Whitening ÷ std", 70, when=("estimator.whitened",)),
        code="ws",
    )
    whitening: str | None = convention(
        "Batch whitening of GAE and REINFORCE++ (and its baseline variant): verl (unbiased token variance, "
        "rsqrt(var + 1e-8); REINFORCE++ re-masked to 0) or openrlhf (biased variance, rsqrt(max(var, 1e-8)); "
        "no position re-masked).",
        choices=("verl", "openrlhf"),
        label="whitening",
    )
    reinforce_hole_mode: str | None = convention(
        "REINFORCE++ at holes: carry the return through (verl ≥ PR #7278: γ once per valid token, 0 on the "
        "hole), reset it to 0 (older verl: turns before a tool call see no outcome reward) or positional "
        "(OpenRLHF: γ once per column, holes included, and a hole shows the running return).",
        choices=("carry", "reset", "positional"),
        label="REINFORCE++ at holes",
    )
    rfpp_baseline_scope: str | None = convention(
        "REINFORCE++-baseline whitening: token (verl: batch-wide token-weighted whitening) or trajectory_popstd "
        "(rLLM: divide by the population std of the centred trajectory rewards; singletons 0).",
        choices=("token", "trajectory_popstd"),
        label="RF++ baseline scope",
    )
    # -- GRPO
    norm_adv_by_std_in_grpo: bool = option(
        True,
        "Divide group-centred scores by the group std (off = Dr.GRPO advantage).",
        label="std normalisation",
        widget=W("toggle", "Divide by group std", 60),
        code="ns",
    )
    grpo_std_scope: str = option(
        "group",
        "GRPO: the std the centred score is divided by: its group's (verl; TRL scale_rewards='group') or one std "
        "over the whole batch, the mean still per group (TRL scale_rewards='batch'). TRL's 'none' is "
        "norm_adv_by_std_in_grpo off.",
        choices=("group", "batch"),
        label="GRPO std over",
        widget=W(
            "segmented", "GRPO std over", 61, width="stretch", when=("estimator == grpo", "norm_adv_by_std_in_grpo")
        ),
        code="gs",
    )
    grpo_var_floor: float | None = convention(
        "grpo_vectorized: variance floor (older verl floored var at 1e-6, so σ ≥ 1e-3).",
        within=NON_NEGATIVE,
        label="GRPO variance floor",
    )
    grpo_singleton: str | None = convention(
        "GRPO on a group with one row: raw score (verl: μ = 0, σ = 1), zero (TRL: its NaN std, or its own "
        "mean, leaves advantage 0) or nan (OpenRLHF group_norm: the unbiased std of one value is NaN, and so is "
        "the advantage).",
        choices=("raw", "zero", "nan"),
        label="GRPO singleton",
    )
    length_penalty: tuple[float, ...] | None = option(
        None,
        "GRPO: prime-rl's linear length penalty (algo.length_penalty, type linear), weights (w_out, w_in, w_turns) "
        "≥ 0; prime-rl's defaults are (0.25, 0.1, 0.1). Before the group baseline each score becomes s − "
        "mean_g(s)·(w_out·out/max_g out + w_in·in/max_g in + w_turns·turns/max_g turns), each maximum at least 1: "
        "out = the trace's output tokens, in = its final-sequence tokens − out (the provider's usage), turns = its "
        "sampled messages. Needs the batch's trace_lengths (the verifiers_traces loader). None = off, as prime-rl.",
        check=rules.length_weights,
        label="length penalty",
        widget=W(
            "length_penalty", "Length penalty (prime-rl)", 62, when=("estimator == grpo", "run.has_trace_lengths")
        ),
        code="lp",
    )
    # -- RLOO, MaxRL, KG-R1 multi-turn GRPO, GPG
    rloo_singleton: str | None = convention(
        "RLOO on a singleton group: raw score (verl rloo loop), zero (rloo_vectorized) or nan (OpenRLHF: its "
        "leave-one-out baseline is 0/0).",
        choices=("raw", "zero", "nan"),
        label="RLOO singleton",
    )
    maxrl_form: str | None = convention(
        "MaxRL's form: skyrl ((s − μ_g)/(μ_g + ε) in a group of two or more, a singleton's raw score) or prime_rl "
        "((s − μ_g)/μ_g, and 0 for the whole group when μ_g ≤ 0, a singleton included).",
        choices=("skyrl", "prime_rl"),
        label="MaxRL form",
    )
    multiturn_turn_coef: float = option(0.5, "KG-R1 grpo_multiturn: A = coef · A_turn + A_global (KG-R1: 0.5).")
    gpg_f_norm: float = option(
        1.0, "GPG: A = α(s − μ)/f_norm (verl's trainer always passes 1.0; the function's own parameter)."
    )
    # -- GDPO
    gdpo_reward_keys: tuple[str, ...] = option(
        (),
        "GDPO: the global reward components normalised one by one (verl algorithm.gdpo_reward_keys); empty = one "
        "dimension, the token-level rewards.",
    )
    gdpo_reward_weights: tuple[float, ...] | None = option(
        None,
        "GDPO: weight of each key's GRPO advantage before batch whitening (verl algorithm.gdpo_reward_weights); "
        "None = all 1.",
    )
    gdpo_whiten: str | None = convention(
        "GDPO's final batch normalisation of Σ_k w_k A_k: token (verl: token-weighted masked_whiten, then × mask) "
        "or row (TRL normalize_then_sum: (x − mean)/(std + ε) over rows, unbiased std, ε = the profile's).",
        choices=("token", "row"),
        label="GDPO whitening",
    )
    # -- optimal token baseline
    otb_handle_zero_tail: bool | None = convention(
        "Optimal token baseline: zero the baseline where a group's strictly longest trajectory runs past the "
        "second longest (verl ≥ PR #5615 default; older verl: off)."
    )
    otb_sum_pi_squared: str | None = option(
        None,
        "Optimal token baseline's Σ_v π(v)² per token: actor (the run's own, as verl's actor computes it) or "
        "sampled_token (stand-in π_t², the sampled token's share: a lower bound, so w = (1 − π_t)²). None = actor "
        "when the run has it, else the stand-in (named in the result's notes).",
        choices=("actor", "sampled_token"),
    )

    # ==== 4. loss (engine.stages.weigh_loss, engine.policy): the gradient each token gets
    # -- aggregation
    loss_agg_mode: str = option(
        "token-mean",
        "How token losses aggregate (verl actor.loss_agg_mode); sets each token's effective weight.",
        choices=LOSS_AGG_MODES,
        label="loss aggregation",
        widget=W("select", "Loss aggregation", 90),
        code="agg",
    )
    loss_scale_factor: float | None = option(
        None, "Denominator of seq-mean-token-sum-norm (default: the padded length T).", within=POSITIVE
    )
    sum_norm_divides_by_seqs: bool | None = convention(
        "seq-mean-token-sum-norm divides by the number of sequences too (verl ≥ PR #5366) and dp_size > 1 needs "
        "the global counts; older verl: Σ_i S_i / loss_scale_factor, no dp factor, no checks."
    )
    seq_mean_rows: str | None = convention(
        "Which rows the seq-mean loss modes average over: nonempty (rows with a token in the loss mask: verl's "
        "agg_loss called without global_batch_size, as legacy verl's actor and rLLM's verl 0.7.1 call it) or all "
        "(every row of the trainer's batch, so a fully masked row still counts in the mean: verl's trainer passes "
        "global_batch_size = the mini-batch's rows, TRL and SkyRL average over every row). Rows dropped from the "
        "batch (rLLM's rejection sampling, truncation filter) are not counted.",
        choices=("nonempty", "all"),
        label="seq-mean over rows",
    )
    seq_mean_losses: tuple[str, ...] | None = convention(
        "Policy losses that aggregate seq-mean-token-mean whatever loss_agg_mode says: verl's SAPO; OpenRLHF's "
        "GSPO (token_level_loss forced off); SkyRL's SAPO and GSPO follow its loss_reduction.",
        each=POLICY_LOSSES,
        label="losses aggregated per sequence",
    )
    reduction_on_advantages: bool | None = convention(
        "Where the loss reduction applies: to the token losses (verl and the others: the loss is aggregated) or to "
        "the advantages before a summed loss (SkyRL: Â = a·A). The same gradient for a loss linear in A; for kl_cov "
        "SkyRL's covariance is taken with Â and its |log ρ| penalty is summed, outside the reduction.",
        label="reduction applied to the advantages",
    )
    zero_advantage_tokens: str | None = convention(
        "Trained tokens whose advantage is exactly 0: kept in the loss (verl and the others: they count in the "
        "token-mean denominators) or dropped (prime-rl filter_zero_advantages: out of the loss and its token "
        "count, and a row left with no token drops out).",
        choices=("kept", "dropped"),
        label="zero-advantage tokens",
    )
    # -- policy loss
    policy_loss: str = option(
        "vanilla",
        "The policy loss the advantage enters (verl actor.policy_loss.loss_mode), one of the registered losses "
        "(engine.policy_losses: each with its formula, the fields it reads and the trainer code it reproduces): "
        + "; ".join(f"{loss.name}: {loss.label}" for loss in list_policy_losses())
        + ".",
        choices=POLICY_LOSSES,
        label="policy loss",
        widget=W("select", "Loss", 200, section="policy"),
        code="pol",
    )
    adv_tau: float = option(
        1.0, "prime-rl adv_tau: the advantage is scaled by it inside the policy loss.", within=NON_NEGATIVE
    )
    # -- policy loss: the clip ratios (vanilla's PPO clip; ε_low, ε_high bound dppo, ipo, cispo, masked_is too)
    clip_ratio_low: float = option(
        0.2,
        "ε_low: the ratio's lower clip 1 − ε_low (verl clip_ratio_low).",
        within=UNIT,
        widget=W(
            "number", "ε low", 210, section="policy", row="loss", bounded=True, step=0.01, when=("policy_loss.reads",)
        ),
        code="cl",
    )
    clip_ratio_high: float = option(
        0.2, "ε_high: the ratio's upper clip 1 + ε_high (verl clip_ratio_high; DAPO's clip-higher 0.28).",
        within=NON_NEGATIVE,
        widget=W("number", "ε high", 211, section="policy", row="loss", min_value=0.0, step=0.01,
                 when=("policy_loss.reads",)),
        code="ch",
    )  # fmt: skip
    clip_ratio_c: float | None = option(
        3.0,
        "Dual clip c (verl clip_ratio_c, > 1): a negative advantage's ratio above c gives no gradient. None = no dual "
        "clip (OpenRLHF's default dual_clip, SkyRL's 'regular' loss, TRL without delta; TRL's two-sided delta is this "
        "cap).",
        check=rules.dual_clip,
        widget=W(
            "number",
            "Dual clip c",
            212,
            section="policy",
            row="loss",
            min_value=1.01,
            step=0.5,
            when=("policy_loss.reads", "profile.dual_clip_form != none"),
        ),
        code="cc",
    )
    # -- policy loss: SAPO
    tau_pos: float = option(
        1.0,
        "SAPO τ for positive advantages.",
        within=POSITIVE,
        widget=W(
            "number",
            "τ (A > 0)",
            213,
            section="policy",
            row="loss",
            min_value=0.01,
            step=0.05,
            when=("policy_loss.reads",),
        ),
        code="tp",
    )
    tau_neg: float = option(
        1.05,
        "SAPO τ for negative advantages.",
        within=POSITIVE,
        widget=W(
            "number",
            "τ (A < 0)",
            214,
            section="policy",
            row="loss",
            min_value=0.01,
            step=0.05,
            when=("policy_loss.reads",),
        ),
        code="tn",
    )
    # -- policy loss: GSPO, CISPO, VESPO
    gspo_gradient: str | None = convention(
        "GSPO's sequence ratio s_i = exp(mean_t log ρ_t): own_token (verl, SkyRL: s_i capped at e^10, and each "
        "token's own log-prob carries it, −A·s_i) or row (OpenRLHF, TRL importance_sampling_level='sequence': "
        "uncapped, differentiated as a function of the row, so the row's aggregated gradient is spread evenly "
        "over its tokens).",
        choices=("own_token", "row"),
        label="GSPO gradient",
    )
    cispo_clip: str | None = convention(
        "CISPO's clipped IS weight: one_plus (verl, SkyRL: clip(ρ, 1 − ε_low, 1 + ε_high)) or epsilon_high (TRL: "
        "min(ρ, ε_high), ε_high itself the cap, no lower bound).",
        choices=("one_plus", "epsilon_high"),
        label="CISPO clip",
    )
    log_ratio_clamp: str | None = convention(
        "The bound on log ρ before exp in the ratio-based losses (vanilla, CISPO, SAPO, DPPO, IPO, masked IS): 20 "
        "(verl's SAFETY_BOUND, SkyRL, OpenRLHF: ρ = exp(clamp(log ρ, ±20)), no gradient through ρ beyond it, the "
        "clamp passing it at the bound itself), 10 (KG-R1's vendored verl) or none (TRL, prime-rl, Search-R1's "
        "vendored verl: ρ = exp(log ρ), unclamped, its gradient whole however far the policy moved).",
        choices=("20", "10", "none"),
        label="log-ratio clamp",
    )
    dppo_ratio: str | None = convention(
        "The weight DPPO's kept tokens get: ratio (prime-rl, SkyRL: −A·ρ, ρ differentiable) or truncated (verl: "
        "−A·sg(min(ρ, clip_ratio_c))·log π, a truncated IS weight that keeps its gradient past the log-ratio clamp).",
        choices=("ratio", "truncated"),
        label="DPPO weight",
    )
    dual_clip_form: str | None = convention(
        "How the dual clip c (clip_ratio_c) enters the PPO loss: min_loss (verl, SkyRL, OpenRLHF: where A < 0 the "
        "loss is min(−A·c, the PPO loss), a constant branch of its own, so at ρ = c exactly autograd splits the "
        "gradient between the two equal branches and the token keeps half) or ratio_cap (TRL's two-sided delta: the "
        "ratio is capped, min(ρ, c), inside the PPO min, for either sign of A; the gradient passes whole at ρ = c) "
        "or none (Search-R1: its PPO loss has no dual clip, so clip_ratio_c is not read: a negative advantage keeps "
        "−A·ρ however large ρ).",
        choices=("min_loss", "ratio_cap", "none"),
        label="dual clip form",
    )
    vespo_params: tuple[float, ...] = option(
        (2.0, 3.0, 3.0, 2.0),
        "VESPO (TRL): (k_pos, λ_pos, k_neg, λ_neg) of the gamma weight φ(w) = e^λ·w^k·e^{−λw} on the row's ratio.",
        check=rules.vespo_params,
    )
    # -- policy loss: prime-rl's dppo_tv and ipo
    kl_tau: float = option(
        0.0,
        "prime-rl kl_tau: kl_tau·(log ρ)² is added to every loss token's loss (dppo_tv and ipo only; prime-rl's "
        "default is 1e-3).",
        within=NON_NEGATIVE,
        widget=W(
            "number",
            "KL τ (log ρ)²",
            217,
            section="policy",
            row="loss",
            min_value=0.0,
            step=0.01,
            when=("policy_loss.reads",),
        ),
        code="kt",
    )
    # -- policy loss: KL-Cov
    kl_cov_ratio: float = option(
        0.0002,
        "KL-Cov: the share of the batch's loss tokens, max(1, ⌊n·ratio⌋) of them, with the largest covariance "
        "(A − Ā)(log π − mean log π) that get the |log ρ| penalty (verl policy_loss.kl_cov_ratio, default 0.0002; "
        "SkyRL kl_cov.kl_cov_frac, default 0.2).",
        within=FRACTION,
        label="KL-Cov share",
        widget=W(
            "number",
            "KL-Cov share",
            215,
            section="policy",
            row="loss",
            bounded=True,
            step=0.0001,
            format="%g",
            when=("policy_loss.reads",),
        ),
        code="kcr",
    )
    ppo_kl_coef: float = option(
        0.1,
        "KL-Cov: the coefficient of the |log ρ| penalty on the selected tokens (verl policy_loss.ppo_kl_coef, "
        "default 0.1; SkyRL kl_cov.ppo_kl_coef, default 1.0).",
        within=NON_NEGATIVE,
        label="KL-Cov coefficient",
        widget=W(
            "number",
            "KL-Cov coefficient",
            216,
            section="policy",
            row="loss",
            min_value=0.0,
            step=0.05,
            when=("policy_loss.reads",),
        ),
        code="kkc",
    )
    # -- rollout correction
    policy_ratio_base: str = option(
        "trainer",
        "What the PPO ratio divides by: trainer (decoupled: π_old = the trainer's log-probs, so the ratio is 1 on the "
        "first mini-batch and the rollout correction weighs the mismatch) or rollout (verl bypass mode: π_old = the "
        "rollout engine's log-probs, so the ratio is the mismatch itself and PPO clips it).",
        choices=("trainer", "rollout"),
        label="PPO ratio against",
        widget=W(
            "segmented",
            "PPO ratio against",
            230,
            section="policy",
            width="stretch",
            when=("run.has_rollout_log_probs",),
        ),
        code="rb",
    )
    rollout_is: str | None = option(
        None,
        "Rollout correction importance weights (verl rollout_is) from π_trainer/π_rollout: token or sequence "
        "(the product over the row), truncated at rollout_is_threshold (TIS), or with a lower bound 'L_U' set to 0 "
        "outside [L, U] (IcePop). None = off. Needs the rollout engine's log-probs.",
        choices=("token", "sequence"),
        label="rollout IS",
        widget=W(
            "select",
            "Rollout IS",
            240,
            section="policy",
            row="rollout_is",
            none_label="off",
            when=("run.has_rollout_log_probs",),
        ),
        code="ris",
    )
    rollout_is_mode: str | None = option(
        None,
        "What rollout_is does with a weight outside the threshold: truncate (clamp into [L, U], or at U) or mask "
        "(0 outside [L, U], or above U). None = verl's rule: 'U' truncates, 'L_U' masks (TRL's "
        "vllm_importance_sampling_mode token/sequence × truncate/mask; OpenRLHF is_correction_mode).",
        choices=("truncate", "mask"),
        label="IS weight outside the threshold",
    )
    rollout_is_threshold: str = option(
        "2.0",
        "verl rollout_is_threshold: 'U' (truncate at U) or 'L_U' (zero outside [L, U]).",
        check=check_threshold,
        label="IS threshold",
        widget=W("text", "IS threshold", 241, section="policy", row="rollout_is", when=("run.has_rollout_log_probs",)),
        code="rit",
    )
    rollout_is_batch_normalize: bool = option(False, "Divide the IS weights by their batch mean (verl).")
    rollout_rs: tuple[str, ...] = option(
        (),
        "Rollout rejection sampling (verl rollout_rs): options token_k1/k2/k3, seq_sum_k1/k2/k3, seq_mean_k1/k2/k3, "
        "seq_max_k2/k3, all of which a token must pass; empty = off. seq_all_k1 (SkyRL's outlier-token mask) drops a "
        "row any of whose tokens fails the k1 bounds; token_bkl/tv and seq_mean_bkl/tv are "
        "OpenRLHF's gates: the sampled token's binary KL or |π_rollout − π_old| (probabilities clamped to "
        "[1e-6, 1 − 1e-6]), per token or averaged over the row, at most the threshold.",
        each=RS_OPTIONS,
        label="rollout rejection",
        widget=W("rollout_rs", "Rollout rejection", 250, section="policy", when=("run.has_rollout_log_probs",)),
        code="rrs",
    )
    rollout_rs_threshold: tuple[str, ...] = option(
        (),
        "verl rollout_rs_threshold: one spec shared, or one per option ('L_U' or 'U' for k1, 'U' otherwise).",
        check=rules.thresholds,
        code="rrt",
    )
    rollout_rs_masks_advantages: bool | None = convention(
        "Where rollout rejection sampling (rollout_rs, decoupled mode) acts: also on the advantages (verl: the "
        "trainer swaps the rejection-masked response mask in before compute_advantage, so whitening, group "
        "statistics, hole skipping and lengths leave the rejected tokens out, and a reward on a rejected token is "
        "dropped) or on the loss only (SkyRL, OpenRLHF, TRL: their masks act inside the policy loss). Bypass mode "
        "(policy_ratio_base='rollout') always leaves the advantages alone.",
        label="rollout rejection acts",
    )
    rejected_tokens_counted: bool | None = convention(
        "A token rollout rejection sampling drops: out of the loss mask and the aggregation's token counts (verl) "
        "or only its loss zeroed, the counts unchanged (SkyRL's off-policy masks and OpenRLHF's mask mode act on "
        "the loss after the reduction's normaliser is fixed).",
        label="rejected tokens counted",
    )
    off_policy_mask_threshold: float | None = option(
        None,
        "TRL off_policy_mask_threshold (DeepSeek-V3.2's off-policy sequence mask): a row with A < 0 whose mean "
        "log π_rollout − log π_θ exceeds it trains nothing (its tokens still counted). None = off.",
        within=NON_NEGATIVE,
    )
    # -- KL loss
    kl_loss_coef: float = option(
        0.0,
        "β of a KL(π_θ ‖ π_ref) loss term added to each token's loss, aggregated as kl_loss_agg says (verl "
        "actor.kl_loss_coef with use_kl_loss; TRL beta; SkyRL kl_loss_coef with use_kl_loss). Needs the reference "
        "log-probs. 0 = off.",
        within=NON_NEGATIVE,
    )
    kl_loss_type: str = option(
        "low_var_kl",
        "The KL loss term's estimator (verl actor.kl_loss_type; TRL: k3 = low_var_kl; SkyRL kl_estimator_type k1, "
        "k2, k3, abs: the same names here).",
        choices=KL_PENALTY_NAMES,
    )
    kl_loss_ratio_weighted: bool = option(
        False,
        "Weigh the KL loss term by the loss's own ratio (TRL use_bias_correction_kl, its default): π_θ/π_old per "
        "token, VESPO included; under GSPO (gspo_gradient='row') the row's sequence ratio, differentiated through "
        "the row.",
    )
    kl_loss_agg: str | None = convention(
        "How the KL loss term (kl_loss_coef) is aggregated: loss (with the policy loss, by loss_agg_mode, on the "
        "loss mask after rollout rejection: verl's use_kl_loss, TRL's beta), seq-mean-token-mean (SkyRL's worker: "
        "a token mean per row, then the mean over every row of the mini-batch, whatever loss_reduction says) or "
        "token-mean (OpenRLHF's actor: the token mean over the batch, whatever loss_agg_mode says, GSPO's forced "
        "per-sample mean too); the last two on the loss mask before the off-policy masks, so a masked token keeps "
        "its KL gradient.",
        choices=("loss", "seq-mean-token-mean", "token-mean"),
        label="KL loss aggregation",
    )

    # ==== rLLM stepwise (engine.rllm): stage 3 over a trajectory's steps, and the rows the loss keeps
    stepwise_mode: str = option(
        "trajectory",
        "rLLM: trajectory (one advantage per trajectory), broadcast (the last step's advantage copied to every "
        "step) or per_step (each step's Monte-Carlo return, grouped by step index).",
        choices=STEPWISE_MODES,
        label="rLLM mode",
        widget=W(
            "segmented",
            "rLLM stepwise mode",
            40,
            value_labels=(("per_step", "per step"),),
            width="stretch",
            compact=True,
        ),
        code="sm",
    )
    stepwise_gamma: float = option(
        0.95,
        "γ of rLLM's per-step Monte-Carlo returns (compute_mc_return default 0.95; the legacy engine passed 0.2).",
        within=UNIT,
        label="step γ",
        widget=W("slider", "Step γ (MC returns)", 41, step=0.01, when=("stepwise_mode == per_step",)),
        code="sg",
    )
    normalize_by_steps: bool = option(
        False,
        "rLLM broadcast: divide the trajectory's advantage by its number of steps.",
        label="÷ steps",
        widget=W("checkbox", "Normalize by steps", 42, when=("stepwise_mode == broadcast",)),
        code="nbs",
    )
    broadcast_group_key: str | None = convention(
        "rLLM broadcast grouping of last steps: prompt (legacy AgentPPOTrainer) or prompt_and_last_step (workflow "
        "trainer: uid = step id, so rollouts with different step counts split).",
        choices=("prompt", "prompt_and_last_step"),
        label="broadcast groups by",
    )
    broadcast_reward: str | None = convention(
        "Stepwise broadcast: the reward the last step is scored with — trajectory (Σ of every step's rewards, "
        "rLLM's trajectory reward) or last_step (the last step's own rewards only, verl v1 multi-row sessions).",
        choices=("trajectory", "last_step"),
        label="broadcast scores the last step with",
    )
    broadcast_read: str | None = convention(
        "Stepwise broadcast: how the last step's advantage becomes the scalar copied to earlier steps — mean over "
        "its masked tokens (rLLM) or its value at the first masked token (verl v1).",
        choices=("mean", "first"),
        label="broadcast reads",
    )
    rejection_sample: bool = option(
        False,
        "rLLM rejection sampling: drop groups that are all solved (scores ≥ 1) or all unsolved (scores ≤ 0) from "
        "the loss; statistics are always reported.",
        label="rejection sampling",
        code="rs",
    )
    mask_truncated_samples: bool = option(
        False,
        "rLLM: drop truncated trajectories from the batch (they leave the seq-mean row count too; TRL's "
        "mask_truncated_completions instead masks their tokens and keeps the rows).",
    )

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"CreditConfig.profile: {self.profile!r} is not one of {list(PROFILES)}")
        for name, value in PROFILES[self.profile].conventions.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        for name, rule in RULES.items():
            object.__setattr__(self, name, rule.coerce(getattr(self, name)))
        self._validate()

    def _validate(self) -> None:
        """Each field against its declaration (allowed values, range, shape), then ``rules.REFUSALS``: what the
        profile's trainer lacks, and fields that rule each other out."""
        for name, rule in RULES.items():
            rule.validate(getattr(self, name))
        rules.refuse(self)

    @property
    def trainer(self) -> Profile:
        """The profile: what its trainer has (``token_sum_supported``, …, ``group_sizes``) and its conventions."""
        return PROFILES[self.profile]

    def replace(self, **changes) -> CreditConfig:
        """A copy with ``changes``; conventions not named keep their resolved values unless the profile changes."""
        if "profile" in changes and changes["profile"] != self.profile:
            base = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
            for name in CONVENTIONS:
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
        """The scheme ``d`` describes (``to_dict``'s form). An older export also holds what the trainer has
        (``token_sum_supported``, …): accepted where it says what the profile says."""
        unknown = set(d) - set(FIELDS) - set(CAPABILITIES)
        if unknown:
            where = " ('device' is where to compute, not part of a scheme)" if "device" in unknown else ""
            raise ValueError(f"CreditConfig: unknown field(s) {sorted(unknown)}{where}")
        return cls(**d)


# ------------------------------------------------------------------------------------------------ derived
FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(CreditConfig)}
CONVENTIONS: tuple[str, ...] = tuple(n for n, f in FIELDS.items() if f.metadata.get("convention"))
FIELD_HELP: dict[str, str] = {n: f.metadata["help"] for n, f in FIELDS.items()}
HINTS: dict[str, str] = {n: str(f.type) for n, f in FIELDS.items()}  # annotations as written ('float | None')
RULES: dict[str, Rule] = rules_of(FIELDS)


def choices(name: str) -> tuple | None:
    """The values field ``name`` accepts (None: any value of its type)."""
    allowed = RULES[name].allowed()
    return None if allowed is None else tuple(allowed)


def bounds(name: str) -> tuple[float, float] | None:
    """The closed range numeric field ``name`` accepts (None: any finite number)."""
    return FIELDS[name].metadata["within"]


def label(name: str) -> str:
    """Field ``name`` in words, as the dashboard says it ("std normalisation"); the name itself by default."""
    return FIELDS[name].metadata["label"] or name


def _check_profiles() -> None:
    """Every profile sets exactly the conventions; none is also a field (what a trainer has is not a choice)."""
    for p in PROFILES.values():
        if set(p.conventions) != set(CONVENTIONS):
            raise TypeError(f"profile {p.name}: sets {sorted(p.conventions)}, the conventions are {CONVENTIONS}")
    if both := set(CAPABILITIES) & set(FIELDS):
        raise TypeError(f"CreditConfig: {sorted(both)} say what a trainer has (Profile), not a choice")


_check_profiles()
