"""The policy losses: one signature, one registry (as verl's ``register_policy_loss``;
docs/conventions/policy-stage.md §14).

Every loss is ``fn(inp: LossInput, cfg: CreditConfig) -> PolicyGradient``: per token, the derivative of its token loss
with respect to log π, g_t = ∂loss_t/∂log π_t, before the aggregation weights and the IS weights (unless it says it
aggregated them itself), and where it cut the policy gradient. ``engine.policy.policy_gradient`` calls the one
``cfg.policy_loss`` names, then adds what every loss shares (TRL's off-policy mask, the KL terms). ρ_t = π_θ/π_old.

Each registration carries what the rest of the project shows about the loss: its label, LaTeX formula, the
``CreditConfig`` fields it reads (the sidebar shows their widgets), the trainer code it reproduces and the golden
files that check it (the README's loss table, the Learn page). Registering a name twice or asking for an unknown
name raises ``ValueError``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.rollout_correction import SAFETY


@dataclass(frozen=True)
class LossInput:
    """What a policy loss reads, [B, T] each: log_prob (log π_θ, the policy being trained), old_log_prob (log
    π_old, the ratio's base), advantages (A, already × ``adv_tau``), mask (the loss mask, rejection applied),
    is_weights (the rollout-correction weights, None without), agg (the aggregation weights, None where the caller
    has none: the losses that aggregate themselves refuse that)."""

    log_prob: torch.Tensor
    old_log_prob: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    is_weights: torch.Tensor | None = None
    agg: torch.Tensor | None = None

    @property
    def log_ratio(self) -> torch.Tensor:
        return self.log_prob - self.old_log_prob

    def needs_agg(self, name: str) -> torch.Tensor:
        if self.agg is None:
            raise ValueError(f"policy loss {name!r} needs the aggregation weights")
        return self.agg


@dataclass(frozen=True)
class PolicyGradient:
    """ratio [B, T]: the ratio the loss clips (GSPO: the row's sequence ratio); clipped [B, T] bool: the policy
    gradient is cut at this token; grad [B, T]: ∂loss_t/∂log π_t before aggregation and IS weights (geo_mean:
    after, its own row mean); aggregated: whether ``grad`` already holds the aggregation; penalty [B, T]: the
    penalty terms' gradient, aggregated with the loss; kl [B, T]: the KL loss term's gradient, aggregated already:
    with its own weights on its own mask (``kl_loss_agg`` other than ``"loss"``), or with the loss's weights where
    the row's sequence ratio couples its tokens (``engine.policy.kl_ratio_level``)."""

    ratio: torch.Tensor
    clipped: torch.Tensor
    grad: torch.Tensor
    aggregated: bool = False
    penalty: torch.Tensor | None = None
    kl: torch.Tensor | None = None

    def weighted(self, agg: torch.Tensor, is_weights: torch.Tensor | None) -> torch.Tensor:
        """∂L/∂log π per token from the loss: the policy gradient times the aggregation and the IS weights (unless
        aggregated already), plus the penalty terms' gradient (``penalty``: KL terms, outside the IS weights) times
        the aggregation. Without ``kl``, which ``total`` adds."""
        grad = self.grad if self.aggregated else self.grad * agg * (is_weights if is_weights is not None else 1.0)
        return grad if self.penalty is None else grad + self.penalty * agg

    def total(self, agg: torch.Tensor, is_weights: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """∂L/∂log π per token [B, T]: ``weighted`` on ``mask`` (0 elsewhere), plus ``kl`` where it is set (its own
        mask: a token rollout rejection took out of ``mask`` keeps it)."""
        grad = torch.where(mask.bool(), self.weighted(agg, is_weights), 0.0)
        return grad if self.kl is None else grad + self.kl


LossFn = Callable[[LossInput, object], PolicyGradient]


@dataclass(frozen=True)
class PolicyLoss:
    """A registered policy loss. label: its name in words; formula: LaTeX of g_t (or of the loss); reads: the
    ``CreditConfig`` fields it reads beyond A and the log-probs; reference: the trainer code it reproduces;
    checked_by: the golden files whose cases exercise it (a test derives the same list from the cases);
    kl_ratio: the ratio TRL's ratio-weighted KL uses with it ("token", "sequence", or None: no trainer defines
    one); unit_at_ratio_one: whether, at ratio 1 and without IS weights, g_t = −A_t exactly (a function of the
    config where an option decides)."""

    name: str
    label: str
    formula: str
    reads: tuple[str, ...]
    reference: str
    fn: LossFn
    checked_by: tuple[str, ...]
    kl_ratio: str | None
    unit_at_ratio_one: bool | Callable[[object], bool]

    @property
    def code(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__name__}"

    @property
    def summary(self) -> str:
        """What it computes: its function's docstring, first paragraph (the sidebar's help, the Learn page)."""
        return inspect.getdoc(self.fn).split("\n\n")[0]

    def is_unit_at_ratio_one(self, cfg) -> bool:
        unit = self.unit_at_ratio_one
        return unit(cfg) if callable(unit) else unit


POLICY_LOSS_REGISTRY: dict[str, PolicyLoss] = {}
KL_RATIOS = ("token", "sequence", None)


def register_policy_loss(
    name: str,
    *,
    label: str,
    formula: str,
    reads: tuple[str, ...],
    reference: str,
    checked_by: tuple[str, ...],
    kl_ratio: str | None = "token",
    unit_at_ratio_one: bool | Callable[[object], bool] = False,
) -> Callable[[LossFn], LossFn]:
    """Decorator: add ``fn`` to ``POLICY_LOSS_REGISTRY`` under ``name`` (see ``PolicyLoss``); a second registration
    of the name or an unknown ``kl_ratio`` raise."""
    if kl_ratio not in KL_RATIOS:
        raise ValueError(f"policy loss {name!r}: kl_ratio {kl_ratio!r} is not one of {list(KL_RATIOS)}")

    def deco(fn: LossFn) -> LossFn:
        if name in POLICY_LOSS_REGISTRY and POLICY_LOSS_REGISTRY[name].fn is not fn:
            raise ValueError(f"policy loss {name!r} is already registered")
        POLICY_LOSS_REGISTRY[name] = PolicyLoss(
            name, label, formula, tuple(reads), reference, fn, tuple(checked_by), kl_ratio, unit_at_ratio_one
        )
        return fn

    return deco


def get_policy_loss(name: str) -> PolicyLoss:
    if name not in POLICY_LOSS_REGISTRY:
        raise ValueError(f"policy_loss {name!r} is not one of {list(POLICY_LOSS_REGISTRY)}")
    return POLICY_LOSS_REGISTRY[name]


def list_policy_losses() -> list[PolicyLoss]:
    """Every registered policy loss, in registration order (the sidebar, the README and the Learn page list them)."""
    return list(POLICY_LOSS_REGISTRY.values())


def policy_loss_table() -> str:
    """The README's policy-loss table (Markdown), made from the registry: a test keeps the README equal to it.
    Each row links its code and the test modules that read its ``checked_by`` golden files (``engine.doclinks``)."""
    from engine.doclinks import code_link, golden_modules, tests_links

    rows = [
        "| name | label | g = ∂loss/∂log π | reads | reference | code | tests |",
        "|---|---|---|---|---|---|---|",
    ]
    for loss in list_policy_losses():
        reads = ", ".join(f"`{f}`" for f in loss.reads) or "–"
        tests = tests_links(golden_modules(loss.checked_by))
        cells = (f"`{loss.name}`", loss.label, f"${loss.formula}$", reads, loss.reference, code_link(loss.fn), tests)
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------ shared pieces
def _ratio(inp: LossInput, cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """(ρ = exp(clamp(log ρ, ±b)), inside = |log ρ| ≤ b), b = ``log_ratio_clamp``: verl's SAFETY_BOUND (20), KG-R1's
    10; no gradient through ρ beyond b (the clamp passes it at b itself). TRL, prime-rl and Search-R1 have none
    ("none": ρ = exp(log ρ), inside everywhere)."""
    log_ratio = inp.log_ratio
    if cfg.log_ratio_clamp == "none":
        return torch.exp(log_ratio), torch.ones_like(log_ratio, dtype=torch.bool)
    bound = float(cfg.log_ratio_clamp)
    return torch.exp(log_ratio.clamp(-bound, bound)), log_ratio.abs() <= bound


def _clip_bounds(cfg) -> tuple[float, float, float]:
    """(ε_low, ε_high, c): the clip range and the dual-clip constant (∞ without one: ``clip_ratio_c`` None, or a
    trainer whose loss has no dual clip, ``dual_clip_form="none"``)."""
    dual = cfg.clip_ratio_c is not None and cfg.dual_clip_form != "none"
    return cfg.clip_ratio_low, cfg.clip_ratio_high, cfg.clip_ratio_c if dual else math.inf


def _shared(ratio, share, A) -> PolicyGradient:
    """g = −A·ρ·share (``_clip_share``); cut where the share is 0 and A ≠ 0."""
    return PolicyGradient(ratio, (share == 0) & (A != 0), torch.where(share > 0, -A * ratio * share, 0.0))


def _clip_share(A, ratio, passes, lo, hi, c, form) -> torch.Tensor:
    """The share w of −A·ρ's gradient a PPO-clipped token keeps (0, ½ or 1; ¼ where two ties coincide): autograd's
    derivative of the loss max(−A·ρ₁, −A·clip(ρ, 1 − ε_low, 1 + ε_high)) and, under ``form="min_loss"`` with A < 0,
    of min(−A·c, that loss), the dual clip a constant branch (verl, SkyRL, OpenRLHF); under ``form="ratio_cap"``
    ρ₁ = min(ρ, c) (TRL's two-sided δ, either sign of A), else ρ₁ = ρ (c = ∞: no dual clip). ``passes`` [B, T] bool:
    where ρ itself carries its gradient (the clamp on log ρ, ``log_ratio_clamp``; GSPO's cap at e¹⁰). A clamp passes
    the gradient at its bounds; torch.maximum and torch.minimum give each of two equal values half of it, so where
    the compared values are exactly equal (ρ on a bound, or A·ρ and A·bound rounding to the same float) the token
    gets the mean of the two branches' shares: ½ at ρ = c under min_loss, whole at ρ = 1 + ε_high (both branches
    pass there)."""
    f = passes.to(ratio.dtype)
    r1, f1 = ratio, f
    if math.isfinite(c) and form == "ratio_cap":
        r1, f1 = ratio.clamp(max=c), f * (ratio <= c)
    pg1, pg2 = -A * r1, -A * ratio.clamp(1 - lo, 1 + hi)
    f2 = f * ((ratio >= 1 - lo) & (ratio <= 1 + hi))
    share = torch.where(pg1 > pg2, f1, torch.where(pg2 > pg1, f2, 0.5 * (f1 + f2)))
    if math.isfinite(c) and form == "min_loss":
        pg3 = torch.where(A < 0, -A * c, math.inf)  # the dual clip's branch, a constant
        loss = torch.maximum(pg1, pg2)
        share = torch.where(loss < pg3, share, torch.where(loss == pg3, 0.5 * share, 0.0))
    return share


CLIP = ("clip_ratio_low", "clip_ratio_high")
VERL_LOSS = "verl 0.9.1 core_algos"


# ------------------------------------------------------------------------------------------------ the losses
@register_policy_loss(
    "vanilla",
    label="PPO clip (clip-higher, dual clip)",
    formula=r"g_t = -A_t\rho_t\,\mathbb{1}[A_t>0,\ \rho_t\le 1+\epsilon_h \;\lor\; A_t<0,\ 1-\epsilon_l\le\rho_t\le c]",
    reads=(*CLIP, "clip_ratio_c", "dual_clip_form", "log_ratio_clamp"),
    reference=f"{VERL_LOSS}.compute_policy_loss_vanilla; OpenRLHF PolicyLoss ppo; TRL grpo/bnpo/dr_grpo/dapo; "
    "SkyRL regular, dual_clip; Search-R1 a14dc3a and KG-R1 7538a53 core_algos.compute_policy_loss (Schulman et al. "
    "2017; Ye et al. 2020 dual clip; DAPO clip-higher)",
    checked_by=(
        "kgr1_policy_loss.json",
        "openrlhf_policy_loss.json",
        "openrlhf_policy_ties.json",
        "searchr1_policy_loss.json",
        "skyrl_policy_loss.json",
        "skyrl_policy_ties.json",
        "trl_policy_loss.json",
        "trl_policy_sequence.json",
        "trl_policy_ties.json",
        "verl_policy_loss.json",
        "verl_policy_loss_vanilla.json",
        "verl_policy_ties.json",
    ),
    unit_at_ratio_one=True,
)
def vanilla_loss(inp: LossInput, cfg) -> PolicyGradient:
    """PPO's clipped surrogate: the unclipped term is the one taken (its gradient −A·ρ) where A > 0 and
    ρ ≤ 1 + ε_high, or A < 0 and 1 − ε_low ≤ ρ ≤ c (dual clip; none under ``dual_clip_form="none"``, Search-R1);
    elsewhere the clipped term, a constant; ρ = exp(log ρ clamped to ±``log_ratio_clamp``), nothing past the clamp.
    Where the two values a trainer's max or min compares are exactly equal, autograd gives each half
    (``_clip_share``): −A·ρ/2 at ρ = c with A < 0 (``dual_clip_form="min_loss"``), and past 1 + ε_high where A·ρ and
    A·(1 + ε_high) round alike."""
    A = inp.advantages
    lo, hi, c = _clip_bounds(cfg)
    ratio, inside = _ratio(inp, cfg)
    return _shared(ratio, _clip_share(A, ratio, inside, lo, hi, c, cfg.dual_clip_form), A)


@register_policy_loss(
    "gspo",
    label="GSPO (sequence ratio)",
    formula=r"g_t = -A_t s_i\,\mathbb{1}[\text{unclipped}],\quad "
    r"s_i = \exp\big(\tfrac{1}{n_i}\textstyle\sum_t m_t\log\rho_t\big)",
    reads=(*CLIP, "clip_ratio_c", "gspo_gradient", "dual_clip_form"),
    reference=f"{VERL_LOSS}.compute_policy_loss_gspo; OpenRLHF gspo; TRL importance_sampling_level='sequence'; "
    "SkyRL gspo (Zheng et al. 2025)",
    checked_by=(
        "openrlhf_policy_loss.json",
        "openrlhf_policy_ties.json",
        "skyrl_policy_loss.json",
        "skyrl_policy_ties.json",
        "trl_policy_loss.json",
        "trl_policy_sequence.json",
        "trl_policy_ties.json",
        "verl_policy_loss.json",
        "verl_policy_ties.json",
    ),
    kl_ratio="sequence",
    unit_at_ratio_one=True,
)
def gspo_loss(inp: LossInput, cfg) -> PolicyGradient:
    """GSPO: the ratio is the row's s_i = exp(mean_t log ρ_t). ``gspo_gradient="own_token"`` (verl, SkyRL): s_i
    capped at e¹⁰ (the cap passing the gradient at 10 itself), clipped without dual clip, each token's own log-prob
    carries −A·s_i; ``"row"`` (OpenRLHF, TRL): uncapped and differentiated through the row (``_gspo_row``)."""
    if cfg.gspo_gradient == "row":
        return _gspo_row(inp, cfg)
    A, mask = inp.advantages, inp.mask
    lo, hi, _ = _clip_bounds(cfg)
    n = mask.sum(-1).clamp(min=1)
    seq = (inp.log_ratio * mask).sum(-1) / n
    ratio = torch.exp(seq.clamp(max=10.0))[:, None].expand_as(A)
    # clamp(max=10) passes the gradient at 10 itself; no dual clip in verl's or SkyRL's GSPO
    share = _clip_share(A, ratio, (seq <= 10.0)[:, None], lo, hi, math.inf, cfg.dual_clip_form)
    return _shared(ratio, share, A)


def _gspo_row(inp: LossInput, cfg) -> PolicyGradient:
    """GSPO with the sequence ratio s_i = exp(Σ_t m·log ρ_t / max(n_i, 1)) differentiated as a function of the
    row (OpenRLHF, TRL importance_sampling_level="sequence"): uncapped, clipped per token like PPO (``_clip_share``:
    the dual clip as ``dual_clip_form`` says), and the row's aggregated policy gradient Σ_t a_t·w_t·(−A_t·s_i)·share_t
    reaches every token of the row as that sum / n_i."""
    agg = inp.needs_agg("gspo (gspo_gradient='row')")
    A, mask = inp.advantages, inp.mask
    lo, hi, c = _clip_bounds(cfg)
    n = mask.sum(-1).clamp(min=1)
    s = torch.exp((inp.log_ratio * mask).sum(-1) / n)[:, None].expand_as(A)
    share = _clip_share(A, s, torch.ones_like(A, dtype=torch.bool), lo, hi, c, cfg.dual_clip_form)
    g = torch.where((share > 0) & (A != 0), -A * s * share, 0.0) * agg * mask  # s may overflow where clipped
    if inp.is_weights is not None:
        g = g * inp.is_weights
    grad = (g.sum(-1) / n)[:, None] * mask
    return PolicyGradient(s, (share == 0) & (A != 0), grad, aggregated=True)


def _cispo_unit(cfg) -> bool:
    return cfg.cispo_clip == "one_plus" or cfg.clip_ratio_high >= 1.0  # min(1, ε_high) = 1


@register_policy_loss(
    "cispo",
    label="CISPO (clipped IS weight)",
    formula=r"g_t = -\operatorname{sg}\big(\operatorname{clip}(\rho_t, 1-\epsilon_l, 1+\epsilon_h)\big)\,A_t",
    reads=(*CLIP, "cispo_clip", "log_ratio_clamp"),
    reference=f"{VERL_LOSS}.compute_policy_loss_cispo; TRL cispo (min(ρ, ε_high)); SkyRL cispo, "
    "importance_sampling (MiniMax-M1, 2025)",
    checked_by=("skyrl_policy_loss.json", "trl_policy_loss.json", "verl_policy_loss.json", "verl_policy_ties.json"),
    unit_at_ratio_one=_cispo_unit,
)
def cispo_loss(inp: LossInput, cfg) -> PolicyGradient:
    """CISPO: the clipped ratio is a constant weight, so no token loses its gradient; ``cispo_clip="epsilon_high"``
    (TRL) caps it at ε_high itself, no lower bound."""
    lo, hi, _ = _clip_bounds(cfg)
    ratio, _ = _ratio(inp, cfg)
    if cfg.cispo_clip == "epsilon_high":
        clipped_ratio = ratio.clamp(max=hi)
    else:
        clipped_ratio = ratio.clamp(1 - lo, 1 + hi)
    return PolicyGradient(ratio, clipped_ratio != ratio, -clipped_ratio * inp.advantages)


@register_policy_loss(
    "sapo",
    label="SAPO (soft gate)",
    formula=r"g_t = -4A_t\,\sigma(x_t)\big(1-\sigma(x_t)\big)\rho_t,\quad x_t = \tau(\rho_t - 1)",
    reads=("tau_pos", "tau_neg", "log_ratio_clamp"),
    reference=f"{VERL_LOSS}.compute_policy_loss_sapo; TRL sapo; SkyRL sapo (Qwen, 2025)",
    checked_by=("verl_policy_loss.json", "trl_policy_loss.json", "skyrl_policy_loss.json"),
)
def sapo_loss(inp: LossInput, cfg) -> PolicyGradient:
    """SAPO: a sigmoid gate instead of a hard clip, τ = τ_pos where A > 0, else τ_neg; nothing is cut."""
    A = inp.advantages
    ratio, inside = _ratio(inp, cfg)
    tau = torch.where(A > 0, cfg.tau_pos, cfg.tau_neg)
    sig = torch.sigmoid(tau * (ratio - 1.0))
    return PolicyGradient(ratio, torch.zeros_like(inside), -4.0 * A * sig * (1 - sig) * ratio * inside)


@register_policy_loss(
    "geo_mean",
    label="GMPO (geometric-mean ratio)",
    formula=r"g_t = -\frac{\bar A_i R_i W_i}{(n_i + 10^{-8})\,B}\,\mathbb{1}[\log\rho_t \text{ unclipped}]",
    reads=CLIP,
    reference=f"{VERL_LOSS}.compute_policy_loss_geo_mean (Zhao et al. 2025, GMPO)",
    checked_by=("verl_policy_loss.json", "verl_policy_ties.json"),
    kl_ratio=None,
)
def geo_mean_loss(inp: LossInput, cfg) -> PolicyGradient:
    """GMPO: the row's geometric-mean ratio R_i of log-ratios clipped in log space to [−ε_low, ε_high], times the
    row's mean advantage Ā_i (and W_i, the geometric mean of the IS weights), averaged over rows: aggregated here."""
    A, mask, log_ratio = inp.advantages, inp.mask, inp.log_ratio
    lo, hi, _ = _clip_bounds(cfg)
    sgn = torch.sign(A)
    unclipped = ((sgn > 0) & (log_ratio <= hi)) | ((sgn < 0) & (log_ratio >= -lo))
    lr = torch.where(unclipped, log_ratio, torch.where(sgn > 0, hi, torch.where(sgn < 0, -lo, 0.0)))
    n = mask.sum(-1) + 1e-8
    R = torch.exp((lr * mask).sum(-1) / n)
    abar = (A * mask).sum(-1) / n
    W = torch.ones_like(R)
    if inp.is_weights is not None:
        W = torch.exp((torch.log(inp.is_weights + 1e-10) * mask).sum(-1) / n)
    grad = -(abar * R * W / n)[:, None] * mask * unclipped / A.shape[0]
    ratio = R[:, None].expand_as(A)
    return PolicyGradient(ratio, ~unclipped & (sgn != 0), grad, aggregated=True)


@register_policy_loss(
    "gpg",
    label="GPG (no ratio)",
    formula=r"g_t = -A_t",
    reads=(),
    reference=f"{VERL_LOSS}.compute_policy_loss_gpg (Chu et al. 2025); verl bypass mode reinforce",
    checked_by=("verl_policy_loss.json",),
    unit_at_ratio_one=True,
)
def gpg_loss(inp: LossInput, cfg) -> PolicyGradient:
    """GPG: −A·log π, no ratio, nothing cut."""
    A = inp.advantages
    return PolicyGradient(torch.ones_like(A), torch.zeros_like(A, dtype=torch.bool), -A)


def _trust_region(inp: LossInput, lo: float, hi: float, loss: str) -> torch.Tensor:
    """Where DPPO / IPO keep a token's policy gradient: the divergence between π_θ and π_old on the sampled token,
    Δp = π_θ − π_old, within the trust region (the mask is not differentiated).

    dppo_tv (DPPO-Binary-TV; prime-rl default_loss_fn, SkyRL binary_tv): drop A > 0 with Δp > ε_high and A < 0
    with −Δp > ε_low. dppo_kl (SkyRL binary_kl): drop A > 0, Δp > 0 and A < 0, Δp < 0 whose binary KL
    μ·log(μ/p) + (1 − μ)·log((1 − μ + 1e-8)/(1 − p + 1e-8)) exceeds ε_high / ε_low. ipo (prime-rl): drop
    |Δp| > ε_high whatever the sign of A."""
    A, log_prob, old_log_prob = inp.advantages, inp.log_prob, inp.old_log_prob
    p, mu = log_prob.exp(), old_log_prob.exp()
    dp = p - mu
    if loss == "ipo":
        return dp.abs() <= hi
    if loss == "dppo_tv":
        return ~(((A > 0) & (dp > hi)) | ((A < 0) & (-dp > lo)))
    eps = 1e-8
    bkl = mu * (old_log_prob - log_prob) + (1 - mu) * torch.log((1 - mu + eps) / (1 - p + eps))
    return ~(((A > 0) & (dp > 0) & (bkl > hi)) | ((A < 0) & (dp < 0) & (bkl > lo)))


def _trust_region_loss(name: str) -> LossFn:
    def loss(inp: LossInput, cfg) -> PolicyGradient:
        ratio, inside = _ratio(inp, cfg)
        trusted = _trust_region(inp, cfg.clip_ratio_low, cfg.clip_ratio_high, name)
        if cfg.dppo_ratio == "truncated":  # verl: −A·sg(min(ρ, c))·log π: the weight, not ρ, carries no gradient
            c = cfg.clip_ratio_c if cfg.clip_ratio_c is not None else math.inf
            A = inp.advantages
            return PolicyGradient(ratio, ~trusted & (A != 0), torch.where(trusted, -A * ratio.clamp(max=c), 0.0))
        return _shared(ratio, (trusted & inside).to(ratio.dtype), inp.advantages)

    loss.__name__ = f"{name}_loss"
    loss.__qualname__ = loss.__name__
    loss.__doc__ = (
        f"{name}: g = −A·ρ where the sampled token's probability stayed in the trust region (``_trust_region``), "
        "else 0; under ``dppo_ratio='truncated'`` (verl) g = −A·min(ρ, clip_ratio_c), the truncated ratio a "
        "detached weight on log π."
    )
    return loss


DPPO_REFERENCE = (
    "prime-rl 559b4477 loss.py default_loss_fn; SkyRL dppo binary_tv; verl 0.9.1 "
    "core_algos.compute_policy_loss_dppo_tv (Li et al. 2025, DPPO)"
)
dppo_tv_loss = register_policy_loss(
    "dppo_tv",
    label="DPPO binary TV",
    formula=r"g_t = -A_t\rho_t\,\mathbb{1}[\neg(A_t>0 \land \Delta p_t>\epsilon_h) "
    r"\land \neg(A_t<0 \land -\Delta p_t>\epsilon_l)]",
    reads=(*CLIP, "kl_tau", "dppo_ratio", "clip_ratio_c", "log_ratio_clamp"),
    reference=DPPO_REFERENCE,
    checked_by=(
        "primerl_policy_loss.json",
        "primerl_policy_ties.json",
        "skyrl_policy_loss.json",
        "skyrl_policy_ties.json",
        "verl_policy_ties.json",
    ),
)(_trust_region_loss("dppo_tv"))
dppo_kl_loss = register_policy_loss(
    "dppo_kl",
    label="DPPO binary KL",
    formula=r"g_t = -A_t\rho_t\,\mathbb{1}[\text{binary KL of } (\pi_{old}, \pi_\theta) \text{ within } \epsilon]",
    reads=(*CLIP, "kl_tau", "dppo_ratio", "clip_ratio_c", "log_ratio_clamp"),
    reference="SkyRL 0.3.0 ppo_utils dppo binary_kl; verl 0.9.1 core_algos.compute_policy_loss_dppo_kl (Li et al. "
    "2025, DPPO)",
    checked_by=("skyrl_policy_loss.json",),
)(_trust_region_loss("dppo_kl"))
ipo_loss = register_policy_loss(
    "ipo",
    label="IPO (prime-rl)",
    formula=r"g_t = -A_t\rho_t\,\mathbb{1}[\lvert\Delta p_t\rvert \le \epsilon_h]",
    reads=("clip_ratio_high", "kl_tau", "dppo_ratio", "clip_ratio_c", "log_ratio_clamp"),
    reference="prime-rl 559b4477 loss.py ipo_loss_fn",
    checked_by=("primerl_policy_loss.json", "primerl_policy_ties.json"),
)(_trust_region_loss("ipo"))


@register_policy_loss(
    "masked_is",
    label="masked IS (SkyRL rollout_is)",
    formula=r"g_t = -A_t\,\operatorname{sg}(\rho_t)\,\mathbb{1}[1-\epsilon_l < \rho_t < 1+\epsilon_h]",
    reads=(*CLIP, "log_ratio_clamp"),
    reference="SkyRL 0.3.0 ppo_utils rollout_is",
    checked_by=("skyrl_policy_loss.json", "skyrl_policy_ties.json"),
)
def masked_is_loss(inp: LossInput, cfg) -> PolicyGradient:
    """SkyRL's rollout_is: the ratio as a detached weight, 0 outside the open band (1 − ε_low, 1 + ε_high)."""
    lo, hi, _ = _clip_bounds(cfg)
    ratio, _ = _ratio(inp, cfg)
    inside_band = (ratio > 1 - lo) & (ratio < 1 + hi)
    return PolicyGradient(ratio, ~inside_band, torch.where(inside_band, -inp.advantages * ratio, 0.0))


@register_policy_loss(
    "vespo",
    label="VESPO (gamma weight)",
    formula=r"g_t = -\operatorname{sg}(\varphi_i)A_t,\quad \varphi(w) = e^{\lambda}w^{k}e^{-\lambda w}",
    reads=("vespo_params", "rollout_is"),
    reference="TRL 1.16.0 GRPOTrainer.get_gamma_weights, loss_type='vespo'",
    checked_by=("trl_policy_loss.json", "trl_policy_sequence.json"),
)
def vespo_loss(inp: LossInput, cfg) -> PolicyGradient:
    """TRL's VESPO: −sg(φ_i)·A·log π with the row's gamma weight φ(w) = e^λ·w^k·e^{−λw}, w = the row's product
    ratio Σ_t clamp(log ρ_t, ±20) (plus the log of the IS weight, clamped to [log 1e-8, 20]: the IS weight enters
    w, not the loss; summed over the row's tokens for token-level IS, counted once for a sequence-level weight, as
    ``get_gamma_weights`` sums a [B, 1] ratio), log w clamped to [log 1e-8, 20]; (k, λ) = (k_pos, λ_pos) where
    A ≥ 0, else (k_neg, λ_neg). Aggregated here."""
    agg = inp.needs_agg("vespo")
    A, mask = inp.advantages, inp.mask
    k_pos, lam_pos, k_neg, lam_neg = cfg.vespo_params
    floor = math.log(1e-8)
    log_w = (inp.log_ratio.clamp(-SAFETY, SAFETY) * mask).sum(-1, keepdim=True)
    if inp.is_weights is not None:
        log_is = torch.log(inp.is_weights).clamp(floor, SAFETY)
        if cfg.rollout_is == "sequence":  # one weight per row, broadcast over its tokens: its log once (0 if empty)
            top = log_is.masked_fill(~mask.bool(), -torch.inf).amax(-1, keepdim=True)
            log_w = log_w + torch.where(torch.isinf(top), 0.0, top)
        else:
            log_w = log_w + (log_is * mask).sum(-1, keepdim=True)
    log_w = log_w.clamp(floor, SAFETY)
    nonneg = A >= 0
    k = torch.where(nonneg, k_pos, k_neg)
    lam = torch.where(nonneg, lam_pos, lam_neg).clamp(min=1e-4)
    phi = torch.exp(lam + k * log_w - lam * log_w.exp()).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    w = log_w.exp().expand_as(A)
    return PolicyGradient(w, torch.zeros_like(A, dtype=torch.bool), -phi * A * agg, aggregated=True)


def kl_cov_tokens(advantages: torch.Tensor, log_prob: torch.Tensor, mask: torch.Tensor, ratio: float) -> torch.Tensor:
    """[B, T] bool: the k = max(1, ⌊n·``ratio``⌋) tokens of ``mask`` (n of them) with the largest covariance term
    (A_t − Ā)(log π_t − mean log π), both means over those n tokens; none when n = 0. As verl's and SkyRL's
    ``compute_policy_loss_kl_cov``: the tokens flattened row-major, their means and ``torch.topk`` on the CPU, so
    that rounding and ties fall as there."""
    valid = mask > 0  # (B, T)
    picked = torch.zeros(valid.numel(), dtype=torch.bool)
    index = torch.nonzero(valid.reshape(-1).cpu(), as_tuple=True)[0]
    if index.numel():
        a = advantages[valid].detach().reshape(-1).cpu()
        lp = log_prob[valid].detach().reshape(-1).cpu()
        cov = (a - a.mean()) * (lp - lp.mean())
        k = max(1, int(len(cov) * ratio))
        picked[index[torch.topk(cov, k, largest=True).indices]] = True
    return picked.view(valid.shape).to(valid.device)


@register_policy_loss(
    "kl_cov",
    label="KL-Cov",
    formula=r"g_t = -A_t\rho_t + \beta_{kl}\operatorname{sign}(\log\rho_t)\,\mathbb{1}[t \in \text{top-}k\ \text{cov}]",
    reads=("kl_cov_ratio", "ppo_kl_coef", "reduction_on_advantages"),
    reference=f"{VERL_LOSS}.compute_policy_loss_kl_cov; SkyRL kl_cov (Cui et al. 2025, The Entropy Mechanism of RL "
    "for Reasoning LMs)",
    checked_by=("verl_policy_loss.json", "skyrl_policy_loss.json"),
    unit_at_ratio_one=True,
)
def kl_cov_loss(inp: LossInput, cfg) -> PolicyGradient:
    """KL-Cov: the loss −A·ρ + ``ppo_kl_coef``·|log ρ|·1[token picked by ``kl_cov_tokens``], ρ = exp(log ρ) not
    clamped; ∂/∂log π = −A·ρ + ``ppo_kl_coef``·sign(log ρ) on the picked tokens (0 at ρ = 1, torch's ``abs``, so
    it is unit at ratio 1 whichever tokens it picks). verl picks by the covariance of A and aggregates both terms
    (IS weights included); SkyRL (``reduction_on_advantages``) hands the loss the advantage already scaled by the
    reduction, Â = a·A: it picks by the covariance of Â and sums the loss, so the penalty is outside the
    aggregation (the gradient comes back aggregated)."""
    A, mask, log_ratio = inp.advantages, inp.mask, inp.log_ratio
    ratio = torch.exp(log_ratio)
    no_clip = torch.zeros_like(mask, dtype=torch.bool)
    if cfg.reduction_on_advantages:
        scaled = A * inp.needs_agg("kl_cov (reduction_on_advantages)")
        picked = kl_cov_tokens(scaled, inp.log_prob, mask, cfg.kl_cov_ratio)
        grad = -scaled * ratio + cfg.ppo_kl_coef * torch.sign(log_ratio) * picked
        return PolicyGradient(ratio, no_clip, grad, aggregated=True)
    picked = kl_cov_tokens(A, inp.log_prob, mask, cfg.kl_cov_ratio)
    return PolicyGradient(ratio, no_clip, -A * ratio + cfg.ppo_kl_coef * torch.sign(log_ratio) * picked)


POLICY_LOSSES = tuple(POLICY_LOSS_REGISTRY)
