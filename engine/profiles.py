"""Profiles: each reference trainer's conventions, and what the trainer has, one declared table.

A ``Profile`` sets every convention field of ``CreditConfig`` (the fields declared with ``convention(...)`` in
``engine.config``) to the value its trainer, at the named commit, hard-codes; ``CreditConfig(profile=...)`` fills
each convention left unset from it. It also says what that trainer *has* (``token_sum_supported``, …,
``group_sizes``): typed attributes, not fields of a scheme, since a user cannot give a trainer a loss mode it lacks;
a scheme that asks for one is refused, naming the profile (``engine.config.rules``). Profiles derive from ``VERL``
by naming what differs, so the table reads as the references' differences (docs/conventions/README.md §8 prints it cell
by cell; a test keeps the two equal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


def capability(help: str, label: str, *, choices: tuple = (True, False)):
    """Declare what a trainer has: a ``Profile`` attribute (no default: every profile says it), its help, the
    ``label`` that names it in words ("token-sum") and the values it takes."""
    return field(kw_only=True, metadata=dict(help=help, label=label, choices=choices))


@dataclass(frozen=True)
class Profile:
    """One reference trainer: the value of every ``convention`` field of ``CreditConfig``, and what it has.

    ``title`` names it in words ("KG-R1" profile), ``source`` is the repository and commit it reproduces, ``summary``
    what sets it apart; ``help`` joins the two for the dashboard. The attributes after ``conventions`` are what the
    trainer has (``CAPABILITIES``): a scheme cannot change them."""

    name: str
    title: str
    source: str
    summary: str
    conventions: Mapping[str, object]
    # ---- what the trainer has (not a choice: CreditConfig refuses a scheme that needs what its profile lacks)
    token_sum_supported: bool = capability(
        "Whether loss_agg_mode='token-sum' exists (added to verl in 2026-08; older verl raised ValueError for it).",
        "token-sum",
    )
    seq_mean_supported: bool = capability(
        "Whether the seq-mean loss modes exist (verl's agg_loss and the others). Search-R1 a14dc3a has no "
        "loss_agg_mode: its compute_policy_loss is a token mean (masked_mean over the response mask).",
        "seq-mean modes",
    )
    prompt_mean_supported: bool = capability(
        "Whether loss_agg_mode='prompt-mean-token-mean' exists: a token mean within each prompt group, then the "
        "mean over the batch's groups (SkyRL's loss_reduction='prompt_mean'; the other trainers have no such mode).",
        "prompt-mean-token-mean",
    )
    sequence_is_supported: bool = capability(
        "Whether rollout_is='sequence' exists: one IS weight per sequence, the product of its tokens' ratios (verl, "
        "TRL). OpenRLHF has none: its is_correction_level='seq' only gates whole rows by their geometric-mean ratio "
        "(rollout_rs seq_mean_k1, or seq_mean_bkl/tv) and weighs each token by its own ratio, and it refuses "
        "is_correction_mode='clip' at that level.",
        "sequence IS weights",
    )
    kl_plus_variants: bool = capability(
        "Whether the KL estimators 'k1+', 'low_var_kl+', … exist (verl ≥ PR #6058); older verl raised "
        "NotImplementedError for them when computing, so a scheme naming one fails there, not when it is made.",
        "'+' KL estimators",
    )
    group_sizes: str = capability(
        "Prompt groups of any size (verl and the others), or equal ones only (OpenRLHF reshapes the rewards to "
        "(-1, n_samples_per_prompt): a batch whose groups differ in size cannot come from it, and is refused "
        "when computed).",
        "group sizes",
        choices=("any", "equal"),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "conventions", MappingProxyType(dict(self.conventions)))
        for name, declared in CAPABILITIES.items():
            value, allowed = getattr(self, name), declared["choices"]
            if type(value) is not type(allowed[0]) or value not in allowed:
                raise ValueError(f"Profile {self.name!r}: {name}={value!r} is not one of {list(allowed)}")

    @property
    def help(self) -> str:
        return f"{self.source}: {self.summary}"

    @property
    def capabilities(self) -> dict[str, object]:
        """What the trainer has: {``CAPABILITIES`` name: value}."""
        return {name: getattr(self, name) for name in CAPABILITIES}

    def lacks(self) -> tuple[str, ...]:
        """What the trainer lacks, in words ("no token-sum", "group sizes: equal only"); () when nothing."""
        out = []
        for name, declared in CAPABILITIES.items():
            value = getattr(self, name)
            if value is False:
                out.append(f"no {declared['label']}")
            elif value is not True and value != declared["choices"][0]:
                out.append(f"{declared['label']}: {value} only")
        return tuple(out)

    def derive(self, name: str, title: str, source: str, summary: str, **changes) -> Profile:
        """A profile with this one's conventions and capabilities except ``changes``."""
        unknown = set(changes) - set(self.conventions) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"Profile {name!r}: {sorted(unknown)} are not conventions nor what a trainer has")
        has = {k: v for k, v in changes.items() if k in CAPABILITIES}
        conventions = {**self.conventions, **{k: v for k, v in changes.items() if k not in CAPABILITIES}}
        return dataclasses.replace(
            self, name=name, title=title, source=source, summary=summary, conventions=conventions, **has
        )


