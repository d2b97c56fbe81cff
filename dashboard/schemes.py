"""Credit schemes as short codes (for URLs and the compare page) and the named presets.

A code is the estimator, then ``key:value`` pairs for the sidebar fields that differ from ``CreditConfig()``'s
defaults, joined by commas: ``gae``, ``grpo,p:rllm,sm:broadcast``, ``gae,kl:1,b:0.01``. Several schemes join
with ``~``. Conventions a profile fills (std ddof, hole handling, …) are not encoded: the profile names them.
"""

from __future__ import annotations

from engine.config import CreditConfig

# CreditConfig field → short key in a code. These are the fields the sidebar and the compare page set.
SHORT: dict[str, str] = {
    "profile": "p",
    "placement": "pl",
    "use_kl_in_reward": "kl",
    "kl_penalty": "kp",
    "kl_coef": "b",
    "gamma": "g",
    "lam": "l",
    "norm_adv_by_std_in_grpo": "ns",
    "stepwise_mode": "sm",
    "stepwise_gamma": "sg",
    "normalize_by_steps": "nbs",
    "state_masking": "ms",
    "loss_agg_mode": "agg",
    "value_source": "vs",
    "rejection_sample": "rs",
}
LONG = {v: k for k, v in SHORT.items()}
SEPARATOR = "~"

PRESETS: dict[str, str] = {
    "gae": "GAE (critic)",
    "grpo": "GRPO",
    "grpo,p:rllm,sm:broadcast": "rLLM broadcast",
    "grpo,p:rllm,sm:per_step": "rLLM per-step",
    "grpo,ns:0": "Dr.GRPO (no std)",
    "rloo": "RLOO",
    "reinforce_plus_plus": "REINFORCE++",
    "grpo_multiturn,p:kg-r1": "KG-R1 multi-turn GRPO",
    "gae,p:kg-r1": "GAE, KG-R1 (old verl)",
    "gae,kl:1,b:0.05": "GAE + in-reward KL",
    "grpo,p:rllm": "GRPO, rLLM (pop. std)",
}
DEFAULT_COMPARE = ("gae", "grpo", "grpo,p:rllm,sm:broadcast", "grpo,p:rllm,sm:per_step")
_DEFAULT = CreditConfig()


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


def _parse(field: str, text: str):
    default = getattr(_DEFAULT, field)
    if field == "value_source":
        return None if text in ("-", "") else text
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
        decode(c)
    return codes


def label(code: str) -> str:
    """A preset's name, or the code made readable (``grpo · p:rllm``)."""
    return PRESETS.get(code, code.replace(",", " · "))
