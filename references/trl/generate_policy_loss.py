"""Golden data for TRL's policy loss (the per-token weight after the advantage), GRPOTrainer called unmodified.

Run in the separate environment made by `bash references/setup_env.sh trl` (CreditLens itself never imports trl):

    .venv-references-trl/bin/python references/trl/generate_policy_loss.py

Writes tests/golden/trl_policy_loss.json. Running it again with the pinned versions reproduces the committed file
byte for byte (`--check` compares instead of writing). references/trl/generate.py writes the other TRL files and
is independent of this script.

Every case calls `GRPOTrainer._compute_loss(stub, None, inputs)` unbound, with a stub `self` carrying only the
attributes it reads, on a leaf float32 tensor `log_prob` that `self._get_per_token_logps_and_entropies` returns,
then `loss.backward()`: outputs.grad_log_prob = d loss / d log_prob. The cases with the vLLM importance-sampling
correction or the off-policy sequence mask first run `GRPOTrainer._generate_and_score_completions(stub, inputs)`
(as the trainer does), whose stubbed generation returns the rollout log-probs as vLLM's sampling log-probs and
whose stubbed forward pass returns `old`: TRL's own code computes `importance_sampling_ratio` from them. Its batch
dict goes to `_compute_loss` with one change, its `advantages` (TRL's GRPO of placeholder rewards) replaced by the
fixture's. Module-level helpers that need a distributed state or a model are replaced in
`trl.trainer.grpo_trainer` (listed in the file's `reference.stubs`); TRL's code is not edited.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import types
from collections import defaultdict
from pathlib import Path

import torch
import trl
import trl.trainer.grpo_trainer as grpo_module
from trl.trainer.grpo_trainer import GRPOTrainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)

OUT_FILE = "trl_policy_loss.json"
TRL_VERSION = "1.16.0"
TORCH_VERSION = "2.13.0+cpu"

MODULE_STUBS = [
    "trl.trainer.grpo_trainer.gather_object = identity (one process: accelerate's gather_object returns its "
    "input unchanged there, but needs an initialised accelerate state)",
    "trl.trainer.grpo_trainer.disable_gradient_checkpointing = contextlib.nullcontext (it only touches the model, "
    "and there is none)",
]
grpo_module.gather_object = lambda x: x
grpo_module.disable_gradient_checkpointing = lambda *args, **kwargs: contextlib.nullcontext()

STUBS = [
    "self: a types.SimpleNamespace carrying only the attributes listed in reference.self_attributes_read; reading "
    "any other raises (one process, training mode, current_gradient_accumulation_steps = steps_per_generation = 1, "
    "no entropy mask (top_entropy_quantile 1.0), no entropy bonus, no aux loss); the loss settings are each case's "
    "params",
    "self._get_per_token_logps_and_entropies: in _compute_loss returns (log_prob, zeros, None), log_prob a leaf "
    "float32 tensor [B, T] with requires_grad (the model's forward pass); in _generate_and_score_completions returns "
    "(old, None, None) (the no-grad recomputation of the sampled tokens' log-probs)",
    "self._generate (IS cases): prompts of 2 tokens; completion i has length L_i = 1 + the row's last valid "
    "position (T for a row without any); tool_mask_list = the fixture mask's first L_i entries (0 = a hole inside "
    "the completion); sampling_per_token_logps_list = rollout[i, :L_i] (vLLM's log-probs); no images, no extra "
    "fields",
    "self._calculate_rewards (IS cases): one reward function returning row_advantages (TRL standardises them in one "
    "group of B; those advantages are then replaced by the fixture's, see the format)",
    "self.get_off_policy_mask / self.get_gamma_weights: GRPOTrainer's own staticmethods (GRPOTrainer."
    "get_off_policy_mask, GRPOTrainer.get_gamma_weights), set on the stub",
    "self.accelerator: gather / gather_for_metrics / reduce = identity, num_processes = 1, process_index 0",
    "inputs.num_items_in_batch (direct cases): as _generate_and_score_completions computes it, "
    "accelerator.gather((completion_mask * tool_mask).sum()).sum()",
    *MODULE_STUBS,
]

FORMAT = (
    "Tensors are plain nested lists, [B, T] unless said. Inputs were torch.float32 (masks float32 0/1) when TRL ran; "
    "outputs are its float32 results widened to float64 by tolist(). Non-finite floats are the strings "
    "'nan'/'inf'/'-inf'. inputs.mask [B, T] is the loss mask (completion_mask * tool_mask), inputs.completion_mask "
    "and inputs.tool_mask what TRL received. inputs.advantages [B] is one scalar per row (TRL's shape; it "
    "unsqueezes to [B, 1]); inputs.token_advantages [B, T] the fixture's verl tensor it came from (not passed). "
    "inputs.log_prob = per_token_logps (the current policy, differentiated), inputs.old_log_prob = "
    "old_per_token_logps, inputs.rollout_log_prob = vLLM's sampling_per_token_logps (IS cases only), "
    "inputs.ref_log_prob = ref_per_token_logps (beta > 0 only). outputs.loss = the returned loss, "
    "outputs.grad_log_prob = d loss / d log_prob (autograd), outputs.metrics = every value _compute_loss appended "
    "to self._metrics['train'] (one call each), outputs.importance_sampling_ratio = the batch's "
    "importance_sampling_ratio ([B, T] for token modes, [B, 1] for sequence modes) and outputs.generation_metrics "
    "what _generate_and_score_completions logged about it (IS cases). params.path: 'direct' = inputs built as "
    "_generate_and_score_completions returns them (old_per_token_logps given, as with num_iterations > 1); "
    "'generate' = the batch dict of _generate_and_score_completions with its advantages replaced by "
    "inputs.advantages. Suggested tolerance: atol=1e-5, rtol=1e-5."
)


class Stub(types.SimpleNamespace):
    """`self` for the unbound calls: reading an attribute it does not carry is an error, and every attribute
    read is recorded (the file lists them)."""

    def __init__(self, reads: set[str], **kwargs):
        super().__init__(**kwargs)
        object.__setattr__(self, "_reads", reads)

    def __getattribute__(self, name):
        if not name.startswith("__") and name != "_reads":
            object.__getattribute__(self, "_reads").add(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        raise AttributeError(f"the stub self does not carry {name!r}: TRL read it")


class _Accelerator:
    num_processes = 1
    process_index = 0
    is_main_process = True
    sync_gradients = True
    device = "cpu"

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


class _DropLog(defaultdict):
    """self._logs[...]: completion tables for the UI; accepts and discards."""

    def __init__(self):
        super().__init__(list)

    def extend(self, values):
        pass

    def append(self, value):
        pass


# Every loss setting _compute_loss reads, with GRPOConfig's defaults (trl 1.16.0) except loss_type, which each
# case sets. epsilon_low = args.epsilon, epsilon_high = args.epsilon_high or args.epsilon (GRPOTrainer.__init__).
DEFAULTS = {
    "loss_type": "dapo",
    "importance_sampling_level": "token",
    "epsilon_low": 0.2,
    "epsilon_high": 0.2,
    "delta": None,
    "beta": 0.0,
    "use_bias_correction_kl": True,
    "sapo_temperature_pos": 1.0,
    "sapo_temperature_neg": 1.05,
    "vespo_k_pos": 2.0,
    "vespo_lambda_pos": 3.0,
    "vespo_k_neg": 3.0,
    "vespo_lambda_neg": 2.0,
    "off_policy_mask_threshold": None,
    "use_vllm": False,
    "vllm_importance_sampling_correction": False,
    "vllm_importance_sampling_mode": "sequence_mask",
    "vllm_importance_sampling_clip_min": None,
    "vllm_importance_sampling_clip_max": 3.0,
    "max_completion_length": None,  # each case: T
    "top_entropy_quantile": 1.0,
    "num_iterations": 1,  # read by _generate_and_score_completions only (old log-probs recomputed when > 1)
    "current_gradient_accumulation_steps": 1,
    "steps_per_generation": 1,
    "num_processes": 1,
}


def _loss_stub(reads, p, log_prob):
    stub = Stub(
        reads,
        top_entropy_quantile=p["top_entropy_quantile"],
        off_policy_mask_threshold=p["off_policy_mask_threshold"],
        importance_sampling_level=p["importance_sampling_level"],
        beta=p["beta"],
        loss_type=p["loss_type"],
        epsilon_low=p["epsilon_low"],
        epsilon_high=p["epsilon_high"],
        use_vllm=p["use_vllm"],
        vllm_importance_sampling_correction=p["vllm_importance_sampling_correction"],
        current_gradient_accumulation_steps=p["current_gradient_accumulation_steps"],
        max_completion_length=p["max_completion_length"],
        aux_loss_enabled=False,
        _entropy_bonus_enabled=False,
        model=types.SimpleNamespace(training=True),
        accelerator=_Accelerator(),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        args=types.SimpleNamespace(
            delta=p["delta"],
            use_bias_correction_kl=p["use_bias_correction_kl"],
            steps_per_generation=p["steps_per_generation"],
            sapo_temperature_pos=p["sapo_temperature_pos"],
            sapo_temperature_neg=p["sapo_temperature_neg"],
            vespo_k_pos=p["vespo_k_pos"],
            vespo_lambda_pos=p["vespo_lambda_pos"],
            vespo_k_neg=p["vespo_k_neg"],
            vespo_lambda_neg=p["vespo_lambda_neg"],
        ),
        # TRL's own staticmethods, reached through self
        get_off_policy_mask=GRPOTrainer.get_off_policy_mask,
        get_gamma_weights=GRPOTrainer.get_gamma_weights,
    )
    stub._get_per_token_logps_and_entropies = lambda *args, **kwargs: (
        log_prob,
        torch.zeros_like(log_prob),
        None,
    )
    return stub


def _lengths_and_tool_mask(mask: torch.Tensor):
    """Completion lengths (1 + last valid position; T for a row without one) and the tool mask inside them."""
    batch, width = mask.shape
    lengths = []
    for row in mask.tolist():
        valid = [t for t, m in enumerate(row) if m]
        lengths.append(valid[-1] + 1 if valid else width)
    completion_mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(width)] for n in lengths])
    tool_mask = torch.where(completion_mask > 0, mask, torch.ones_like(mask))  # padded with 1, as TRL pads it
    return lengths, completion_mask, tool_mask


def _generate_batch(reads, p, v, gen_metrics):
    """TRL's _generate_and_score_completions with vLLM sampling log-probs: the batch dict _compute_loss receives."""
    mask, old, rollout = v["mask"], v["old"], v["rollout"]
    batch = mask.shape[0]
    lengths, _, _ = _lengths_and_tool_mask(mask)
    stub = Stub(
        reads,
        accelerator=_Accelerator(),
        model=types.SimpleNamespace(training=True),
        environment_factories=None,
        environments=None,
        tools=None,
        num_generations=batch,
        num_generations_eval=batch,
        scale_rewards="group",
        multi_objective_aggregation="sum_then_normalize",
        reward_weights=torch.ones(1),
        reward_funcs=[None],
        reward_func_names=["reward"],
        mask_truncated_completions=False,
        pad_to_multiple_of=None,
        _is_vlm=False,
        use_vllm=p["use_vllm"],
        vllm_importance_sampling_correction=p["vllm_importance_sampling_correction"],
        vllm_importance_sampling_mode=p["vllm_importance_sampling_mode"],
        vllm_importance_sampling_clip_min=p["vllm_importance_sampling_clip_min"],
        vllm_importance_sampling_clip_max=p["vllm_importance_sampling_clip_max"],
        beta=0.0,
        num_iterations=p["num_iterations"],
        args=types.SimpleNamespace(
            steps_per_generation=1,
            gradient_accumulation_steps=1,
            per_device_train_batch_size=batch,
            gradient_checkpointing_kwargs=None,
        ),
        _metrics={"train": gen_metrics, "eval": defaultdict(list)},
        _logs=defaultdict(_DropLog),
        _pending_metrics=defaultdict(list),
        _pending_extra_logs=defaultdict(list),
        _tokenizer=types.SimpleNamespace(pad_token_id=0),
    )
    stub._generate = lambda prompts: (
        [[1, 2]] * len(prompts),
        [[3] * n for n in lengths],
        [[int(m) for m in row[:n]] for row, n in zip(mask.tolist(), lengths, strict=True)],
        ["c"] * len(prompts),
        [row[:n] for row, n in zip(rollout.tolist(), lengths, strict=True)],
        {},
        None,
        None,
    )
    stub._calculate_rewards = lambda inputs, prompts, completions, ids: v["row_advantages"].unsqueeze(1).clone()
    stub._get_per_token_logps_and_entropies = lambda *args, **kwargs: (old.clone(), None, None)
    out = GRPOTrainer._generate_and_score_completions(stub, [{"prompt": "p"} for _ in range(batch)])
    assert torch.equal(out["old_per_token_logps"], old), "old_per_token_logps"
    assert torch.equal(out["completion_mask"] * out["tool_mask"], mask.long()), "loss mask"
    return out


