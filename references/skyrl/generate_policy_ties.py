"""Golden data: SkyRL's policy losses where the values a min, max or clamp compares are exactly equal.

Run in the environment of references/skyrl/generate_policy_loss.py (`bash references/setup_env.sh skyrl`):

    .venv-references-skyrl/bin/python references/skyrl/generate_policy_ties.py

Writes tests/golden/skyrl_policy_ties.json (`--check` compares instead of writing). Each case runs the two steps of
generate_policy_loss.py (its `_run`: `apply_loss_reduction_to_advantages_minibatch`, then the registered loss, a sum;
its stubs and `reference`) on the float32 inputs of references/tie_inputs.py, whose ratios sit exactly on the clip
boundaries. What autograd does there:

* dual_clip: -min(r*A, clamp(r, 1 - low, 1 + high)*A) ties on and inside the band with equal derivatives (whole);
  past the band where the products round alike, half; min(-A*c, loss) ties at r == clip_ratio_c (A < 0): half.
* regular: safe_exp_delta's clamp(-20, 20) passes at +-20, nothing beyond.
* gspo: clamp(log s, max=10) passes at exactly 10.
* rollout_is: the band (1 - low, 1 + high) is open: a ratio exactly on a bound gets 0.
* dppo binary_tv: the masks compare with > (no gradient): a token exactly at delta keeps its gradient.

The loss sees the reduced advantage (token_mean: A / 8, sequence_mean: A / (4 * 2)): a power of two, so its products
with the ratio round as A's do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generate_policy_loss as base  # references/skyrl/generate_policy_loss.py: the stubs, the call, the reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

OUT_FILE = "skyrl_policy_ties.json"

# (batch, the loss's parameters, what autograd gives at the boundaries)
CASES = [
    (
        "ppo",
        dict(policy_loss_type="dual_clip", clip_ratio_c=2.0),
        "A = 1: ratio 1.2 and 0.8 whole, 2.0 none. A = -1: 0.8 and 1.2 whole, 2.0 = clip_ratio_c half (torch.min "
        "of two equal values), 4.0 none. Row 2: A*ratio == A*1.2 past the bound: half",
    ),
    (
        "safety_at",
        dict(policy_loss_type="regular"),
        "log ratio 20 with A = -1: the clamp passes at its bound, -A*e^20; -20 with A = 1: -A*e^-20",
    ),
    ("safety_beyond", dict(policy_loss_type="regular"), "log ratio 20.5 and -20.5: past the clamp, no gradient"),
    (
        "gspo_own",
        dict(policy_loss_type="gspo", loss_reduction="sequence_mean"),
        "row 0: mean log ratio exactly 10, clamp(max=10) passes; row 1: 10.5, none; row 2: s = 1.2 with A = 1, "
        "whole; row 3: A*s == A*1.2 past the bound, half",
    ),
    (
        "rollout_band",
        dict(policy_loss_type="rollout_is", rollout=True),
        "ratio (against rollout_logprobs = old) exactly 1.2 and 0.8: outside the open band, 0; ratio 1: -A",
    ),
    (
        "dppo",
        dict(policy_loss_type="dppo", rollout=True),
        "binary_tv, delta 0.2 / 0.2: A = 1 at exp(log_prob) - exp(mu) exactly 0.2 kept, past it masked, -0.2 kept; "
        "A = -1 at exactly -0.2 kept, past it masked, 0.2 kept",
    ),
]


def _build_cases() -> list[dict]:
    cases = []
    for batch_name, p, expect in CASES:
        v = tie_inputs.variant(batch_name)
        p = {"loss_reduction": "token_mean", **p}
        params, inputs, outputs = base._run(p, v)
        name = f"{p['policy_loss_type']}/{batch_name}/{p['loss_reduction']}"
        if "clip_ratio_c" in p:
            name += f"/clip_ratio_c={p['clip_ratio_c']}"
        note = f"{expect}. {base.NOTES[p['policy_loss_type']]}. Inputs: {v['description']['note']}"
        cases.append({"name": name, "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "skyrl": (base.skyrl.__version__, base.SKYRL_VERSION),
        "torch": (base.torch.__version__, base.TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/skyrl/requirements.txt"):
        return 2
    base.torch.use_deterministic_algorithms(True)
    reference = {
        **base._reference(),
        "harness": "references/skyrl/generate_policy_ties.py (calls generate_policy_loss._run)",
    }
    reference["inputs"] = "references/tie_inputs.py"
    text = golden_io.dump({"reference": reference, "format": base.FORMAT, "cases": _build_cases()})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
