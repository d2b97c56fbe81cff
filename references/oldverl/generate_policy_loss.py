"""Golden data for the policy loss of the old verl that Search-R1 and KG-R1 vendor, called unmodified.

Neither repository is on PyPI: this script loads the files it runs from a source checkout of each at its pinned
commit, verifies their sha256 (and that of the files whose call or defaults it restates), and calls each one's
`verl/trainer/ppo/core_algos.py` `compute_policy_loss` as its `verl/workers/actor/dp_actor.py` does. It runs in the
environment of references/verl (`bash references/setup_env.sh verl`: CPU torch 2.13.0, tensordict and transformers,
which the vendored `verl/utils/torch_functional.py` imports; the installed verl 0.9.1 is not used):

    git clone https://github.com/PeterGriffinJin/Search-R1 /tmp/search-r1
    git -C /tmp/search-r1 checkout a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06
    git clone https://github.com/Jinyeop3110/KG-R1 /tmp/kg-r1
    git -C /tmp/kg-r1 checkout 7538a53742ff5a4d389558759898d814c9ca13ae
    .venv-references-verl/bin/python references/oldverl/generate_policy_loss.py \\
        --search-r1-src /tmp/search-r1 --kg-r1-src /tmp/kg-r1

Writes tests/golden/searchr1_policy_loss.json and tests/golden/kgr1_policy_loss.json (one of them when only its
checkout is given). Running it again with the pinned versions reproduces the committed files byte for byte
(`--check` compares instead of writing).

What runs. Search-R1 (`compute_policy_loss(old_log_prob, log_prob, advantages, eos_mask, cliprange)`): ratio =
exp(log_prob - old_log_prob), no clamp; max(-A*ratio, -A*clamp(ratio, 1 - cliprange, 1 + cliprange)); no dual clip;
masked_mean over eos_mask (a token mean). KG-R1 (`compute_policy_loss(old_log_prob, log_prob, advantages,
response_mask, cliprange, cliprange_low, cliprange_high, clip_ratio_c, loss_agg_mode)`): log-ratio clamped to
[-10, 10] before exp; torch.maximum of the two PPO branches; where A < 0, torch.min(-A*clip_ratio_c, that); then
agg_loss(loss_agg_mode). Each case calls the function on the whole batch, one micro-batch (gradient_accumulation 1),
with log_prob a leaf requiring grad, then loss.backward(): outputs.grad_log_prob = d loss / d log_prob. The
`two_micro_batches` cases restate dp_actor's loop around it: rows split into micro-batches, each loss divided by
gradient_accumulation (their number) and backpropagated, the gradients summed. Entropy and KL-loss terms are off
(entropy_coeff 0, use_kl_loss False: CreditLens models no entropy term; the KL loss is not covered here).

The inputs: references/policy_inputs.py's four variants (holes, dense, holes_large_drift, holes_on_policy) and
references/tie_inputs.py's boundary batches (ratios exactly 1 +- eps, a dual clip of 2 and a ratio of 4 with A < 0,
log-ratios exactly +-10, +-10.5, +-20 and +-20.5).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

TORCH_VERSION = "2.13.0+cpu"
FUNCTION = "verl/trainer/ppo/core_algos.py compute_policy_loss"
# The bare packages that stand in for the vendored verl's package __init__ files (see STUBS).
PACKAGES = ("verl", "verl.utils", "verl.trainer", "verl.trainer.ppo")


@dataclass(frozen=True)
class Source:
    """One repository vendoring an old verl: where it is pinned, the files executed (path: sha256) and the files
    read, not executed (the actor whose call is restated, the config whose defaults are)."""

    key: str
    repo: str
    commit: str
    commit_date: str
    out_file: str
    executed: dict
    read: dict


SEARCH_R1 = Source(
    "search-r1",
    "PeterGriffinJin/Search-R1",
    "a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06",
    "2025-10-29T11:56:51-05:00",
    "searchr1_policy_loss.json",
    {
        "verl/trainer/ppo/core_algos.py": "f7a0260fcc9dd73a856d358e9da325b74cc24a5e360da08eb31749457f752e33",
        "verl/utils/torch_functional.py": "e6f0578b0f52b530d52e9fc69968108d67badeb8374f18f39258e3550ac35454",
    },
    {
        "verl/workers/actor/dp_actor.py": "71cc289d50076e6fc3bb30c26d69c2e98486834c28fe02548eb2a4c1c4301e33",
        "verl/trainer/config/ppo_trainer.yaml": "d990ac6c00f34fcbfde426a520ffc1b96d0ef96f118914ba26033d5eaba314b7",
    },
)
KG_R1 = Source(
    "kg-r1",
    "Jinyeop3110/KG-R1",
    "7538a53742ff5a4d389558759898d814c9ca13ae",
    "2025-10-17T12:04:01-04:00",
    "kgr1_policy_loss.json",
    {
        "verl/trainer/ppo/core_algos.py": "f5cf10688cc649ce0d1399200aac11fa29d5c98983a9e5f6c752894dc2eb7b0c",
        "verl/utils/torch_functional.py": "8aa42edf3d4e0d41b311b0e53fe6812863af9a28c45fda92b1d2c405f86ec0ef",
        "verl/utils/device.py": "87f58dc00b1bf0f4983ed3efa8483266a1fb7340fc29e165e4052e33b1295d1d",
    },
    {
        "verl/workers/actor/dp_actor.py": "ee87bcd129a678ae3a6720bd2ca9d2509c28ad3961373ed6a400a20f8db45c48",
        "verl/trainer/config/ppo_trainer.yaml": "9e0d3fe6cd2001ea99ead3db41352746a1958e8cb8ab87bd814e5c2950086f5c",
    },
)
SOURCES = {s.key: s for s in (SEARCH_R1, KG_R1)}

# The actor config defaults (verl/trainer/config/ppo_trainer.yaml at each commit) the cases start from.
CONFIG_DEFAULTS = {
    "search-r1": {"clip_ratio": 0.2, "entropy_coeff": 0.001, "use_kl_loss": False, "state_masking": False},
    "kg-r1": {
        "clip_ratio": 0.2,
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "clip_ratio_c": 3.0,
        "loss_agg_mode": "${actor_rollout_ref.actor.loss_agg_mode} (set by the run script: token-mean in "
        "evaluation_k_beam.yaml, seq-mean-token-sum-norm in train_grpo_kg_qwen_3b_cwq_f1_turn7.sh)",
        "entropy_coeff": 0,
        "use_kl_loss": False,
    },
}
CALLS = {
    "search-r1": "dp_actor.py DataParallelPPOActor.update_policy: core_algos.compute_policy_loss(old_log_prob="
    "old_log_prob, log_prob=log_prob, advantages=advantages, eos_mask=response_mask, cliprange=clip_ratio); "
    "policy_loss = pg_loss - entropy_loss * entropy_coeff (+ kl_loss * kl_loss_coef with use_kl_loss); loss = "
    "policy_loss / gradient_accumulation; loss.backward(), per micro-batch",
    "kg-r1": "dp_actor.py DataParallelPPOActor.update_policy: compute_policy_loss(old_log_prob=old_log_prob, "
    "log_prob=log_prob, advantages=advantages, response_mask=response_mask, cliprange=clip_ratio, cliprange_low="
    "clip_ratio_low (or clip_ratio), cliprange_high=clip_ratio_high (or clip_ratio), clip_ratio_c=config.get("
    "'clip_ratio_c', 3.0), loss_agg_mode=loss_agg_mode); policy_loss = pg_loss (entropy_coeff 0; + kl_loss * "
    "kl_loss_coef with use_kl_loss); loss = policy_loss / gradient_accumulation (use_dynamic_bsz off); "
    "loss.backward(), per micro-batch",
}

STUBS = [
    "sys.modules['verl'], ['verl.utils'], ['verl.trainer'], ['verl.trainer.ppo']: bare packages whose __path__ is "
    "the checkout's directory, in place of their __init__.py files (verl/__init__.py imports verl.protocol's "
    "DataProto and sets up logging, and KG-R1's also pkg_resources; verl/utils/__init__.py imports the tokenizer "
    "helpers); the submodules core_algos.py and torch_functional.py (and KG-R1's verl/utils/device.py, which "
    "torch_functional.py imports) load from the checkout's files unmodified. flash_attn is not installed: "
    "torch_functional.py's own try/except ImportError takes its fallback (not used by compute_policy_loss)",
]

FORMAT = (
    "Tensors are plain nested lists, [B, T]. Inputs were torch.float32 when the reference ran (the mask float32 "
    "0/1); outputs are its float32 results widened to float64 by tolist(). Non-finite floats are the strings "
    "'nan'/'inf'/'-inf'. inputs.log_prob = the current policy's log-probs (the leaf differentiated), "
    "inputs.old_log_prob = the ratio's base, inputs.advantages = per-token advantages (the fixture's verl GRPO "
    "tensor, or one value per row on the tie batches), inputs.response_mask = the loss mask (eos_mask in "
    "Search-R1). outputs.loss = pg_loss (summed over the micro-batches, each divided by gradient_accumulation), "
    "outputs.grad_log_prob = d loss / d log_prob (autograd), outputs.metrics = the function's other returns, per "
    "micro-batch: pg_clipfrac, ppo_kl (and KG-R1's pg_clipfrac_lower). Suggested tolerance: atol=1e-5, rtol=1e-5."
)

NOTES = {
    "search-r1": "Search-R1 compute_policy_loss: ratio = exp(lp - old) (no clamp); pg_loss = masked_mean(max(-A*ratio, "
    "-A*clamp(ratio, 1 - cliprange, 1 + cliprange)), eos_mask) (no dual clip, one cliprange, a token mean)",
    "kg-r1": "KG-R1 compute_policy_loss: ratio = exp(clamp(lp - old, -10, 10)); clip1 = maximum(-A*ratio, "
    "-A*clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)); where A < 0, min(-A*clip_ratio_c, clip1); "
    "agg_loss(loss_agg_mode)",
}


def _verify_checkout(src: Path, source: Source) -> None:
    """The checkout's executed (and read) files are the pinned ones (``golden_io.verify_checkout``)."""
    golden_io.verify_checkout(src, {**source.executed, **source.read}, source.repo, source.commit)