def _direct_batch(p, v):
    mask = v["mask"]
    batch, width = mask.shape
    _, completion_mask, tool_mask = _lengths_and_tool_mask(mask)
    inputs = {
        "prompt_ids": torch.ones(batch, 2, dtype=torch.long),
        "prompt_mask": torch.ones(batch, 2, dtype=torch.long),
        "completion_ids": torch.full((batch, width), 3, dtype=torch.long),
        "completion_mask": completion_mask.long(),
        "tool_mask": tool_mask.long(),
        "advantages": v["row_advantages"].clone(),
        "old_per_token_logps": v["old"].clone(),
        "num_items_in_batch": _Accelerator().gather((completion_mask * tool_mask).sum()).sum(),
    }
    if p["beta"] != 0.0:
        inputs["ref_per_token_logps"] = v["ref"].clone()
    return inputs


def _run(reads, p, v):
    gen_metrics = defaultdict(list)
    if p["path"] == "generate":
        inputs = _generate_batch(reads, p, v, gen_metrics)
        inputs["advantages"] = v["row_advantages"].clone()
        if p["beta"] != 0.0:  # the generation computes ref_per_token_logps from the ref model: the fixture's
            inputs["ref_per_token_logps"] = v["ref"].clone()
    else:
        inputs = _direct_batch(p, v)
    log_prob = v["log_prob"].clone().requires_grad_(True)
    stub = _loss_stub(reads, p, log_prob)
    loss = GRPOTrainer._compute_loss(stub, None, inputs)
    loss.backward()
    metrics = stub._metrics["train"]
    assert all(len(values) == 1 for values in metrics.values()), metrics
    outputs = {
        "loss": loss.item(),
        "grad_log_prob": log_prob.grad.tolist(),
        "metrics": {k: values[0] for k, values in sorted(metrics.items())},
    }
    if "importance_sampling_ratio" in inputs:
        outputs["importance_sampling_ratio"] = inputs["importance_sampling_ratio"].tolist()
    if gen_metrics:
        outputs["generation_metrics"] = {
            k: values[0] for k, values in sorted(gen_metrics.items()) if k.startswith("sampling/")
        }
    case_inputs = {
        "mask": v["mask"].tolist(),
        "completion_mask": inputs["completion_mask"].float().tolist(),
        "tool_mask": inputs["tool_mask"].float().tolist(),
        "advantages": v["row_advantages"].tolist(),
        "token_advantages": v["advantages"].tolist(),
        "index": v["index"],
        "log_prob": v["log_prob"].tolist(),
        "old_log_prob": v["old"].tolist(),
    }
    if p["path"] == "generate":
        case_inputs["rollout_log_prob"] = v["rollout"].tolist()
    if p["beta"] != 0.0:
        case_inputs["ref_log_prob"] = v["ref"].tolist()
    return case_inputs, outputs, int(inputs["num_items_in_batch"].item())


