"""Golden: the policy-loss stage (CONVENTIONS.md §14) against verl 0.9.1's own policy losses and rollout correction
(``verl_policy_loss.json``, made by ``references/verl/generate.py``): per token, d loss / d log π (the gradient
weight CreditLens shows, negated), the IS weights and the rejection-masked mask.

The other trainers' policy-loss files (OpenRLHF, TRL, SkyRL, prime-rl) are kept for the profiles that will
reproduce them; ``test_other_trainers_files_are_kept_not_yet_reproduced`` pins their case counts.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import REFERENCE_ERRORS, assert_golden, golden_cases, is_error, load_golden, tensor

from engine import CreditConfig
from engine.aggregation import agg_weights
from engine.policy import policy_gradient, rollout_correction

VERL = "verl_policy_loss.json"
NOT_YET: set[str] = set()


def _split(spec) -> tuple[str, ...]:
    return () if spec is None else tuple(s.strip() for s in str(spec).split(","))


def _config(p: dict) -> CreditConfig:
    rc = p["rollout_correction"] or {}
    bypass = p["loss_mode"] == "bypass_mode"
    # bypass + reinforce is −A·log π·w: gpg with the IS weights of π_θ against the rollout (π_θ = the trainer's)
    reinforce = bypass and rc.get("loss_type") == "reinforce"
    return CreditConfig(
        policy_loss="gpg" if reinforce else "vanilla" if bypass else p["loss_mode"],
        policy_ratio_base="rollout" if bypass and not reinforce else "trainer",
        clip_ratio_low=p["clip_ratio_low"],
        clip_ratio_high=p["clip_ratio_high"],
        clip_ratio_c=max(p["clip_ratio_c"], 1.0 + 1e-6),
        tau_pos=p["tau_pos"],
        tau_neg=p["tau_neg"],
        loss_agg_mode=p["loss_agg_mode"],
        rollout_is=rc.get("rollout_is"),
        rollout_is_threshold=str(rc.get("rollout_is_threshold", "2.0")),
        rollout_is_batch_normalize=rc.get("rollout_is_batch_normalize", False),
        rollout_rs=_split(rc.get("rollout_rs")),
        rollout_rs_threshold=_split(rc.get("rollout_rs_threshold")),
    )


def _stage(case: dict):
    """What stage 4 computes, on the case's own log-probs (π_θ = inputs.log_prob, not the first mini-batch)."""
    p, x = case["params"], case["inputs"]
    cfg = _config(p)
    lp, old, adv, mask = (tensor(x[k]) for k in ("log_prob", "old_log_prob", "advantages", "response_mask"))
    rollout = tensor(x["rollout_log_prob"]) if "rollout_log_prob" in x else None
    bypass = cfg.policy_ratio_base == "rollout"
    if p["loss_mode"] == "bypass_mode":
        old = lp  # π_old is π_θ's own detached value in bypass mode (verl apply_bypass_mode)
    # bypass mode: π_old is the rollout's, so the mismatch is log π_θ − log π_rollout (verl apply_bypass_mode)
    corr = rollout_correction(lp if bypass else old, rollout, mask, cfg) if p["rollout_correction"] else None
    keep = corr.keep if corr is not None and corr.keep is not None else torch.ones_like(mask, dtype=torch.bool)
    gbi = p["global_batch_info"] or {}
    rows = "all" if gbi.get("global_batch_size") == mask.shape[0] else "nonempty"
    agg = agg_weights(mask if bypass else mask * keep, cfg.loss_agg_mode, seq_mean_rows=rows) * keep
    after = mask * keep
    is_w = corr.weights if corr is not None and not bypass else None
    pg = policy_gradient(lp, rollout if bypass else old, adv, after, cfg, is_weights=is_w)
    if pg.aggregated:
        grad = pg.grad
    else:
        if cfg.policy_loss == "sapo":
            agg = agg_weights(after, "seq-mean-token-mean", seq_mean_rows=rows)
        grad = pg.grad * agg * (is_w if is_w is not None else 1.0)
    return cfg, corr, after, torch.where(after.bool(), grad, 0.0)


def _reproduced(c: dict) -> bool:
    return not is_error(c) and c["name"] not in NOT_YET


@pytest.mark.parametrize("case", golden_cases(VERL, _reproduced))
def test_verl_policy_loss_gradient(case: dict) -> None:
    _, corr, after, grad = _stage(case)
    out = case["outputs"]
    assert_golden(grad, out["grad_log_prob"], what="d loss / d log_prob")
    if "response_mask_after" in out:
        assert_golden(after, out["response_mask_after"], what="rejection-masked mask")
    if out.get("rollout_is_weights") is not None:
        assert_golden(corr.weights, out["rollout_is_weights"], what="rollout IS weights")


@pytest.mark.parametrize("case", golden_cases(VERL, is_error))
def test_refused_where_verl_raises(case: dict) -> None:
    with pytest.raises(REFERENCE_ERRORS):
        p = case["params"]
        if p["clip_ratio_c"] <= 1.0:
            CreditConfig(clip_ratio_c=p["clip_ratio_c"])
        _stage(case)


def test_not_yet_reproduced_is_named() -> None:
    names = {c["name"] for c in load_golden(VERL)["cases"]}
    assert NOT_YET <= names and len(names) == 39  # every case but the two errors is reproduced


@pytest.mark.parametrize(
    "file, cases",
    [
        ("openrlhf_policy_loss.json", 29),
        ("trl_policy_loss.json", 33),
        ("skyrl_policy_loss.json", 37),
        ("primerl_policy_loss.json", 18),
    ],
)
def test_other_trainers_files_are_kept_not_yet_reproduced(file: str, cases: int) -> None:
    data = load_golden(file)
    assert len(data["cases"]) == cases
    assert all("grad_log_prob" in c["outputs"] or "error" in c["outputs"] for c in data["cases"])


@pytest.mark.parametrize("case", golden_cases("verl_policy_loss_vanilla.json"))
def test_the_gradient_is_the_derivative_of_the_loss_value(case: dict) -> None:
    """On verl 1dda039b's vanilla cases (``engine.aggregation.policy_loss_vanilla`` reproduces their loss values in
    test_golden_verl_loss.py), the stage's closed-form gradient equals autograd through that loss."""
    from engine.aggregation import policy_loss_vanilla

    p, x = case["params"], case["inputs"]
    lp = tensor(x["log_prob"]).requires_grad_(True)
    old, adv, mask = tensor(x["old_log_prob"]), tensor(x["advantages"]), tensor(x["response_mask"])
    kw = dict(clip_ratio_low=p["clip_ratio_low"], clip_ratio_high=p["clip_ratio_high"], clip_ratio_c=p["clip_ratio_c"])
    loss, _ = policy_loss_vanilla(old, lp, adv, mask, loss_agg_mode=p["loss_agg_mode"], **kw)
    loss.backward()
    cfg = CreditConfig(loss_agg_mode=p["loss_agg_mode"], **kw)
    pg = policy_gradient(lp.detach(), old, adv, mask, cfg)
    grad = torch.where(mask.bool(), pg.grad * agg_weights(mask, p["loss_agg_mode"]), 0.0)
    assert_golden(grad, lp.grad, what="closed form vs autograd")
