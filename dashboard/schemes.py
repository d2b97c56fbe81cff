"""Credit schemes as short codes (for URLs and the compare page) and the named presets.

A code is the estimator, then ``key:value`` pairs for the sidebar fields that differ from ``CreditConfig()``'s
defaults, joined by commas: ``gae``, ``grpo,p:rllm,sm:broadcast``, ``gae,kl:1,b:0.01``; a field holding several
values joins them with ``/`` (``rrs:token_k1/seq_mean_k3,rrt:0.5_2/0.01``). Several schemes join with ``~``.
Conventions a profile fills (std ddof, hole handling, …) are not encoded: the profile names them.
"""

from __future__ import annotations

import dataclasses

from engine.config import FIELDS, CreditConfig
from engine.config import label as field_label
from engine.profiles import CAPABILITIES, PROFILES

# CreditConfig field → short key in a code: each field declared with a ``code`` (engine/config/scheme.py). These
# are the fields the sidebar and the compare page set. A code lists the fields that differ from the default in
# CODE_ORDER, the order of the codes already in use (links and saved codes keep reading the same); a field declared
# with a code later comes after them, in declaration order.
CODE_ORDER = (
    "profile", "placement", "use_kl_in_reward", "kl_penalty", "kl_coef", "gamma", "lam", "norm_adv_by_std_in_grpo",
    "grpo_std_scope", "whiten_std", "length_penalty", "policy_loss", "clip_ratio_low", "clip_ratio_high",
    "clip_ratio_c", "kl_cov_ratio", "ppo_kl_coef", "tau_pos", "tau_neg", "kl_tau", "policy_ratio_base", "rollout_is",
    "rollout_is_threshold", "rollout_rs", "rollout_rs_threshold", "stepwise_mode", "stepwise_gamma",
    "normalize_by_steps", "state_masking", "loss_agg_mode", "value_source", "rejection_sample",
)  # fmt: skip
_CODES = {n: f.metadata["code"] for n, f in FIELDS.items() if f.metadata.get("code")}
SHORT: dict[str, str] = {n: _CODES[n] for n in CODE_ORDER} | {n: c for n, c in _CODES.items() if n not in CODE_ORDER}
LONG = {v: k for k, v in SHORT.items()}
SEPARATOR = "~"

PRESETS: dict[str, str] = {
    "gae": "GAE (critic)",
    "grpo": "GRPO",
    "grpo,p:rllm,sm:broadcast": "GRPO · rLLM profile · rLLM broadcast",
    "grpo,p:rllm,sm:per_step": "GRPO · rLLM profile · rLLM per-step",
    "grpo,ns:0": "Dr.GRPO (no std)",
    "rloo": "RLOO",
    "reinforce_plus_plus": "REINFORCE++",
    "grpo_multiturn,p:kg-r1": "KG-R1 multi-turn GRPO",
    "gae,p:kg-r1": "GAE, KG-R1 (old verl)",
    "gae,kl:1,b:0.05": "GAE + in-reward KL",
    "grpo,p:rllm": "GRPO · rLLM profile (pop. std)",
    "grpo,p:trl": "GRPO · TRL profile (ε 1e-4, a lone row gets 0)",
    "grpo,p:trl,gs:batch": "GRPO · TRL scale_rewards=batch",
    "reinforce_plus_plus_baseline,p:openrlhf": "OpenRLHF reinforce_baseline",
    "grpo,p:openrlhf,kl:1,b:0.01": "OpenRLHF group_norm + in-reward KL",
}
# "auto": the sidebar's scheme varied one thing at a time (``dashboard.compare_model.auto_codes``), so that the
# default comparison follows the sidebar's profile and std convention. Travels in the URL as ``schemes=auto``.
AUTO = "auto"
AUTO_LABEL = "Sidebar scheme, one change at a time"
DEFAULT_COMPARE = (AUTO,)
_DEFAULT = CreditConfig()


TUPLE_JOIN = "/"


def _fmt(v) -> str:
    if isinstance(v, tuple):  # rollout_rs, rollout_rs_threshold, length_penalty
        return TUPLE_JOIN.join(_fmt(x) for x in v)
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


