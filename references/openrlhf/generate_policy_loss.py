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
   requires_grad and the gradient of actor_loss with respect to it is recorded.

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

STUBS = [
    "sys.modules['deepspeed'] = an empty module (openrlhf/models/utils.py imports it at the top; only "
    "set_z3_leaf_modules, never called here, uses it)",
    "sys.modules['openrlhf.models'] = a bare package with __path__ = [<installed openrlhf>/models] in place of "
    "openrlhf/models/__init__.py (it imports the Actor and model classes: transformers models, peft, flash-attn, "
    "deepspeed); openrlhf/models/loss.py and models/utils.py are imported from the installed files unmodified",
    "iter_grad_accum_global_norm gets strategy=None (with no process group initialised it never reads it) and the "
    "action mask itself as the one micro-batch item (mask_fn = identity, where PolicyActor passes "
    "lambda e: e.action_mask on its Experience)",
]

sys.modules["deepspeed"] = types.ModuleType("deepspeed")
_package = types.ModuleType("openrlhf.models")
_package.__path__ = [str(ROOT / "models")]
sys.modules["openrlhf.models"] = _package

from openrlhf.models.loss import PolicyLoss  # noqa: E402
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
    "reads them unmasked). Suggested tolerance: atol=1e-5, rtol=1e-5."
)

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
    loss.backward()
    assert loss.dtype == torch.float32 and log_prob.grad.dtype == torch.float32
    metrics = {"clip_ratio": clip_ratio, "ppo_kl": ppo_kl, "vllm_kl": vllm_kl, "is_filter_ratio": is_filter_ratio}
    return {
        "loss": loss.item(),
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": {k: None if v is None else v.item() for k, v in metrics.items()},
    }


def _spec(fixture="multiturn_holes", drift="drift", adv="grpo", note="", **params):
    unknown = set(params) - set(DEFAULTS)
    assert not unknown, unknown
    return {"fixture": fixture, "drift": drift, "adv": adv, "note": note, "params": {**DEFAULTS, **params}}


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
    return "/".join(parts)


LOSS_NOTES = {
    "ppo": "ratio = exp(clamp(log_prob - old, -20, 20)); loss_t = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), "
    "with dual_clip: for A < 0 -max(min(...), dual_clip A); times the IS coefficient when is_correction is on; "
    "aggregate_loss",
    "gspo": "s = exp(masked mean over the row of log_prob - old (log_prob - rollout when is_correction is on)), "
    "broadcast * action_mask; loss_t = -min(s A, clip(s, 1 - eps_low, 1 + eps_high) A) (dual clip likewise); "
    "aggregate_loss per sample (token_level_loss forced False)",
}


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
    cases, checked = [], 0
    for spec in CASES:
        x, how = policy_inputs.drift_inputs(spec["fixture"], fixtures[spec["fixture"]], spec["drift"], spec["adv"])
        params = dict(spec["params"])
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
        same = verl_inputs.get((spec["fixture"], spec["drift"], spec["adv"]), {})
        assert all(same[k] == v for k, v in inputs.items() if k in same), spec  # the verl cases' numbers
        checked += bool(same)
        note = (
            f"{spec['note'] + '. ' if spec['note'] else ''}{LOSS_NOTES[params['policy_loss_type']]}. Masks from "
            f"{fixtures[spec['fixture']]['source']}; {how}"
        )
        cases.append({"name": _case_name(spec), "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    assert checked == len(cases) - 1, checked  # all but RD/large/normal, which no verl case has
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
        "unless is_correction_level is on) and **loss_batch_info; the KL-loss, entropy and aux-loss terms are off",
        "sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in FILES_RUN},
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
