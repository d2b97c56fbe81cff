"""Golden data for prime-rl's trainer loss (the per-token weight after the advantage), called unmodified.

prime-rl is not on PyPI: this script loads src/prime_rl/trainer/rl/loss.py from a source checkout at the pinned
commit, verifies the sha256 of every file it executes, and calls it as prime-rl's RL trainer does. Run it in the
separate environment made by `bash references/setup_env.sh prime_rl` (torch, jaxtyping, beartype; CreditLens never
imports prime-rl):

    git clone https://github.com/PrimeIntellect-ai/prime-rl /tmp/prime-rl
    git -C /tmp/prime-rl checkout 559b44772e471d1538537b8805cc77f3824a5e64
    .venv-references-prime_rl/bin/python references/prime_rl/generate_policy_loss.py --prime-rl-src /tmp/prime-rl

Writes tests/golden/primerl_policy_loss.json. Running it again with the pinned versions reproduces the committed
file byte for byte (`--check` compares instead of writing). references/prime_rl/generate.py writes the advantage
file and is independent of this script.

What runs: loss.py's `setup_rl_loss_fn(loss_config)` (the trainer's rl loss: `default_loss_fn` for a
DefaultLossConfig, `ipo_loss_fn` for an IPOLossConfig) and `compute_loss(...)`, called with the arguments
src/prime_rl/trainer/rl/train.py passes: per-sample 1-D views split from one packed leaf tensor of trainer
log-probs (`out["logprobs"].squeeze().split(sequence_lengths)`), the inference log-probs, per-token advantages and
boolean loss masks split the same way, ref_logprobs / ce_weights / ref_kl_weights None, rl_weights None or the
case's, rl_scale = max(total rl tokens, 1) as train.py counts them (loss_mask & rl_weights != 0), ce_scale =
ref_kl_scale = 1 (max(0, 1)). Then `loss.backward()`: outputs.grad_log_prob = d loss / d trainer log-probs. Every
row of a case is one packed sample of length T (its masked positions stand for the sample's prompt, tool and
padding tokens, which loss_mask excludes); one case packs the rows into two micro-batches, as the trainer's loop
does, with the global rl_scale.

prime-rl declares Python ~=3.12; loss.py runs on Python 3.11 as it is. STUBS lists what is stubbed: its two
imports of prime-rl modules that need pydantic and the rest of the package (the config classes, import_object),
and the config objects (namespaces of the placeholder classes, so setup_rl_loss_fn's isinstance dispatch works).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)

OUT_FILE = "primerl_policy_loss.json"
TORCH_VERSION = "2.13.0+cpu"
PRIME_RL_REPO = "PrimeIntellect-ai/prime-rl"
PRIME_RL_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"
PRIME_RL_COMMIT_DATE = "2026-08-21T22:39:59-07:00"

# Every file of the checkout this script executes, with its sha256 at PRIME_RL_COMMIT.
PINNED_FILES = {
    "src/prime_rl/trainer/rl/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "src/prime_rl/trainer/rl/loss.py": "102b14539a2aa7e4b807967f9c9caeaaa974373391a21602ce45b24414fb7863",
}
# Read, not executed: the config classes whose defaults CONFIG_DEFAULTS restates; the trainer loop whose call
# this script restates (checked like the executed files).
READ_FILES = {
    "packages/prime-rl-configs/src/prime_rl/configs/trainer.py": (
        "8e9dfae7baf22c7eecd0238ddde47f2f2073763b6b9ef6315a0878f9d287c4d6"
    ),
    "src/prime_rl/trainer/rl/train.py": "84a75d465b3420bd1282369855e172100827013f1208577fdb80992ac6526f0d",
}

CONFIG_DEFAULTS = {
    "DefaultLossConfig": {"dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "adv_tau": 1.0, "kl_tau": 1e-3},
    "IPOLossConfig": {"ipo_threshold": 0.1, "adv_tau": 1.0, "kl_tau": 1e-3},
}

STUBS = [
    "sys.modules['prime_rl.configs'] and ['prime_rl.configs.trainer']: a module holding placeholder classes "
    "CustomLossConfig, DefaultLossConfig, IPOLossConfig (types.SimpleNamespace subclasses) and LossConfig (loss.py "
    "imports them for annotations and setup_rl_loss_fn's isinstance dispatch; the real module is pydantic + "
    "prime-pydantic-config + the rest of the config package)",
    "sys.modules['prime_rl.utils'] and ['prime_rl.utils.utils']: a module holding import_object = None (used only "
    "for a CustomLossConfig, not run here; the real utils.py imports the trainer's runtime)",
    "config objects: DefaultLossConfig(dppo_mask_low, dppo_mask_high, adv_tau, kl_tau) / IPOLossConfig("
    "ipo_threshold, adv_tau, kl_tau) instances of the placeholder classes carrying exactly the fields the loss "
    "reads (params.config), in place of the pydantic classes of packages/prime-rl-configs/src/prime_rl/configs/"
    "trainer.py (their defaults are in reference.config_defaults)",
]

FORMAT = (
    "Tensors are plain nested lists, [B, T] unless said; each row is one packed sample of length T. Inputs were "
    "torch.float32 (loss_mask torch.bool, recorded as 0/1) when prime-rl ran; outputs are its float32 results "
    "widened to float64 by tolist(). Non-finite floats are the strings 'nan'/'inf'/'-inf'. inputs.log_prob = the "
    "trainer log-probs (differentiated), inputs.inference_log_prob = the inference engine's log-probs of the "
    "sampled tokens (prime-rl has no separate 'old' policy: the ratio is trainer / inference; params."
    "inference_from says which shared-input tensor was passed: 'old' or 'rollout'), inputs.advantages = per-token "
    "advantages (the fixture's verl GRPO tensor), inputs.rl_weights = the rl component's per-token weights (null: "
    "none). outputs.loss = compute_loss's scaled loss (summed over the micro-batches), outputs.grad_log_prob = "
    "d loss / d log_prob (autograd), outputs.rl_scale, outputs.metrics = compute_loss's aggregated metrics (one "
    "value per sample, per micro-batch: a list of dicts). Suggested tolerance: atol=1e-5, rtol=1e-5."
)

NOTES = {
    "default": "default_loss_fn (DPPO-Binary TV + Kimi-K2.5 KL): log r = lp - inf, r = exp(log r); dp = exp(lp) - "
    "exp(inf); masked = (dp > dppo_mask_high) where A > 0, else (dp < -dppo_mask_low) (A == 0 takes the low "
    "test); keep = loss_mask & ~masked; per-token loss = -keep*adv_tau*A*r + kl_tau*loss_mask*(log r)^2 (* "
    "rl_weights); gradient per token = (-keep*adv_tau*A*r + 2*kl_tau*loss_mask*log r) [* w] / rl_scale",
    "ipo": "ipo_loss_fn: masked = |exp(lp) - exp(inf)| > ipo_threshold (either sign of A); keep = loss_mask & "
    "~masked; per-token loss = -keep*adv_tau*A*r + kl_tau*loss_mask*(log r)^2 (* rl_weights); gradient per token "
    "= (-keep*adv_tau*A*r + 2*kl_tau*loss_mask*log r) [* w] / rl_scale",
}
AGGREGATION = (
    "compute_loss: sum over every sample of its per-token loss sum, / rl_scale (the global count of rl tokens, "
    "loss_mask & rl_weights != 0); a token with rl_weight 0 leaves the mask and the count"
)


def _verify_checkout(src: Path) -> None:
    """The checkout's executed (and read) files are the pinned ones (``golden_io.verify_checkout``)."""
    golden_io.verify_checkout(src, {**PINNED_FILES, **READ_FILES}, "prime-rl", PRIME_RL_COMMIT)


