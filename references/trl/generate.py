"""Golden data from TRL's GRPOTrainer, called unmodified.

Run in the separate environment made by `bash references/setup_env.sh trl` (CreditLens itself never imports trl):

    .venv-references-trl/bin/python references/trl/generate.py

Writes tests/golden/trl_grpo_advantages.json and tests/golden/trl_grpo_loss_weights.json. Running it again
with the pinned versions reproduces the committed files byte for byte (`--check` compares instead of writing).

The two methods are called unbound with a stub `self` that carries only the attributes they read
(`GRPOTrainer._generate_and_score_completions(stub, inputs)`, `GRPOTrainer._compute_loss(stub, None, inputs)`):
no model, tokenizer or Trainer is built. Module-level helpers that need a distributed state or a model are
replaced in `trl.trainer.grpo_trainer` (listed in each file's `reference.stubs`); TRL's code is not edited.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
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

TRL_VERSION = "1.16.0"
TORCH_VERSION = "2.13.0+cpu"
NAN = float("nan")

FORMAT = (
    "Tensors are plain nested lists (row-major). Inputs were materialised as torch.float32 (masks float32 0/1) "
    "before calling the reference; outputs are its float32 results widened to float64 by tolist(). Non-finite "
    "floats are encoded as strings 'nan'/'inf'/'-inf'. Suggested tolerance: atol=1e-5, rtol=1e-5."
)

# Only these module-level names are replaced; everything else in trl.trainer.grpo_trainer runs as shipped.
MODULE_STUBS = [
    "trl.trainer.grpo_trainer.gather_object = identity (one process: accelerate's gather_object returns its "
    "input unchanged there, but needs an initialised accelerate state)",
    "trl.trainer.grpo_trainer.disable_gradient_checkpointing = contextlib.nullcontext (it only touches the model, "
    "and there is none)",
]
grpo_module.gather_object = lambda x: x
grpo_module.disable_gradient_checkpointing = lambda *args, **kwargs: contextlib.nullcontext()


class Stub(types.SimpleNamespace):
    """`self` for the unbound calls: reading an attribute it does not carry is an error, and every attribute
    read is recorded (the files list them)."""

    def __init__(self, reads: set[str], **kwargs):
        super().__init__(**kwargs)
        object.__setattr__(self, "_reads", reads)

    def __getattribute__(self, name):
        if not name.startswith("__") and name != "_reads":
            object.__getattribute__(self, "_reads").add(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        raise AttributeError(f"the stub self does not carry {name!r}: TRL read it")


def _f32(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def _reference(function: str, stubs: list[str]) -> dict:
    path = Path(grpo_module.__file__)
    return {
        "repo": "huggingface/trl",
        "version": TRL_VERSION,
        "package": f"trl=={TRL_VERSION} (PyPI)",
        "path": "trl/trainer/grpo_trainer.py",
        "function": function,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "stubs": stubs,
    }


# --------------------------------------------------------------------------------------------------------------
# File 1: _generate_and_score_completions (advantages)
# --------------------------------------------------------------------------------------------------------------


class _Accelerator:
    device = "cpu"
    process_index = 0
    num_processes = 1
    is_main_process = True

    def gather(self, x):
        return x


class _DropLog(defaultdict):
    """self._logs[...]: completion tables for the UI; accepts and discards."""

    def __init__(self):
        super().__init__(list)

    def extend(self, values):
        pass

    def append(self, value):
        pass


def _advantage_stub(reads, rewards_per_func, num_generations, weights, names, scale, aggregation):
    batch = rewards_per_func.shape[0]
    stub = Stub(
        reads,
        accelerator=_Accelerator(),
        model=types.SimpleNamespace(training=True),
        environment_factories=None,
        environments=None,
        tools=None,
        num_generations=num_generations,
        num_generations_eval=num_generations,
        scale_rewards=scale,
        multi_objective_aggregation=aggregation,
        reward_weights=torch.tensor(weights, dtype=torch.float32),  # as GRPOTrainer.__init__ builds it
        reward_funcs=[None] * len(names),
        reward_func_names=list(names),
        mask_truncated_completions=False,
        pad_to_multiple_of=None,
        _is_vlm=False,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        beta=0.0,
        num_iterations=1,
        args=types.SimpleNamespace(
            steps_per_generation=1,
            gradient_accumulation_steps=1,
            per_device_train_batch_size=batch,
            gradient_checkpointing_kwargs=None,
        ),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _logs=defaultdict(_DropLog),
        _pending_metrics=defaultdict(list),
        _pending_extra_logs=defaultdict(list),
        _tokenizer=types.SimpleNamespace(pad_token_id=0),
    )
    # Generation: every prompt 2 tokens, every completion 4 tokens (they play no part in the advantages).
    stub._generate = lambda prompts: (
        [[1, 2]] * len(prompts),
        [[3, 3, 3, 3]] * len(prompts),
        None,
        ["c"] * len(prompts),
        None,
        {},
        None,
        None,
    )
    # Rewards: TRL's own _calculate_rewards calls the reward functions, turns None into NaN and gathers.
    stub._calculate_rewards = lambda inputs, prompts, completions, completion_ids_list: rewards_per_func.clone()
    return stub


ADVANTAGE_STUBS = [
    "self: a types.SimpleNamespace carrying only the attributes listed in reference.self_attributes_read "
    "(one process, training mode, no vLLM, beta = 0, num_iterations = steps_per_generation = "
    "gradient_accumulation_steps = 1, no tools or environments)",
    "self._generate: returns fixed token ids (2 prompt and 4 completion tokens per row), no tool mask, no "
    "sampling log-probs, no images",
    "self._calculate_rewards: returns inputs.rewards_per_func as float32 (TRL's own calls the reward functions, "
    "maps None to NaN and gathers over processes; NaN here = that reward function returned None)",
    "self.accelerator.gather: identity (one process)",
    *MODULE_STUBS,
]

# Reward sets: [B, F] rows, consecutive groups of num_generations (one group a line). F = 2 reward functions.
# fmt: off
REWARD_SETS = [
    (
        "plain",
        "distinct weighted rewards in every group",
        3,
        (1.0, 1.0),
        [[1.0, 0.0], [0.5, 0.0], [0.0, 0.25],
         [0.2, 0.9], [0.7, 0.1], [1.0, 1.0],
         [0.0, 0.0], [0.3, 0.6], [0.9, 0.4],
         [0.6, 0.2], [0.1, 0.1], [0.8, 0.7]],
    ),
    (
        "weights_1_0.5",
        "the plain rewards with reward_weights (1.0, 0.5)",
        3,
        (1.0, 0.5),
        None,  # = plain
    ),
    (
        "tie_group",
        "group 1 has three identical rows (0.5, 0.5); group 2 ties on the weighted sum (1.0) with different "
        "per-function rewards; std 0 -> advantage 0 / (0 + 1e-4) = 0",
        3,
        (1.0, 1.0),
        [[1.0, 0.0], [0.5, 0.0], [0.0, 0.25],
         [0.5, 0.5], [0.5, 0.5], [0.5, 0.5],
         [1.0, 0.0], [0.0, 1.0], [0.5, 0.5],
         [0.6, 0.2], [0.1, 0.1], [0.8, 0.7]],
    ),
    (
        "nan_in_one_function",
        "rows 1, 5, 10 have NaN in one reward function (it returned None): the weighted nansum counts it as 0",
        3,
        (1.0, 1.0),
        [[1.0, 0.0], [0.5, NAN], [0.0, 0.25],
         [0.2, 0.9], [0.7, 0.1], [NAN, 1.0],
         [0.0, 0.0], [0.3, 0.6], [0.9, 0.4],
         [0.6, 0.2], [0.1, NAN], [0.8, 0.7]],
    ),
    (
        "one_unscorable_row",
        "row 4 has NaN in every reward function (unscorable): excluded from its group's mean and std, advantage 0",
        3,
        (1.0, 1.0),
        [[1.0, 0.0], [0.5, 0.0], [0.0, 0.25],
         [0.2, 0.9], [NAN, NAN], [1.0, 1.0],
         [0.0, 0.0], [0.3, 0.6], [0.9, 0.4],
         [0.6, 0.2], [0.1, 0.1], [0.8, 0.7]],
    ),
    (
        "two_unscorable_in_group",
        "rows 6 and 7 are unscorable, so group 2 has one scorable row (8): its nanstd is NaN (Bessel correction "
        "of a single value), its advantage NaN, and nan_to_num makes it 0",
        3,
        (1.0, 1.0),
        [[1.0, 0.0], [0.5, 0.0], [0.0, 0.25],
         [0.2, 0.9], [0.7, 0.1], [1.0, 1.0],
         [NAN, NAN], [NAN, NAN], [0.9, 0.4],
         [0.6, 0.2], [0.1, 0.1], [0.8, 0.7]],
    ),
    (
        "num_generations_2",
        "B = 8 in groups of 2; group 3 is a tie",
        2,
        (1.0, 1.0),
        [[1.0, 0.0], [0.0, 0.5],
         [0.2, 0.9], [0.7, 0.1],
         [0.3, 0.6], [0.9, 0.4],
         [0.5, 0.5], [0.5, 0.5]],
    ),
    (
        "magnitudes",
        "group 0 around 1e3 (std ~0.15), group 1 around 1e-3 (std ~1e-3, comparable to eps = 1e-4), group 2 "
        "spans 1e-3 .. 1e3, group 3 around 1e-6 (std << eps). Row 0 (1000.1) is group 0's mean in decimal, so its "
        "advantage is 0 in exact arithmetic; in float32 the group mean is 1000.1000366 (one ulp above float32(1000.1)) "
        "and that rounding, divided by (std + 1e-4), gives -4.07e-4 under scale_rewards group and -6.1e-5 under none: "
        "matching those to 1e-5 needs the same float32 mean (torch.nanmean over the group)",
        3,
        (1.0, 1.0),
        [[1000.1, 0.0], [1000.25, 0.0], [999.95, 0.0],
         [0.0011, 0.0005], [0.0021, 0.0001], [0.0003, 0.0],
         [1000.0, 0.001], [0.001, 1000.0], [0.5, 0.002],
         [1.0e-6, 2.0e-6], [3.0e-6, 0.0], [0.0, 0.5e-6]],
    ),
]
# fmt: on
NORMALIZE_THEN_SUM_SETS = {"plain", "weights_1_0.5", "nan_in_one_function", "one_unscorable_row"}


def _advantage_cases(reads: set[str]) -> list[dict]:
    names = ["reward_a", "reward_b"]
    plain_rows = REWARD_SETS[0][4]
    cases = []
    for set_name, set_note, num_generations, weights, rows in REWARD_SETS:
        rewards_per_func = _f32(plain_rows if rows is None else rows)
        batch = rewards_per_func.shape[0]
        runs = [("sum_then_normalize", scale) for scale in ("group", "batch", "none")]
        if set_name in NORMALIZE_THEN_SUM_SETS:
            runs.append(("normalize_then_sum", "group"))
        for aggregation, scale in runs:
            stub = _advantage_stub(reads, rewards_per_func, num_generations, weights, names, scale, aggregation)
            inputs = [{"prompt": f"prompt {i // num_generations}"} for i in range(batch)]
            out = GRPOTrainer._generate_and_score_completions(stub, inputs)
            advantages = out["advantages"]
            assert advantages.dtype == torch.float32 and advantages.shape == (batch,)

            # `rewards` as TRL logs it (the statement after the process slice in _generate_and_score_completions,
            # restated here because only its nanmean/nanstd reach self._metrics); checked against those metrics.
            rewards = (rewards_per_func * stub.reward_weights.unsqueeze(0)).nansum(dim=1)
            rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            metrics = stub._metrics["train"]
            for logged, mine in (
                (metrics["reward"][-1], torch.nanmean(rewards).item()),
                (metrics["reward_std"][-1], grpo_module.nanstd(rewards).item()),
            ):
                assert logged == mine or (math.isnan(logged) and math.isnan(mine)), (set_name, logged, mine)

            note = set_note
            if aggregation == "normalize_then_sum":
                note += (
                    "; normalize_then_sum: each reward function is standardised within its group "
                    "((r - nanmean) / (nanstd + 1e-4)), the weighted nansum of those is standardised over the "
                    "whole batch; scale_rewards is not read on this branch (the value here is only recorded)"
                )
            note += (
                "; outputs.rewards = the weighted nansum TRL logs (rewards_per_func * reward_weights).nansum(1), "
                "NaN for unscorable rows, recomputed with TRL's logging statement and checked against the "
                "logged reward mean and std"
            )
            cases.append(
                {
                    "name": f"{set_name}/{aggregation}/{scale}",
                    "note": note,
                    "params": {
                        "num_generations": num_generations,
                        "reward_weights": list(weights),
                        "reward_func_names": names,
                        "scale_rewards": scale,
                        "multi_objective_aggregation": aggregation,
                    },
                    "inputs": {
                        "rewards_per_func": rewards_per_func.tolist(),
                        "index": [i // num_generations for i in range(batch)],
                    },
                    "outputs": {"advantages": advantages.tolist(), "rewards": rewards.tolist()},
                }
            )
    return cases


# --------------------------------------------------------------------------------------------------------------
# File 2: _compute_loss (per-token weights)
# --------------------------------------------------------------------------------------------------------------

B, T = 4, 6
LENGTHS = [6, 4, 2, 5]
LENGTHS_ZERO_ROW = [6, 4, 0, 5]
TOOL_HOLES = {0: (2, 3), 3: (1, 2)}  # row -> tool-result token positions inside the completion
SEED = 20240611


class _LossAccelerator:
    num_processes = 1
    sync_gradients = True
    device = "cpu"

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def _loss_stub(reads, loss_type, max_completion_length, logp):
    stub = Stub(
        reads,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="token",
        beta=0.0,
        loss_type=loss_type,
        epsilon_low=0.2,
        epsilon_high=0.2,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        current_gradient_accumulation_steps=1,
        max_completion_length=max_completion_length,
        aux_loss_enabled=False,
        _entropy_bonus_enabled=False,
        model=types.SimpleNamespace(training=True),
        accelerator=_LossAccelerator(),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        args=types.SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
    )
    stub._get_per_token_logps_and_entropies = lambda *args, **kwargs: (logp, torch.zeros(B, T), None)
    return stub


LOSS_STUBS = [
    "self: a types.SimpleNamespace carrying only the attributes listed in reference.self_attributes_read "
    "(training mode, one process, current_gradient_accumulation_steps = steps_per_generation = 1, beta = 0, "
    "token-level importance sampling, epsilon 0.2, no vLLM correction, no entropy mask, bonus or aux loss)",
    "self._get_per_token_logps_and_entropies: returns a leaf float32 tensor logp [B, T] (requires_grad) and zero "
    "entropies; inputs.old_per_token_logps = logp.detach().clone(), so the ratio is exactly 1 and no clipping "
    "is active",
    "self.accelerator.gather / gather_for_metrics / reduce: identity (one process); num_processes = 1",
    "inputs.num_items_in_batch: computed as TRL's _generate_and_score_completions does: loss_mask = "
    "completion_mask (* tool_mask when given); accelerator.gather(loss_mask.sum()).sum()",
]


def _mask(lengths):
    return _f32([[1.0 if t < n else 0.0 for t in range(T)] for n in lengths])


def _run_loss(reads, loss_type, max_completion_length, completion_mask, tool_mask, advantages, logp0):
    logp = logp0.clone().requires_grad_(True)
    loss_mask = completion_mask if tool_mask is None else completion_mask * tool_mask
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": completion_mask,
        "advantages": advantages,
        "old_per_token_logps": logp.detach().clone(),
        "num_items_in_batch": _LossAccelerator().gather(loss_mask.sum()).sum(),
    }
    if tool_mask is not None:
        inputs["tool_mask"] = tool_mask
    loss = GRPOTrainer._compute_loss(_loss_stub(reads, loss_type, max_completion_length, logp), None, inputs)
    loss.backward()
    return loss.detach(), logp.grad.detach(), inputs["num_items_in_batch"]


DENOMINATORS = {
    "grpo": "mean over rows of (sum_t loss * mask) / mask.sum(-1).clamp(min=1): w = mask / (len_i * B), with "
    "len_i the row's loss-mask count; a row with no loss tokens contributes 0 but is still counted in B",
    "bnpo": "sum(loss * mask) / mask.sum().clamp(min=1): w = mask / (loss tokens in the micro-batch)",
    "dr_grpo": "sum(loss * mask) / (B * max_completion_length): w = mask / (B * max_completion_length), "
    "every row counted in B whatever its length",
    "dapo": "sum(loss * mask) / (num_items_in_batch.clamp(min=1) / num_processes * "
    "current_gradient_accumulation_steps / steps_per_generation)",
}


def _loss_cases(reads: set[str]) -> list[dict]:
    generator = torch.Generator().manual_seed(SEED)
    logp0 = -3.0 * torch.rand(B, T, generator=generator)  # value irrelevant: the ratio is exp(logp - logp) = 1
    advantages = torch.randn(B, generator=generator)
    tool_mask = torch.ones(B, T)
    for row, cols in TOOL_HOLES.items():
        tool_mask[row, list(cols)] = 0.0
    variants = [
        ("varied_lengths", "completion lengths 6, 4, 2, 5", _mask(LENGTHS), None, T),
        (
            "tool_mask",
            "lengths 6, 4, 2, 5; tool_mask 0 on tokens 2-3 of row 0 and 1-2 of row 3 (tool results inside the "
            "completion): the loss mask is completion_mask * tool_mask",
            _mask(LENGTHS),
            tool_mask,
            T,
        ),
        (
            "zero_row",
            "lengths 6, 4, 0, 5: row 2 has an all-zero completion_mask (what mask_truncated_completions leaves "
            "for a truncated completion)",
            _mask(LENGTHS_ZERO_ROW),
            None,
            T,
        ),
        ("max_len_10", "lengths 6, 4, 2, 5 with max_completion_length 10 > T = 6", _mask(LENGTHS), None, 10),
    ]
    cases = []
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        for variant, variant_note, completion_mask, tmask, max_len in variants:
            loss_ones, grad_ones, num_items = _run_loss(
                reads, loss_type, max_len, completion_mask, tmask, torch.ones(B), logp0
            )
            loss, grad, _ = _run_loss(reads, loss_type, max_len, completion_mask, tmask, advantages, logp0)
            weights = -grad_ones
            # The relation the file is for: grad = -advantages[:, None] * weights, checked here in float32.
            torch.testing.assert_close(grad, -advantages[:, None] * weights, rtol=1e-6, atol=1e-7)
            # TRL's completion and tool masks are int64; the results must not depend on the float32 masks used.
            long_tmask = None if tmask is None else tmask.long()
            loss_long, grad_long, _ = _run_loss(
                reads, loss_type, max_len, completion_mask.long(), long_tmask, advantages, logp0
            )
            assert torch.equal(loss_long, loss) and torch.equal(grad_long, grad), (loss_type, variant)

            case_inputs = {"completion_mask": completion_mask.tolist()}
            if tmask is not None:
                case_inputs["tool_mask"] = tmask.tolist()
            case_inputs["advantages"] = advantages.tolist()
            cases.append(
                {
                    "name": f"{loss_type}/{variant}",
                    "note": f"{variant_note}. {loss_type}: {DENOMINATORS[loss_type]}",
                    "params": {
                        "loss_type": loss_type,
                        "max_completion_length": max_len,
                        "num_items_in_batch": int(num_items.item()),
                        "current_gradient_accumulation_steps": 1,
                        "steps_per_generation": 1,
                        "num_processes": 1,
                        "mode": "train",
                        "advantages_seed": SEED,
                    },
                    "inputs": case_inputs,
                    "outputs": {
                        "weights": weights.tolist(),
                        "loss_unit_advantages": loss_ones.item(),
                        "grad": grad.tolist(),
                        "loss": loss.item(),
                    },
                }
            )
    return cases


LOSS_FORMAT = (
    FORMAT + " Shapes: completion_mask, tool_mask, weights, grad [B, T] = [4, 6]; advantages [B]. per_token_logps == "
    "old_per_token_logps (ratio 1, no clipping), beta = 0. outputs.weights = -d(loss)/d(per_token_logps) with "
    "every advantage 1, i.e. the per-token aggregation weight w (the loss is then -sum(w)); "
    "outputs.loss_unit_advantages is that loss. outputs.grad = d(loss)/d(per_token_logps) and outputs.loss "
    "with inputs.advantages (standard normal, torch.Generator seed params.advantages_seed), so grad = "
    "-advantages[:, None] * weights."
)
ADVANTAGE_FORMAT = (
    FORMAT + " Shapes: rewards_per_func [B, F] (NaN = the reward function returned None), index [B] integer group ids "
    "(consecutive blocks of num_generations), outputs.advantages [B] = out['advantages'] of the call, "
    "outputs.rewards [B] the logged weighted reward sum (NaN for unscorable rows)."
)


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"trl": (trl.__version__, TRL_VERSION), "torch": (torch.__version__, TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/trl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)

    outputs = {}
    for file_name, function, stubs, fmt, build in (
        (
            "trl_grpo_advantages.json",
            "GRPOTrainer._generate_and_score_completions",
            ADVANTAGE_STUBS,
            ADVANTAGE_FORMAT,
            _advantage_cases,
        ),
        (
            "trl_grpo_loss_weights.json",
            "GRPOTrainer._compute_loss",
            LOSS_STUBS + [f"{s} (in place in the process; _compute_loss calls neither)" for s in MODULE_STUBS],
            LOSS_FORMAT,
            _loss_cases,
        ),
    ):
        reads: set[str] = set()
        cases = build(reads)
        reference = _reference(function, stubs)
        reference["self_attributes_read"] = sorted(reads)
        outputs[file_name] = golden_io.dump({"reference": reference, "format": fmt, "cases": cases})

    return golden_io.write_or_check(outputs, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
