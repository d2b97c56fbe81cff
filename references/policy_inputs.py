"""The inputs every policy-loss harness shares (references/NAME/generate_policy_loss.py): the fixture masks and
advantages of tests/golden/verl_grpo_outcome.json and seeded log-probs, so the trl, skyrl and prime-rl policy-loss
files hold the same numbers under the same input names. Needs torch (every harness environment has it) and
golden_io; CreditLens never imports it. A second recipe (``drift_fixtures``, ``drift_inputs``, at the end) makes the
inputs of the verl and OpenRLHF policy-loss files.

Log-probs (float32, [B, T], drawn with torch.Generator().manual_seed(seed), in this order):
    old     = -1 + 0.3 * randn                    (the behaviour policy the trainer recomputed: "old")
    log_prob = old + drift * randn                (the current trainer policy, the tensor differentiated)
    rollout = old + rollout_drift * randn         (the inference engine's log-probs of the sampled tokens)
    ref     = old + 0.2 * randn                   (a reference model, for KL terms)
each then clamped to <= -0.01 (a probability below 1; DPPO-style masks compare probabilities). The "on_policy"
variant sets log_prob = old exactly (ratio 1). Masked positions hold drawn values too: the trainers must ignore them.
"""

from __future__ import annotations

import json

import golden_io
import torch

FIXTURES = {
    "multiturn_holes": "multiturn_holes_groups_3_2_1/norm_by_std=True",
    "random_dense_seed0": "random_dense_seed0/norm_by_std=True",
}
MAX_LOGP = -0.01

# name: (fixture, seed, drift, rollout_drift, on_policy, note)
VARIANTS = {
    "holes": (
        "multiturn_holes",
        101,
        0.3,
        0.2,
        False,
        "6 x 10 hole fixture, drift 0.3 (ratios on both sides of 1 +- 0.2), rollout drift 0.2",
    ),
    "dense": (
        "random_dense_seed0",
        202,
        0.3,
        0.2,
        False,
        "12 x 16 dense fixture (row 10 fully masked), drift 0.3, rollout drift 0.2",
    ),
    "holes_large_drift": (
        "multiturn_holes",
        699,
        1.0,
        0.5,
        False,
        "hole fixture, large drift 1.0 (ratios far outside the clip range, dual clip and masks fire), rollout "
        "drift 0.5",
    ),
    "holes_on_policy": (
        "multiturn_holes",
        101,
        0.3,
        0.2,
        True,
        "hole fixture, log_prob == old exactly (ratio 1: the on-policy first step); rollout and ref as in 'holes'",
    ),
}


def _fixture(name: str) -> dict:
    case_name = FIXTURES[name]
    cases = json.loads((golden_io.OUT_DIR / "verl_grpo_outcome.json").read_text())["cases"]
    case = next(c for c in cases if c["name"] == case_name)
    mask = golden_io.decode(case["inputs"]["response_mask"])
    advantages = golden_io.decode(case["outputs"]["advantages"])
    # One scalar per row (what an outcome estimator hands the loss): the value on the row's first valid token,
    # 0.0 for a row without one. verl's token advantages are that scalar times the mask.
    rows = [
        next((a for a, m in zip(arow, mrow, strict=True) if m), 0.0)
        for arow, mrow in zip(advantages, mask, strict=True)
    ]
    return {
        "source": f"tests/golden/verl_grpo_outcome.json case {case_name!r} (inputs.response_mask, outputs.advantages)",
        "mask": torch.tensor(mask, dtype=torch.float32),
        "advantages": torch.tensor(advantages, dtype=torch.float32),
        "row_advantages": torch.tensor(rows, dtype=torch.float32),
        "index": case["inputs"]["index"],
    }


