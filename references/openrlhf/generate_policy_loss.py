"""Golden data from OpenRLHF's policy loss, called unmodified.

Run in the separate environment made by `bash references/setup_env.sh openrlhf` (CreditLens itself never imports
openrlhf):

    .venv-references-openrlhf/bin/python references/openrlhf/generate_policy_loss.py

Writes tests/golden/openrlhf_policy_loss.json. Running it again with the pinned versions reproduces the committed
file byte for byte (`--check` compares instead of writing).

What runs is the actor's loss step as PolicyActor builds and calls it (openrlhf/trainer/ray/ppo_actor.py):

1. `PolicyLoss(clip_eps_low=args.actor.eps_clip_low_high[0], clip_eps_high=...[1], dual_clip=args.actor.dual_clip,
   token_level_loss=args.actor.loss_agg_mode == "token-mean", policy_loss_type=args.actor.policy_loss_type,
   is_correction_level=..., is_correction_mode=..., is_correction_gating=..., is_correction_threshold=...)`
   (openrlhf/models/loss.py), with the threshold as the CLI leaves it (a single HIGH becomes [0.0, HIGH]);
2. the loss normalisers of the non-dynamic-batch path: `iter_grad_accum_global_norm(micro_batches, strategy,
   accumulated_gradient, lambda e: e.action_mask)` (openrlhf/utils/loss_utils.py), here one micro-batch holding the
   whole batch, one optimizer step (gas 1), no process group: {dp_size: 1, batch_num_tokens, global_batch_size};
3. `actor_loss, clip_ratio, ppo_kl, vllm_kl, is_filter_ratio = PolicyLoss(...)(action_log_probs,
   old_action_log_probs, advantages, action_mask=experience.action_mask, rollout_log_probs=
   experience.rollout_log_probs, **loss_batch_info)` as training_step calls it; action_log_probs is a leaf with
   requires_grad and the gradient of actor_loss with respect to it is recorded;
4. the KL-to-reference loss of the cases with params.kl (`--algo.kl.use_loss` with `--algo.kl.init_coef` > 0),
   restated from training_step (trainer/ray/ppo_actor.py:318-338) around OpenRLHF's own functions:
   `kl = compute_approx_kl(action_log_probs, base_action_log_probs, log_probs_old=old_action_log_probs,
   kl_estimator=args.algo.kl.estimator, unbiased_gradient=args.algo.kl.unbiased_gradient)` (models/utils.py),
   `kl_loss = aggregate_loss(kl, experience.action_mask, **loss_batch_info)` (models/loss.py: loss_batch_info
   carries no token_level_loss, so the KL term is always the token mean over the step's action tokens, whatever
   loss_agg_mode says and before any is_correction mask), and `loss = actor_loss + kl_loss * kl_ctl` with kl_ctl =
   the KL controller's value, init_kl_coef at the first step (FixedKLController; AdaptiveKLController starts there
   too). The gradient is that of the whole loss.

The rollout log-probs are passed only when is_correction_level is not "off" (the trainer asks vLLM for them only
then; otherwise experience.rollout_log_probs is None). The inputs are the verl policy-loss cases' (same fixtures,
same seeds and recipe as references/verl/generate.py; checked against tests/golden/verl_policy_loss.json), so every
case lines up with verl cases on the same numbers.

Heavy imports the loss never reaches are stubbed (STUBS, also written to the file), as in generate.py: deepspeed and
the `openrlhf.models` package __init__ (a bare package over the installed directory, so models/loss.py and
models/utils.py load from the installed files unmodified).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
import types
from pathlib import Path

import openrlhf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)

OUT_FILE = "openrlhf_policy_loss.json"
OPENRLHF_VERSION = "0.11.2"
TORCH_VERSION = "2.13.0+cpu"
ROOT = Path(openrlhf.__file__).resolve().parent
FILES_RUN = ["openrlhf/models/loss.py", "openrlhf/models/utils.py", "openrlhf/utils/loss_utils.py"]
GLUE_FILES = ["openrlhf/trainer/ray/ppo_actor.py"]  # restated, not run

STUBS = [
    "sys.modules['deepspeed'] = an empty module (openrlhf/models/utils.py imports it at the top; only "
    "set_z3_leaf_modules, never called here, uses it)",
    "sys.modules['openrlhf.models'] = a bare package with __path__ = [<installed openrlhf>/models] in place of "
    "openrlhf/models/__init__.py (it imports the Actor and model classes: transformers models, peft, flash-attn, "
    "deepspeed); openrlhf/models/loss.py and models/utils.py are imported from the installed files unmodified",
    "iter_grad_accum_global_norm gets strategy=None (with no process group initialised it never reads it) and the "
    "action mask itself as the one micro-batch item (mask_fn = identity, where PolicyActor passes "
    "lambda e: e.action_mask on its Experience)",
    "the KL-loss cases restate training_step's three KL lines (ppo_actor.py:318-338) instead of calling it: "
    "training_step needs the Actor model's forward, a DeepspeedStrategy and an Experience; the restated lines call "
    "compute_approx_kl and aggregate_loss unmodified, with action_log_probs the same leaf the policy loss takes and "
    "base_action_log_probs = inputs.ref_log_prob",
]

sys.modules["deepspeed"] = types.ModuleType("deepspeed")
_package = types.ModuleType("openrlhf.models")
_package.__path__ = [str(ROOT / "models")]
sys.modules["openrlhf.models"] = _package

from openrlhf.models.loss import PolicyLoss, aggregate_loss  # noqa: E402
from openrlhf.models.utils import compute_approx_kl  # noqa: E402
from openrlhf.utils.loss_utils import iter_grad_accum_global_norm  # noqa: E402

FORMAT = (
    "Tensors are plain nested lists [B, T] (row-major). Inputs were materialised as torch.float32 (log-probs, "
    "advantages) and response_mask as torch.int64 0/1 (the action_mask dtype OpenRLHF's samples generator builds) "
    "before calling the reference; outputs are its float32 results widened to float64 by tolist(). Non-finite "
    "floats are encoded as strings 'nan'/'inf'/'-inf'. A case whose reference call raised has outputs={'error': "
    "'ExcType: message'}. Per case: loss_fn = PolicyLoss(clip_eps_low, clip_eps_high, dual_clip, "
    "token_level_loss = (loss_agg_mode == 'token-mean'), policy_loss_type, is_correction_level, "
    "is_correction_mode, is_correction_gating, is_correction_threshold) from params (GSPO forces "
    "token_level_loss False: params.token_level_loss_effective); params.loss_batch_info = the normalisers "
    "iter_grad_accum_global_norm gives one micro-batch holding the whole batch (dp_size 1, batch_num_tokens = "
    "action tokens, global_batch_size = non-empty rows); loss, clip_ratio, ppo_kl, vllm_kl, is_filter_ratio = "
    "loss_fn(inputs.log_prob, inputs.old_log_prob, inputs.advantages, action_mask=inputs.response_mask, "
    "rollout_log_probs=inputs.rollout_log_prob (None when is_correction_level is 'off'), **loss_batch_info). "
    "outputs.loss, outputs.metrics = {clip_ratio, ppo_kl, vllm_kl, is_filter_ratio} (null when not computed), "
    "outputs.grad_log_prob = d loss / d log_prob by autograd (log_prob a leaf with requires_grad; masked positions "
    "get 0). PolicyLoss returns no IS weights or rejection mask: the coefficient it multiplies into the per-token "
    "loss shows in grad_log_prob only. Masked positions of the log-probs keep their seeded values (the loss never "
    "reads them unmasked). The KL-loss cases (params.kl set: use_kl_loss, init_kl_coef, kl_estimator, "
    "unbiased_gradient, ref_scale) also have inputs.ref_log_prob = base_action_log_probs and outputs.kl_loss = "
    "aggregate_loss(compute_approx_kl(log_prob, ref_log_prob, log_probs_old=old_log_prob, kl_estimator, "
    "unbiased_gradient), response_mask, **loss_batch_info); their outputs.loss = policy loss + kl_loss * "
    "init_kl_coef, and grad_log_prob is that sum's gradient. Suggested tolerance: atol=1e-5, rtol=1e-5."
)
# The reference policy of the KL-loss cases: ref = min(old + ref_scale * randn, LOGPROB_CAP), drawn from its own
# generator so that the shared drift inputs stay as they are.
REF_SEED = 7
KL_DEFAULTS = {"use_kl_loss": True, "init_kl_coef": 0.1, "kl_estimator": "k3", "unbiased_gradient": False}

# Inputs: references/policy_inputs.py's drift recipe (drift_fixtures, drift_inputs), shared with
# references/verl/generate.py.


DEFAULTS = {
    "policy_loss_type": "ppo",
    "clip_eps_low": 0.2,
    "clip_eps_high": 0.2,
    "dual_clip": None,
    "loss_agg_mode": "token-mean",
    "is_correction_level": "off",
    "is_correction_mode": "mask",
    "is_correction_gating": "ratio",
    "is_correction_threshold": [0.5, 5.0],
}


def _run(params: dict, x: dict) -> dict:
    mask = x["mask"].to(torch.int64)
    correction = params["is_correction_level"] != "off"
    try:
        loss_fn = PolicyLoss(
            clip_eps_low=params["clip_eps_low"],
            clip_eps_high=params["clip_eps_high"],
            dual_clip=params["dual_clip"],
            token_level_loss=params["loss_agg_mode"] == "token-mean",
            policy_loss_type=params["policy_loss_type"],
            is_correction_level=params["is_correction_level"],
            is_correction_mode=params["is_correction_mode"],
            is_correction_gating=params["is_correction_gating"],
            is_correction_threshold=list(params["is_correction_threshold"]),
        )
    except Exception as exc:  # recorded as the reference's answer
        return {"error": f"{type(exc).__name__}: {exc}"}
    params["token_level_loss_effective"] = loss_fn.token_level_loss
    [(_, info)] = list(iter_grad_accum_global_norm([mask], None, 1, lambda m: m))
    params["loss_batch_info"] = {k: v if isinstance(v, int) else v.item() for k, v in info.items()}
    log_prob = x["log_prob"].clone().requires_grad_(True)
    loss, clip_ratio, ppo_kl, vllm_kl, is_filter_ratio = loss_fn(
        log_prob,
        x["old"],
        x["advantages"],
        action_mask=mask,
        rollout_log_probs=x["rollout"] if correction else None,
        **info,
    )
    kl_loss = None
    if params.get("kl"):  # training_step's KL lines (ppo_actor.py:318-338), restated
        k = params["kl"]
        kl = compute_approx_kl(
            log_prob,
            x["ref"],
            log_probs_old=x["old"],
            kl_estimator=k["kl_estimator"],
            unbiased_gradient=k["unbiased_gradient"],
        )
        kl_loss = aggregate_loss(kl, mask, **info)
        loss = loss + kl_loss * k["init_kl_coef"]
    loss.backward()
    assert loss.dtype == torch.float32 and log_prob.grad.dtype == torch.float32
    metrics = {"clip_ratio": clip_ratio, "ppo_kl": ppo_kl, "vllm_kl": vllm_kl, "is_filter_ratio": is_filter_ratio}
    out = {
        "loss": loss.item(),
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": {k: None if v is None else v.item() for k, v in metrics.items()},
    }
    if kl_loss is not None:
        out["kl_loss"] = kl_loss.item()
    return out


def _spec(fixture="multiturn_holes", drift="drift", adv="grpo", note="", kl=None, **params):
    unknown = set(params) - set(DEFAULTS)
    assert not unknown, unknown
    spec = {"fixture": fixture, "drift": drift, "adv": adv, "note": note, "params": {**DEFAULTS, **params}}
    if kl is not None:  # only the KL-loss cases carry params.kl: the other cases stay as they were
        assert not set(kl) - set(KL_DEFAULTS) - {"ref_scale"}, kl
        spec["params"]["kl"] = {**KL_DEFAULTS, "ref_scale": 0.2, **kl}
    return spec


MH = "multiturn_holes"
RD = "random_dense_seed0"
GSPO = {"policy_loss_type": "gspo", "clip_eps_low": 3e-4, "clip_eps_high": 4e-4}
TOKEN = {"is_correction_level": "token"}
SEQ = {"is_correction_level": "seq"}
CASES = [
    # PPO
    _spec(drift="ratio1", note="ratio 1 everywhere: no clipping, d loss/d log_prob = -A / n_tokens"),
    _spec(drift="ratio1", adv="normal"),
    _spec(),
    _spec(adv="normal"),
    _spec(clip_eps_high=0.28, note="clip-higher: upper bound 1.28, lower 0.8"),
    _spec(drift="large", adv="normal", note="large drift, no dual clip"),
    _spec(drift="large", adv="normal", dual_clip=3.0, note="dual clip: for A < 0 the loss is capped at -3 A"),
    _spec(drift="large", adv="normal", dual_clip=10.0),
    _spec(fixture=RD, note="a fully masked row (row 10)"),
    _spec(fixture=RD, loss_agg_mode="seq-mean-token-mean", note="per-sample mean over the 11 non-empty rows"),
    _spec(dual_clip=1.0, note="dual_clip must be > 1"),
    # GSPO (token_level_loss forced False)
    _spec(drift="ratio1", **GSPO),
    _spec(**GSPO, note="GSPO paper's clip range 3e-4 / 4e-4"),
    _spec(adv="normal", policy_loss_type="gspo", note="clip 0.2; loss_agg_mode token-mean asked, GSPO forces seq"),
    _spec(fixture=RD, drift="large", policy_loss_type="gspo", clip_eps_high=0.28),
    _spec(
        drift="large",
        **GSPO,
        **TOKEN,
        is_correction_threshold=[0.5, 2.0],
        note="GSPO with is_correction on: the sequence ratio uses log_prob - rollout_log_prob instead of log_prob - "
        "old_log_prob, and no IS coefficient is applied (the correction block runs for ppo only)",
    ),
    # importance-sampling correction (ppo)
    _spec(
        drift="large",
        **TOKEN,
        is_correction_mode="clip",
        is_correction_threshold=[0.0, 2.0],
        note="TIS: coefficient clamp(exp(old - rollout), 0, 2) (CLI: a single HIGH 2 becomes [0, 2])",
    ),
    _spec(
        drift="large",
        **TOKEN,
        is_correction_mode="clip",
        is_correction_threshold=[0.5, 2.0],
        note="token clip to [0.5, 2]",
    ),
    _spec(
        drift="large",
        **TOKEN,
        is_correction_threshold=[0.5, 2.0],
        note="ICEPOP: tokens with exp(old - rollout) outside [0.5, 2] get 0, the others their IS weight",
    ),
    _spec(**TOKEN, note="token mask with the default band [0.5, 5]"),
    _spec(drift="ratio1", **TOKEN, is_correction_threshold=[0.8, 1.25], note="the first minibatch with a mismatch"),
    _spec(
        drift="large",
        **SEQ,
        is_correction_threshold=[0.8, 1.25],
        note="seq-mask-tis: a row whose geometric-mean ratio exp(masked mean(old - rollout)) is outside [0.8, 1.25] "
        "gets 0, the others their per-token IS weight",
    ),
    _spec(
        fixture=RD,
        drift="large",
        **SEQ,
        is_correction_gating="binary_kl",
        is_correction_threshold=[0.0, 0.05],
        note="FlashREINFORCE trust region: rows whose mean sampled-token binary KL exceeds 0.05 are dropped",
    ),
    _spec(drift="large", **TOKEN, is_correction_gating="binary_kl", is_correction_threshold=[0.0, 0.05]),
    _spec(drift="large", **TOKEN, is_correction_gating="tv", is_correction_threshold=[0.0, 0.02]),
    _spec(fixture=RD, drift="large", **SEQ, is_correction_gating="tv", is_correction_threshold=[0.0, 0.05]),
    _spec(
        fixture=RD,
        drift="large",
        adv="normal",
        dual_clip=3.0,
        clip_eps_high=0.28,
        loss_agg_mode="seq-mean-token-mean",
        **TOKEN,
        is_correction_mode="clip",
        is_correction_threshold=[0.0, 2.0],
        note="dual clip, clip-higher, TIS and the per-sample mean together",
    ),
    _spec(**SEQ, is_correction_mode="clip", note="clip needs level token"),
    _spec(**TOKEN, is_correction_gating="binary_kl", note="a divergence gate needs an upper bound only"),
    # the KL-to-reference loss (use_kl_loss): token mean over the action mask, whatever loss_agg_mode says
    _spec(drift="ratio1", kl={"kl_estimator": "k1"}, note="KL loss k1 at ratio 1: -A/n + beta/n"),
    _spec(kl={"kl_estimator": "k1"}),
    _spec(kl={"kl_estimator": "k2"}),
    _spec(kl={"kl_estimator": "k3"}),
    _spec(fixture=RD, drift="large", adv="normal", kl={"kl_estimator": "k3", "init_kl_coef": 0.5}),
    _spec(
        fixture=RD,
        loss_agg_mode="seq-mean-token-mean",
        kl={"kl_estimator": "k3"},
        note="per-sample policy loss; the KL loss stays a token mean over the action tokens",
    ),
    _spec(fixture=RD, drift="large", loss_agg_mode="seq-mean-token-mean", kl={"kl_estimator": "k2"}),
    _spec(**GSPO, kl={"kl_estimator": "k3"}, note="GSPO (per-sample, forced); the KL loss a token mean"),
    _spec(fixture=RD, drift="large", policy_loss_type="gspo", kl={"kl_estimator": "k1"}),
    _spec(
        drift="large",
        kl={"kl_estimator": "k1", "ref_scale": 8.0},
        note="a far reference: |log_prob - ref| > 10 on some tokens, where the ±10 clamp cuts k1's gradient",
    ),
    _spec(
        drift="large",
        kl={"kl_estimator": "k2", "ref_scale": 8.0},
        note="k2 = d^2/2 clamped at 10: no gradient where |log_prob - ref| > sqrt(20)",
    ),
    _spec(
        fixture=RD,
        drift="large",
        kl={"kl_estimator": "k3", "ref_scale": 8.0},
        note="k3 clamped at 10 (log_prob - ref below about -2.6 or above about 11)",
    ),
    _spec(
        drift="large",
        **TOKEN,
        is_correction_threshold=[0.5, 2.0],
        kl={"kl_estimator": "k3"},
        note="ICEPOP token mask: a masked token's policy loss is 0, its KL loss stays",
    ),
    _spec(
        drift="large",
        **TOKEN,
        is_correction_gating="binary_kl",
        is_correction_threshold=[0.0, 0.05],
        kl={"kl_estimator": "k3"},
        note="token binary-KL gate under token-mean: a gated token keeps its KL loss and its count",
    ),
    _spec(
        fixture=RD,
        drift="large",
        **SEQ,
        is_correction_gating="binary_kl",
        is_correction_threshold=[0.0, 0.05],
        loss_agg_mode="seq-mean-token-mean",
        kl={"kl_estimator": "k2"},
        note="rows dropped by the binary-KL gate keep their KL loss",
    ),
    _spec(
        drift="large",
        **TOKEN,
        is_correction_mode="clip",
        is_correction_threshold=[0.0, 2.0],
        kl={"kl_estimator": "k1"},
        note="TIS: the IS coefficient weighs the policy loss, not the KL loss",
    ),
    _spec(
        drift="large",
        kl={"kl_estimator": "k3", "unbiased_gradient": True},
        note="unbiased_gradient: the k3 value forward, the gradient w * (log_prob - ref) with w = min(exp(log_prob - "
        "old), 10) detached (a straight-through surrogate)",
    ),
]


def _case_name(spec: dict) -> str:
    p = spec["params"]
    parts = [p["policy_loss_type"], spec["fixture"], spec["drift"], f"adv={spec['adv']}", p["loss_agg_mode"]]
    if (p["clip_eps_low"], p["clip_eps_high"]) != (0.2, 0.2):
        parts.append(f"eps={p['clip_eps_low']},{p['clip_eps_high']}")
    if p["dual_clip"] is not None:
        parts.append(f"dual_clip={p['dual_clip']}")
    if p["is_correction_level"] != "off":
        low, high = p["is_correction_threshold"]
        parts.append(
            f"is={p['is_correction_level']},{p['is_correction_mode']},{p['is_correction_gating']},[{low},{high}]"
        )
    if p.get("kl"):
        k = p["kl"]
        parts.append(f"kl_loss={k['kl_estimator']},coef={k['init_kl_coef']},ref_scale={k['ref_scale']}")
        if k["unbiased_gradient"]:
            parts.append("unbiased_gradient")
    return "/".join(parts)


LOSS_NOTES = {
    "ppo": "ratio = exp(clamp(log_prob - old, -20, 20)); loss_t = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), "
    "with dual_clip: for A < 0 -max(min(...), dual_clip A); times the IS coefficient when is_correction is on; "
    "aggregate_loss",
    "gspo": "s = exp(masked mean over the row of log_prob - old (log_prob - rollout when is_correction is on)), "
    "broadcast * action_mask; loss_t = -min(s A, clip(s, 1 - eps_low, 1 + eps_high) A) (dual clip likewise); "
    "aggregate_loss per sample (token_level_loss forced False)",
}


KL_NOTE = (
    "Plus the KL loss: init_kl_coef * aggregate_loss(compute_approx_kl(log_prob, ref, kl_estimator), action_mask, "
    "**loss_batch_info): always the token sum over the action mask / batch_num_tokens (loss_batch_info has no "
    "token_level_loss), before any is_correction mask; k1 = d, k2 = d^2/2, k3 = exp(-max(d, -10)) - 1 + max(d, -10), "
    "d = log_prob - ref, every estimator clamped to [-10, 10]."
)


def _verl_inputs() -> dict:
    """verl_policy_loss.json's inputs by (fixture, drift, advantages) (bypass-mode cases, whose old_log_prob is the
    rollout log-prob, left out)."""
    out: dict = {}
    for case in json.loads((golden_io.OUT_DIR / "verl_policy_loss.json").read_text())["cases"]:
        loss_mode, fixture, drift, adv = case["name"].split("/")[:4]
        if loss_mode != "bypass_mode":
            for key, value in case["inputs"].items():
                out.setdefault((fixture, drift, adv.removeprefix("adv=")), {}).setdefault(key, value)
    return out


def _build_cases() -> list[dict]:
    fixtures = policy_inputs.drift_fixtures()
    verl_inputs = _verl_inputs()
    cases, unmatched = [], set()
    for spec in CASES:
        x, how = policy_inputs.drift_inputs(spec["fixture"], fixtures[spec["fixture"]], spec["drift"], spec["adv"])
        params = dict(spec["params"])
        if params.get("kl"):
            g = torch.Generator().manual_seed(REF_SEED)
            noise = torch.randn(x["old"].shape, generator=g, dtype=torch.float32)
            x["ref"] = (x["old"] + params["kl"]["ref_scale"] * noise).clamp(max=policy_inputs.LOGPROB_CAP)
            how += (
                f"; ref = min(old + {params['kl']['ref_scale']} * randn(B, T, generator=torch.Generator()."
                f"manual_seed({REF_SEED})), {policy_inputs.LOGPROB_CAP})"
            )
        outputs = _run(params, x)
        inputs = {
            "log_prob": x["log_prob"].tolist(),
            "old_log_prob": x["old"].tolist(),
            "rollout_log_prob": x["rollout"].tolist(),
            "advantages": x["advantages"].tolist(),
            "response_mask": x["mask"].tolist(),
        }
        if params["is_correction_level"] == "off":
            del inputs["rollout_log_prob"]
        if params.get("kl"):
            inputs["ref_log_prob"] = x["ref"].tolist()
        same = verl_inputs.get((spec["fixture"], spec["drift"], spec["adv"]), {})
        assert all(same[k] == v for k, v in inputs.items() if k in same), spec  # the verl cases' numbers
        if not same:
            unmatched.add((spec["fixture"], spec["drift"], spec["adv"]))
        kl_note = f" {KL_NOTE}" if params.get("kl") else ""
        note = (
            f"{spec['note'] + '. ' if spec['note'] else ''}{LOSS_NOTES[params['policy_loss_type']]}.{kl_note} "
            f"Masks from {fixtures[spec['fixture']]['source']}; {how}"
        )
        cases.append({"name": _case_name(spec), "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    assert unmatched == {(RD, "large", "normal")}, unmatched  # the one input set no verl case has
    return cases


def _reference() -> dict:
    return {
        "repo": "OpenRLHF/OpenRLHF",
        "version": OPENRLHF_VERSION,
        "package": f"openrlhf=={OPENRLHF_VERSION} (PyPI)",
        "path": FILES_RUN[0],
        "function": "PolicyLoss.forward (models/loss.py; aggregate_loss, models/utils.py masked_mean), with the "
        "normalisers of utils/loss_utils.py iter_grad_accum_global_norm, called as PolicyActor.training_step calls "
        "them (trainer/ray/ppo_actor.py)",
        "functions": {
            "policy_loss": "openrlhf.models.loss.PolicyLoss",
            "aggregation": "openrlhf.models.loss.aggregate_loss",
            "loss_batch_info": "openrlhf.utils.loss_utils.iter_grad_accum_global_norm",
        },
        "glue": "Restated from ppo_actor.py (not called): the PolicyLoss constructor arguments from args (token_level_"
        "loss = args.actor.loss_agg_mode == 'token-mean'), the CLI's single-threshold rule (train_ppo_ray.py: HIGH "
        "-> [0.0, HIGH]), and training_step's call with rollout_log_probs = experience.rollout_log_probs (None "
        "unless is_correction_level is on) and **loss_batch_info; the KL-loss cases (params.kl) add training_step's KL "
        "lines (ppo_actor.py:318-338): kl = compute_approx_kl(action_log_probs, base_action_log_probs, log_probs_old="
        "old_action_log_probs, kl_estimator, unbiased_gradient), kl_loss = aggregate_loss(kl, action_mask, "
        "**loss_batch_info), loss = actor_loss + kl_loss * kl_ctl (kl_ctl = init_kl_coef); the entropy and aux-loss "
        "terms are off",
        "sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in FILES_RUN},
        "glue_sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in GLUE_FILES},
        "torch": torch.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "openrlhf": (importlib.metadata.version("openrlhf"), OPENRLHF_VERSION),
        "torch": (torch.__version__, TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/openrlhf/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    cases = _build_cases()
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