# What a trainer has: Profile attribute → its declaration (help, label, choices), in declaration order.
CAPABILITIES: dict[str, Mapping] = {f.name: f.metadata for f in dataclasses.fields(Profile) if "label" in f.metadata}


VERL = Profile(
    "verl",
    "verl",
    "verl-project/verl 1dda039b (2026-08)",
    "hole-skipping GAE, REINFORCE++ carries returns through holes; v1 multi-row sessions broadcast the final "
    "row's GRPO advantage.",
    dict(
        advantage_mask="action",
        gae_skip_holes=True,
        gae_value_mask="none",
        reinforce_hole_mode="carry",
        std_ddof=1,
        grpo_var_floor=0.0,
        epsilon=1e-6,
        grpo_singleton="raw",
        rloo_singleton="raw",
        outcome_tokens="broadcast",
        whitening="verl",
        kl_clamp="k3",
        maxrl_form="skyrl",
        zero_advantage_tokens="kept",
        gdpo_whiten="token",
        rfpp_baseline_scope="token",
        sum_norm_divides_by_seqs=True,
        # ppo_loss sets global_batch_size = ppo_mini_batch_size × rollout.n (every row; ray_trainer._update_actor)
        seq_mean_rows="all",
        otb_handle_zero_tail=True,
        global_exclude_prefixes=("_",),
        turn_score_reduce="mean",
        broadcast_group_key="prompt",
        broadcast_reward="last_step",
        broadcast_read="first",
        gspo_gradient="own_token",
        cispo_clip="one_plus",
        dual_clip_form="min_loss",
        log_ratio_clamp="20",
        dppo_ratio="truncated",
        rejected_tokens_counted=False,
        # RayPPOTrainer.fit: compute_rollout_correction_and_add_to_batch replaces response_mask before compute_advantage
        rollout_rs_masks_advantages=True,
        reduction_on_advantages=False,
        seq_mean_losses=("sapo",),
        kl_loss_agg="loss",
    ),
    token_sum_supported=True,
    seq_mean_supported=True,
    prompt_mean_supported=False,  # SkyRL's prompt_mean
    sequence_is_supported=True,
    kl_plus_variants=True,
    group_sizes="any",
)
# Search-R1 and KG-R1 vendor an old verl: no '+' KL variants, old sum-norm, no token-sum, no hole skipping.
_OLD_VERL = dict(
    advantage_mask="attention",
    gae_skip_holes=False,
    kl_plus_variants=False,
    sum_norm_divides_by_seqs=False,
    token_sum_supported=False,
    otb_handle_zero_tail=False,
    seq_mean_rows="all",  # KG-R1's agg_loss: torch.mean over the rows (Search-R1 has token-mean only)
)
# rLLM: trajectory reward = Σ step rewards; the broadcast scalar is the mean over the last step's tokens.
# rLLM pins verl 0.7.1, whose default (legacy) actor calls agg_loss without global_batch_size: non-empty rows.
# Its trainers call no rollout rejection before the advantages (the unified one computes IS weights only).
_RLLM = dict(
    turn_score_reduce="sum",
    broadcast_reward="trajectory",
    broadcast_read="mean",
    seq_mean_rows="nonempty",
    rollout_rs_masks_advantages=False,
)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        VERL,
        VERL.derive(
            "verl-legacy",
            "legacy verl",
            "volcengine/verl b178a3c (2026-01)",
            "REINFORCE++ resets at holes, old sum-norm, no token-sum, var floor, no k1+, OTB without zero-tail "
            "handling.",
            reinforce_hole_mode="reset",
            grpo_var_floor=1e-6,
            kl_plus_variants=False,
            sum_norm_divides_by_seqs=False,
            token_sum_supported=False,
            otb_handle_zero_tail=False,
            seq_mean_rows="nonempty",  # the legacy dp_actor calls agg_loss without global_batch_size
        ),
        VERL.derive(
            "search-r1",
            "Search-R1",
            "Search-R1 a14dc3a",
            "advantages over the attention mask (info tokens included), GAE without hole skipping, last token "
            "bootstraps from the first padding value; the policy loss is a token mean (no loss_agg_mode), PPO's "
            "clip without dual clip or clamp on log ρ.",
            **_OLD_VERL,
            gae_value_mask="attention_shifted",
            seq_mean_supported=False,
            # core_algos.compute_policy_loss: ratio = exp(log_prob - old_log_prob), max of the two PPO branches only
            dual_clip_form="none",
            log_ratio_clamp="none",
        ),
        VERL.derive(
            "kg-r1",
            "KG-R1",
            "KG-R1 7538a53",
            "old-verl GAE over the attention mask, '_otc_scaling_factor'/'_kg_turns_used' leak into the global "
            "reward, mean turn reward; the policy loss clamps log ρ at ±10.",
            **_OLD_VERL,
            gae_value_mask="attention",
            global_exclude_prefixes=("_raw_",),
            log_ratio_clamp="10",  # core_algos.compute_policy_loss: torch.clamp(log ρ, min=-10, max=10) before exp
        ),
        # rLLM's unified trainer: rLLM-native estimators on trajectory rewards, per TrajectoryGroup (task).
        VERL.derive(
            "rllm",
            "rLLM",
            "rLLM 9beb6e0 unified trainer",
            "rLLM-native estimators (population std, RF++-baseline over centred trajectory rewards), one scalar "
            "per trajectory grouped by task, trajectory reward = Σ step rewards.",
            **_RLLM,
            std_ddof=0,
            rfpp_baseline_scope="trajectory_popstd",
        ),
        # rLLM's AgentWorkflowPPOTrainer: verl's estimators; uid = step id, so broadcast groups split by last step.
        VERL.derive(
            "rllm-workflow",
            "rLLM workflow",
            "rLLM 9beb6e0 AgentWorkflowPPOTrainer",
            "verl's estimators (unbiased std); stepwise broadcast grouped by (task, last-step index) because uid = "
            "step id, so rollouts of different lengths split.",
            **_RLLM,
            broadcast_group_key="prompt_and_last_step",
        ),
        # rLLM's legacy AgentPPOTrainer: verl's estimators; broadcast groups are the prompt uid.
        VERL.derive(
            "rllm-legacy",
            "rLLM legacy",
            "rLLM 7982c508 AgentPPOTrainer",
            "verl's estimators; stepwise broadcast grouped by the prompt uid, per-step groups = k-th steps of a "
            "prompt's rollouts (its engine passed stepwise_gamma = 0.2).",
            **_RLLM,
        ),
        # SkyRL's ppo_utils: verl's GRPO; RLOO gives a singleton 0; REINFORCE++ and GAE predate verl's hole handling;
        # the loss reduction scales the advantages, and the policy loss is a sum.
        VERL.derive(
            "skyrl",
            "SkyRL",
            "NovaSky-AI/SkyRL skyrl 0.3.0 ppo_utils",
            "verl's GRPO; RLOO gives a singleton 0 (as rloo_vectorized); REINFORCE++ resets its return at every "
            "hole and GAE runs over holes (older verl); adds MaxRL (÷ group mean); the loss reduction (prompt_mean "
            "too) scales the advantages; the worker's KL loss is a token mean per row, averaged over the rows.",
            rloo_singleton="zero",
            reinforce_hole_mode="reset",
            gae_skip_holes=False,
            seq_mean_rows="all",
            rejected_tokens_counted=True,
            seq_mean_losses=(),
            rollout_rs_masks_advantages=False,
            prompt_mean_supported=True,
            reduction_on_advantages=True,
            kl_loss_agg="seq-mean-token-mean",
            dppo_ratio="ratio",  # ppo_utils dppo: −A·ρ on the kept tokens, ρ = exp(clamp(log ρ, ±20))
        ),
        # TRL's GRPOTrainer: GRPO on the weighted sum of its reward functions; the loss_type sets the aggregation.
        VERL.derive(
            "trl",
            "TRL",
            "huggingface/trl 1.16.0 GRPOTrainer",
            "GRPO with ε = 1e-4 (scale_rewards group / batch / none); every reward column counts; a group left "
            "with one scorable row gets 0; loss_type grpo and dr_grpo average over every row, fully masked ones "
            "included; normalize_then_sum is GDPO whitened over rows; the two-sided delta caps the ratio (its "
            "gradient passes whole at ρ = δ).",
            epsilon=1e-4,
            grpo_singleton="zero",
            seq_mean_rows="all",
            global_exclude_prefixes=(),
            gdpo_whiten="row",
            gspo_gradient="row",
            cispo_clip="epsilon_high",
            dual_clip_form="ratio_cap",
            log_ratio_clamp="none",  # GRPOTrainer._compute_loss: coef_1 = exp(log_importance_weights), no clamp
            dppo_ratio="ratio",
            rollout_rs_masks_advantages=False,
            kl_clamp="none",
        ),
        # OpenRLHF's experience maker: baseline the scalar reward, then per-token KL, then cumulative returns.
        VERL.derive(
            "openrlhf",
            "OpenRLHF",
            "OpenRLHF/OpenRLHF openrlhf 0.11.2 experience_maker",
            "group baseline on the reward before KL, then the reward-to-go of the centred reward and −β·KL (γ "
            "once per column, holes included); whitening with the biased variance, nothing re-masked; GAE values "
            "on the action mask, no hole skipping; ε = 1e-9; a group of one gives NaN; every KL estimator "
            "clamped to ±10, the actor's KL loss a token mean over the batch; groups must be equal in size.",
            outcome_tokens="reward_to_go",
            whitening="openrlhf",
            reinforce_hole_mode="positional",
            gae_skip_holes=False,
            gae_value_mask="action",
            epsilon=1e-9,
            grpo_singleton="nan",
            rloo_singleton="nan",
            kl_clamp="all",
            kl_plus_variants=False,
            # ppo_actor.training_step: aggregate_loss(kl, action_mask, **loss_batch_info), token mode always
            kl_loss_agg="token-mean",
            group_sizes="equal",
            gspo_gradient="row",
            rejected_tokens_counted=True,
            seq_mean_losses=("gspo",),
            rollout_rs_masks_advantages=False,
            seq_mean_rows="nonempty",
            sequence_is_supported=False,
        ),
        # prime-rl's orchestrator: r − group mean (no std), MaxRL ÷ the mean, zero-advantage tokens pruned.
        VERL.derive(
            "prime-rl",
            "prime-rl",
            "PrimeIntellect-ai/prime-rl 559b4477 orchestrator",
            "GRPO without the std (r − group mean), a group of one gets 0; MaxRL (r − μ)/μ, 0 when μ ≤ 0; tokens "
            "whose advantage is exactly 0 leave the loss and its token count (filter_zero_advantages).",
            grpo_singleton="zero",
            maxrl_form="prime_rl",
            zero_advantage_tokens="dropped",
            seq_mean_rows="nonempty",
            rollout_rs_masks_advantages=False,
            log_ratio_clamp="none",  # loss.py: log_ratio = trainer − inference, ratio = exp(log_ratio), no clamp
            dppo_ratio="ratio",
        ),
    )
}


