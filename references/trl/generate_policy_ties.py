"""Golden data: TRL's GRPOTrainer loss where the values a min, max or clamp compares are exactly equal.

Run in the environment of references/trl/generate_policy_loss.py (`bash references/setup_env.sh trl`):

    .venv-references-trl/bin/python references/trl/generate_policy_ties.py

Writes tests/golden/trl_policy_ties.json (`--check` compares instead of writing). Each case calls
`GRPOTrainer._compute_loss` exactly as generate_policy_loss.py does (its `_run`, path 'direct': the stub `self`,
log_prob a leaf requiring grad; its stubs, FORMAT and reference) on the float32 inputs of references/tie_inputs.py,
whose ratios sit exactly on the clip boundaries. What autograd does there:

* the two-sided delta is clamp(coef_1, max=delta) before -min(coef_1*A, coef_2*A), for either sign of A: the clamp
  passes its gradient at coef_1 == delta, and there coef_1*A < coef_2*A (A < 0): the whole gradient, not half; a
  delta below 1 + epsilon_high also cuts A > 0 above delta (A < 0 there keeps coef_2's gradient).
* -min(...) ties on and inside the band with equal derivatives (whole); past it where the products round alike, half.
* the log ratio is not clamped: exp(log ratio) keeps its gradient at and past +-20.
* importance_sampling_level sequence (GSPO): the same on the row's ratio, differentiated through the row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generate_policy_loss as base  # references/trl/generate_policy_loss.py: the stub self, the call, the reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

OUT_FILE = "trl_policy_ties.json"

# (name, batch, params overriding generate_policy_loss.DEFAULTS, what autograd gives at the boundaries)
CASES = [
    (
        "dapo/ppo",
        "ppo",
        {"delta": 2.0},
        "A = 1: ratio 1.2 and 0.8 whole, 2.0 none. A = -1: 0.8 and 1.2 whole, 2.0 = delta whole (the clamp passes at "
        "its bound and no other branch ties), 4.0 none. Row 2: A*ratio == A*1.2 past the bound: half",
    ),
    (
        "dapo/ppo_delta_low",
        "ppo_delta_low",
        {"delta": 1.1},
        "delta 1.1 below 1 + epsilon_high = 1.2: A = 1 at ratio 1.1 whole (coef_1 == coef_2, both pass), at 1.2 none "
        "(coef_1 capped at 1.1 gives the smaller loss), 0.8 whole; A = -1: 1.1 and 0.8 whole, 1.2 whole too (past "
        "delta, but coef_2*A = -1.2 is the smaller and its clamp passes at the bound)",
    ),
    ("dapo/safety_at", "safety_at", {}, "log ratio 20 with A = -1: -A*e^20 (no clamp); -20 with A = 1: -A*e^-20"),
    (
        "dapo/safety_beyond",
        "safety_beyond",
        {},
        "log ratio 20.5 with A = -1: no clamp on the log ratio, so -A*e^20.5 (verl, SkyRL and OpenRLHF: 0)",
    ),
    (
        "gspo/gspo_row",
        "gspo_row",
        {"loss_type": "grpo", "importance_sampling_level": "sequence", "delta": 2.0},
        "row 0: s exactly 2.0 = delta with A = -1, whole; row 1: s = 4.0, none; row 2: s = 1.2 with A = 1, whole; row "
        "3: A*s == A*1.2 past the bound, half; each row's gradient spread over its two tokens",
    ),
]


def _build_cases(reads: set[str]) -> list[dict]:
    cases = []
    for name, batch_name, overrides, expect in CASES:
        v = tie_inputs.variant(batch_name)
        p = dict(base.DEFAULTS, path="direct", **overrides)
        p["max_completion_length"] = v["mask"].shape[1]
        case_inputs, outputs, num_items = base._run(reads, p, v)
        params = {k: p[k] for k in ("path", *base.DEFAULTS)}
        params["num_items_in_batch"] = num_items
        params["inputs_variant"] = v["description"]
        note = f"{base._note(p, expect)}. Inputs: {v['description']['note']}"
        cases.append({"name": name, "note": note, "params": params, "inputs": case_inputs, "outputs": outputs})
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"trl": (base.trl.__version__, base.TRL_VERSION), "torch": (base.torch.__version__, base.TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/trl/requirements.txt"):
        return 2
    base.torch.use_deterministic_algorithms(True)
    reads: set[str] = set()
    cases = _build_cases(reads)
    reference = {
        "repo": "huggingface/trl",
        "version": base.TRL_VERSION,
        "package": f"trl=={base.TRL_VERSION} (PyPI)",
        "path": "trl/trainer/grpo_trainer.py",
        "function": "GRPOTrainer._compute_loss",
        "sha256": base.hashlib.sha256(Path(base.grpo_module.__file__).read_bytes()).hexdigest(),
        "torch": base.torch.__version__,
        "stubs": base.STUBS,
        "self_attributes_read": sorted(reads),
        "harness": "references/trl/generate_policy_ties.py (calls generate_policy_loss._run)",
        "inputs": "references/tie_inputs.py",
    }
    text = golden_io.dump({"reference": reference, "format": base.FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
