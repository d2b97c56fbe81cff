"""Golden data from SkyRL's advantage estimators, called unmodified.

Run in the separate environment made by `bash references/setup_env.sh skyrl` (CreditLens itself never imports skyrl):

    .venv-references-skyrl/bin/python references/skyrl/generate.py

Writes tests/golden/skyrl_advantages.json. Running it again with the pinned versions reproduces the committed
file byte for byte (`--check` compares instead of writing).

Every estimator SkyRL 0.3.0 registers in `AdvantageEstimatorRegistry` (skyrl/backends/skyrl_train/utils/
ppo_utils.py: grpo, rloo, reinforce++, gae, maxrl) is called through `ppo_utils.compute_advantages_and_returns`,
with the keyword arguments SkyRL's trainer passes (skyrl/train/trainer.py, RayPPOTrainer.
compute_advantages_and_returns, the non-step-wise branch). The inputs are the shared fixtures of the verl golden
files (tests/golden/verl_grpo_outcome.json, and the critic values of tests/golden/verl_gae.json), read from those
files, so every case lines up with a verl case on the same numbers.

One thing is stubbed: the `skyrl.backends` package's __init__ (it only re-exports the Tinker engine's
AbstractBackend, whose pydantic TypedDicts need Python >= 3.12) is replaced by a bare package object whose
__path__ is the installed directory, so `skyrl.backends.skyrl_train.utils.ppo_utils` and everything it imports
load from the installed files as shipped. ray is the real ray 2.56.0 (never initialised: the registries stay
process-local, as SkyRL's own code does when ray is not running).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import types
from pathlib import Path

import numpy as np
import skyrl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)

OUT_FILE = "skyrl_advantages.json"
SKYRL_VERSION = "0.3.0"
TORCH_VERSION = "2.13.0+cpu"
PPO_UTILS = "skyrl/backends/skyrl_train/utils/ppo_utils.py"

STUBS = [
    "sys.modules['skyrl.backends'] = a bare module with __path__ = [<installed skyrl>/backends] in place of "
    "skyrl/backends/__init__.py (that __init__ only does `from skyrl.backends.backend import AbstractBackend`, "
    "the Tinker engine's backend, whose pydantic TypedDicts raise on Python < 3.12); every submodule, "
    "ppo_utils.py included, is imported from the installed files unmodified",
    "loguru: logger.disable('skyrl') (RLOO's 'Only one response for prompt index ...' warnings are not printed; "
    "the computation is unchanged)",
]

_backends = types.ModuleType("skyrl.backends")
_backends.__path__ = [str(Path(skyrl.__file__).parent / "backends")]
sys.modules["skyrl.backends"] = _backends

from loguru import logger  # noqa: E402
from skyrl.backends.skyrl_train.utils import ppo_utils  # noqa: E402
from skyrl.train.config import AlgorithmConfig  # noqa: E402

logger.disable("skyrl")

FORMAT = (
    "Tensors are plain nested lists (row-major, shape [batch, response_len]). Inputs were materialised as "
    "torch.float32 (response_mask float32 0/1, values float32) before calling the reference; outputs are its "
    "float32 results widened to float64 by tolist(). Non-finite floats are encoded as strings 'nan'/'inf'/'-inf'. "
    "A case whose reference call raised has outputs={'error': 'ExcType: message'}. inputs.index holds integer "
    "group ids; SkyRL was given them as a numpy array of strings, np.array([str(i) for i in index]) (its uids; "
    "the trainer's non-step-wise branch passes the same uids as a Python list of str, which gives identical "
    "results: checked on every case). Each call is ppo_utils.compute_advantages_and_returns(token_level_rewards, "
    "response_mask, index, adv_estimator=params.estimator, config=AlgorithmConfig(...), values=inputs.values or "
    "None, gamma=params.gamma, lambd=params.lambd, grpo_norm_by_std=params.grpo_norm_by_std); epsilon is the "
    "estimator's own default (params.epsilon, not passed by the dispatcher). outputs.advantages and "
    "outputs.returns are the two tensors it returns. Suggested tolerance: atol=1e-5, rtol=1e-5 (except where a "
    "case note says the value is amplified float noise)."
)

# The verl cases whose inputs are the shared fixtures (tests/golden/README.md, "Shared input fixtures").
FIXTURES = {
    "multiturn_holes": "multiturn_holes_groups_3_2_1/norm_by_std=True",
    "ties_zero_std": "ties_zero_std/norm_by_std=True",
    "random_dense_seed0": "random_dense_seed0/norm_by_std=True",
    "near_tie_float_noise": "near_tie_float_noise/norm_by_std=True",
}
# Critic values for GAE: verl_gae.json's cases on the same fixtures.
GAE_VALUES = {
    "multiturn_holes": "multiturn_holes/gamma=1.0,lam=1.0",
    "random_dense_seed0": "random_dense_seed0/gamma=1.0,lam=1.0",
}
GAE_PARAMS = [(1.0, 1.0), (0.99, 0.95)]
REINFORCE_PP_GAMMAS = {"multiturn_holes": (1.0, 0.9), "random_dense_seed0": (1.0, 0.9)}  # others: gamma 1.0

ESTIMATOR_NOTES = {
    "grpo": "compute_grpo_outcome_advantage: score = sum_t token_level_rewards; per group mean and torch.std "
    "(Bessel, ddof 1) of the scores; a group of one gets mean 0, std 1; (score - mean) / (std + epsilon) when "
    "grpo_norm_by_std else score - mean; broadcast * response_mask; returns = advantages",
    "rloo": "compute_rloo_outcome_advantage: score = sum_t token_level_rewards; (score - group mean) * n / (n - 1) "
    "= score - mean of the others; a group of one gets 0; broadcast * response_mask; returns = advantages",
    "reinforce++": "compute_reinforce_plus_plus_outcome_advantage: returns[:, t] = r_t + gamma * running, then "
    "running *= response_mask[:, t] (the return resets at every hole and the row end); advantages = "
    "masked_whiten(returns, response_mask) over the whole batch (Bessel-corrected variance, rsqrt(var + 1e-8)) "
    "* response_mask",
    "gae": "compute_gae_advantage_return: plain GAE over every position (holes are not skipped, the mask is not "
    "read in the recursion); returns = advantages + values; advantages = masked_whiten(advantages, "
    "response_mask) over the whole batch, not re-masked (masked positions hold whitened values)",
    "maxrl": "compute_maxrl_advantage: score = sum_t token_level_rewards; (score - group mean) / (group mean + "
    "epsilon) for groups of >= 2, a group of one gets score - 0 = its raw score; broadcast * response_mask; "
    "returns = advantages",
}


def _f32(rows) -> torch.Tensor:
    return torch.tensor(golden_io.decode(rows), dtype=torch.float32)


def _cases_by_name(file_name: str) -> dict:
    return {c["name"]: c for c in json.loads((golden_io.OUT_DIR / file_name).read_text())["cases"]}


def _fixtures() -> dict:
    outcome = _cases_by_name("verl_grpo_outcome.json")
    gae = _cases_by_name("verl_gae.json")
    fixtures = {}
    for name, case_name in FIXTURES.items():
        inputs = outcome[case_name]["inputs"]
        fixtures[name] = {
            "source": f"verl_grpo_outcome.json case {case_name!r}",
            "note": outcome[case_name]["note"],
            "token_level_rewards": inputs["token_level_rewards"],
            "response_mask": inputs["response_mask"],
            "index": inputs["index"],
        }
    for name, case_name in GAE_VALUES.items():
        inputs = gae[case_name]["inputs"]
        # The same fixture in both files: the values belong to these rewards and masks.
        assert inputs["token_level_rewards"] == fixtures[name]["token_level_rewards"], name
        assert inputs["response_mask"] == fixtures[name]["response_mask"], name
        fixtures[name]["values"] = inputs["values"]
        fixtures[name]["values_source"] = f"verl_gae.json case {case_name!r}"
    return fixtures


def _config(estimator: str, gamma: float, lambd: float, norm_by_std: bool) -> AlgorithmConfig:
    return dataclasses.replace(
        AlgorithmConfig(), advantage_estimator=estimator, gamma=gamma, lambd=lambd, grpo_norm_by_std=norm_by_std
    )


def _call(fixture: dict, estimator: str, gamma: float, lambd: float, norm_by_std: bool, with_values: bool, uids):
    rewards = _f32(fixture["token_level_rewards"])
    mask = _f32(fixture["response_mask"])
    values = _f32(fixture["values"]) if with_values else None
    try:
        advantages, returns = ppo_utils.compute_advantages_and_returns(
            token_level_rewards=rewards,
            response_mask=mask,
            index=uids,
            adv_estimator=estimator,
            config=_config(estimator, gamma, lambd, norm_by_std),
            values=values,
            gamma=gamma,
            lambd=lambd,
            grpo_norm_by_std=norm_by_std,
        )
    except Exception as exc:  # recorded as the reference's answer
        return {"error": f"{type(exc).__name__}: {exc}"}
    assert advantages.dtype == torch.float32 and returns.dtype == torch.float32, estimator
    assert advantages.shape == rewards.shape and returns.shape == rewards.shape, estimator
    return {"advantages": advantages.tolist(), "returns": returns.tolist()}


def _runs(estimators: list[str], fixtures: dict):
    """(estimator, fixture name, gamma, lambd, grpo_norm_by_std, with values) for every case."""
    for estimator in estimators:
        for name in fixtures:
            if estimator == "grpo":
                for norm in (True, False):
                    yield estimator, name, 1.0, 1.0, norm, False
            elif estimator == "gae":
                if "values" in fixtures[name]:
                    for gamma, lambd in GAE_PARAMS:
                        yield estimator, name, gamma, lambd, True, True
            elif estimator == "reinforce++":
                for gamma in REINFORCE_PP_GAMMAS.get(name, (1.0,)):
                    yield estimator, name, gamma, 1.0, True, False
            else:
                yield estimator, name, 1.0, 1.0, True, False


def _case_name(estimator, name, gamma, lambd, norm) -> str:
    if estimator == "grpo":
        return f"grpo/{name}/grpo_norm_by_std={norm}"
    if estimator == "gae":
        return f"gae/{name}/gamma={gamma},lambd={lambd}"
    if estimator == "reinforce++":
        return f"reinforce++/{name}/gamma={gamma}"
    return f"{estimator}/{name}"


def _build_cases() -> tuple[list[dict], list[str]]:
    registered = list(ppo_utils.AdvantageEstimatorRegistry.list_available())
    order = ["grpo", "rloo", "reinforce++", "gae", "maxrl"]
    assert sorted(registered) == sorted(order), f"SkyRL registers {registered}: update this script"
    fixtures = _fixtures()
    cases = []
    for estimator, name, gamma, lambd, norm, with_values in _runs(order, fixtures):
        fixture = fixtures[name]
        uids_array = np.array([str(i) for i in fixture["index"]])
        outputs = _call(fixture, estimator, gamma, lambd, norm, with_values, uids_array)
        # The trainer's main branch passes the uids as a list of str: same numbers.
        as_list = _call(fixture, estimator, gamma, lambd, norm, with_values, [str(i) for i in fixture["index"]])
        assert json.dumps(golden_io.encode(as_list)) == json.dumps(golden_io.encode(outputs)), (estimator, name)

        inputs = {
            "token_level_rewards": fixture["token_level_rewards"],
            "response_mask": fixture["response_mask"],
            "index": fixture["index"],
        }
        sources = fixture["source"]
        if with_values:
            inputs["values"] = fixture["values"]
            sources += f"; values from {fixture['values_source']}"
        config = _config(estimator, gamma, lambd, norm)
        note = f"{fixture['note']}. Inputs from {sources}. {ESTIMATOR_NOTES[estimator]}"
        if estimator == "gae" and name == "multiturn_holes":
            note += "; compare verl_gae.json (holes skipped there)"
        cases.append(
            {
                "name": _case_name(estimator, name, gamma, lambd, norm),
                "note": note,
                "params": {
                    "estimator": estimator,
                    "gamma": gamma,
                    "lambd": lambd,
                    "grpo_norm_by_std": norm,
                    "epsilon": 1e-6,
                    "config": {
                        "class": "skyrl.train.config.AlgorithmConfig (defaults, these four fields set; the "
                        "estimators receive it as `config` and do not read it)",
                        "advantage_estimator": config.advantage_estimator,
                        "gamma": config.gamma,
                        "lambd": config.lambd,
                        "grpo_norm_by_std": config.grpo_norm_by_std,
                    },
                },
                "inputs": inputs,
                "outputs": outputs,
            }
        )
    return cases, order


def _reference(estimators: list[str]) -> dict:
    path = Path(ppo_utils.__file__)
    functions = {name: ppo_utils.AdvantageEstimatorRegistry.get(name).__name__ for name in estimators}
    return {
        "repo": "NovaSky-AI/SkyRL",
        "version": SKYRL_VERSION,
        "package": f"skyrl=={SKYRL_VERSION} (PyPI)",
        "path": PPO_UTILS,
        "function": "compute_advantages_and_returns -> AdvantageEstimatorRegistry.get(estimator): "
        + ", ".join(f"{k} = {v}" for k, v in functions.items()),
        "functions": functions,
        "registered_estimators": sorted(ppo_utils.AdvantageEstimatorRegistry.list_available()),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {"skyrl": (skyrl.__version__, SKYRL_VERSION), "torch": (torch.__version__, TORCH_VERSION)}
    if not golden_io.pinned(versions, "references/skyrl/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)

    cases, estimators = _build_cases()
    text = golden_io.dump({"reference": _reference(estimators), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
