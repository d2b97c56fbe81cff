"""Golden data for SkyRL's policy losses (the per-token weight after the advantage), called unmodified.

Run in the separate environment made by `bash references/setup_env.sh skyrl` (CreditLens itself never imports skyrl):

    .venv-references-skyrl/bin/python references/skyrl/generate_policy_loss.py

Writes tests/golden/skyrl_policy_loss.json. Running it again with the pinned versions reproduces the committed file
byte for byte (`--check` compares instead of writing). references/skyrl/generate.py writes the advantage file and
is independent of this script.

Each case runs the two steps SkyRL 0.3.0 takes from advantages to the policy gradient:
1. the trainer's loss reduction, which SkyRL applies to the advantages, not to the loss:
   `ppo_utils.apply_loss_reduction_to_advantages_minibatch(advantages, loss_mask, loss_reduction,
   micro_batch_size, max_seq_len, prompt_boundaries)` over the whole batch as one mini-batch (as
   skyrl/train/trainer.py's normalize_minibatch_advantages calls it);
2. the worker's policy loss, `PolicyLossRegistry.get(policy_loss_type)(log_probs, old_log_probs,
   normalized_advantages, config=AlgorithmConfig, loss_mask=loss_mask, rollout_logprobs=...)` once per micro-batch
   (skyrl/backends/skyrl_train/workers/worker.py's forward_backward), every registered loss; each returns a SUM over
   tokens, and the micro-batch losses add (gradient accumulation; dp_size 1).
outputs.grad_log_prob = d(sum of the micro-batch losses)/d log_probs (autograd).

The cases after those (named `*kl_loss*`) run step 2 through the worker itself, so that the KL-to-reference loss
term comes in as SkyRL adds it: `PolicyWorkerBase.forward_backward(data)` (skyrl/backends/skyrl_train/workers/
worker.py), unmodified, which splits the mini-batch into micro-batches (`get_microbatch_iterator`), and per micro-batch
`_forward_backward_micro` computes the registered policy loss and, with use_kl_loss, kl_loss = masked_mean(
compute_approx_kl(log_probs, base_action_log_probs, loss_mask, kl_estimator_type), loss_mask, dim=-1).mean() (a token
mean per row, then the mean over the micro-batch's rows), and backpropagates policy_loss * dp_size + (kl_loss_coef *
kl_loss - entropy term) * microbatch_weight, microbatch_weight = rows of the micro-batch / rows of the mini-batch.
Not covered: the entropy term (use_entropy_loss, off in every case: CreditLens models no entropy loss),
advantage_batch_normalize, and the Megatron worker (megatron_model_wrapper.py: the same KL term, scaled per
micro-batch by num_microbatches / num_real_microbatches instead of the row share).

Stubs: that of generate.py: the `skyrl.backends` package's __init__ (a re-export of the Tinker engine's
AbstractBackend, whose pydantic TypedDicts need Python >= 3.12) is replaced by a bare package object whose __path__
is the installed directory, so ppo_utils and everything it imports load from the installed files as shipped. For the
worker cases (`STUBS` lists them all): transformers and datasets (not installed) as modules of placeholders that
raise when used (the worker's import chain names them; the path run never touches them); torch.cuda.current_device
returns the CPU device (Experience.to_device); the worker object is PolicyWorkerBase made without __init__ (no Ray
actor, no process group) carrying the attributes the two methods read: cfg (a real TrainerConfig), policy_loss_fn
(the registry's), model (a stand-in for the language model: returns the rows of one log_prob leaf tensor picked by
the row index written in sequences[:, 0], and zero entropy), strategy (backward = loss.backward(); all_reduce on one
rank returns its input), mesh_rank.dp_size = 1, device_mesh, optimizer and scheduler (learning rate 0).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import types
import warnings
from pathlib import Path

import skyrl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)

OUT_FILE = "skyrl_policy_loss.json"
SKYRL_VERSION = "0.3.0"
TORCH_VERSION = "2.13.0+cpu"
EXECUTED = [
    "skyrl/backends/skyrl_train/utils/ppo_utils.py",
    "skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py",
    "skyrl/backends/skyrl_train/utils/torch_utils.py",
    "skyrl/train/config/config.py",
]
EXECUTED_WORKER = [  # the KL-loss cases also run these
    "skyrl/backends/skyrl_train/workers/worker.py",
    "skyrl/backends/skyrl_train/workers/worker_utils.py",
    "skyrl/backends/skyrl_train/training_batch.py",
    "skyrl/train/dataset/replay_buffer.py",
]

STUBS = [
    "sys.modules['skyrl.backends'] = a bare module with __path__ = [<installed skyrl>/backends] in place of "
    "skyrl/backends/__init__.py (that __init__ only does `from skyrl.backends.backend import AbstractBackend`, "
    "the Tinker engine's backend, whose pydantic TypedDicts raise on Python < 3.12); every submodule is imported "
    "from the installed files unmodified",
    "loguru: logger.disable('skyrl') (the 'recommended to use sequence_mean' warnings of gspo and sapo under "
    "another reduction are not printed; nothing else changes)",
    "torch.manual_seed(0) before every loss call (clip_cov draws torch.randperm from the global generator)",
    "KL-loss cases: sys.modules['transformers'], ['transformers.modeling_utils'], "
    "['transformers.modeling_flash_attention_utils'] and ['datasets'] = modules whose names (those the worker's import "
    "chain reads: AutoConfig, AutoProcessor, AutoTokenizer, GenerationConfig, PreTrainedModel, PreTrainedTokenizer, "
    "PreTrainedTokenizerBase, PreTrainedTokenizerFast, PretrainedConfig, _flash_attention_forward) are placeholders "
    "that raise when called or instantiated (neither package is installed; forward_backward never uses them)",
    "KL-loss cases: torch.cuda.current_device = a function returning torch.device('cpu') (the worker moves each "
    "micro-batch to it); torch.autocast(device_type='cuda') then disables itself (CPU torch), so everything is float32",
    "KL-loss cases: the worker is object.__new__(PolicyWorkerBase) (no Ray actor, no process group) with cfg = "
    "TrainerConfig(algorithm=the case's AlgorithmConfig, micro_train_batch_size_per_gpu), policy_loss_fn = "
    "PolicyLossRegistry.get(policy_loss_type), model = a torch.nn.Module standing in for the language model (returns "
    "log_prob[sequences[:, 0]], the rows of the differentiated log_prob tensor named by the row index the harness "
    "writes in column 0 of sequences, and entropy zeros), strategy = backward: loss.backward(), all_reduce: returns "
    "its input (one rank), mesh_rank.dp_size = 1, device_mesh.get_group = None, optimizer None, scheduler lr 0.0; the "
    "mini-batch is a real TrainingInputBatch (sequences [B, T + 1] with the row index, attention_mask ones, "
    "action_log_probs = old, base_action_log_probs = ref, advantages = the reduced advantages, loss_mask and "
    "response_mask = the mask, rollout_logprobs, metadata response_length = T)",
]

_backends = types.ModuleType("skyrl.backends")
_backends.__path__ = [str(Path(skyrl.__file__).parent / "backends")]
sys.modules["skyrl.backends"] = _backends

from loguru import logger  # noqa: E402
from skyrl.backends.skyrl_train.utils import ppo_utils  # noqa: E402
from skyrl.train.config import config as config_module  # noqa: E402

logger.disable("skyrl")

FORMAT = (
    "Tensors are plain nested lists, [B, T] unless said. Inputs were torch.float32 (loss_mask float32 0/1) when SkyRL "
    "ran; outputs are its float32 results widened to float64 by tolist(). Non-finite floats are the strings "
    "'nan'/'inf'/'-inf'. inputs.log_prob = log_probs (the current policy, differentiated), inputs.old_log_prob = "
    "old_log_probs, inputs.rollout_log_prob = rollout_logprobs (the inference engine's; null when the case passed "
    "None), inputs.advantages = the token advantages before the loss reduction (the fixture's verl GRPO tensor, "
    "scalar per row times the mask), inputs.loss_mask. outputs.normalized_advantages = "
    "apply_loss_reduction_to_advantages_minibatch's result (what the loss function received), outputs.loss = the "
    "sum of the loss function's results over the micro-batches (one unless params.micro_batch_size < B), "
    "outputs.grad_log_prob = d loss / d log_prob (autograd), outputs.metrics = the metrics dict the loss function "
    "returned (a list of one dict per micro-batch). params.config holds every AlgorithmConfig field the reduction "
    "and the loss read (sub-configs as dicts). The KL-loss cases (params.function PolicyWorkerBase.forward_backward) "
    "also have inputs.ref_log_prob = base_action_log_probs (the reference model's), params.config's use_kl_loss, "
    "kl_loss_coef, kl_estimator_type and use_entropy_loss; their outputs.loss is the worker's final_loss (the loss "
    "it backpropagated, summed over the micro-batches) and outputs.metrics one dict: forward_backward's metrics "
    "(policy_kl = the KL loss before kl_loss_coef, averaged over the micro-batches; policy_lr left out). Suggested "
    "tolerance: atol=1e-5, rtol=1e-5."
)

NOTES = {
    "regular": "ppo_policy_loss: r = exp(clamp(lp - old, -20, 20)); l = -min(r*A, clamp(r, 1-eps_clip_low, "
    "1+eps_clip_high)*A)",
    "dual_clip": "ppo_policy_loss with dual clip: l as regular, then for A < 0: min(l, -A*clip_ratio_c) (a token "
    "with A < 0 and r > clip_ratio_c gets the constant -A*c: no gradient)",
    "gspo": "gspo_policy_loss (GSPO-token): s = exp(masked_mean(lp - old, loss_mask, -1)) per row (detached), token "
    "ratio = exp(min(lp - sg(lp) + sg(log s), 10)) (value s, gradient s per token); l = -min(ratio*A, "
    "clamp(ratio, 1-eps_clip_low, 1+eps_clip_high)*A)",
    "cispo": "compute_policy_loss_cispo: l = -A * sg(clamp(r, 1-cispo_eps_clip_low, 1+cispo_eps_clip_high)) * lp",
    "sapo": "sapo_policy_loss: r = exp(clamp(lp - old, -20, 20)); l = -sigmoid(tau*(r-1))*4/tau * A, tau = tau_pos "
    "if A > 0 else tau_neg",
    "clip_cov": "compute_policy_loss_clip_cov: l = max(-A*r, -A*clamp(r, 1-eps_clip_low, 1+eps_clip_high)) * corr; "
    "corr = 0 on up to max(int(clip_ratio * n_valid), 1) tokens drawn at random (torch.randperm) among the valid, "
    "not clip-selected tokens with clip_cov_lb < (A - masked_mean(A))*(lp - masked_mean(lp)) < clip_cov_ub; no "
    "off-policy correction",
    "kl_cov": "compute_policy_loss_kl_cov: l = -A*r, plus ppo_kl_coef*|lp - old| on the top max(1, "
    "int(n_valid*kl_cov_frac)) valid tokens by (A - mean A)*(lp - mean lp); no off-policy correction",
    "dppo": "dppo_policy_loss: mu = rollout_logprobs (old_log_probs when None); r = exp(clamp(lp - mu, -20, 20)); "
    "l = -r*A*m, m = 0 (no grad) where binary_tv: A > 0 and p - p_mu > delta_high, or A < 0 and p_mu - p > "
    "delta_low; binary_kl: A > 0, p > p_mu and KL_bin > delta_high, or A < 0, p < p_mu and KL_bin > delta_low "
    "(p = exp(lp))",
    "rollout_is": "rollout_is_policy_loss: r = exp(clamp(lp - rollout, -20, 20)); l = -sg(r if 1-eps_clip_low < r < "
    "1+eps_clip_high else 0) * A * lp",
    "importance_sampling": "importance_sampling_loss: l = -exp(lp - old) * A, summed over the mask; no correction",
    "cross_entropy": "cross_entropy_loss: l = -lp summed over the mask (SFT; advantages unused)",
}
REDUCTIONS = {
    "token_mean": "A / loss_mask.sum().clamp(min=1) (whole mini-batch)",
    "token_mean_legacy": "per micro-batch of micro_batch_size rows: A / mb_mask.sum().clamp(min=1) / n_micro_batches",
    "sequence_mean": "A / (B * loss_mask.sum(-1).clamp(min=1)) per row",
    "seq_mean_token_sum_norm": "A / (B * max_seq_len)",
    "prompt_mean": "A / (n_prompts * tokens of the row's prompt group) (prompt_boundaries = the index's groups)",
}
CORRECTION = (
    "Off-policy correction (apply_off_policy_correction, when rollout_logprobs is given and a correction is set; "
    "rho = exp(clamp(old - rollout, -20, 20)) per token): outlier token mask (drop a whole row if any valid token "
    "has rho < outlier_token_is_threshold_low or > ..._high), token mask (drop a token with rho outside "
    "[token_mask_is_threshold_low, ..._high]), TIS (loss *= sg(min(rho, token_tis_ratio_clip_high)) per token, or "
    "sg(min(exp(sum_t mask*log rho), sequence_tis_ratio_clip_high)) per row), sequence mask (drop a row whose "
    "geometric mean rho is outside [geo_mask_low, geo_mask_high], or whose product is outside [product_mask_low, "
    "product_mask_high]); the masks multiply loss_mask before the sum"
)


KL_LOSS = (
    "The worker adds the KL loss (use_kl_loss): kl_loss_coef * masked_mean(compute_approx_kl(log_prob, ref_log_prob, "
    "loss_mask, kl_estimator_type), loss_mask, dim=-1).mean() per micro-batch, times microbatch_weight = micro-batch "
    "rows / mini-batch rows: a token mean per row (masked_mean clamps the count at 1), averaged over every row of the "
    "mini-batch (a fully masked row too), whatever loss_reduction says; its mask is loss_mask before the off-policy "
    "masks (those act inside the policy loss); k3: x = clamp(ref - lp, -20, 20), clamp(exp(x) - x - 1, -10, 10); "
    "k1: lp - ref; k2: (lp - ref)^2 / 2; abs: |lp - ref|"
)
WORKER_STUBS = {
    "transformers": (
        "AutoConfig",
        "AutoProcessor",
        "AutoTokenizer",
        "GenerationConfig",
        "PreTrainedModel",
        "PreTrainedTokenizer",
        "PreTrainedTokenizerBase",
        "PreTrainedTokenizerFast",
        "PretrainedConfig",
    ),
    "transformers.modeling_flash_attention_utils": ("_flash_attention_forward",),
    "transformers.modeling_utils": ("PreTrainedModel",),
    "datasets": (),
}


def _placeholder(module: str, name: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"stub {module}.{name} used")

    return type(name, (), {"__init__": refuse}) if name[0].isupper() else refuse


def _worker_module():
    """skyrl.backends.skyrl_train.workers.worker, imported with the placeholder modules of STUBS (once)."""
    for module, names in WORKER_STUBS.items():
        if module not in sys.modules:
            stub = types.ModuleType(module)
            for name in names:
                setattr(stub, name, _placeholder(module, name))
            sys.modules[module] = stub
    torch.cuda.current_device = lambda: torch.device("cpu")
    from skyrl.backends.skyrl_train.workers import worker

    return worker


class _Policy(torch.nn.Module):
    """The language model's stand-in: the log-probs of the rows named in sequences[:, 0], and zero entropy."""

    def __init__(self, log_prob: torch.Tensor):
        super().__init__()
        self.log_prob = log_prob

    def forward(self, sequences, num_actions, **kwargs):
        return self.log_prob[sequences[:, 0]], {"entropy": torch.zeros(sequences.shape)}