AGGREGATION = {
    "grpo": "mean over rows of sum_t(l * mask) / mask.sum(-1).clamp(min=1), then / current_gradient_accumulation_steps",
    "sapo": "as grpo: per-row token mean, mean over rows",
    "bnpo": "sum(l * mask) / mask.sum().clamp(min=1), then / current_gradient_accumulation_steps",
    "dr_grpo": "sum(l * mask) / (B * max_completion_length), then / current_gradient_accumulation_steps",
    "dapo": "sum(l * mask) / (num_items_in_batch.clamp(min=1) / num_processes * current_gradient_accumulation_steps "
    "/ steps_per_generation)",
    "cispo": "as dapo",
    "vespo": "as dapo",
    "luspo": "sum(l * mask, -1).mean() over rows (each sequence weighted by its length), then / "
    "current_gradient_accumulation_steps",
}
LOSS_NOTES = {
    "clip": "r = exp(log_prob - old) (token) or exp(sum_t(mask*(log_prob-old))/len) per row (sequence, GSPO: its "
    "gradient reaches every valid token of the row as r * A / len); l = -min(r*A, clamp(r, 1-eps_low, 1+eps_high)*A) "
    "(with delta: the first r is clamp(r, max=delta) first)",
    "cispo": "l = -sg(clamp(r, max=epsilon_high)) * A * log_prob (note: clamp at epsilon_high itself, not "
    "1+epsilon_high)",
    "sapo": "l = -sigmoid(tau*(r-1)) * 4/tau * A, tau = sapo_temperature_pos if A > 0 else sapo_temperature_neg",
    "vespo": "l = -sg(phi) * A * log_prob, phi = exp(lam + k*log w - lam*w) per row with log w = "
    "clamp(sum_t clamp(log_prob-old, -20, 20)*mask [+ sum_t clamp(log IS ratio)], log 1e-8, 20); (k, lam) = "
    "(k_pos, lambda_pos) if A >= 0 else (k_neg, lambda_neg)",
}