class _Config(types.SimpleNamespace):
    pass


def _load(src: Path):
    """Install the stubs, import trainer/rl/loss.py from the checkout, check nothing else of it was executed."""
    configs = types.ModuleType("prime_rl.configs")
    configs.__path__ = []
    trainer_config = types.ModuleType("prime_rl.configs.trainer")
    for name in ("CustomLossConfig", "DefaultLossConfig", "IPOLossConfig", "LossConfig"):
        setattr(trainer_config, name, type(name, (_Config,), {"__module__": "stub"}))
    configs.trainer = trainer_config
    utils = types.ModuleType("prime_rl.utils")
    utils.__path__ = []
    utils_utils = types.ModuleType("prime_rl.utils.utils")
    utils_utils.import_object = None
    utils.utils = utils_utils
    sys.modules.update(
        {
            "prime_rl.configs": configs,
            "prime_rl.configs.trainer": trainer_config,
            "prime_rl.utils": utils,
            "prime_rl.utils.utils": utils_utils,
        }
    )
    sys.path.insert(0, str(src / "src"))  # prime_rl and prime_rl.trainer: namespace packages there
    loss = importlib.import_module("prime_rl.trainer.rl.loss")
    executed = sorted(
        str(Path(m.__file__).resolve().relative_to(src.resolve()))
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(src.resolve())
    )
    assert executed == sorted(PINNED_FILES), f"executed files {executed} != pinned {sorted(PINNED_FILES)}"
    return loss, trainer_config