class _Strategy:
    """One rank: backward is loss.backward(); an all-reduce returns its input."""

    def backward(self, loss, model, optimizer):
        loss.backward()

    def all_reduce(self, data, op="mean", group=None):
        return data


def _prompt_boundaries(index: list[int]) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for i in range(1, len(index) + 1):
        if i == len(index) or index[i] != index[start]:
            bounds.append((start, i))
            start = i
    return bounds


def _config(p: dict):
    c = config_module
    return dataclasses.replace(
        c.AlgorithmConfig(),
        policy_loss_type=p["policy_loss_type"],
        loss_reduction=p["loss_reduction"],
        eps_clip_low=p.get("eps_clip_low", 0.2),
        eps_clip_high=p.get("eps_clip_high", 0.2),
        clip_ratio_c=p.get("clip_ratio_c", 3.0),
        max_seq_len=p.get("max_seq_len"),
        off_policy_correction=c.OffPolicyCorrectionConfig(**p.get("off_policy_correction", {})),
        sapo=c.SAPOConfig(**p.get("sapo", {})),
        cispo=c.CISPOConfig(**p.get("cispo", {})),
        dppo=c.DPPOConfig(**p.get("dppo", {})),
        clip_cov=c.ClipCovConfig(**p.get("clip_cov", {})),
        kl_cov=c.KLCovConfig(**p.get("kl_cov", {})),
    )