# prime-rl's algo.type → the CreditConfig fields that compute its advantage under profile="prime-rl"
# (docs/conventions/prime-rl.md §13). hierarchical_grpo is GRPO whose groups are (agent, episode) keys: the loader's
# group ids must say so.
PRIME_RL_ALGORITHMS: dict[str, dict[str, object]] = {
    "grpo": {"estimator": "grpo", "norm_adv_by_std_in_grpo": False},
    "max_rl": {"estimator": "maxrl"},
    "hierarchical_grpo": {"estimator": "grpo", "norm_adv_by_std_in_grpo": False},
}


# prime-rl's LinearLengthPenaltyConfig: its weights, in CreditConfig.length_penalty's order, and their defaults.
PRIME_RL_LENGTH_PENALTY = {"num_output_tokens_weight": 0.25, "num_input_tokens_weight": 0.1, "num_turns_weight": 0.1}


def prime_rl_algorithm(name: str, length_penalty: Mapping[str, object] | None = None) -> dict[str, object]:
    """The ``CreditConfig`` fields for prime-rl's ``algo.type`` ``name``; use with ``profile="prime-rl"``.

    ``length_penalty``: grpo's ``[orchestrator.algo.length_penalty]`` table (``type = "linear"``, the three weights;
    a weight left out takes prime-rl's default), or None (off, prime-rl's default)."""
    if name not in PRIME_RL_ALGORITHMS:
        raise ValueError(f"prime-rl algo.type {name!r} is not one of {list(PRIME_RL_ALGORITHMS)}")
    fields = dict(PRIME_RL_ALGORITHMS[name])
    if length_penalty is None:
        return fields
    if name != "grpo":
        raise ValueError(f"prime-rl's length_penalty belongs to algo.type 'grpo', not {name!r}")
    table = dict(length_penalty)
    if table.pop("type", "linear") != "linear":
        raise ValueError(f"prime-rl length_penalty type {length_penalty['type']!r}: only 'linear' exists")
    if unknown := set(table) - set(PRIME_RL_LENGTH_PENALTY):
        raise ValueError(f"prime-rl length_penalty: unknown field(s) {sorted(unknown)}")
    weights = PRIME_RL_LENGTH_PENALTY | table
    return fields | {"length_penalty": tuple(weights[k] for k in PRIME_RL_LENGTH_PENALTY)}


