"""Golden data from verl's policy losses and rollout correction, called unmodified.

Run in the separate environment made by `bash references/setup_env.sh verl` (CreditLens itself never imports verl):

    .venv-references-verl/bin/python references/verl/generate.py

Writes tests/golden/verl_policy_loss.json. Running it again with the pinned versions reproduces the committed file
byte for byte (`--check` compares instead of writing).

What runs, all from the installed verl 0.9.1 (no stubs: `import verl` and the modules below load as shipped):

* `verl.trainer.ppo.core_algos.get_policy_loss_fn(name)` for vanilla (PPO clip, clip-higher, dual clip), gspo,
  cispo, sapo, geo_mean, gpg, kl_cov and bypass_mode, called with the keyword arguments the actor's loss passes
  (`verl.workers.utils.losses.ppo_loss`, the loss of verl 0.9.1's engine workers; 0.9.1 has no dp_actor.py):
  `policy_loss_fn(old_log_prob=, log_prob=, advantages=, response_mask=response_mask.to(bool),
  loss_agg_mode=config.loss_agg_mode, config=config, rollout_is_weights=data.get("rollout_is_weights"))`, after
  ppo_loss has set `config.global_batch_info` = {dp_size, batch_num_tokens, global_batch_size, loss_scale_factor}.
  `config` is a real `verl.workers.config.ActorConfig`. log_prob is a leaf tensor with requires_grad, and the
  gradient of the returned loss with respect to it is recorded.
* Decoupled rollout correction (three policies): the trainer (ray_trainer.fit and the v1 trainer_base) calls
  `verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config)`
  before the advantages; it calls `compute_rollout_correction_and_rejection_mask(old_log_prob=old_log_probs,
  rollout_log_prob=rollout_log_probs, response_mask, rollout_is, rollout_is_threshold,
  rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold)`, REPLACES the batch's response_mask by the
  rejection-masked one and adds `rollout_is_weights` to the batch. The harness calls that same function on a real
  `DataProto`, then the policy loss as ppo_loss does: the modified response_mask is the loss mask (and the
  batch_num_tokens the engine counts from it) and the weights go in as `rollout_is_weights=`, which every policy
  loss multiplies into its per-token loss before aggregating (geo_mean: their per-sequence geometric mean times
  the sequence loss). This glue (the order of the two calls and the global_batch_info values) restates the
  trainer's code; it is written in the file's reference.glue.
* Bypass mode (two policies, old = rollout): `apply_bypass_mode` sets old_log_probs = rollout_log_probs and the
  loss mode to "bypass_mode", whose loss function computes the weights and the rejection mask itself (from the
  current log_prob, under no_grad) and calls the PPO-clip or REINFORCE loss.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
from pathlib import Path

import torch
import verl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.config.algorithm import RolloutCorrectionConfig  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch  # noqa: E402
from verl.workers.config import ActorConfig, PolicyLossConfig  # noqa: E402

OUT_FILE = "verl_policy_loss.json"
VERL_VERSION = "0.9.1"
TORCH_VERSION = "2.13.0+cpu"
ROOT = Path(verl.__file__).resolve().parent
FILES_RUN = [
    "verl/trainer/ppo/core_algos.py",
    "verl/trainer/ppo/rollout_corr_helper.py",
    "verl/utils/torch_functional.py",
    "verl/workers/config/actor.py",
    "verl/trainer/config/algorithm.py",
    "verl/base_config.py",
    "verl/protocol.py",
]
STUBS: list[str] = []  # nothing is stubbed: verl and its imports load from the installed files

GLUE = (
    "Restated from verl 0.9.1 (not called): (1) decoupled mode, as ray_trainer.RayPPOTrainer.fit and "
    "trainer/ppo/v1/trainer_base.py do before compute_advantage: batch = DataProto.from_dict(old_log_probs, "
    "rollout_log_probs, response_mask); batch, metrics = compute_rollout_correction_and_add_to_batch(batch, "
    "RolloutCorrectionConfig(**params.rollout_correction)) (called; it calls compute_rollout_correction_and_"
    "rejection_mask and replaces response_mask by the rejection-masked mask, and adds rollout_is_weights when "
    "rollout_is is set). (2) workers/utils/losses.py ppo_loss: config.global_batch_info = {dp_size, "
    "batch_num_tokens, global_batch_size, loss_scale_factor}, response_mask = data['response_mask'].to(bool), "
    "rollout_is_weights = data.get('rollout_is_weights'), policy_loss_fn = get_policy_loss_fn(config.policy_loss."
    "loss_mode), policy_loss_fn(old_log_prob=, log_prob=, advantages=, response_mask=, loss_agg_mode=config."
    "loss_agg_mode, config=config, rollout_is_weights=). The values of global_batch_info are those of one "
    "mini-batch holding the whole batch on one data-parallel rank in one micro-batch: dp_size = 1, "
    "batch_num_tokens = the sum of the (rejection-masked) response mask (the engine's forward_backward_batch "
    "counts data['loss_mask'], which is the response_mask, all-reduced over dp), global_batch_size = B (the "
    "trainer's ppo_mini_batch_size * rollout.n rows, fully masked rows included), loss_scale_factor = "
    "config.loss_scale_factor (None). Cases with params.global_batch_info = {} call the loss with the config's "
    "empty default instead (verl's own fallback: token count and non-empty row count of the mask passed). (3) bypass "
    "mode, as rollout_corr_helper.apply_bypass_mode sets it up: old_log_prob = rollout_log_prob, policy_loss."
    "loss_mode = 'bypass_mode', policy_loss.rollout_correction = the RolloutCorrectionConfig; no rollout_is_weights "
    "in the batch. Not reproduced: the advantages the trainer would compute after the rejection mask replaced "
    "response_mask (the advantages here are inputs), entropy and KL-loss terms (off), micro-batch splitting."
)

FORMAT = (
    "Tensors are plain nested lists [B, T] (row-major). Inputs were materialised as torch.float32 (response_mask "
    "float32 0/1) before calling the reference; outputs are its float32 results widened to float64 by tolist(). "
    "Non-finite floats are encoded as strings 'nan'/'inf'/'-inf'. A case whose reference call raised has "
    "outputs={'error': 'ExcType: message'}. Per case: config = ActorConfig(strategy='fsdp', rollout_n=1, "
    "ppo_mini_batch_size=B, ppo_micro_batch_size_per_gpu=B, clip_ratio, clip_ratio_low, clip_ratio_high, "
    "clip_ratio_c, tau_pos, tau_neg, loss_agg_mode from params, policy_loss=PolicyLossConfig(loss_mode=params."
    "loss_mode[, rollout_correction for bypass_mode][, params.policy_loss for kl_cov])). When "
    "params.rollout_correction is not null and params.bypass_mode is false (decoupled mode), "
    "compute_rollout_correction_and_add_to_batch runs first on inputs.old_log_prob / inputs.rollout_log_prob / "
    "inputs.response_mask: outputs.rollout_is_weights "
    "(null when rollout_is is null) and outputs.response_mask_after (the rejection-masked mask) are what it put in "
    "the batch, outputs.rollout_corr_metrics its metrics. Then the policy loss runs as ppo_loss calls it "
    "(reference.glue) with config.global_batch_info = params.global_batch_info, response_mask = "
    "response_mask_after (or inputs.response_mask) as bool, rollout_is_weights = outputs.rollout_is_weights; "
    "in bypass mode old_log_prob = inputs.rollout_log_prob = inputs.old_log_prob. outputs.loss is the scalar it "
    "returned, outputs.grad_log_prob = d loss / d log_prob by autograd (log_prob a leaf with requires_grad; "
    "masked positions get 0), outputs.metrics the metrics dict it returned (floats). Which config fields each loss "
    "reads: vanilla clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c; gspo and cispo clip_ratio_low, "
    "clip_ratio_high (clip_ratio if None); sapo tau_pos, tau_neg (and always aggregates with seq-mean-token-mean, "
    "whatever loss_agg_mode says); geo_mean clip_ratio, clip_ratio_low, clip_ratio_high (ignores loss_agg_mode and "
    "global_batch_info: torch.mean over rows); gpg none; kl_cov policy_loss.kl_cov_ratio and "
    "policy_loss.ppo_kl_coef (params.policy_loss, PolicyLossConfig's defaults 0.0002 and 0.1 included); "
    "bypass_mode policy_loss.rollout_correction, then vanilla's fields (loss_type ppo_clip) or none (reinforce); "
    "all but geo_mean read global_batch_info. "
    "Suggested tolerance: atol=1e-5, rtol=1e-5."
)

# Inputs: references/policy_inputs.py's drift recipe (drift_fixtures, drift_inputs), shared with
# references/openrlhf/generate_policy_loss.py.

DEFAULT_CFG = {
    "clip_ratio": 0.2,
    "clip_ratio_low": 0.2,
    "clip_ratio_high": 0.2,
    "clip_ratio_c": 3.0,
    "tau_pos": 1.0,
    "tau_neg": 1.05,
    "loss_agg_mode": "token-mean",
}
KL_COV_KEYS = ("kl_cov_ratio", "ppo_kl_coef")
RC_KEYS = ("rollout_is", "rollout_is_threshold", "rollout_is_batch_normalize", "rollout_rs", "rollout_rs_threshold")


def _config(loss_mode: str, cfg: dict, batch: int, rc: dict | None, bypass: bool, pl: dict) -> ActorConfig:
    policy_loss = PolicyLossConfig(loss_mode=loss_mode, **pl)
    if bypass:
        policy_loss = PolicyLossConfig(
            loss_mode=loss_mode, rollout_correction=RolloutCorrectionConfig(**rc, bypass_mode=True)
        )
    return ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_mini_batch_size=batch,
        ppo_micro_batch_size_per_gpu=batch,
        clip_ratio=cfg["clip_ratio"],
        clip_ratio_low=cfg["clip_ratio_low"],
        clip_ratio_high=cfg["clip_ratio_high"],
        clip_ratio_c=cfg["clip_ratio_c"],
        tau_pos=cfg["tau_pos"],
        tau_neg=cfg["tau_neg"],
        loss_agg_mode=cfg["loss_agg_mode"],
        policy_loss=policy_loss,
    )


def _run(spec: dict, x: dict) -> tuple[dict, dict]:
    """(params, outputs) of one case."""
    batch = x["mask"].shape[0]
    cfg = {**DEFAULT_CFG, **spec["cfg"]}
    rc = spec["rc"]
    bypass = spec["bypass"]
    loss_mode = "bypass_mode" if bypass else spec["loss"]
    params = {"loss_mode": loss_mode, **cfg}
    params["rollout_correction"] = None
    if rc is not None:  # every field of the RolloutCorrectionConfig built from the case (its defaults included)
        rcc = RolloutCorrectionConfig(**rc, bypass_mode=bypass)
        params["rollout_correction"] = {k: getattr(rcc, k) for k in (*RC_KEYS, "bypass_mode", "loss_type")}
    params["bypass_mode"] = bypass
    if loss_mode == "kl_cov":  # the PolicyLossConfig fields kl_cov reads, its defaults included
        pl = PolicyLossConfig(loss_mode=loss_mode, **spec["pl"])
        params["policy_loss"] = {k: getattr(pl, k) for k in KL_COV_KEYS}
    outputs: dict = {}
    try:
        config = _config(loss_mode, cfg, batch, None if rc is None else dict(rc), bypass, spec["pl"])
        mask = x["mask"]
        old = x["rollout"] if bypass else x["old"]
        weights = None
        if rc is not None and not bypass:
            data = DataProto.from_dict(
                tensors={"old_log_probs": old.clone(), "rollout_log_probs": x["rollout"].clone(), "response_mask": mask}
            )
            data, corr_metrics = compute_rollout_correction_and_add_to_batch(data, RolloutCorrectionConfig(**rc))
            mask = data.batch["response_mask"]
            weights = data.batch["rollout_is_weights"] if "rollout_is_weights" in data.batch.keys() else None
            assert mask.dtype == torch.float32 and (weights is None or weights.dtype == torch.float32)
            outputs["rollout_is_weights"] = None if weights is None else weights.tolist()
            outputs["response_mask_after"] = mask.tolist()
            outputs["rollout_corr_metrics"] = corr_metrics
        if spec["gbi"] == "trainer":
            gbi = {
                "dp_size": 1,
                "batch_num_tokens": int(mask.sum().item()),
                "global_batch_size": batch,
                "loss_scale_factor": config.loss_scale_factor,
            }
        else:
            gbi = {}
        params["global_batch_info"] = gbi
        config.global_batch_info.update(gbi)
        log_prob = x["log_prob"].clone().requires_grad_(True)
        loss, metrics = get_policy_loss_fn(loss_mode)(
            old_log_prob=old,
            log_prob=log_prob,
            advantages=x["advantages"],
            response_mask=mask.to(bool) if spec["gbi"] == "trainer" else mask,
            loss_agg_mode=cfg["loss_agg_mode"],
            config=config,
            rollout_is_weights=weights,
        )
        loss.backward()
    except Exception as exc:  # recorded as the reference's answer
        params.setdefault("global_batch_info", None)
        return params, {"error": f"{type(exc).__name__}: {exc}"}
    assert loss.dtype == torch.float32 and log_prob.grad.dtype == torch.float32
    outputs = {
        "loss": loss.item(),
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": {k: float(v) for k, v in metrics.items()},
        **outputs,
    }
    return params, outputs


def _spec(
    loss,
    fixture="multiturn_holes",
    drift="drift",
    adv="grpo",
    cfg=None,
    rc=None,
    bypass=False,
    gbi="trainer",
    note="",
    pl=None,
):
    return {
        "loss": loss,
        "fixture": fixture,
        "drift": drift,
        "adv": adv,
        "cfg": cfg or {},
        "rc": rc,
        "bypass": bypass,
        "gbi": gbi,
        "note": note,
        "pl": pl or {},  # PolicyLossConfig fields (kl_cov's)
    }


MH = "multiturn_holes"
RD = "random_dense_seed0"
CLIP_HIGHER = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
GSPO_CLIP = {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4, "loss_agg_mode": "seq-mean-token-mean"}
TIS_TOKEN = {"rollout_is": "token", "rollout_is_threshold": 2.0}
KL_COV_SKYRL = {"kl_cov_ratio": 0.2, "ppo_kl_coef": 1.0}
CASES = [
    # vanilla PPO
    _spec("vanilla", drift="ratio1", note="ratio 1 everywhere: no clipping, d loss/d log_prob = -A / n_tokens"),
    _spec("vanilla", drift="ratio1", adv="normal"),
    _spec("vanilla"),
    _spec("vanilla", adv="normal"),
    _spec("vanilla", cfg=CLIP_HIGHER, note="clip-higher: upper bound 1.28, lower 0.8"),
    _spec(
        "vanilla", drift="large", adv="normal", note="large drift: dual clip (ratio > clip_ratio_c = 3, A < 0) fires"
    ),
    _spec("vanilla", drift="large", adv="normal", cfg={"clip_ratio_c": 10.0}, note="dual clip at 10"),
    _spec("vanilla", fixture=RD, note="a fully masked row (row 10)"),
    _spec("vanilla", fixture=RD, cfg={"loss_agg_mode": "token-sum"}),
    _spec("vanilla", fixture=RD, cfg={"loss_agg_mode": "seq-mean-token-mean"}),
    _spec(
        "vanilla",
        fixture=RD,
        cfg={"loss_agg_mode": "seq-mean-token-mean"},
        gbi="none",
        note="global_batch_info empty (a direct call): the seq-mean divides by the 11 non-empty rows, not 12",
    ),
    _spec("vanilla", fixture=RD, cfg={"loss_agg_mode": "seq-mean-token-sum"}),
    _spec("vanilla", fixture=RD, cfg={"loss_agg_mode": "seq-mean-token-sum-norm"}),
    _spec("vanilla", cfg={"clip_ratio_c": 1.0}, note="clip_ratio_c must be > 1"),
    # gspo
    _spec("gspo", drift="ratio1", cfg=GSPO_CLIP),
    _spec("gspo", cfg=GSPO_CLIP, note="GSPO paper's clip range 3e-4 / 4e-4, seq-mean-token-mean"),
    _spec("gspo", adv="normal", cfg={"loss_agg_mode": "token-mean"}, note="clip 0.2, token-mean, token advantages"),
    _spec(
        "gspo",
        fixture=RD,
        drift="large",
        cfg={"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "loss_agg_mode": "seq-mean-token-mean"},
    ),
    # cispo
    _spec("cispo", drift="ratio1", cfg=CLIP_HIGHER),
    _spec("cispo", cfg=CLIP_HIGHER),
    _spec(
        "cispo",
        drift="large",
        adv="normal",
        cfg={"clip_ratio_low": 1.0, "clip_ratio_high": 0.28},
        note="clip_ratio_low 1: lower bound 0 (no lower clip), upper 1.28",
    ),
    # sapo
    _spec("sapo", drift="ratio1", note="gate at ratio 1: sigmoid(0) * 4 / tau = 2 / tau, gradient 1 * A"),
    _spec("sapo", adv="normal"),
    _spec(
        "sapo",
        drift="large",
        adv="normal",
        cfg={"tau_pos": 1.0, "tau_neg": 2.0, "loss_agg_mode": "token-mean"},
        note="loss_agg_mode token-mean is passed and ignored (sapo aggregates seq-mean-token-mean)",
    ),
    # geo_mean (GMPO)
    _spec("geo_mean", cfg={"clip_ratio": 0.4, "clip_ratio_low": 0.4, "clip_ratio_high": 0.4}),
    _spec(
        "geo_mean",
        fixture=RD,
        drift="large",
        cfg={"clip_ratio": 0.4, "clip_ratio_low": 0.4, "clip_ratio_high": 0.4},
        note="torch.mean over all 12 rows, the fully masked one included",
    ),
    # gpg
    _spec("gpg", adv="normal"),
    # decoupled rollout correction + vanilla
    _spec("vanilla", drift="large", rc=TIS_TOKEN, note="token TIS: weight min(exp(old - rollout), 2)"),
    _spec("vanilla", rc={"rollout_is": "sequence", "rollout_is_threshold": 2.0}, note="sequence TIS"),
    _spec(
        "vanilla",
        drift="large",
        rc={"rollout_is": "token", "rollout_is_threshold": "0.5_2.0"},
        note="IcePop: token weights outside [0.5, 2] set to 0",
    ),
    _spec("vanilla", drift="large", rc={**TIS_TOKEN, "rollout_is_batch_normalize": True}),
    _spec(
        "vanilla",
        fixture=RD,
        drift="large",
        rc={"rollout_is": None, "rollout_rs": "token_k1", "rollout_rs_threshold": "0.5_2.0"},
        note="rejection only: token_k1 = -log ratio outside [log .5, log 2]",
    ),
    _spec(
        "vanilla",
        fixture=RD,
        rc={
            "rollout_is": "sequence",
            "rollout_is_threshold": 2.0,
            "rollout_rs": "seq_mean_k3",
            "rollout_rs_threshold": 0.02,
        },
        note="whole rows rejected; global_batch_size stays B",
    ),
    _spec("vanilla", rc={**TIS_TOKEN, "rollout_rs": "token_k3,seq_max_k2", "rollout_rs_threshold": "0.05,0.1"}),
    _spec("vanilla", rc={"rollout_is": None, "rollout_rs": "token_k1"}, note="rollout_rs without a threshold"),
    # rollout correction into other losses
    _spec("gspo", drift="large", cfg=GSPO_CLIP, rc=TIS_TOKEN),
    _spec(
        "geo_mean",
        drift="large",
        cfg={"clip_ratio": 0.4, "clip_ratio_low": 0.4, "clip_ratio_high": 0.4},
        rc=TIS_TOKEN,
        note="weights enter as their per-row geometric mean",
    ),
    # bypass mode (old = rollout)
    _spec(
        "vanilla",
        bypass=True,
        rc={
            "rollout_is": "token",
            "rollout_is_threshold": 2.0,
            "rollout_rs": "seq_mean_k3",
            "rollout_rs_threshold": 0.06,
            "loss_type": "ppo_clip",
        },
        note="ppo_clip: the rejection mask is applied, the IS weights only logged",
    ),
    _spec(
        "vanilla",
        drift="large",
        adv="normal",
        bypass=True,
        rc={"rollout_is": "token", "rollout_is_threshold": 2.0, "loss_type": "reinforce"},
        cfg={"loss_agg_mode": "seq-mean-token-sum"},
        note="reinforce: -A * log_prob * min(exp(log_prob - rollout), 2) (weights detached)",
    ),
    # kl_cov (added after the cases above, which keep their order and bytes)
    _spec(
        "kl_cov",
        drift="ratio1",
        pl=KL_COV_SKYRL,
        note="ratio 1: |log ratio| has gradient 0 at 0 (torch.abs), so d loss/d log_prob = -A / n_tokens",
    ),
    _spec("kl_cov", note="PolicyLossConfig's defaults: kl_cov_ratio 0.0002 selects max(1, int(n * 0.0002)) = 1 token"),
    _spec("kl_cov", pl=KL_COV_SKYRL, note="kl_cov_ratio 0.2, ppo_kl_coef 1 (SkyRL's defaults): 20% of the tokens"),
    _spec("kl_cov", drift="large", adv="normal", pl={"kl_cov_ratio": 0.1, "ppo_kl_coef": 0.5}),
    _spec(
        "kl_cov",
        fixture=RD,
        pl=KL_COV_SKYRL,
        cfg={"loss_agg_mode": "seq-mean-token-mean"},
        note="the covariance over every valid token of the batch (row 10 fully masked)",
    ),
    _spec(
        "kl_cov",
        drift="large",
        pl=KL_COV_SKYRL,
        rc=TIS_TOKEN,
        note="the IS weights multiply the penalised token losses too",
    ),
    _spec(
        "kl_cov",
        pl={"kl_cov_ratio": 1.5},
        note="kl_cov_ratio > 1: more tokens than the batch has (torch.topk raises)",
    ),
]


def _case_name(spec: dict, params: dict) -> str:
    parts = [params["loss_mode"], spec["fixture"], spec["drift"], f"adv={spec['adv']}", params["loss_agg_mode"]]
    for key in ("clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "tau_pos", "tau_neg"):
        if params[key] != DEFAULT_CFG[key]:
            parts.append(f"{key}={params[key]}")
    for key, value in params.get("policy_loss", {}).items():
        parts.append(f"{key}={value}")
    rc = spec["rc"]
    if rc is not None:
        if spec["bypass"]:
            parts.append(f"loss_type={rc['loss_type']}")
        if rc.get("rollout_is"):
            parts.append(f"is={rc['rollout_is']}:{rc.get('rollout_is_threshold')}")
        if rc.get("rollout_is_batch_normalize"):
            parts.append("batch_normalize")
        if rc.get("rollout_rs"):
            parts.append(f"rs={rc['rollout_rs']}:{rc.get('rollout_rs_threshold')}")
    if spec["gbi"] != "trainer":
        parts.append("no_global_batch_info")
    return "/".join(parts)


LOSS_NOTES = {
    "vanilla": "compute_policy_loss_vanilla: ratio = exp(clamp(log_prob - old, -20, 20)); loss_t = max(-A r, -A "
    "clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high)), and for A < 0 min(that, -A clip_ratio_c) (dual clip); "
    "times rollout_is_weights; agg_loss",
    "gspo": "compute_policy_loss_gspo: s_i = exp(masked mean of log_prob - old over the row), token ratio = "
    "exp(min(log_prob - sg(log_prob) + sg(log s_i), 10)); loss_t = max(-A s, -A clip(s, 1 - low, 1 + high)); "
    "times rollout_is_weights; agg_loss",
    "cispo": "compute_policy_loss_cispo: loss_t = -sg(clip(exp(clamp(log_prob - old, -20, 20)), 1 - low, "
    "1 + high)) A log_prob; times rollout_is_weights; agg_loss",
    "sapo": "compute_policy_loss_sapo: loss_t = -sigmoid(tau (r - 1)) 4 / tau * A, tau = tau_pos if A > 0 else "
    "tau_neg, r = exp(clamp(log_prob - old, -20, 20)); times rollout_is_weights; agg_loss with seq-mean-token-mean",
    "geo_mean": "compute_policy_loss_geo_mean: per-token log-ratio clipped to [-low, high] on the side sign(A) "
    "says, row ratio = exp(masked mean of it), row advantage = masked mean of A, loss = mean over rows of "
    "-A_row * ratio_row (times the rows' geometric-mean rollout_is_weights)",
    "gpg": "compute_policy_loss_gpg: loss_t = -log_prob A; times rollout_is_weights; agg_loss",
    "kl_cov": "compute_policy_loss_kl_cov: r = exp(log_prob - old) (not clamped); loss_t = -A r, plus ppo_kl_coef "
    "|log_prob - old| on the top max(1, int(n_valid kl_cov_ratio)) valid tokens (torch.topk, flattened row-major) "
    "by (A - mean A)(sg(log_prob) - mean sg(log_prob)) over the valid tokens of the batch, on the CPU; times "
    "rollout_is_weights; agg_loss",
    "bypass_mode": "compute_policy_loss_bypass_mode: under no_grad compute_rollout_correction_and_rejection_mask("
    "old_log_prob=log_prob, rollout_log_prob=old_log_prob=rollout), then compute_policy_loss_vanilla with the "
    "rejection-masked mask and no weights (ppo_clip) or compute_policy_loss_reinforce with the weights (reinforce)",
}


def _build_cases() -> list[dict]:
    fixtures = policy_inputs.drift_fixtures()
    cases = []
    for spec in CASES:
        x, how = policy_inputs.drift_inputs(spec["fixture"], fixtures[spec["fixture"]], spec["drift"], spec["adv"])
        params, outputs = _run(spec, x)
        note = f"{spec['note'] + '. ' if spec['note'] else ''}{LOSS_NOTES[params['loss_mode']]}. Masks from "
        note += f"{fixtures[spec['fixture']]['source']}; {how}"
        if spec["bypass"]:
            note += "; bypass mode: old_log_prob is the rollout log-prob (inputs.old_log_prob = rollout_log_prob)"
        inputs = {
            "log_prob": x["log_prob"].tolist(),
            "old_log_prob": (x["rollout"] if spec["bypass"] else x["old"]).tolist(),
        }
        if spec["rc"] is not None:
            inputs["rollout_log_prob"] = x["rollout"].tolist()
        inputs["advantages"] = x["advantages"].tolist()
        inputs["response_mask"] = x["mask"].tolist()
        cases.append(
            {"name": _case_name(spec, params), "note": note, "params": params, "inputs": inputs, "outputs": outputs}
        )
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    return cases


def _reference() -> dict:
    return {
        "repo": "verl-project/verl",
        "version": VERL_VERSION,
        "package": f"verl=={VERL_VERSION} (PyPI)",
        "path": FILES_RUN[0],
        "function": "get_policy_loss_fn(loss_mode)(...) (core_algos.py: compute_policy_loss_vanilla, _gspo, _cispo, "
        "_sapo, _geo_mean, _gpg, _kl_cov, _bypass_mode), after rollout_corr_helper."
        "compute_rollout_correction_and_add_to_batch (calls compute_rollout_correction_and_rejection_mask) in "
        "decoupled mode",
        "functions": {
            "policy_loss": "verl.trainer.ppo.core_algos.get_policy_loss_fn",
            "rollout_correction": "verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch "
            "-> compute_rollout_correction_and_rejection_mask",
            "aggregation": "verl.trainer.ppo.core_algos.agg_loss",
        },
        "glue": GLUE,
        "sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in FILES_RUN},
        "versions": {
            name: importlib.metadata.version(name) for name in ("verl", "torch", "tensordict", "numpy", "omegaconf")
        },
        "stubs": STUBS,
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "verl": (importlib.metadata.version("verl"), VERL_VERSION),
        "torch": (torch.__version__, TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/verl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    cases = _build_cases()
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