def _recorded_config(cfg, loss_type: str) -> dict:
    out = {
        "policy_loss_type": cfg.policy_loss_type,
        "loss_reduction": cfg.loss_reduction,
        "max_seq_len": cfg.max_seq_len,
        "eps_clip_low": cfg.eps_clip_low,
        "eps_clip_high": cfg.eps_clip_high,
        "clip_ratio_c": cfg.clip_ratio_c,
        "off_policy_correction": dataclasses.asdict(cfg.off_policy_correction),
    }
    for sub in ("sapo", "cispo", "dppo", "clip_cov", "kl_cov"):
        if loss_type == sub:
            out[sub] = dataclasses.asdict(getattr(cfg, sub))
    return out


def _run(p: dict, v: dict) -> tuple[dict, dict, dict]:
    cfg = _config(p)
    mask, advantages = v["mask"], v["advantages"]
    batch, width = mask.shape
    micro = p.get("micro_batch_size", batch)
    boundaries = _prompt_boundaries(v["index"]) if cfg.loss_reduction == "prompt_mean" else None
    normalized = ppo_utils.apply_loss_reduction_to_advantages_minibatch(
        advantages=advantages.clone(),
        loss_mask=mask,
        loss_reduction=cfg.loss_reduction,
        micro_batch_size=micro,
        max_seq_len=cfg.max_seq_len,
        prompt_boundaries=boundaries,
    )
    loss_fn = ppo_utils.PolicyLossRegistry.get(cfg.policy_loss_type)
    log_prob = v["log_prob"].clone().requires_grad_(True)
    rollout = v["rollout"] if p.get("rollout") else None
    total, metrics = None, []
    for start in range(0, batch, micro):
        rows = slice(start, start + micro)
        torch.manual_seed(0)
        loss, loss_metrics = loss_fn(
            log_prob[rows],
            v["old"][rows].clone(),
            normalized[rows].clone(),
            config=cfg,
            loss_mask=mask[rows].clone(),
            rollout_logprobs=None if rollout is None else rollout[rows].clone(),
        )
        total = loss if total is None else total + loss
        metrics.append(dict(sorted(loss_metrics.items())))
    total.backward()
    params = {
        "policy_loss_type": cfg.policy_loss_type,
        "function": loss_fn.__name__,
        "loss_reduction": cfg.loss_reduction,
        "micro_batch_size": micro,
        "prompt_boundaries": None if boundaries is None else [list(b) for b in boundaries],
        "rollout_logprobs_passed": rollout is not None,
        "config": _recorded_config(cfg, cfg.policy_loss_type),
        "inputs_variant": v["description"],
    }
    inputs = {
        "loss_mask": mask.tolist(),
        "advantages": advantages.tolist(),
        "index": v["index"],
        "log_prob": v["log_prob"].tolist(),
        "old_log_prob": v["old"].tolist(),
        "rollout_log_prob": None if rollout is None else rollout.tolist(),
    }
    outputs = {
        "normalized_advantages": normalized.tolist(),
        "loss": total.item(),
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": metrics,
    }
    return params, inputs, outputs


