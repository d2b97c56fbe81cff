"""Golden data: prime-rl's trainer loss where the values its trust-region masks compare are exactly equal.

Run in the environment and with the checkout of references/prime_rl/generate_policy_loss.py:

    .venv-references-prime_rl/bin/python references/prime_rl/generate_policy_ties.py --prime-rl-src /tmp/prime-rl

Writes tests/golden/primerl_policy_ties.json (`--check` compares instead of writing). Each case runs the loss exactly
as generate_policy_loss.py does (its checkout check, stubs and `_run`: `setup_rl_loss_fn`, then `compute_loss` on
per-sample views of one packed leaf tensor, rl_scale as train.py counts it; its `reference`) on the float32 inputs of
references/tie_inputs.py. The inference log-probs are the inputs' `old`. What autograd does there:

* default_loss_fn: the DPPO masks compare exp(trainer) - exp(inference) with > and < (no gradient): a token exactly at
  dppo_mask_high / -dppo_mask_low keeps its gradient.
* ipo_loss_fn: |exp(trainer) - exp(inference)| > ipo_threshold: exactly at the threshold the token is kept.
* the ratio exp(trainer - inference) is not clamped: it keeps its gradient at and past log ratio +-20.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generate_policy_loss as base  # references/prime_rl/generate_policy_loss.py: the checkout, stubs, call

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

OUT_FILE = "primerl_policy_ties.json"

# (name, batch, loss, what autograd gives at the boundaries)
CASES = [
    (
        "default/dppo",
        "dppo",
        "default",
        "A = 1 at exp(lp) - exp(inf) exactly 0.2 = dppo_mask_high: kept (masked only where >), past it masked, -0.2 "
        "kept; A = -1 at exactly -0.2: kept (masked only where < -0.2), past it masked, 0.2 kept",
    ),
    (
        "ipo/ipo",
        "ipo",
        "ipo",
        "|exp(lp) - exp(inf)| exactly 0.1 = ipo_threshold, either sign of A: kept; past it masked",
    ),
    ("default/safety_at", "safety_at", "default", "log ratio 20 with A = -1 (inside the trust region): -A*e^20"),
    (
        "default/safety_beyond",
        "safety_beyond",
        "default",
        "log ratio 20.5 with A = -1: no clamp on the log ratio, so -A*e^20.5 (verl, SkyRL and OpenRLHF: 0)",
    ),
]


def _cases(loss_module, config_classes) -> list[dict]:
    cases = []
    for name, batch_name, loss, expect in CASES:
        v = tie_inputs.variant(batch_name)
        params, inputs, outputs = base._run(loss_module, config_classes, {"loss": loss, "inference": "old"}, v)
        note = f"{expect}. {base.NOTES[loss]}. Aggregation: {base.AGGREGATION}. Inputs: {v['description']['note']}"
        cases.append({"name": name, "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    return cases


def main() -> int:
    def add_arguments(parser):
        parser.add_argument(
            "--prime-rl-src",
            type=Path,
            required=True,
            help=f"a checkout of {base.PRIME_RL_REPO} at {base.PRIME_RL_COMMIT}",
        )

    args = golden_io.parse_args(__doc__, add_arguments)
    if not golden_io.pinned(
        {"torch": (base.torch.__version__, base.TORCH_VERSION)}, "references/prime_rl/requirements.txt"
    ):
        return 2
    base._verify_checkout(args.prime_rl_src)
    loss_module, config_classes = base._load(args.prime_rl_src)
    base.torch.use_deterministic_algorithms(True)
    reference = {
        **base._reference(),
        "harness": "references/prime_rl/generate_policy_ties.py (calls generate_policy_loss._run)",
        "inputs": "references/tie_inputs.py",
    }
    text = golden_io.dump({"reference": reference, "format": base.FORMAT, "cases": _cases(loss_module, config_classes)})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
