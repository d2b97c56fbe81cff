"""Golden data: verl's advantages after decoupled rollout rejection replaced the response mask, called unmodified.

Run in the environment of references/verl/generate.py (`bash references/setup_env.sh verl`):

    .venv-references-verl/bin/python references/verl/generate_rs_advantages.py

Writes tests/golden/verl_rollout_rs_advantages.json. Running it again with the pinned versions reproduces the file
byte for byte (`--check` compares instead of writing). references/verl/generate.py writes the policy-loss file and
is independent of this script.

In decoupled mode verl's trainer (ray_trainer.RayPPOTrainer.fit, and trainer/ppo/v1/trainer_base.py's
_compute_advantage) runs, in this order, on one `DataProto`:
1. (in-reward KL, off here) token_level_rewards = token_level_scores;
2. `rollout_corr_helper.compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config)`: it calls
   `compute_rollout_correction_and_rejection_mask(old_log_probs, rollout_log_probs, response_mask, ...)`, REPLACES
   `batch.batch["response_mask"]` by the rejection-masked mask and adds `rollout_is_weights` when rollout_is is set;
3. `ray_trainer.compute_advantage(batch, adv_estimator, gamma, lam, num_repeat, norm_adv_by_std_in_grpo, config)`,
   which hands every estimator `data.batch["response_mask"]`: the rejection-masked one.
The harness runs steps 2 and 3 as they are (both functions called, on a real DataProto with the uids as its
`non_tensor_batch["uid"]` and a real `AlgoConfig`); nothing is stubbed. Bypass mode never calls step 2 (the loss
applies the rejection itself), so its advantages see the original mask: not a case here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import torch
import verl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)
import policy_inputs  # noqa: E402  (references/policy_inputs.py: the shared inputs)
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.config.algorithm import AlgoConfig, RolloutCorrectionConfig  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch  # noqa: E402

OUT_FILE = "verl_rollout_rs_advantages.json"
VERL_VERSION = "0.9.1"
TORCH_VERSION = "2.13.0+cpu"
ROOT = Path(verl.__file__).resolve().parent
FILES_RUN = [
    "verl/trainer/ppo/ray_trainer.py",
    "verl/trainer/ppo/core_algos.py",
    "verl/trainer/ppo/rollout_corr_helper.py",
    "verl/utils/torch_functional.py",
    "verl/trainer/config/algorithm.py",
    "verl/base_config.py",
    "verl/protocol.py",
]
RC_KEYS = ("rollout_is", "rollout_is_threshold", "rollout_is_batch_normalize", "rollout_rs", "rollout_rs_threshold")

GLUE = (
    "Restated from verl 0.9.1 (not called): the order of RayPPOTrainer.fit (ray_trainer.py, the 'adv' block) and "
    "trainer/ppo/v1/trainer_base.py _compute_advantage in decoupled mode: token_level_rewards = token_level_scores "
    "(use_kl_in_reward off), then compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config) (called), "
    "then compute_advantage(batch, adv_estimator=, gamma=, lam=, num_repeat=1, norm_adv_by_std_in_grpo=True, "
    "config=AlgoConfig(gamma=, lam=, adv_estimator=)) (called). The batch is DataProto.from_dict(tensors="
    "{token_level_rewards, values (gae only), old_log_probs, rollout_log_probs, response_mask}, non_tensors={uid: "
    "inputs.index as an object array})."
)

FORMAT = (
    "Tensors are plain nested lists [B, T] (row-major). Inputs were materialised as torch.float32 (response_mask "
    "float32 0/1) before calling the reference; outputs are its float32 results widened to float64 by tolist(). "
    "Non-finite floats are encoded as strings 'nan'/'inf'/'-inf'. Per case: params.estimator (verl "
    "AdvantageEstimator value), params.gamma, params.lam, params.norm_adv_by_std_in_grpo (true), "
    "params.rollout_correction (every RC_KEYS field of the RolloutCorrectionConfig built, its defaults included). "
    "inputs.token_level_rewards, inputs.values (gae only), inputs.old_log_prob (the trainer's, old_log_probs), "
    "inputs.rollout_log_prob, inputs.response_mask (before the correction), inputs.index (the uids: rows with one "
    "id are one group). outputs.response_mask_after: batch['response_mask'] after "
    "compute_rollout_correction_and_add_to_batch, the mask compute_advantage read; outputs.rollout_is_weights (null "
    "without rollout_is); outputs.advantages, outputs.returns: what compute_advantage put in the batch. "
    "Suggested tolerance: atol=1e-5, rtol=1e-5."
)

# estimator name (verl's AdvantageEstimator value), gamma, lam
ESTIMATORS = [
    ("gae", 1.0, 1.0),
    ("gae", 0.99, 0.95),
    ("reinforce_plus_plus", 1.0, 1.0),
    ("reinforce_plus_plus_baseline", 1.0, 1.0),
    ("grpo", 1.0, 1.0),
    ("rloo", 1.0, 1.0),
    ("opo", 1.0, 1.0),
]
MH = "multiturn_holes"
RD = "random_dense_seed0"
# (fixture, drift of references/policy_inputs.py, rollout correction, note)
SETTINGS = [
    (
        MH,
        "drift",
        {"rollout_is": None, "rollout_rs": "token_k1", "rollout_rs_threshold": "0.8_1.25"},
        "token rejection: tokens with log(pi_old / pi_rollout) outside [log .8, log 1.25] leave the mask (some "
        "last tokens, which carry the outcome reward, among them)",
    ),
    (
        MH,
        "drift",
        {"rollout_is": None, "rollout_rs": "seq_mean_k3", "rollout_rs_threshold": 0.02},
        "whole rows rejected: a row whose mean k3 exceeds 0.02 leaves the mask entirely",
    ),
    (
        MH,
        "drift",
        {"rollout_is": "token", "rollout_is_threshold": 2.0},
        "IS weights only, no rejection: the mask the estimators read is the original one",
    ),
    (
        RD,
        "large",
        {"rollout_is": None, "rollout_rs": "token_k1", "rollout_rs_threshold": "0.5_2.0"},
        "token rejection on the dense fixture (row 10 fully masked before)",
    ),
    (
        RD,
        "drift",
        {
            "rollout_is": "sequence",
            "rollout_is_threshold": 2.0,
            "rollout_rs": "seq_mean_k3",
            "rollout_rs_threshold": 0.02,
        },
        "sequence TIS with whole rows rejected on the dense fixture",
    ),
]


def _fixtures() -> dict:
    """token_level_rewards, values, response_mask (verl_gae.json, gamma=1 lam=1 case) and index
    (verl_grpo_outcome.json) of each fixture; the masks and rewards of the two files are the same."""
    gae = policy_inputs.cases_by_name("verl_gae.json")
    outcome = policy_inputs.cases_by_name("verl_grpo_outcome.json")
    out = {}
    for name, outcome_case in policy_inputs.FIXTURES.items():
        gae_case = f"{name}/gamma=1.0,lam=1.0"
        g, o = gae[gae_case]["inputs"], outcome[outcome_case]["inputs"]
        assert g["response_mask"] == o["response_mask"] and g["token_level_rewards"] == o["token_level_rewards"]
        out[name] = {
            "source": f"verl_gae.json case {gae_case!r} (token_level_rewards, values, response_mask) and "
            f"verl_grpo_outcome.json case {outcome_case!r} (index)",
            "rewards": torch.tensor(golden_io.decode(g["token_level_rewards"]), dtype=torch.float32),
            "values": torch.tensor(golden_io.decode(g["values"]), dtype=torch.float32),
            "index": o["index"],
        }
    return out


def _run(estimator: str, gamma: float, lam: float, rc: dict, fx: dict, x: dict) -> dict:
    tensors = {"token_level_rewards": fx["rewards"].clone()}
    if estimator == "gae":
        tensors["values"] = fx["values"].clone()
    tensors |= {"old_log_probs": x["old"].clone(), "rollout_log_probs": x["rollout"].clone()}
    tensors["response_mask"] = x["mask"]
    data = DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array(fx["index"], dtype=object)})
    data, _ = compute_rollout_correction_and_add_to_batch(data, RolloutCorrectionConfig(**rc))
    mask_after = data.batch["response_mask"].clone()
    weights = data.batch["rollout_is_weights"] if "rollout_is_weights" in data.batch.keys() else None
    config = AlgoConfig(gamma=gamma, lam=lam, adv_estimator=estimator)
    data = compute_advantage(
        data, adv_estimator=estimator, gamma=gamma, lam=lam, num_repeat=1, norm_adv_by_std_in_grpo=True, config=config
    )
    adv, ret = data.batch["advantages"], data.batch["returns"]
    assert adv.dtype == torch.float32 and ret.dtype == torch.float32 and mask_after.dtype == torch.float32
    assert torch.equal(data.batch["response_mask"], mask_after)  # compute_advantage read (and kept) this mask
    return {
        "response_mask_after": mask_after.tolist(),
        "rollout_is_weights": None if weights is None else weights.tolist(),
        "advantages": adv.tolist(),
        "returns": ret.tolist(),
    }


def _rc_name(rc: dict) -> str:
    parts = []
    if rc.get("rollout_is"):
        parts.append(f"is={rc['rollout_is']}:{rc.get('rollout_is_threshold')}")
    if rc.get("rollout_rs"):
        parts.append(f"rs={rc['rollout_rs']}:{rc.get('rollout_rs_threshold')}")
    return "/".join(parts)


def _build_cases() -> list[dict]:
    fixtures = _fixtures()
    masks = policy_inputs.drift_fixtures()
    cases = []
    for fixture, drift, rc, note in SETTINGS:
        fx = fixtures[fixture]
        x, how = policy_inputs.drift_inputs(fixture, masks[fixture], drift, "grpo")
        how = how.split("; advantages =")[0]  # the log-probs' recipe (the loss's advantages are not used here)
        rcc = RolloutCorrectionConfig(**rc)
        for estimator, gamma, lam in ESTIMATORS:
            outputs = _run(estimator, gamma, lam, rc, fx, x)
            inputs = {"token_level_rewards": fx["rewards"].tolist()}
            if estimator == "gae":
                inputs["values"] = fx["values"].tolist()
            inputs |= {
                "old_log_prob": x["old"].tolist(),
                "rollout_log_prob": x["rollout"].tolist(),
                "response_mask": x["mask"].tolist(),
                "index": fx["index"],
            }
            name = f"{estimator}/{fixture}/{drift}/{_rc_name(rc)}"
            if estimator == "gae":
                name += f"/gamma={gamma},lam={lam}"
            cases.append(
                {
                    "name": name,
                    "note": f"{note}. Rewards, values, masks and uids from {fx['source']}; log-probs: {how}",
                    "params": {
                        "estimator": estimator,
                        "gamma": gamma,
                        "lam": lam,
                        "norm_adv_by_std_in_grpo": True,
                        "rollout_correction": {k: getattr(rcc, k) for k in RC_KEYS},
                    },
                    "inputs": inputs,
                    "outputs": outputs,
                }
            )
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    return cases


def _reference() -> dict:
    return {
        "repo": "verl-project/verl",
        "version": VERL_VERSION,
        "package": f"verl=={VERL_VERSION} (PyPI)",
        "path": FILES_RUN[0],
        "function": "rollout_corr_helper.compute_rollout_correction_and_add_to_batch, then ray_trainer."
        "compute_advantage (core_algos: compute_gae_advantage_return, compute_reinforce_plus_plus_outcome_advantage, "
        "compute_reinforce_plus_plus_baseline_outcome_advantage, compute_grpo_outcome_advantage, "
        "compute_rloo_outcome_advantage, compute_opo_outcome_advantage)",
        "glue": GLUE,
        "sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in FILES_RUN},
        "versions": {
            name: importlib.metadata.version(name) for name in ("verl", "torch", "tensordict", "numpy", "omegaconf")
        },
        "stubs": [],
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "verl": (importlib.metadata.version("verl"), VERL_VERSION),
        "torch": (torch.__version__, TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/verl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)
    cases = _build_cases()
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
