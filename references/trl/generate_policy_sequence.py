"""Golden data for TRL's sequence-level ratios in the policy loss, GRPOTrainer called unmodified.

Run in the environment of the other TRL harnesses (`bash references/setup_env.sh trl`):

    .venv-references-trl/bin/python references/trl/generate_policy_sequence.py

Writes tests/golden/trl_policy_sequence.json (`--check` compares instead of writing). The loss cases run exactly as
those of `generate_policy_loss.py` (imported: its stubs, its `_run`, its shared inputs), on what that file does not
hold:

* the KL term (beta > 0) under a sequence-level ratio: GSPO (loss_type grpo, importance_sampling_level sequence),
  LUSPO, dapo at sequence level, with use_bias_correction_kl on (TRL's default: the per-token k3 times the row's
  differentiable sequence ratio coef_1 [B, 1]) and off;
* the KL term under VESPO (token level, TRL's default: k3 times the token ratio; with the vLLM token IS correction);
* TRL's k3 far from the reference (`holes_far_ref`): TRL computes exp(ref - lp) - (ref - lp) - 1 with no clamp;
* VESPO with the sequence-level vLLM IS modes. `GRPOTrainer.__init__` refuses them (the `init/...` cases: the
  constructor run on a tiny randomly initialised Llama built from a config, a word-level tokenizer built in memory
  and a two-prompt dataset, nothing downloaded, `is_vllm_available` stubbed to True so that the check is reached;
  the token modes pass the check and stop later, at vLLM's import, which is recorded too). The `compute_loss/...`
  cases record what `_compute_loss`, called unbound, computes for them anyway (the row's log IS ratio enters
  log w once: `torch.sum` over a [B, 1] tensor).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import tempfile
from pathlib import Path

import torch
import trl
import trl.trainer.grpo_trainer as grpo_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import generate_policy_loss as base  # noqa: E402  (its module stubs apply here too)
import golden_io  # noqa: E402
import policy_inputs  # noqa: E402

OUT_FILE = "trl_policy_sequence.json"
FAR_SHIFT = 11.0  # holes_far_ref: old, log_prob and rollout moved this far below ref on some tokens


def far_ref_variant() -> dict:
    """The `holes` inputs with old, log_prob and rollout lowered by FAR_SHIFT on the valid tokens where
    (row + position) % 4 == 0, ref left as it is: there ref - log_prob is about 11 and k3 about e^11."""
    v = policy_inputs.variant("holes")
    mask = v["mask"]
    rows, cols = torch.meshgrid(torch.arange(mask.shape[0]), torch.arange(mask.shape[1]), indexing="ij")
    far = (mask > 0) & ((rows + cols) % 4 == 0)
    for key in ("old", "log_prob", "rollout"):
        v[key] = torch.where(far, v[key] - FAR_SHIFT, v[key])
    description = dict(v["description"])
    description["name"] = "holes_far_ref"
    description["note"] = (
        f"{description['note']}; then old, log_prob and rollout minus {FAR_SHIFT} on the valid tokens where "
        "(row + position) % 4 == 0 (ref unchanged: k3 = exp(ref - lp) - (ref - lp) - 1 reaches about e^11 there)"
    )
    description["recipe"] = f"{description['recipe']}; then the shift above"
    v["description"] = description
    return v


def _case_specs():
    """(name, variant, params overriding base.DEFAULTS, note)."""
    specs = []

    def add(name, variant, note, **params):
        specs.append((name, variant, params, note))

    sequence = {"loss_type": "grpo", "importance_sampling_level": "sequence"}
    for variant in ("holes", "holes_large_drift", "holes_on_policy", "dense"):
        add(
            f"gspo_beta/{variant}",
            variant,
            "GSPO with beta 0.04: + beta * k3 * coef_1, coef_1 = exp(sum_t(mask*(lp-old))/len) the row's sequence "
            "ratio (use_bias_correction_kl, the default), differentiated through the row",
            beta=0.04,
            **sequence,
        )
    add(
        "gspo_beta_no_bias_correction/holes_large_drift",
        "holes_large_drift",
        "GSPO with beta 0.04, use_bias_correction_kl False: + beta * k3 per token",
        beta=0.04,
        use_bias_correction_kl=False,
        **sequence,
    )
    add(
        "luspo_beta/holes_large_drift",
        "holes_large_drift",
        "LUSPO (sequence level) with beta 0.04: the KL times the row's sequence ratio",
        loss_type="luspo",
        importance_sampling_level="sequence",
        beta=0.04,
    )
    add(
        "dapo_sequence_beta/holes_large_drift",
        "holes_large_drift",
        "dapo at importance_sampling_level sequence (TRL warns, runs) with beta 0.04",
        importance_sampling_level="sequence",
        beta=0.04,
    )
    add(
        "gspo_vllm_is_beta/sequence_truncate/holes_large_drift",
        "holes_large_drift",
        "GSPO with beta 0.04 and the vLLM IS correction sequence_truncate (the KL is added after the IS weight)",
        beta=0.04,
        vllm_importance_sampling_mode="sequence_truncate",
        **sequence,
        **base_vllm(),
    )
    for variant in ("holes", "holes_large_drift"):
        add(
            f"vespo_beta/{variant}",
            variant,
            "VESPO (token level, the default) with beta 0.04: + beta * k3 * the token ratio",
            loss_type="vespo",
            beta=0.04,
        )
    add(
        "vespo_beta_no_bias_correction/holes_large_drift",
        "holes_large_drift",
        "VESPO with beta 0.04, use_bias_correction_kl False",
        loss_type="vespo",
        beta=0.04,
        use_bias_correction_kl=False,
    )
    add(
        "vespo_vllm_is_beta/token_mask/holes_large_drift",
        "holes_large_drift",
        "VESPO with beta 0.04 and the vLLM IS correction token_mask, clip_min 0.5",
        loss_type="vespo",
        beta=0.04,
        vllm_importance_sampling_mode="token_mask",
        vllm_importance_sampling_clip_min=0.5,
        **base_vllm(),
    )
    for name, params in (
        ("dapo_beta", {}),
        ("gspo_beta", sequence),
        ("vespo_beta", {"loss_type": "vespo"}),
    ):
        add(
            f"{name}/holes_far_ref",
            "holes_far_ref",
            "beta 0.04 far from the reference: TRL's k3 is not clamped",
            beta=0.04,
            **params,
        )
    for mode in ("sequence_mask", "sequence_truncate"):
        for variant, clip_min in (("holes", None), ("holes_large_drift", 0.5)):
            add(
                f"compute_loss/vespo_vllm_is/{mode}/{variant}",
                variant,
                f"VESPO with the vLLM IS correction {mode} (clip_min {clip_min}), _compute_loss called unbound: "
                "GRPOTrainer.__init__ refuses this configuration (see the init/ cases)",
                loss_type="vespo",
                vllm_importance_sampling_mode=mode,
                vllm_importance_sampling_clip_min=clip_min,
                **base_vllm(),
            )
    return specs


def base_vllm() -> dict:
    return {"path": "generate", "use_vllm": True, "vllm_importance_sampling_correction": True}


def _loss_cases(reads: set[str]) -> list[dict]:
    variants = {name: policy_inputs.variant(name) for name in policy_inputs.VARIANTS}
    variants["holes_far_ref"] = far_ref_variant()
    cases = []
    for name, variant_name, overrides, note in _case_specs():
        v = variants[variant_name]
        p = dict(base.DEFAULTS, path="direct")
        p.update(overrides)
        p["max_completion_length"] = v["mask"].shape[1]
        case_inputs, outputs, num_items = base._run(reads, p, v)
        params = {k: p[k] for k in ("path", *base.DEFAULTS)}
        params["num_items_in_batch"] = num_items
        params["inputs_variant"] = v["description"]
        cases.append(
            {
                "name": name,
                "note": f"{base._note(p, note)}. Inputs: {v['description']['note']}",
                "params": params,
                "inputs": case_inputs,
                "outputs": outputs,
            }
        )
    return cases


INIT_STUBS = [
    "trl.trainer.grpo_trainer.is_vllm_available = lambda: True (init cases: vLLM is not installed; the VESPO check "
    "comes after this one, the vLLM client is built after both)",
    "init cases: model = transformers.LlamaForCausalLM(LlamaConfig(vocab_size=4, hidden_size=8, "
    "intermediate_size=8, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1)) randomly initialised; "
    "processing_class = PreTrainedTokenizerFast over a tokenizers WordLevel vocabulary {<pad>, <eos>, a, b}; "
    "train_dataset = datasets.Dataset.from_dict({'prompt': ['a b', 'b a']}); reward_funcs = one function returning 0",
]


def _init_cases() -> list[dict]:
    """GRPOTrainer(...) with loss_type vespo, use_vllm and each vLLM IS mode: what the constructor raises."""
    from datasets import Dataset
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    grpo_module.is_vllm_available = lambda *args, **kwargs: True
    torch.manual_seed(0)
    vocab = {"<pad>": 0, "<eos>": 1, "a": 2, "b": 3}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="a")), pad_token="<pad>", eos_token="<eos>"
    )
    config = LlamaConfig(
        vocab_size=4,
        hidden_size=8,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        pad_token_id=0,
        eos_token_id=1,
    )
    model = LlamaForCausalLM(config)
    cases = []
    for mode in ("sequence_mask", "sequence_truncate", "token_truncate", "token_mask"):
        with tempfile.TemporaryDirectory() as out:
            args = trl.GRPOConfig(
                output_dir=out,
                loss_type="vespo",
                use_vllm=True,
                vllm_importance_sampling_correction=True,
                vllm_importance_sampling_mode=mode,
                per_device_train_batch_size=2,
                num_generations=2,
                max_completion_length=4,
                report_to=[],
                use_cpu=True,
            )
            try:
                grpo_module.GRPOTrainer(
                    model=model,
                    reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
                    args=args,
                    train_dataset=Dataset.from_dict({"prompt": ["a b", "b a"]}),
                    processing_class=tokenizer,
                )
                raise AssertionError(f"GRPOTrainer accepted vespo with {mode} and no vLLM")
            except (ValueError, ImportError) as e:
                error = f"{type(e).__name__}: {e}"
        refused = error.startswith("ValueError")
        cases.append(
            {
                "name": f"init/vespo_vllm_is/{mode}",
                "note": (
                    f"GRPOTrainer(args=GRPOConfig(loss_type='vespo', use_vllm=True, "
                    f"vllm_importance_sampling_mode='{mode}')): "
                    + (
                        "the constructor refuses the configuration"
                        if refused
                        else "the VESPO check passes; the constructor stops later, at vLLM's import (not installed)"
                    )
                ),
                "params": {
                    **base.DEFAULTS,
                    "loss_type": "vespo",
                    "use_vllm": True,
                    "vllm_importance_sampling_correction": True,
                    "vllm_importance_sampling_mode": mode,
                    "path": "init",
                },
                "inputs": {},
                "outputs": {"error": error} if refused else {"passed_vespo_check": True, "stopped_at": error},
            }
        )
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"trl": (trl.__version__, base.TRL_VERSION), "torch": (torch.__version__, base.TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/trl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    logging.disable(logging.WARNING)  # TRL's warnings about the configurations tried (recorded in the notes)
    reads: set[str] = set()
    cases = _loss_cases(reads) + _init_cases()
    reference = {
        "repo": "huggingface/trl",
        "version": base.TRL_VERSION,
        "package": f"trl=={base.TRL_VERSION} (PyPI)",
        "path": "trl/trainer/grpo_trainer.py",
        "function": "GRPOTrainer._compute_loss (IS cases: after GRPOTrainer._generate_and_score_completions); "
        "init cases: GRPOTrainer.__init__",
        "sha256": hashlib.sha256(Path(grpo_module.__file__).read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "stubs": [*base.STUBS, *INIT_STUBS],
        "self_attributes_read": sorted(reads),
    }
    text = golden_io.dump({"reference": reference, "format": base.FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