def variant(name: str) -> dict:
    """mask, advantages [B, T], row_advantages [B], index, old, log_prob, rollout, ref (float32) and a description."""
    fixture_name, seed, drift, rollout_drift, on_policy, note = VARIANTS[name]
    out = _fixture(fixture_name)
    shape = tuple(out["mask"].shape)
    generator = torch.Generator().manual_seed(seed)
    old = -1.0 + 0.3 * torch.randn(shape, generator=generator)
    log_prob = old + drift * torch.randn(shape, generator=generator)
    rollout = old + rollout_drift * torch.randn(shape, generator=generator)
    ref = old + 0.2 * torch.randn(shape, generator=generator)
    old, log_prob, rollout, ref = (x.clamp(max=MAX_LOGP) for x in (old, log_prob, rollout, ref))
    if on_policy:
        log_prob = old.clone()
    out.update(old=old, log_prob=log_prob, rollout=rollout, ref=ref)
    out["description"] = {
        "name": name,
        "fixture": fixture_name,
        "source": out.pop("source"),
        "note": note,
        "seed": seed,
        "recipe": f"torch.Generator().manual_seed({seed}); old = -1 + 0.3*randn; log_prob = old + {drift}*randn; "
        f"rollout = old + {rollout_drift}*randn; ref = old + 0.2*randn (drawn in this order, shape [B, T]); each "
        f"clamped to <= {MAX_LOGP}" + ("; then log_prob = old (on policy)" if on_policy else ""),
    }
    return out


# ------------------------------------------------------------------------------------------------ the drift recipe
# The verl and OpenRLHF policy-loss files (references/verl/generate.py, references/openrlhf/generate_policy_loss.py)
# share this second recipe: per fixture one seed, and the log-probs scaled by a named drift.
SEEDS = {"multiturn_holes": 0, "random_dense_seed0": 1}
# log_prob - old and rollout - old scales per drift kind ("ratio1": log_prob = old_log_prob exactly).
DRIFTS = {"ratio1": (0.0, 0.2), "drift": (0.3, 0.2), "large": (1.5, 0.8)}
# Where old_log_prob is centred: lower for the large drift, so that ratios above clip_ratio_c = 3 stay possible
# under the cap (log_prob <= -0.01).
CENTRES = {"ratio1": -1.0, "drift": -1.0, "large": -3.0}
LOGPROB_CAP = -0.01


def cases_by_name(file_name: str) -> dict:
    return {c["name"]: c for c in json.loads((golden_io.OUT_DIR / file_name).read_text())["cases"]}


def drift_fixtures() -> dict:
    outcome = cases_by_name("verl_grpo_outcome.json")
    fixtures = {}
    for name, case_name in FIXTURES.items():
        case = outcome[case_name]
        fixtures[name] = {
            "source": f"verl_grpo_outcome.json case {case_name!r}",
            "mask": torch.tensor(golden_io.decode(case["inputs"]["response_mask"]), dtype=torch.float32),
            "grpo": torch.tensor(golden_io.decode(case["outputs"]["advantages"]), dtype=torch.float32),
        }
    return fixtures


def drift_inputs(fixture_name: str, fixture: dict, drift: str, advantages: str) -> tuple[dict, str]:
    """old, log_prob, rollout [B, T] float32 (seeded), advantages, mask; and how they were made."""
    mask = fixture["mask"]
    seed = SEEDS[fixture_name]
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(mask.shape, generator=g, dtype=torch.float32)
    d_lp = torch.randn(mask.shape, generator=g, dtype=torch.float32)
    d_ro = torch.randn(mask.shape, generator=g, dtype=torch.float32)
    noise_adv = torch.randn(mask.shape, generator=g, dtype=torch.float32)
    s_lp, s_ro = DRIFTS[drift]
    old = (CENTRES[drift] + 0.3 * base).clamp(max=LOGPROB_CAP)
    log_prob = old.clone() if drift == "ratio1" else (old + s_lp * d_lp).clamp(max=LOGPROB_CAP)
    rollout = (old + s_ro * d_ro).clamp(max=LOGPROB_CAP)
    how = (
        f"g = torch.Generator().manual_seed({seed}); base, d_lp, d_ro, noise = four torch.randn(B, T, generator=g) "
        f"draws in that order; old = min({CENTRES[drift]} + 0.3 * base, {LOGPROB_CAP}); "
        + (
            "log_prob = old (exactly: ratio 1, the first minibatch)"
            if drift == "ratio1"
            else f"log_prob = min(old + {s_lp} * d_lp, {LOGPROB_CAP})"
        )
        + f"; rollout = min(old + {s_ro} * d_ro, {LOGPROB_CAP}); masked positions keep their values"
    )
    if advantages == "grpo":
        adv = fixture["grpo"].clone()
        how += f"; advantages = the GRPO advantages of {fixture['source']} (one value per row, 0 on masked tokens)"
    else:
        adv = noise_adv * mask
        how += "; advantages = noise * response_mask (token-level, seeded normal)"
    return {"old": old, "log_prob": log_prob, "rollout": rollout, "advantages": adv, "mask": mask}, how