# OpenRLHF's --advantage_estimator → the CreditConfig fields that compute it under profile="openrlhf"
# (docs/conventions/openrlhf.md §12). OpenRLHF forces γ = 1 for every estimator but reinforce and gae.
OPENRLHF_ESTIMATORS: dict[str, dict[str, object]] = {
    "gae": {"estimator": "gae"},
    "reinforce": {"estimator": "reinforce_plus_plus"},
    "rloo": {"estimator": "rloo"},
    "reinforce_baseline": {"estimator": "reinforce_plus_plus_baseline"},
    "group_norm": {"estimator": "grpo"},
    "dr_grpo": {"estimator": "grpo", "norm_adv_by_std_in_grpo": False},
    "flash_reinforce": {"estimator": "flash_reinforce"},
}


def openrlhf_estimator(name: str) -> dict[str, object]:
    """The ``CreditConfig`` fields for OpenRLHF's ``advantage_estimator`` ``name``; use with
    ``profile="openrlhf"``."""
    if name not in OPENRLHF_ESTIMATORS:
        raise ValueError(f"OpenRLHF advantage_estimator {name!r} is not one of {list(OPENRLHF_ESTIMATORS)}")
    return dict(OPENRLHF_ESTIMATORS[name])


# TRL's GRPOConfig.loss_type → the CreditConfig aggregation that weighs each token as TRL's loss does (one process,
# no gradient accumulation; docs/conventions/trl.md §10). dr_grpo divides by max_completion_length, others: nothing.
TRL_LOSS_AGG = {
    "grpo": "seq-mean-token-mean",
    "sapo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "dapo": "token-mean",
    "cispo": "token-mean",
    "vespo": "token-mean",
    "luspo": "seq-mean-token-sum",
}