def _parse(field: str, text: str):
    default = getattr(_DEFAULT, field)
    if text == "-":  # None (value_source, rollout_is, clip_ratio_c: no dual clip, length_penalty: off)
        return None
    if field == "length_penalty":  # three weights
        return tuple(float(x) for x in text.split(TUPLE_JOIN))
    if default is None:  # value_source, rollout_is: "-" is None
        return None if text in ("-", "") else text
    if isinstance(default, tuple):
        return tuple(text.split(TUPLE_JOIN)) if text else ()
    if isinstance(default, bool):
        if text not in ("0", "1"):
            raise ValueError(f"scheme code: {SHORT[field]} takes 0 or 1, got {text!r}")
        return text == "1"
    if isinstance(default, float):
        return float(text)
    return text


def encode(cfg: CreditConfig) -> str:
    """The shortest code that ``decode`` turns back into ``cfg``'s sidebar fields."""
    parts = [cfg.estimator]
    for field, short in SHORT.items():
        v = getattr(cfg, field)
        if v != getattr(_DEFAULT, field):
            parts.append(f"{short}:{_fmt(v)}")
    return ",".join(parts)


def decode(code: str, base: CreditConfig | None = None) -> CreditConfig:
    """A ``CreditConfig`` from a code; fields not in the code come from ``base`` (default ``CreditConfig()``).
    Raises ``ValueError`` with the offending piece."""
    est, *pairs = [p for p in code.strip().split(",") if p]
    changes: dict = {"estimator": est}
    for pair in pairs:
        key, sep, val = pair.partition(":")
        if not sep or key not in LONG:
            raise ValueError(f"scheme code: unknown piece {pair!r}")
        changes[LONG[key]] = _parse(LONG[key], val)
    base = base or CreditConfig()
    profile = changes.pop("profile", "verl" if base is _DEFAULT else base.profile)
    return base.replace(profile=profile, **changes)


def encode_many(codes: list[str]) -> str:
    return SEPARATOR.join(codes)


def decode_many(text: str) -> list[str]:
    """Codes from a joined string; each one checked (invalid ones raise ``ValueError``)."""
    codes = [c for c in text.split(SEPARATOR) if c]
    for c in codes:
        if c != AUTO:
            decode(c)
    return codes


def label(code: str) -> str:
    """A preset's name, or the code in words (``GRPO · rLLM profile · no std · rLLM per-step``)."""
    if code == AUTO:
        return AUTO_LABEL
    if code in PRESETS:
        return PRESETS[code]
    try:
        return words(decode(code))
    except ValueError:
        return code.replace(",", " · ")


# ------------------------------------------------------------------------------------------------ words
PROFILE_WORDS = {p.name: f"{p.title} profile" for p in PROFILES.values()}
MODE_WORDS = {"trajectory": "trajectory", "broadcast": "broadcast", "per_step": "per-step"}
VALUE_WORDS = {
    None: "critic",
    "critic": "critic",
    "zeros": "values = zeros, no critic",
    "group_mean": "values = group mean, no critic",
}


def uses_values(estimator: str) -> bool:
    """The estimator reads critic values (or their stand-in, ``value_source``): the registry's ``requires``."""
    from engine import get_estimator

    return "values" in get_estimator(estimator).requires


def estimator_words(cfg: CreditConfig) -> str:
    """The estimator in words, with what a value-based one really used: "GAE (critic)", "GAE (values = zeros, no
    critic)"."""
    from engine import get_estimator

    est = cfg.estimator
    spec = get_estimator(est)
    name = spec.short
    if "values" in spec.requires:
        name += f" ({VALUE_WORDS.get(cfg.value_source, cfg.value_source)})"
    return name


