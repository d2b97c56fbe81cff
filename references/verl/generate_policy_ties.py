"""Golden data: verl's policy losses where the values a min, max or clamp compares are exactly equal.

Run in the environment of references/verl/generate.py (`bash references/setup_env.sh verl`):

    .venv-references-verl/bin/python references/verl/generate_policy_ties.py

Writes tests/golden/verl_policy_ties.json (`--check` compares instead of writing). Each case calls the loss exactly as
generate.py does (its `_run`: `get_policy_loss_fn(loss_mode)(...)` with a real ActorConfig and ppo_loss's
global_batch_info, log_prob a leaf requiring grad; the file's `reference` is generate.py's), on the float32 inputs of
references/tie_inputs.py, whose ratios sit exactly on the clip boundaries. What autograd does there:

* vanilla: max(pg1, pg2) ties wherever the ratio is on or inside the clip band, and both branches carry the same
  derivative there (the clamp passes its bounds): the whole gradient; where A*ratio and A*(1 + eps_high) round to the
  same float32 above the band, half. min(-A*c, loss) ties at ratio == clip_ratio_c (A < 0): half the gradient.
  clamp(log ratio, -20, 20) passes at +-20.
* gspo: clamp(log s, max=10) passes at exactly 10; the PPO clip as vanilla, no dual clip.
* geo_mean: min(sgn*log ratio, sgn*clamp(log ratio, -low, high)) ties inside the band and at its bounds, with equal
  derivatives: the whole gradient up to and at the bound.
* dppo_tv: the trust-region masks are comparisons (no gradient), inclusive: a token exactly at the bound keeps its
  gradient; the ratio is truncated at clip_ratio_c, detached (not reproduced by CreditLens: the case says so).
* cispo: the clipped ratio is detached: a bound changes nothing but the value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generate  # references/verl/generate.py: the call, the config, the reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py)
import tie_inputs  # noqa: E402  (references/tie_inputs.py: the inputs on the boundaries)

OUT_FILE = "verl_policy_ties.json"

# (loss, batch, cfg overriding generate.DEFAULT_CFG, what autograd gives at the boundaries)
CASES = [
    (
        "vanilla",
        "ppo",
        {"clip_ratio_c": 2.0},
        "A = 1: ratio 1.2 and 0.8 whole (max ties, both branches pass), 2.0 none (clipped). A = -1: 0.8 and 1.2 whole, "
        "2.0 = clip_ratio_c half (min(-A*c, loss) ties: torch.min gives each equal input half), 4.0 none. Row 2: "
        "A*ratio == A*1.2 in float32 past the bound: max ties, the clamped branch passes nothing: half",
    ),
    (
        "vanilla",
        "safety_at",
        {"clip_ratio_c": 1e9},
        "log ratio 20 with A = -1 (dual clip 1e9 above e^20): clamp(-20, 20) passes at its bound: -A*e^20; log ratio "
        "-20 with A = 1: -A*e^-20 (below the tolerance)",
    ),
    (
        "vanilla",
        "safety_beyond",
        {"clip_ratio_c": 1e9},
        "log ratio 20.5 and -20.5: past the clamp, no gradient",
    ),
    (
        "gspo",
        "gspo_own",
        {"loss_agg_mode": "seq-mean-token-mean"},
        "row 0: mean log ratio exactly 10, clamp(max=10) passes: -A*e^10 per token; row 1: 10.5, none; row 2: s = 1.2 "
        "with A = 1, whole; row 3: A*s == A*1.2 past the bound, half",
    ),
    (
        "geo_mean",
        "geo_mean",
        {"clip_ratio": 0.25, "clip_ratio_low": 0.25, "clip_ratio_high": 0.25},
        "A = 1: log ratio 0.25 (= high) and -0.25 pass, 0.3 clipped; A = -1: -0.25 (= -low) and 0.25 pass, -0.3 "
        "clipped",
    ),
    (
        "dppo_tv",
        "dppo",
        {},
        "A = 1: exp(log_prob) - exp(old) exactly 0.2 (= clip_ratio_high) kept (<=), past it masked, -0.2 kept; A = -1: "
        "exactly -0.2 (= -clip_ratio_low) kept (>=), past it masked, 0.2 kept; ratios below clip_ratio_c = 3",
    ),
    (
        "dppo_tv",
        "ppo",
        {},
        "the ratio 4.0 with A = -1 (kept by the trust region) is truncated at clip_ratio_c = 3, detached: -A*3",
    ),
    (
        "cispo",
        "ppo",
        {},
        "the clipped ratio is detached: at 1.2 and 0.8 the weight is the ratio itself",
    ),
]


def _build_cases() -> list[dict]:
    cases = []
    for loss, batch_name, cfg, expect in CASES:
        x = tie_inputs.variant(batch_name)
        spec = generate._spec(loss, cfg=cfg)
        params, outputs = generate._run(spec, x)
        parts = [loss, batch_name] + [f"{k}={v}" for k, v in cfg.items() if v != generate.DEFAULT_CFG.get(k)]
        cases.append(
            {
                "name": "/".join(parts),
                "note": f"{expect}. Inputs: {x['description']['note']}. {x['description']['recipe']}",
                "params": params,
                "inputs": {
                    "log_prob": x["log_prob"].tolist(),
                    "old_log_prob": x["old"].tolist(),
                    "advantages": x["advantages"].tolist(),
                    "response_mask": x["mask"].tolist(),
                },
                "outputs": outputs,
            }
        )
    return cases


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "verl": (generate.importlib.metadata.version("verl"), generate.VERL_VERSION),
        "torch": (generate.torch.__version__, generate.TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/verl/requirements.txt"):
        return 2
    generate.torch.use_deterministic_algorithms(True)
    reference = {**generate._reference(), "harness": "references/verl/generate_policy_ties.py (calls generate._run)"}
    reference["inputs"] = "references/tie_inputs.py"
    text = golden_io.dump({"reference": reference, "format": generate.FORMAT, "cases": _build_cases()})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