def _case_specs():
    """(name, variant, params overriding DEFAULTS, note) for every case."""
    specs = []

    def add(name, variant, note, **params):
        specs.append((name, variant, params, note))

    for variant in ("holes", "dense", "holes_large_drift", "holes_on_policy"):
        add(f"dapo/{variant}", variant, "loss_type dapo (the default), token-level ratio, epsilon 0.2")
    for loss_type in ("grpo", "bnpo", "dr_grpo"):
        add(
            f"{loss_type}/holes", "holes", f"loss_type {loss_type}, token-level ratio, epsilon 0.2", loss_type=loss_type
        )
    add("grpo/holes_large_drift", "holes_large_drift", "loss_type grpo, large drift", loss_type="grpo")
    for variant in ("holes", "holes_large_drift"):
        add(
            f"dapo_clip_higher/{variant}",
            variant,
            "clip-higher: epsilon 0.2, epsilon_high 0.28 (DAPO)",
            epsilon_high=0.28,
        )
    add(
        "grpo_two_sided_delta/holes_large_drift",
        "holes_large_drift",
        "two-sided clipping (INTELLECT-2): args.delta 1.5 caps the unclipped ratio, so a negative-advantage token "
        "with r > 1.5 keeps gradient r*A only below 1.5 (above it the capped term is constant: no gradient)",
        loss_type="grpo",
        delta=1.5,
    )
    for variant in ("holes", "holes_large_drift"):
        add(
            f"gspo/{variant}",
            variant,
            "GSPO: importance_sampling_level sequence with loss_type grpo",
            loss_type="grpo",
            importance_sampling_level="sequence",
        )
    add(
        "luspo/holes",
        "holes",
        "LUSPO: loss_type luspo with importance_sampling_level sequence",
        loss_type="luspo",
        importance_sampling_level="sequence",
    )
    add(
        "cispo/holes_large_drift",
        "holes_large_drift",
        "CISPO, epsilon_high 5.0 (ScaleRL)",
        loss_type="cispo",
        epsilon_high=5.0,
    )
    add("cispo/holes", "holes", "CISPO, epsilon_high 1.2 (clips in this range)", loss_type="cispo", epsilon_high=1.2)
    for variant in ("holes", "holes_large_drift"):
        add(f"sapo/{variant}", variant, "SAPO, temperatures 1.0 / 1.05 (defaults)", loss_type="sapo")
    add("vespo/holes_large_drift", "holes_large_drift", "VESPO, default k and lambda", loss_type="vespo")
    add(
        "dapo_beta/holes",
        "holes",
        "beta 0.04: + beta * k3 KL (exp(ref-lp) - (ref-lp) - 1) per token, times the ratio r (use_bias_correction_kl, "
        "the default; r is differentiable, so it changes the KL gradient even at r = 1)",
        beta=0.04,
    )
    add(
        "dapo_beta_no_bias_correction/holes",
        "holes",
        "beta 0.04 with use_bias_correction_kl False: + beta * k3 KL per token",
        beta=0.04,
        use_bias_correction_kl=False,
    )
    add(
        "dapo_beta/holes_on_policy",
        "holes_on_policy",
        "beta 0.04 at ratio 1 (bias correction on)",
        beta=0.04,
    )
    vllm = {"path": "generate", "use_vllm": True, "vllm_importance_sampling_correction": True}
    for mode in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
        add(
            f"dapo_vllm_is/{mode}/holes",
            "holes",
            f"vLLM IS correction, mode {mode}, clip_max 3.0 (default), clip_min None",
            vllm_importance_sampling_mode=mode,
            **vllm,
        )
    for mode in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
        add(
            f"dapo_vllm_is/{mode}_clip_min_0.5/holes_large_drift",
            "holes_large_drift",
            f"vLLM IS correction, mode {mode}, clip_min 0.5, clip_max 3.0 (large rollout drift: bounds fire)",
            vllm_importance_sampling_mode=mode,
            vllm_importance_sampling_clip_min=0.5,
            **vllm,
        )
    add(
        "gspo_vllm_is/sequence_mask/holes_large_drift",
        "holes_large_drift",
        "GSPO (grpo, sequence level) with the vLLM IS correction sequence_mask, clip_max 3.0",
        loss_type="grpo",
        importance_sampling_level="sequence",
        vllm_importance_sampling_mode="sequence_mask",
        **vllm,
    )
    add(
        "vespo_vllm_is/token_truncate/holes_large_drift",
        "holes_large_drift",
        "VESPO with the vLLM IS correction token_truncate: the IS ratio enters phi's log w, not the per-token loss",
        loss_type="vespo",
        vllm_importance_sampling_mode="token_truncate",
        **vllm,
    )
    add(
        "dapo_off_policy_mask/holes_large_drift",
        "holes_large_drift",
        "off_policy_mask_threshold 0.05 (DeepSeek-V3.2 OPSM): a row with A < 0 and mean_t(rollout - log_prob) > 0.05 "
        "is dropped; sampling_per_token_logps from the generation (use_vllm False: no IS ratio; num_iterations 2, so "
        "the generation recomputes old_per_token_logps)",
        off_policy_mask_threshold=0.05,
        path="generate",
        num_iterations=2,
    )
    return specs