def _load(src: Path, source: Source):
    """Install the bare packages over ``src``, import core_algos from it, check nothing else of it was executed.
    Each repository's verl replaces the previous one's in sys.modules (the returned module keeps its own)."""
    for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
        del sys.modules[name]
    for name in PACKAGES:
        package = types.ModuleType(name)
        package.__path__ = [str(src.joinpath(*name.split(".")))]
        sys.modules[name] = package
    core_algos = importlib.import_module("verl.trainer.ppo.core_algos")
    root = src.resolve()
    executed = sorted(
        str(Path(m.__file__).resolve().relative_to(root))
        for name, m in list(sys.modules.items())
        if (name == "verl" or name.startswith("verl.")) and getattr(m, "__file__", None)
    )
    assert executed == sorted(source.executed), f"executed files {executed} != pinned {sorted(source.executed)}"
    return core_algos


@contextmanager
def _environ(name: str, value: str | None):
    """``os.environ[name] = value`` inside the block (KG-R1's unbiased-fixed-norm reads MAX_LENGTH)."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


# ------------------------------------------------------------------------------------------------ the cases
# (name, inputs: "variant:NAME" or "ties:NAME", params, note)
SEARCH_R1_CASES = [
    *(
        (f"cliprange_0.2/{v}", f"variant:{v}", {}, "the default cliprange 0.2")
        for v in ("holes", "dense", "holes_large_drift", "holes_on_policy")
    ),
    (
        "cliprange_0.3/holes_large_drift",
        "variant:holes_large_drift",
        {"cliprange": 0.3},
        "cliprange 0.3",
    ),
    (
        "cliprange_0.2/two_micro_batches/holes",
        "variant:holes",
        {"micro_batch_size": 3},
        "rows 0-2 and 3-5 in two micro-batches, each a token mean of its own tokens divided by "
        "gradient_accumulation 2 (dp_actor's loop): not the token mean of the batch unless the two hold as many "
        "tokens",
    ),
    (
        "ties/ppo",
        "ties:ppo",
        {},
        "A = 1: ratio 1.2 and 0.8 whole (max ties, both branches pass), 2.0 none (clipped). A = -1: 0.8 and 1.2 "
        "whole, 2.0 and 4.0 whole: no dual clip. Row 2: A*ratio == A*1.2 in float32 past the bound: max ties, the "
        "clamped branch passes nothing: half",
    ),
    ("ties/log_ratio_10", "ties:log_ratio_10", {}, "log ratio 10 with A = -1: no clamp, no dual clip: -A*e^10"),
    ("ties/log_ratio_10.5", "ties:log_ratio_10.5", {}, "log ratio 10.5 with A = -1: -A*e^10.5"),
    ("ties/safety_at", "ties:safety_at", {}, "log ratio 20 with A = -1: -A*e^20 (verl clamps at +-20: passes)"),
    (
        "ties/safety_beyond",
        "ties:safety_beyond",
        {},
        "log ratio 20.5 with A = -1: no clamp, so -A*e^20.5 (verl: 0 past its +-20 clamp)",
    ),
]
KG_R1_CASES = [
    *(
        (f"token-mean/{v}", f"variant:{v}", {}, "the defaults: clip 0.2 / 0.2, clip_ratio_c 3, token-mean")
        for v in ("holes", "dense", "holes_large_drift", "holes_on_policy")
    ),
    (
        "token-mean/clip_0.2_0.28/holes_large_drift",
        "variant:holes_large_drift",
        {"clip_ratio_high": 0.28},
        "clip-higher: clip_ratio_low 0.2, clip_ratio_high 0.28",
    ),
    *(
        (f"{mode}/{v}", f"variant:{v}", {"loss_agg_mode": mode}, f"loss_agg_mode {mode}")
        for mode in ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
        for v in ("holes_large_drift", "dense")
    ),
    *(
        (
            f"unbiased-fixed-norm/{v}",
            f"variant:{v}",
            {"loss_agg_mode": "unbiased-fixed-norm", "MAX_LENGTH": "4500"},
            "loss_agg_mode unbiased-fixed-norm with MAX_LENGTH=4500 (train_grpo_kg_qwen_3b_cwq_f1_turn7.sh): sum of "
            "the token losses / 4500",
        )
        for v in ("holes_large_drift", "dense")
    ),
    (
        "token-mean/two_micro_batches/holes",
        "variant:holes",
        {"micro_batch_size": 3},
        "rows 0-2 and 3-5 in two micro-batches, each a token mean of its own tokens divided by "
        "gradient_accumulation 2 (dp_actor's loop)",
    ),
    (
        "ties/ppo/clip_ratio_c=2.0",
        "ties:ppo",
        {"clip_ratio_c": 2.0},
        "A = 1: ratio 1.2 and 0.8 whole, 2.0 none (clipped). A = -1: 0.8 and 1.2 whole, 2.0 = clip_ratio_c half "
        "(torch.min of two equal values), 4.0 none. Row 2: A*ratio == A*1.2 past the bound: half",
    ),
    (
        "ties/ppo",
        "ties:ppo",
        {},
        "clip_ratio_c 3: A = -1 at ratio 2.0 whole, 4.0 none (dual clip)",
    ),
    (
        "ties/log_ratio_10/clip_ratio_c=1e9",
        "ties:log_ratio_10",
        {"clip_ratio_c": 1e9},
        "log ratio exactly 10 with A = -1 (dual clip 1e9 above e^10): clamp(-10, 10) passes at its bound: -A*e^10",
    ),
    (
        "ties/log_ratio_10.5/clip_ratio_c=1e9",
        "ties:log_ratio_10.5",
        {"clip_ratio_c": 1e9},
        "log ratio 10.5 with A = -1: past the clamp at 10, no gradient (verl's +-20 clamp: -A*e^10.5)",
    ),
    (
        "ties/safety_at/clip_ratio_c=1e9",
        "ties:safety_at",
        {"clip_ratio_c": 1e9},
        "log ratio 20 with A = -1: past the clamp at 10, no gradient (verl: -A*e^20)",
    ),
    (
        "ties/safety_beyond/clip_ratio_c=1e9",
        "ties:safety_beyond",
        {"clip_ratio_c": 1e9},
        "log ratio 20.5 with A = -1: past the clamp, no gradient",
    ),
]
CASES = {"search-r1": SEARCH_R1_CASES, "kg-r1": KG_R1_CASES}


def _call(core_algos, key: str, p: dict, old, log_prob, advantages, mask):
    """One call as dp_actor makes it: (pg_loss, {metric: value})."""
    if key == "search-r1":
        pg_loss, clipfrac, ppo_kl = core_algos.compute_policy_loss(
            old_log_prob=old, log_prob=log_prob, advantages=advantages, eos_mask=mask, cliprange=p["cliprange"]
        )
        return pg_loss, {"pg_clipfrac": clipfrac.item(), "ppo_kl": ppo_kl.item()}
    with _environ("MAX_LENGTH", p.get("MAX_LENGTH")):
        pg_loss, clipfrac, ppo_kl, clipfrac_lower = core_algos.compute_policy_loss(
            old_log_prob=old,
            log_prob=log_prob,
            advantages=advantages,
            response_mask=mask,
            cliprange=p["cliprange"],
            cliprange_low=p["cliprange_low"],
            cliprange_high=p["cliprange_high"],
            clip_ratio_c=p["clip_ratio_c"],
            loss_agg_mode=p["loss_agg_mode"],
        )
    metrics = {"pg_clipfrac": clipfrac.item(), "ppo_kl": ppo_kl.item(), "pg_clipfrac_lower": clipfrac_lower.item()}
    return pg_loss, metrics


def _params(key: str, given: dict, rows: int) -> dict:
    """The call's arguments: the config defaults, then the case's own values (KG-R1: clip_ratio_low / high fall
    back on clip_ratio, as dp_actor does)."""
    micro = given.get("micro_batch_size", rows)
    if key == "search-r1":
        p = {"cliprange": given.get("cliprange", CONFIG_DEFAULTS[key]["clip_ratio"])}
    else:
        d = CONFIG_DEFAULTS[key]
        clip = given.get("clip_ratio", d["clip_ratio"])
        p = {
            "cliprange": clip,
            "cliprange_low": given.get("clip_ratio_low", clip),
            "cliprange_high": given.get("clip_ratio_high", clip),
            "clip_ratio_c": given.get("clip_ratio_c", d["clip_ratio_c"]),
            "loss_agg_mode": given.get("loss_agg_mode", "token-mean"),
        }
        if "MAX_LENGTH" in given:
            p["MAX_LENGTH"] = given["MAX_LENGTH"]
    return {**p, "micro_batch_size": micro, "gradient_accumulation": -(-rows // micro)}


def _run(core_algos, key: str, given: dict, x: dict):
    """Call the loss on ``x`` (micro-batch by micro-batch, each loss / gradient_accumulation, then backward)."""
    mask, adv, old = x["mask"], x["advantages"], x["old"]
    rows = mask.shape[0]
    p = _params(key, given, rows)
    log_prob = x["log_prob"].clone().requires_grad_(True)
    micro, accumulation = p["micro_batch_size"], p["gradient_accumulation"]
    total, metrics = None, []
    for start in range(0, rows, micro):
        rows_here = slice(start, min(start + micro, rows))
        pg_loss, m = _call(core_algos, key, p, old[rows_here], log_prob[rows_here], adv[rows_here], mask[rows_here])
        loss = pg_loss / accumulation
        loss.backward()
        total = loss.detach() if total is None else total + loss.detach()
        metrics.append(m)
    outputs = {"loss": total.item(), "grad_log_prob": log_prob.grad.tolist(), "metrics": metrics}
    return p, outputs


def _inputs(spec: str) -> dict:
    kind, name = spec.split(":", 1)
    return policy_inputs.variant(name) if kind == "variant" else tie_inputs.variant(name)


def _cases(core_algos, key: str) -> list[dict]:
    cases = []
    for name, spec, given, note in CASES[key]:
        x = _inputs(spec)
        p, outputs = _run(core_algos, key, given, x)
        params = {"function": FUNCTION, **p, "inputs_variant": x["description"]}
        inputs = {
            "log_prob": x["log_prob"].tolist(),
            "old_log_prob": x["old"].tolist(),
            "advantages": x["advantages"].tolist(),
            "response_mask": x["mask"].tolist(),
            "index": x["index"],
        }
        text = f"{note}. {NOTES[key]}. Inputs: {x['description']['note']}"
        cases.append({"name": name, "note": text, "params": params, "inputs": inputs, "outputs": outputs})
    return cases


def _reference(source: Source) -> dict:
    return {
        "repo": source.repo,
        "commit": source.commit,
        "commit_date": source.commit_date,
        "path": "verl/trainer/ppo/core_algos.py",
        "function": "compute_policy_loss",
        "harness": "references/oldverl/generate_policy_loss.py",
        "inputs": "references/policy_inputs.py (variants), references/tie_inputs.py (ties/ cases)",
        "sha256": dict(source.executed),
        "read_sha256": dict(source.read),
        "config_defaults": CONFIG_DEFAULTS[source.key],
        "glue": CALLS[source.key],
        "python": "3.11",
        "torch": torch.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    def add_arguments(parser):
        parser.add_argument("--search-r1-src", type=Path, help=f"a checkout of {SEARCH_R1.repo} at {SEARCH_R1.commit}")
        parser.add_argument("--kg-r1-src", type=Path, help=f"a checkout of {KG_R1.repo} at {KG_R1.commit}")

    args = golden_io.parse_args(__doc__, add_arguments)
    given = {"search-r1": args.search_r1_src, "kg-r1": args.kg_r1_src}
    if not any(given.values()):
        print("give --search-r1-src, --kg-r1-src or both", file=sys.stderr)
        return 2
    if not golden_io.pinned({"torch": (torch.__version__, TORCH_VERSION)}, "references/verl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    outputs = {}
    for key, src in given.items():
        if src is None:
            continue
        source = SOURCES[key]
        _verify_checkout(src, source)
        core_algos = _load(src, source)
        data = {"reference": _reference(source), "format": FORMAT, "cases": _cases(core_algos, key)}
        outputs[source.out_file] = golden_io.dump(data)
    return golden_io.write_or_check(outputs, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