def _run_worker(p: dict, v: dict) -> tuple[dict, dict, dict]:
    """A KL-loss case: the reduction as in _run, then PolicyWorkerBase.forward_backward on the mini-batch."""
    worker = _worker_module()
    from skyrl.backends.skyrl_train.training_batch import TrainingInputBatch

    alg = dataclasses.replace(
        _config(p), use_kl_loss=True, kl_loss_coef=p["kl_loss_coef"], kl_estimator_type=p["kl_estimator_type"]
    )
    assert not alg.use_entropy_loss
    mask, advantages = v["mask"], v["advantages"]
    batch, width = mask.shape
    micro = p.get("micro_batch_size", batch)
    trainer_cfg = dataclasses.replace(
        config_module.TrainerConfig(), algorithm=alg, micro_train_batch_size_per_gpu=micro
    )
    boundaries = _prompt_boundaries(v["index"]) if alg.loss_reduction == "prompt_mean" else None
    normalized = ppo_utils.apply_loss_reduction_to_advantages_minibatch(
        advantages=advantages.clone(),
        loss_mask=mask,
        loss_reduction=alg.loss_reduction,
        micro_batch_size=micro,
        max_seq_len=alg.max_seq_len,
        prompt_boundaries=boundaries,
    )
    log_prob = v["log_prob"].clone().requires_grad_(True)
    rollout = v["rollout"] if p.get("rollout") else None
    sequences = torch.zeros(batch, width + 1, dtype=torch.long)
    sequences[:, 0] = torch.arange(batch)
    data = TrainingInputBatch(
        {
            "sequences": sequences,
            "attention_mask": torch.ones(batch, width + 1, dtype=torch.long),
            "action_log_probs": v["old"].clone(),
            "base_action_log_probs": v["ref"].clone(),
            "advantages": normalized.clone(),
            "loss_mask": mask.clone(),
            "response_mask": mask.clone(),
            "rollout_logprobs": None if rollout is None else rollout.clone(),
        }
    )
    data.metadata = {"response_length": width}
    policy = object.__new__(worker.PolicyWorkerBase)
    policy.__dict__.update(
        cfg=trainer_cfg,
        policy_loss_fn=ppo_utils.PolicyLossRegistry.get(alg.policy_loss_type),
        model=_Policy(log_prob),
        strategy=_Strategy(),
        mesh_rank=types.SimpleNamespace(dp_size=1),
        device_mesh=types.SimpleNamespace(get_group=lambda name: None),
        optimizer=None,
        scheduler=types.SimpleNamespace(get_last_lr=lambda: [0.0]),
    )
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU torch: "CUDA is not available ... Disabling autocast"
        result = worker.PolicyWorkerBase.forward_backward(policy, data)
    config = _recorded_config(alg, alg.policy_loss_type)
    config.update(
        use_kl_loss=alg.use_kl_loss,
        kl_loss_coef=alg.kl_loss_coef,
        kl_estimator_type=alg.kl_estimator_type,
        use_entropy_loss=alg.use_entropy_loss,
    )
    params = {
        "policy_loss_type": alg.policy_loss_type,
        "function": "PolicyWorkerBase.forward_backward",
        "loss_reduction": alg.loss_reduction,
        "micro_batch_size": micro,
        "prompt_boundaries": None if boundaries is None else [list(b) for b in boundaries],
        "rollout_logprobs_passed": rollout is not None,
        "config": config,
        "inputs_variant": v["description"],
    }
    inputs = {
        "loss_mask": mask.tolist(),
        "advantages": advantages.tolist(),
        "index": v["index"],
        "log_prob": v["log_prob"].tolist(),
        "old_log_prob": v["old"].tolist(),
        "rollout_log_prob": None if rollout is None else rollout.tolist(),
        "ref_log_prob": v["ref"].tolist(),
    }
    metrics = {k: val for k, val in sorted(result.metrics.items()) if k != "policy_lr"}
    outputs = {
        "normalized_advantages": normalized.tolist(),
        "loss": metrics["final_loss"],
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": [metrics],
    }
    return params, inputs, outputs