def trl_aggregation(
    multi_objective_aggregation: str, reward_funcs: tuple[str, ...], reward_weights: tuple[float, ...] | None = None
) -> dict[str, object]:
    """The ``CreditConfig`` fields for TRL's ``multi_objective_aggregation`` over the reward functions
    ``reward_funcs`` (the run's global reward components) with ``reward_weights`` (default 1 each): sum_then_normalize
    is GRPO on the weighted sum, normalize_then_sum is GDPO, its final normalisation over rows under ``trl``."""
    weights = tuple(reward_weights) if reward_weights is not None else (1.0,) * len(reward_funcs)
    if len(weights) != len(reward_funcs):
        raise ValueError(f"TRL reward_weights: {len(weights)} weights for {len(reward_funcs)} reward functions")
    if multi_objective_aggregation == "sum_then_normalize":
        return {"estimator": "grpo", "global_weights": tuple(zip(reward_funcs, weights, strict=True))}
    if multi_objective_aggregation == "normalize_then_sum":
        return {"estimator": "gdpo", "gdpo_reward_keys": tuple(reward_funcs), "gdpo_reward_weights": weights}
    raise ValueError(
        f"TRL multi_objective_aggregation {multi_objective_aggregation!r} is not 'sum_then_normalize' or "
        "'normalize_then_sum'"
    )