def _piece(field: str, v) -> str:
    """One sidebar field's value in words (for labels)."""
    return {
        "profile": lambda: PROFILE_WORDS.get(v, f"{v} profile"),
        "placement": lambda: f"placement {v}",
        "use_kl_in_reward": lambda: "in-reward KL" if v else "no in-reward KL",
        "kl_penalty": lambda: f"KL estimator {v}",
        "kl_coef": lambda: f"β = {v:g}",
        "gamma": lambda: f"γ = {v:g}",
        "lam": lambda: f"λ = {v:g}",
        "norm_adv_by_std_in_grpo": lambda: "÷ group std" if v else "no std",
        "grpo_std_scope": lambda: "std over the batch" if v == "batch" else "std over the group",
        "whiten_std": lambda: "whitening ÷ std" if v else "whitening centres only",
        "length_penalty": lambda: "no length penalty" if v is None else f"length penalty {_fmt(v)}",
        "policy_loss": lambda: f"{v} policy loss",
        "clip_ratio_low": lambda: f"ε_low = {v:g}",
        "clip_ratio_high": lambda: f"ε_high = {v:g}",
        "clip_ratio_c": lambda: "no dual clip" if v is None else f"dual clip c = {v:g}",
        "kl_cov_ratio": lambda: f"KL-Cov share {v:g}",
        "ppo_kl_coef": lambda: f"KL-Cov coefficient {v:g}",
        "policy_ratio_base": lambda: "bypass (ratio against the rollout)" if v == "rollout" else "decoupled ratio",
        "rollout_is": lambda: f"rollout IS {v}" if v else "no rollout IS",
        "rollout_is_threshold": lambda: f"IS threshold {v}",
        "rollout_rs": lambda: f"rollout rejection {', '.join(v)}" if v else "no rollout rejection",
        "rollout_rs_threshold": lambda: f"rejection threshold {', '.join(v)}" if v else "no rejection threshold",
        "stepwise_mode": lambda: f"rLLM {MODE_WORDS.get(v, v)}",
        "stepwise_gamma": lambda: f"step γ = {v:g}",
        "normalize_by_steps": lambda: "÷ steps" if v else "not ÷ steps",
        "state_masking": lambda: "tool tokens masked" if v else "tool tokens trained (no state masking)",
        "loss_agg_mode": lambda: f"loss {v}",
        "rejection_sample": lambda: "rejection sampling" if v else "no rejection sampling",
    }.get(field, lambda: f"{field} = {v}")()


def words(cfg: CreditConfig) -> str:
    """A scheme in words: the estimator (and its values), then each sidebar field that differs from the default
    scheme, e.g. ``GRPO · rLLM profile · no std · rLLM per-step``."""
    parts = [estimator_words(cfg)]
    for field in SHORT:
        if field == "value_source":
            continue  # said with the estimator, where it matters
        v = getattr(cfg, field)
        if field == "kl_penalty" and not cfg.use_kl_in_reward or field == "kl_coef" and not cfg.use_kl_in_reward:
            continue
        if v != getattr(_DEFAULT, field):
            parts.append(_piece(field, v))
    return " · ".join(parts)


# Effective (profile-filled) conventions that ``differences`` names when the profile changes, with their values
# in words where the value alone says too little (the field's name in words: ``engine.config.label``).
CONVENTION_WORDS = {
    "std_ddof": {0: "population (ddof 0)", 1: "unbiased (ddof 1)"},
    "turn_score_reduce": {"sum": "Σ step rewards", "mean": "mean turn reward"},
    "broadcast_reward": {},
    "broadcast_read": {"mean": "mean over the last step", "first": "its first token"},
    "broadcast_group_key": {},
    "advantage_mask": {},
    "gae_skip_holes": {True: "yes", False: "no"},
    "gae_value_mask": {},
    "rfpp_baseline_scope": {},
    "reinforce_hole_mode": {},
    "grpo_var_floor": {},
    "epsilon": {},
    "grpo_singleton": {"raw": "raw score", "zero": "0", "nan": "NaN"},
    "rloo_singleton": {"raw": "raw score", "zero": "0", "nan": "NaN"},
    "outcome_tokens": {"broadcast": "broadcast on the mask", "reward_to_go": "reward-to-go from the last token"},
    "whitening": {"verl": "verl (unbiased, re-masked)", "openrlhf": "OpenRLHF (biased, not re-masked)"},
    "kl_clamp": {"k3": "k3 only", "all": "every estimator", "none": "none"},
    "maxrl_form": {"skyrl": "÷ (μ + ε)", "prime_rl": "÷ μ, 0 when μ ≤ 0"},
    "zero_advantage_tokens": {"kept": "kept", "dropped": "dropped from the loss"},
    "gdpo_whiten": {"token": "over tokens", "row": "over rows"},
    "gspo_gradient": {"own_token": "each token's own", "row": "spread over the row"},
    "cispo_clip": {"one_plus": "clip(ρ, 1 − ε_low, 1 + ε_high)", "epsilon_high": "min(ρ, ε_high)"},
    "dual_clip_form": {
        "min_loss": "min(−A·c, loss), half at ρ = c",
        "ratio_cap": "min(ρ, c), whole at ρ = c",
        "none": "none (clip_ratio_c not read)",
    },
    "log_ratio_clamp": {"20": "±20", "10": "±10", "none": "none"},
    "dppo_ratio": {"ratio": "−A·ρ", "truncated": "−A·min(ρ, c), detached"},
    "seq_mean_losses": {(): "none", ("sapo",): "SAPO", ("gspo",): "GSPO", ("gspo", "sapo"): "GSPO, SAPO"},
    "rejected_tokens_counted": {True: "still counted", False: "out of the counts"},
    "rollout_rs_masks_advantages": {True: "before the advantages", False: "in the loss only"},
    "reduction_on_advantages": {True: "yes (kl_cov's picks and penalty see it)", False: "no (the loss is aggregated)"},
    "kl_loss_agg": {
        "loss": "with the loss (loss_agg_mode)",
        "seq-mean-token-mean": "per row, mean over rows",
        "token-mean": "token mean over the batch",
    },
    "seq_mean_rows": {"nonempty": "those with a loss token", "all": "all"},
    "global_exclude_prefixes": {(): "none", ("_",): "'_' keys", ("_raw_",): "'_raw_' keys"},
}
# What the profiles' trainers have (``engine.profiles.CAPABILITIES``, named by their label), that ``differences``
# names after the conventions when the profile changes, with their values in words.
CAPABILITY_WORDS = {
    "token_sum_supported": {True: "exists", False: "does not exist"},
    "seq_mean_supported": {True: "exist", False: "do not exist"},
    "prompt_mean_supported": {True: "exists", False: "does not exist"},
    "sequence_is_supported": {True: "exist", False: "do not exist"},
    "kl_plus_variants": {True: "accepted", False: "refused"},
    "group_sizes": {"any": "any", "equal": "equal only"},
}
# The fields ``differences`` names one by one, in this order (the rest: "also <field>, …").
DIFF_FIELDS = (
    "estimator",
    "profile",
    "stepwise_mode",
    "norm_adv_by_std_in_grpo",
    "grpo_std_scope",
    "whiten_std",
    "stepwise_gamma",
    "placement",
    "use_kl_in_reward",
    "kl_coef",
    "kl_penalty",
    "gamma",
    "lam",
    "normalize_by_steps",
    "state_masking",
    "loss_agg_mode",
    "rejection_sample",
)