def _case_specs():
    specs = []

    def add(name, variant, note, **p):
        p.setdefault("loss_reduction", "token_mean")
        specs.append((name, variant, p, note))

    for variant in ("holes", "dense", "holes_large_drift", "holes_on_policy"):
        add(f"regular/token_mean/{variant}", variant, "PPO clip 0.2 / 0.2, token_mean", policy_loss_type="regular")
    for reduction, extra in (
        ("sequence_mean", {}),
        ("seq_mean_token_sum_norm", {"max_seq_len": 12}),
        ("prompt_mean", {}),
        ("token_mean_legacy", {"micro_batch_size": 3}),
    ):
        add(
            f"regular/{reduction}/holes",
            "holes",
            f"PPO clip 0.2 / 0.2, loss_reduction {reduction}"
            + (" (max_seq_len 12)" if "max_seq_len" in extra else "")
            + (" (micro-batches of 3 rows: two loss calls)" if "micro_batch_size" in extra else ""),
            policy_loss_type="regular",
            loss_reduction=reduction,
            **extra,
        )
    add(
        "regular_clip_higher/holes_large_drift",
        "holes_large_drift",
        "clip-higher: eps_clip_low 0.2, eps_clip_high 0.28",
        policy_loss_type="regular",
        eps_clip_high=0.28,
    )
    for variant in ("holes", "holes_large_drift"):
        add(f"dual_clip/{variant}", variant, "dual-clip PPO, clip_ratio_c 3.0", policy_loss_type="dual_clip")
    for variant in ("holes", "holes_large_drift"):
        add(
            f"gspo/sequence_mean/{variant}",
            variant,
            "GSPO with sequence_mean (its recommended reduction), eps 0.2 / 0.2",
            policy_loss_type="gspo",
            loss_reduction="sequence_mean",
        )
    for variant in ("holes", "holes_large_drift"):
        add(
            f"cispo/{variant}",
            variant,
            "CISPO with the defaults cispo_eps_clip_low 0, high 5",
            policy_loss_type="cispo",
        )
    add(
        "cispo_eps_0.2_0.28/holes",
        "holes",
        "CISPO with cispo_eps_clip_low 0.2, cispo_eps_clip_high 0.28",
        policy_loss_type="cispo",
        cispo={"cispo_eps_clip_low": 0.2, "cispo_eps_clip_high": 0.28},
    )
    for variant in ("holes", "holes_large_drift"):
        add(
            f"sapo/sequence_mean/{variant}",
            variant,
            "SAPO with sequence_mean, tau_pos 1.0, tau_neg 1.05 (defaults)",
            policy_loss_type="sapo",
            loss_reduction="sequence_mean",
        )
    add(
        "clip_cov/dense",
        "dense",
        "Clip-Cov with the defaults (clip_ratio 2e-4, bounds 1 and 5)",
        policy_loss_type="clip_cov",
    )
    add(
        "clip_cov_ratio_0.2/holes_large_drift",
        "holes_large_drift",
        "Clip-Cov with clip_ratio 0.2, clip_cov_lb 0.0, clip_cov_ub 5.0 (several tokens zeroed)",
        policy_loss_type="clip_cov",
        clip_cov={"clip_ratio": 0.2, "clip_cov_lb": 0.0, "clip_cov_ub": 5.0},
    )
    for variant in ("holes", "dense"):
        add(
            f"kl_cov/{variant}",
            variant,
            "KL-Cov with the defaults (kl_cov_frac 0.2, ppo_kl_coef 1.0)",
            policy_loss_type="kl_cov",
        )
    add(
        "dppo_binary_tv/holes",
        "holes",
        "DPPO binary_tv, delta 0.2 / 0.2, mu = rollout_logprobs",
        policy_loss_type="dppo",
        rollout=True,
    )
    add(
        "dppo_binary_tv/holes_large_drift",
        "holes_large_drift",
        "DPPO binary_tv, delta 0.2 / 0.2, mu = rollout_logprobs",
        policy_loss_type="dppo",
        rollout=True,
    )
    add(
        "dppo_binary_kl/holes_large_drift",
        "holes_large_drift",
        "DPPO binary_kl, delta 0.05 / 0.05 (the paper's KL values), mu = rollout_logprobs",
        policy_loss_type="dppo",
        dppo={"dppo_type": "binary_kl", "delta_low": 0.05, "delta_high": 0.05},
        rollout=True,
    )
    for variant in ("holes", "holes_large_drift"):
        add(f"rollout_is/{variant}", variant, "rollout_is, eps 0.2 / 0.2", policy_loss_type="rollout_is", rollout=True)
    add("importance_sampling/holes", "holes", "importance_sampling (Tinker's)", policy_loss_type="importance_sampling")
    add("cross_entropy/holes", "holes", "cross_entropy (SFT)", policy_loss_type="cross_entropy")
    corrections = [
        ("tis_token", "holes", {"tis_ratio_type": "token"}, "TIS per token, cap token_tis_ratio_clip_high 2.0"),
        (
            "tis_token_cap_1.2",
            "holes_large_drift",
            {"tis_ratio_type": "token", "token_tis_ratio_clip_high": 1.2},
            "TIS per token, cap 1.2",
        ),
        (
            "tis_sequence_cap_1.1",
            "holes_large_drift",
            {"tis_ratio_type": "sequence", "sequence_tis_ratio_clip_high": 1.1},
            "TIS per sequence, cap 1.1",
        ),
        (
            "geometric_mask",
            "holes",
            {"sequence_mask_metric": "geometric", "geo_mask_low": 0.95, "geo_mask_high": 1.05},
            "geometric sequence mask [0.95, 1.05]",
        ),
        ("product_mask", "holes_large_drift", {"sequence_mask_metric": "product"}, "product sequence mask [0.5, 2]"),
        (
            "outlier_token_mask",
            "holes_large_drift",
            {"outlier_token_is_threshold_low": 0.5, "outlier_token_is_threshold_high": 2.0},
            "outlier token mask (whole rows) [0.5, 2]",
        ),
        (
            "token_mask",
            "holes_large_drift",
            {"token_mask_is_threshold_low": 0.5, "token_mask_is_threshold_high": 2.0},
            "per-token mask [0.5, 2]",
        ),
        (
            "tis_token_and_token_mask",
            "holes_large_drift",
            {"tis_ratio_type": "token", "token_mask_is_threshold_low": 0.5, "token_mask_is_threshold_high": 2.0},
            "per-token mask [0.5, 2] then TIS per token (cap 2.0)",
        ),
    ]
    for name, variant, correction, note in corrections:
        add(
            f"regular_off_policy/{name}/{variant}",
            variant,
            f"PPO clip 0.2 with off_policy_correction: {note}",
            policy_loss_type="regular",
            off_policy_correction=correction,
            rollout=True,
        )
    # Added after the cases above (which keep their order and bytes): prompt_mean with a prompt group whose only
    # row is fully masked, and kl_cov under reductions that scale rows differently (its covariance then ranks the
    # scaled advantages, and its penalty stays outside the reduction).
    add(
        "regular/prompt_mean/dense",
        "dense",
        "PPO clip 0.2 / 0.2, loss_reduction prompt_mean (prompt 4 is row 10 alone, fully masked: it still counts)",
        policy_loss_type="regular",
        loss_reduction="prompt_mean",
    )
    for reduction in ("sequence_mean", "prompt_mean"):
        add(
            f"kl_cov_frac_0.3/{reduction}/dense",
            "dense",
            f"KL-Cov with kl_cov_frac 0.3, ppo_kl_coef 0.5, loss_reduction {reduction}",
            policy_loss_type="kl_cov",
            loss_reduction=reduction,
            kl_cov={"kl_cov_frac": 0.3, "ppo_kl_coef": 0.5},
        )
    # Added after the cases above: the worker's KL loss (PolicyWorkerBase.forward_backward), the same term under
    # every reduction, micro-batches of unequal size, a fully masked row, and off-policy masks (which it ignores).
    kl = dict(policy_loss_type="regular", kl_loss_coef=0.1, kl_estimator_type="k3", worker=True)
    for reduction, variant in (("token_mean", "holes"), ("sequence_mean", "holes"), ("token_mean", "dense")):
        add(
            f"regular_kl_loss/{reduction}/{variant}",
            variant,
            f"PPO clip 0.2 / 0.2, loss_reduction {reduction}, KL loss k3 with kl_loss_coef 0.1",
            **kl,
            loss_reduction=reduction,
        )
    add(
        "regular_kl_loss/prompt_mean/dense",
        "dense",
        "PPO clip 0.2 / 0.2, loss_reduction prompt_mean, KL loss k3 with kl_loss_coef 0.1",
        **kl,
        loss_reduction="prompt_mean",
    )
    add(
        "regular_kl_loss/token_mean/holes_on_policy",
        "holes_on_policy",
        "PPO at ratio 1, loss_reduction token_mean, KL loss k3 with kl_loss_coef 0.1",
        **kl,
    )
    add(
        "regular_kl_loss_k1/token_mean/holes_large_drift",
        "holes_large_drift",
        "PPO clip 0.2 / 0.2, loss_reduction token_mean, KL loss k1 with kl_loss_coef 0.1, micro-batches of 4 rows "
        "(4 + 2: two forward_backward micro-batches of unequal size)",
        **{**kl, "kl_estimator_type": "k1"},
        micro_batch_size=4,
    )
    add(
        "regular_kl_loss_k2/seq_mean_token_sum_norm/holes",
        "holes",
        "PPO clip 0.2 / 0.2, loss_reduction seq_mean_token_sum_norm (max_seq_len 12), KL loss k2 with kl_loss_coef 0.1",
        **{**kl, "kl_estimator_type": "k2"},
        loss_reduction="seq_mean_token_sum_norm",
        max_seq_len=12,
    )
    add(
        "regular_kl_loss_abs/sequence_mean/holes_large_drift",
        "holes_large_drift",
        "PPO clip 0.2 / 0.2, loss_reduction sequence_mean, KL loss abs with kl_loss_coef 0.1",
        **{**kl, "kl_estimator_type": "abs"},
        loss_reduction="sequence_mean",
    )
    add(
        "gspo_kl_loss/sequence_mean/holes",
        "holes",
        "GSPO with sequence_mean, KL loss k3 with kl_loss_coef 0.1",
        **{**kl, "policy_loss_type": "gspo"},
        loss_reduction="sequence_mean",
    )
    add(
        "regular_off_policy_kl_loss/token_mask/holes_large_drift",
        "holes_large_drift",
        "PPO clip 0.2 with off_policy_correction: per-token mask [0.5, 2], KL loss k3 with kl_loss_coef 0.1 (the "
        "masked tokens keep their KL gradient)",
        **kl,
        off_policy_correction={"token_mask_is_threshold_low": 0.5, "token_mask_is_threshold_high": 2.0},
        rollout=True,
    )
    return specs