def _case_specs():
    specs = []

    def add(name, variant, note, loss="default", inference="old", **p):
        specs.append((name, variant, dict(p, loss=loss, inference=inference), note))

    for variant in ("holes", "dense", "holes_large_drift", "holes_on_policy"):
        add(
            f"default/{variant}",
            variant,
            "default loss with the defaults (DPPO masks 0.2 / 0.2, adv_tau 1, kl_tau 1e-3)",
        )
    for variant in ("holes", "dense", "holes_large_drift"):
        add(
            f"default/inference_rollout/{variant}",
            variant,
            "default loss, defaults; inference log-probs = the rollout tensor",
            inference="rollout",
        )
    add(
        "default_masks_0.1_0.3/holes_large_drift",
        "holes_large_drift",
        "default loss, dppo_mask_low 0.1, dppo_mask_high 0.3",
        config={"dppo_mask_low": 0.1, "dppo_mask_high": 0.3},
    )
    add(
        "default_adv_tau_0.5_kl_tau_0.1/holes",
        "holes",
        "default loss, adv_tau 0.5, kl_tau 0.1 (a visible KL term)",
        config={"adv_tau": 0.5, "kl_tau": 0.1},
    )
    add(
        "default_kl_tau_0/holes_large_drift",
        "holes_large_drift",
        "default loss, kl_tau 0 (the masked policy gradient alone)",
        config={"kl_tau": 0.0},
    )
    add(
        "default_rl_weights/holes",
        "holes",
        "default loss with rl_weights: 0.5 on row 0, 0 on the first valid token of rows 1 and 3 (those leave the "
        "mask and rl_scale), 2.0 on row 5, 1 elsewhere",
        rl_weights=True,
    )
    add(
        "default_two_micro_batches/holes",
        "holes",
        "default loss, rows 0-2 and 3-5 in two compute_loss calls (two micro-batches) with the global rl_scale; "
        "the losses add",
        micro_batch_size=3,
    )
    for variant in ("holes", "dense", "holes_large_drift", "holes_on_policy"):
        add(
            f"ipo/{variant}",
            variant,
            "ipo loss with the defaults (ipo_threshold 0.1, adv_tau 1, kl_tau 1e-3)",
            loss="ipo",
        )
    add(
        "ipo/inference_rollout/holes_large_drift",
        "holes_large_drift",
        "ipo loss, defaults; inference log-probs = the rollout tensor",
        loss="ipo",
        inference="rollout",
    )
    add(
        "ipo_threshold_0.2_adv_tau_0.5_kl_tau_0.01/holes_large_drift",
        "holes_large_drift",
        "ipo loss, ipo_threshold 0.2, adv_tau 0.5, kl_tau 0.01",
        loss="ipo",
        config={"ipo_threshold": 0.2, "adv_tau": 0.5, "kl_tau": 0.01},
    )
    return specs


def _rl_weights(mask: torch.Tensor) -> torch.Tensor:
    weights = torch.ones_like(mask)
    weights[0] = 0.5
    weights[5] = 2.0
    for row in (1, 3):
        first = int(mask[row].nonzero()[0])
        weights[row, first] = 0.0
    return weights