def _val(field: str, v) -> str:
    if field == "stepwise_mode":
        return MODE_WORDS.get(v, str(v))
    if field == "norm_adv_by_std_in_grpo":
        return "on" if v else "off"
    if field == "profile":
        return PROFILE_WORDS.get(v, str(v)).removesuffix(" profile")
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _convention(cfg: CreditConfig, field: str):
    value = getattr(cfg, field)
    return CONVENTION_WORDS[field].get(value, value)


def _profile_changes(a: CreditConfig, b: CreditConfig) -> list[str]:
    """The conventions, then what the trainer has, that differ from ``a`` to ``b``, in words."""
    conv = [
        f"{field_label(f)} {_convention(a, f)} → {_convention(b, f)}"
        for f in CONVENTION_WORDS
        if getattr(a, f) != getattr(b, f)
    ]
    for name, words in CAPABILITY_WORDS.items():
        va, vb = getattr(a.trainer, name), getattr(b.trainer, name)
        if va != vb:
            conv.append(f"{CAPABILITIES[name]['label']} {words.get(va, va)} → {words.get(vb, vb)}")
    return conv


def differences(a: CreditConfig, b: CreditConfig) -> str:
    """What differs from scheme ``a`` to scheme ``b``, in words, on their effective fields (profile conventions
    filled): "rLLM mode: broadcast → per-step"; "same scheme" when nothing does. A profile change names the
    conventions it changes in brackets."""
    if a == b:
        return "same scheme"
    parts = []
    if a.estimator != b.estimator or (uses_values(a.estimator) and a.value_source != b.value_source):
        parts.append(f"estimator: {estimator_words(a)} → {estimator_words(b)}")
    for field in DIFF_FIELDS:
        if field == "estimator":
            continue
        va, vb = getattr(a, field), getattr(b, field)
        if va == vb:
            continue
        if field in ("kl_coef", "kl_penalty") and not (a.use_kl_in_reward or b.use_kl_in_reward):
            continue
        text = f"{field_label(field)}: {_val(field, va)} → {_val(field, vb)}"
        if field == "profile":
            conv = _profile_changes(a, b)
            if conv:
                text += f" ({'; '.join(conv)})"
        parts.append(text)
    rest = sorted(
        f.name
        for f in dataclasses.fields(CreditConfig)
        if f.compare
        and f.name not in DIFF_FIELDS
        and (f.name not in CONVENTION_WORDS or a.profile == b.profile)
        and f.name != "value_source"
        and getattr(a, f.name) != getattr(b, f.name)
    )
    if rest:
        parts.append("also " + ", ".join(rest))
    return "; ".join(parts) if parts else "same scheme"
