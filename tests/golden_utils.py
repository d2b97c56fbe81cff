"""Helpers for the golden tests: read ``tests/golden``, turn its JSON into tensors, compare at 1e-5.

Each golden file holds ``cases`` = [{name, params, inputs, outputs, note?}], produced by calling the reference
trainers' own, unmodified functions (``tests/golden/README.md`` says which, at which commit, and how).
Non-finite numbers are the strings "nan"/"inf"/"-inf"; ``outputs.error`` means the reference raised, and the
engine must raise too.

More cases of the same files can be checked without copying them in: every directory named in
``CREDITLENS_GOLDEN_EXTRA`` (``os.pathsep``-separated), and ``shared/golden`` when it sits beside the clone (where
the reference outputs are produced), is read too; a case that is already bundled, byte for byte, runs once; any
other case runs as ``<dir name>:<case name>``. ``pytest``'s header lists the directories read.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest
import torch

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.registry import EstimatorInput, get_estimator

ATOL = RTOL = 1e-5
# What the engine raises where a reference raised (verl raises ValueError or NotImplementedError).
REFERENCE_ERRORS = (ValueError, NotImplementedError)

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def extra_golden_dirs() -> list[Path]:
    """Directories of further golden files of the same names (see the module docstring), existing ones only."""
    named = [Path(p) for p in os.environ.get("CREDITLENS_GOLDEN_EXTRA", "").split(os.pathsep) if p]
    beside_clone = Path(__file__).resolve().parents[2] / "shared" / "golden"
    dirs = [*named, beside_clone]
    return [d for d in dict.fromkeys(d.resolve() for d in dirs) if d.is_dir() and d != GOLDEN_DIR.resolve()]


@cache
def load_golden(filename: str) -> dict:
    """The bundled golden file (it must exist: a missing file fails the test, it is never skipped)."""
    return json.loads((GOLDEN_DIR / filename).read_text())


def _all_cases(filename: str) -> list[tuple[str, dict]]:
    """(test id, case): the bundled cases, then the extra directories' cases that are not bundled verbatim."""
    bundled = load_golden(filename)["cases"]
    seen = {json.dumps(c, sort_keys=True) for c in bundled}
    out = [(c["name"], c) for c in bundled]
    for d in extra_golden_dirs():
        path = d / filename
        if not path.is_file():
            continue
        for c in json.loads(path.read_text())["cases"]:
            key = json.dumps(c, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append((f"{d.parent.name}/{d.name}:{c['name']}", c))
    return out


def golden_cases(filename: str, where=None) -> list:
    """One ``pytest.param`` per case (test id = the case name); ``where(case)`` filters."""
    return [pytest.param(c, id=name) for name, c in _all_cases(filename) if where is None or where(c)]


def is_error(case: dict) -> bool:
    return "error" in case["outputs"]


def _decode(x):
    if isinstance(x, str):
        return float(x)  # "nan", "inf", "-inf"
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def tensor(x, dtype=torch.float32) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(dtype)
    return torch.tensor(_decode(x), dtype=dtype)


def assert_golden(actual: torch.Tensor, expected, mask: torch.Tensor | None = None, what: str = "") -> None:
    """``actual`` equals the golden ``expected`` to atol = rtol = 1e-5 (NaN == NaN), on ``mask == 1`` only when a
    mask is given (docs/conventions/README.md §5.6: values the loss never sees are arbitrary unless the engine means to
    match them)."""
    exp = expected if isinstance(expected, torch.Tensor) else tensor(expected)
    act = torch.as_tensor(actual, dtype=torch.float32).detach().cpu()
    assert act.shape == exp.shape, f"{what}: shape {list(act.shape)} != golden {list(exp.shape)}"
    if mask is not None:
        keep = mask.bool()
        act, exp = act[keep], exp[keep]
    torch.testing.assert_close(act, exp, atol=ATOL, rtol=RTOL, equal_nan=True, msg=lambda m: f"{what}: {m}")


def run_estimator(name: str, cfg: CreditConfig, **fields):
    """Call a registered estimator directly (layer a): ``fields`` fill an ``EstimatorInput``."""
    rewards = fields["token_level_rewards"]
    B, T = rewards.shape
    fields.setdefault("group_ids", torch.arange(B))
    fields.setdefault("action_mask", fields["response_mask"])
    fields.setdefault("turn_ids", torch.where(fields["response_mask"] > 0, 0, -1))
    return get_estimator(name).fn(EstimatorInput(**fields), cfg)


def credit_from_verl(inputs: dict, cfg: CreditConfig, mask_key: str = "response_mask", **extra):
    """compute_credit (layer b) on a verl-style case: token_level_rewards as the run's token scores (placement
    as_given), the case's mask as verl's response_mask, ``index`` as the prompt groups."""
    kw = {
        "token_level_rewards": tensor(inputs["token_level_rewards"]),
        "response_mask": tensor(inputs[mask_key]),
    }
    if "index" in inputs:
        kw["index"] = torch.tensor(inputs["index"])
    kw.update(extra)
    return compute_credit(TrajectoryBatch.from_tensors(**kw), cfg, device="cpu")