def _run(loss_module, config_classes, p: dict, v: dict):
    kind = "DefaultLossConfig" if p["loss"] == "default" else "IPOLossConfig"
    values = dict(CONFIG_DEFAULTS[kind], **p.get("config", {}))
    loss_config = getattr(config_classes, kind)(**values)
    rl_loss_fn = loss_module.setup_rl_loss_fn(loss_config)

    mask = v["mask"].bool()
    batch, width = mask.shape
    inference = v[p["inference"]]
    weights = _rl_weights(v["mask"]) if p.get("rl_weights") else None
    packed = v["log_prob"].reshape(-1).clone().requires_grad_(True)  # the packed micro-batches' trainer log-probs
    rows = packed.split([width] * batch)
    micro = p.get("micro_batch_size", batch)
    # train.py: rl_scale = max(sum over micro-batches of (loss_mask & rl_weights != 0).sum() or loss_mask.sum(), 1)
    local = int((mask & (weights != 0)).sum()) if weights is not None else int(mask.sum())
    rl_scale = max(local, 1)
    total, metrics = None, []
    for start in range(0, batch, micro):
        idx = range(start, min(start + micro, batch))
        loss, aggregated = loss_module.compute_loss(
            trainer_logprobs=[rows[i] for i in idx],
            inference_logprobs=[inference[i].clone() for i in idx],
            ref_logprobs=None,
            advantages=[v["advantages"][i].clone() for i in idx],
            loss_mask=[mask[i].clone() for i in idx],
            rl_weights=None if weights is None else [weights[i].clone() for i in idx],
            ce_weights=None,
            ref_kl_weights=None,
            rl_loss_fn=rl_loss_fn,
            rl_scale=rl_scale,
            ce_scale=1,
            ref_kl_scale=1,
        )
        loss.backward()
        total = loss.detach() if total is None else total + loss.detach()
        metrics.append({k: t.float().tolist() for k, t in sorted(aggregated.items())})
    params = {
        "loss": p["loss"],
        "function": f"setup_rl_loss_fn({kind}) -> {'default_loss_fn' if p['loss'] == 'default' else 'ipo_loss_fn'}",
        "config": {"class": kind, **values},
        "inference_from": p["inference"],
        "micro_batch_size": micro,
        "sequence_lengths": [width] * batch,
        "rl_scale": rl_scale,
        "ce_scale": 1,
        "ref_kl_scale": 1,
        "inputs_variant": v["description"],
    }
    inputs = {
        "loss_mask": v["mask"].tolist(),
        "advantages": v["advantages"].tolist(),
        "index": v["index"],
        "log_prob": v["log_prob"].tolist(),
        "inference_log_prob": inference.tolist(),
        "rl_weights": None if weights is None else weights.tolist(),
    }
    outputs = {
        "loss": total.item(),
        "grad_log_prob": packed.grad.reshape(batch, width).tolist(),
        "rl_scale": rl_scale,
        "metrics": metrics,
    }
    return params, inputs, outputs


def _cases(loss_module, config_classes) -> list[dict]:
    variants = {name: policy_inputs.variant(name) for name in policy_inputs.VARIANTS}
    cases = []
    for name, variant_name, p, note in _case_specs():
        v = variants[variant_name]
        params, inputs, outputs = _run(loss_module, config_classes, p, v)
        text = f"{note}. {NOTES[p['loss']]}. Aggregation: {AGGREGATION}. Inputs: {v['description']['note']}"
        if p["inference"] == "old":
            text += " (inference log-probs = the shared 'old' tensor, so the ratio matches the other trainers' files)"
        cases.append({"name": name, "note": text, "params": params, "inputs": inputs, "outputs": outputs})
    return cases


def _reference() -> dict:
    return {
        "repo": PRIME_RL_REPO,
        "commit": PRIME_RL_COMMIT,
        "commit_date": PRIME_RL_COMMIT_DATE,
        "path": "src/prime_rl/trainer/rl/loss.py",
        "function": "setup_rl_loss_fn -> default_loss_fn / ipo_loss_fn, through compute_loss",
        "sha256": dict(PINNED_FILES),
        "read_sha256": dict(READ_FILES),
        "config_defaults": CONFIG_DEFAULTS,
        "glue": "the call restates src/prime_rl/trainer/rl/train.py: rl_scale from the micro-batches' masks, "
        "per-sample views split from one packed leaf tensor, compute_loss per micro-batch, loss.backward()",
        "python": "3.11 (prime-rl declares ~=3.12; loss.py needs nothing newer)",
        "torch": torch.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    def add_arguments(parser):
        parser.add_argument(
            "--prime-rl-src", type=Path, required=True, help=f"a checkout of {PRIME_RL_REPO} at {PRIME_RL_COMMIT}"
        )

    args = golden_io.parse_args(__doc__, add_arguments)
    if not golden_io.pinned({"torch": (torch.__version__, TORCH_VERSION)}, "references/prime_rl/requirements.txt"):
        return 2
    _verify_checkout(args.prime_rl_src)
    loss_module, config_classes = _load(args.prime_rl_src)
    torch.use_deterministic_algorithms(True)
    cases = _cases(loss_module, config_classes)
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