def trl_loss_agg(loss_type: str, max_completion_length: int | None = None) -> dict[str, object]:
    """The ``CreditConfig`` fields (``loss_agg_mode``, ``loss_scale_factor``) for TRL's ``loss_type``; dr_grpo needs
    ``max_completion_length``. Use with ``profile="trl"``, whose seq-mean modes count every row as TRL does."""
    if loss_type not in TRL_LOSS_AGG:
        raise ValueError(f"TRL loss_type {loss_type!r} is not one of {list(TRL_LOSS_AGG)}")
    fields: dict[str, object] = {"loss_agg_mode": TRL_LOSS_AGG[loss_type]}
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("TRL loss_type 'dr_grpo' divides by max_completion_length: give it")
        fields["loss_scale_factor"] = float(max_completion_length)
    return fields


def profile_table() -> str:
    """The README's profile table: each profile, what it reproduces, what its trainer lacks, where it is declared
    and the golden tests made from its trainer (``engine.doclinks``)."""
    from engine.doclinks import golden_modules, profile_golden_files, tests_links

    rows = ["| profile | what it reproduces | what its trainer lacks | code | tests |", "|---|---|---|---|---|"]
    for p in PROFILES.values():
        links = f"[`PROFILES`](engine/profiles.py) | {tests_links(golden_modules(profile_golden_files(p.source)))}"
        rows.append(f"| `{p.name}` | {p.help} | {', '.join(p.lacks()) or '–'} | {links} |")
    return "\n".join(rows)
