"""Golden data: OpenRLHF's policy loss where the values a min, max or clamp compares are exactly equal.

Run in the environment of references/openrlhf/generate_policy_loss.py (`bash references/setup_env.sh openrlhf`):

    .venv-references-openrlhf/bin/python references/openrlhf/generate_policy_ties.py

Writes tests/golden/openrlhf_policy_ties.json (`--check` compares instead of writing). Each case runs the actor's loss
step exactly as generate_policy_loss.py does (its `_run`: `PolicyLoss(...)` with the normalisers of
`iter_grad_accum_global_norm`, log_prob a leaf requiring grad; its stubs and `reference`) on the float32 inputs of
references/tie_inputs.py, whose ratios sit exactly on the clip boundaries. What autograd does there:

* ppo: -min(r*A, clamp(r, 1 - low, 1 + high)*A) ties on and inside the band with equal derivatives (whole); past the
  band where the products round alike, half; with dual_clip, -max(min(...), dual_clip*A) ties at r == dual_clip
  (A < 0): half. clamp(log ratio, -20, 20) passes at +-20, nothing beyond.
* gspo: the sequence ratio s = exp(masked mean of the log ratio), uncapped and differentiated through the row; the same
  min and dual-clip max on s: at s == dual_clip (A < 0) half the row's gradient.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generate_policy_loss as base  # references/openrlhf/generate_policy_loss.py: the stubs, the call, the reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

OUT_FILE = "openrlhf_policy_ties.json"

# (batch, PolicyLoss parameters overriding generate_policy_loss.DEFAULTS, what autograd gives at the boundaries)
CASES = [
    (
        "ppo",
        {"dual_clip": 2.0},
        "A = 1: ratio 1.2 and 0.8 whole, 2.0 none. A = -1: 0.8 and 1.2 whole, 2.0 = dual_clip half (torch.max of two "
        "equal values), 4.0 none. Row 2: A*ratio == A*1.2 past the bound: half",
    ),
    ("safety_at", {}, "log ratio 20 with A = -1: the clamp passes at its bound, -A*e^20; -20 with A = 1: -A*e^-20"),
    ("safety_beyond", {}, "log ratio 20.5 and -20.5: past the clamp, no gradient"),
    (
        "gspo_row",
        {"policy_loss_type": "gspo", "dual_clip": 2.0},
        "row 0: s exactly 2.0 = dual_clip with A = -1, half; row 1: s = 4.0, none; row 2: s = 1.2 with A = 1, whole; "
        "row 3: A*s == A*1.2 past the bound, half; each row's gradient spread over its two tokens",
    ),
]


def _build_cases() -> list[dict]:
    cases = []
    for batch_name, overrides, expect in CASES:
        x = tie_inputs.variant(batch_name)
        params = {**base.DEFAULTS, **overrides}
        outputs = base._run(params, x)
        name = "/".join(
            [params["policy_loss_type"], batch_name]
            + [f"{k}={v}" for k, v in overrides.items() if k != "policy_loss_type"]
        )
        note = f"{expect}. {base.LOSS_NOTES[params['policy_loss_type']]}. Inputs: {x['description']['note']}"
        inputs = {
            "log_prob": x["log_prob"].tolist(),
            "old_log_prob": x["old"].tolist(),
            "advantages": x["advantages"].tolist(),
            "response_mask": x["mask"].tolist(),
        }
        cases.append({"name": name, "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "openrlhf": (base.importlib.metadata.version("openrlhf"), base.OPENRLHF_VERSION),
        "torch": (base.torch.__version__, base.TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/openrlhf/requirements.txt"):
        return 2
    base.torch.use_deterministic_algorithms(True)
    reference = {
        **base._reference(),
        "harness": "references/openrlhf/generate_policy_ties.py (calls generate_policy_loss._run)",
        "inputs": "references/tie_inputs.py",
    }
    text = golden_io.dump({"reference": reference, "format": base.FORMAT, "cases": _build_cases()})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