def _note(p, base):
    lt = p["loss_type"]
    formula = LOSS_NOTES["clip"] if lt in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo") else LOSS_NOTES[lt]
    return f"{base}. {formula}. Aggregation ({lt}): {AGGREGATION[lt]}"


def _build_cases(reads: set[str]) -> list[dict]:
    variants = {name: policy_inputs.variant(name) for name in policy_inputs.VARIANTS}
    cases = []
    for name, variant_name, overrides, note in _case_specs():
        v = variants[variant_name]
        p = dict(DEFAULTS, path="direct")
        p.update(overrides)
        p["max_completion_length"] = v["mask"].shape[1]
        case_inputs, outputs, num_items = _run(reads, p, v)
        params = {k: p[k] for k in ("path", *DEFAULTS)}
        params["num_items_in_batch"] = num_items
        params["inputs_variant"] = v["description"]
        cases.append(
            {
                "name": name,
                "note": f"{_note(p, note)}. Inputs: {v['description']['note']}",
                "params": params,
                "inputs": case_inputs,
                "outputs": outputs,
            }
        )
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"trl": (trl.__version__, TRL_VERSION), "torch": (torch.__version__, TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/trl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    reads: set[str] = set()
    cases = _build_cases(reads)
    reference = {
        "repo": "huggingface/trl",
        "version": TRL_VERSION,
        "package": f"trl=={TRL_VERSION} (PyPI)",
        "path": "trl/trainer/grpo_trainer.py",
        "function": "GRPOTrainer._compute_loss (IS cases: after GRPOTrainer._generate_and_score_completions)",
        "sha256": hashlib.sha256(Path(grpo_module.__file__).read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "stubs": STUBS,
        "self_attributes_read": sorted(reads),
    }
    text = golden_io.dump({"reference": reference, "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