def _build_cases() -> list[dict]:
    variants = {name: policy_inputs.variant(name) for name in policy_inputs.VARIANTS}
    cases = []
    covered = set()
    for name, variant_name, p, note in _case_specs():
        v = variants[variant_name]
        params, inputs, outputs = _run_worker(p, v) if p.get("worker") else _run(p, v)
        loss_type = params["policy_loss_type"]
        covered.add(loss_type)
        text = f"{note}. {NOTES[loss_type]}. Reduction ({params['loss_reduction']}): "
        text += f"{REDUCTIONS[params['loss_reduction']]}; the loss is sum_t l * loss_mask (after the corrections)"
        if p.get("off_policy_correction"):
            text += f". {CORRECTION}"
        if p.get("worker"):
            text += f". {KL_LOSS}"
        text += f". Inputs: {v['description']['note']}"
        cases.append({"name": name, "note": text, "params": params, "inputs": inputs, "outputs": outputs})
    registered = set(ppo_utils.PolicyLossRegistry.list_available())
    assert covered == registered, f"SkyRL registers {sorted(registered)}, covered {sorted(covered)}"
    return cases


def _reference() -> dict:
    root = Path(skyrl.__file__).parent
    functions = {
        name: ppo_utils.PolicyLossRegistry.get(name).__name__
        for name in sorted(ppo_utils.PolicyLossRegistry.list_available())
    }
    return {
        "repo": "NovaSky-AI/SkyRL",
        "version": SKYRL_VERSION,
        "package": f"skyrl=={SKYRL_VERSION} (PyPI)",
        "path": EXECUTED[0],
        "function": "apply_loss_reduction_to_advantages_minibatch, then PolicyLossRegistry.get(policy_loss_type) "
        "(the KL-loss cases: then workers/worker.py PolicyWorkerBase.forward_backward, which calls it and adds the KL "
        "loss)",
        "functions": functions,
        "registered_policy_losses": sorted(functions),
        "sha256": {
            rel: hashlib.sha256((root.parent / rel).read_bytes()).hexdigest() for rel in EXECUTED + EXECUTED_WORKER
        },
        "torch": torch.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"skyrl": (skyrl.__version__, SKYRL_VERSION), "torch": (torch.__version__, TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/skyrl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    cases = _build_cases()
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
