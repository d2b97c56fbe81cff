"""Golden: verl's advantages after decoupled rollout rejection replaced the response mask
(``verl_rollout_rs_advantages.json``, made by ``references/verl/generate_rs_advantages.py``).

verl's trainer calls ``compute_rollout_correction_and_add_to_batch`` before ``compute_advantage`` and that call swaps
the rejection-masked ``response_mask`` into the batch, so GAE skips a rejected token as a hole (its reward dropped),
REINFORCE++ carries its return past it, the whitening and OPO's lengths leave it out, and GRPO / RLOO give it 0.
CreditLens does the same under ``rollout_rs_masks_advantages`` (profile ``verl``): ``compute_credit`` on the case's
tensors must give the whole advantage and return tensors, the rejection-masked mask as the estimator's mask and the
loss mask, and the IS weights. The other trainers reject inside the loss: their advantages do not move.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import assert_golden, golden_cases, load_golden, tensor

import engine.stages
from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.profiles import PROFILES

GOLDEN = "verl_rollout_rs_advantages.json"


def _split(spec) -> tuple[str, ...]:
    return () if spec is None else tuple(s.strip() for s in str(spec).split(","))


def _config(p: dict, **fields) -> CreditConfig:
    rc = p["rollout_correction"]
    return CreditConfig(
        **{"profile": "verl", "rollout_is": rc["rollout_is"], **fields},
        estimator=p["estimator"],
        placement="as_given",
        gamma=p["gamma"],
        lam=p["lam"],
        norm_adv_by_std_in_grpo=p["norm_adv_by_std_in_grpo"],
        rollout_is_threshold=str(rc["rollout_is_threshold"]),
        rollout_is_batch_normalize=rc["rollout_is_batch_normalize"],
        rollout_rs=_split(rc["rollout_rs"]),
        rollout_rs_threshold=_split(rc["rollout_rs_threshold"]),
    )


def _batch(i: dict) -> TrajectoryBatch:
    kw = {
        "token_level_rewards": tensor(i["token_level_rewards"]),
        "response_mask": tensor(i["response_mask"]),
        "index": torch.tensor(i["index"]),
        "old_log_probs": tensor(i["old_log_prob"]),
        "rollout_log_probs": tensor(i["rollout_log_prob"]),
    }
    if "values" in i:
        kw["values"] = tensor(i["values"])
    return TrajectoryBatch.from_tensors(**kw)


@pytest.mark.parametrize("case", golden_cases(GOLDEN))
def test_advantages_see_the_rejection_masked_mask(case: dict) -> None:
    out = case["outputs"]
    res = compute_credit(_batch(case["inputs"]), _config(case["params"]), device="cpu")
    assert_golden(res.advantages, out["advantages"], what="advantages")
    assert_golden(res.returns, out["returns"], what="returns")
    after = tensor(out["response_mask_after"])
    assert_golden(res.advantage_mask, after, what="the estimator's mask")
    assert_golden(res.loss_mask, after, what="loss mask")
    assert_golden(res.count_mask, after, what="count mask (verl counts the rejection-masked mask)")
    mask = tensor(case["inputs"]["response_mask"]).bool()
    assert torch.equal(res.rejected, mask & ~after.bool())
    if out["rollout_is_weights"] is not None:
        assert_golden(res.is_weight, out["rollout_is_weights"], what="rollout IS weights")


def test_the_cases_reject_tokens_and_rows() -> None:
    """The file covers what it says: token and whole-row rejection, and a case without rejection (IS only)."""
    kept = {}
    for c in load_golden(GOLDEN)["cases"]:
        before, after = tensor(c["inputs"]["response_mask"]), tensor(c["outputs"]["response_mask_after"])
        emptied = int(((before.sum(-1) > 0) & (after.sum(-1) == 0)).sum())
        kept[c["name"].rsplit("/", 1)[0] if c["name"].startswith("gae/") else c["name"]] = (
            float(after.sum() / before.sum()),
            emptied,
        )
    assert any(share < 1 and emptied == 0 for share, emptied in kept.values())  # tokens only
    assert any(emptied > 0 for _, emptied in kept.values())  # whole rows
    assert any(share == 1 for share, _ in kept.values())  # IS weights only: the mask unchanged
    assert len(load_golden(GOLDEN)["cases"]) == 35


REJECTING = [c for c in golden_cases(GOLDEN) if c.values[0]["params"]["rollout_correction"]["rollout_rs"]]


@pytest.mark.parametrize("profile", ["skyrl", "openrlhf", "trl", "prime-rl", "rllm-workflow"])
@pytest.mark.parametrize("case", [c for c in REJECTING if c.values[0]["params"]["estimator"] in ("gae", "grpo")])
def test_other_trainers_reject_in_the_loss_only(case: dict, profile: str) -> None:
    """SkyRL's off-policy masks, OpenRLHF's and TRL's IS masks act inside the policy loss; rLLM's trainers run no
    rejection before the advantages: the advantages are those without rollout correction, the loss mask drops
    the rejected tokens."""
    batch = _batch(case["inputs"])
    fields = {"profile": profile}
    if not PROFILES[profile].sequence_is_supported and case["params"]["rollout_correction"]["rollout_is"]:
        fields["rollout_is"] = "token"  # OpenRLHF has no sequence-level IS weight (the profile refuses it)
    cfg = _config(case["params"], **fields)
    sizes = torch.unique(torch.unique(batch.group_ids, return_counts=True)[1])
    if cfg.trainer.group_sizes == "equal" and sizes.numel() > 1:
        batch = batch.replace(group_ids=torch.zeros_like(batch.group_ids))  # OpenRLHF needs equal groups
    res = compute_credit(batch, cfg, device="cpu")
    plain = compute_credit(batch, cfg.replace(rollout_is=None, rollout_rs=(), rollout_rs_threshold=()), device="cpu")
    assert not PROFILES[profile].conventions["rollout_rs_masks_advantages"]
    assert torch.equal(res.advantages, plain.advantages) and torch.equal(res.returns, plain.returns)
    assert torch.equal(res.advantage_mask, plain.advantage_mask)
    after = tensor(case["outputs"]["response_mask_after"]).bool()
    assert torch.equal(res.loss_mask.bool(), plain.loss_mask.bool() & after)  # prime-rl: less its zero advantages


@pytest.mark.parametrize("case", [c for c in REJECTING if c.values[0]["params"]["estimator"] == "gae"])
def test_bypass_mode_rejects_in_the_loss_only(case: dict) -> None:
    """verl's bypass mode never calls compute_rollout_correction_and_add_to_batch: the loss rejects, with π_θ
    against the rollout, and the advantages see the original mask."""
    batch = _batch(case["inputs"])
    cfg = _config(case["params"], policy_ratio_base="rollout")
    res = compute_credit(batch, cfg, device="cpu")
    plain = compute_credit(batch, cfg.replace(rollout_is=None, rollout_rs=(), rollout_rs_threshold=()), device="cpu")
    assert torch.equal(res.advantages, plain.advantages)
    assert bool((res.loss_mask < tensor(case["inputs"]["response_mask"])).any())  # the loss still rejects


def test_the_correction_is_computed_once(monkeypatch) -> None:
    """Computed before the advantages, reused by the loss stage."""
    calls = []
    real = engine.stages.rollout_correction
    monkeypatch.setattr(engine.stages, "rollout_correction", lambda *a: calls.append(1) or real(*a))
    case = REJECTING[0].values[0]
    compute_credit(_batch(case["inputs"]), _config(case["params"]), device="cpu").materialize()
    assert len(calls) == 1


def test_the_run_needs_both_log_probs_before_the_advantages() -> None:
    case = REJECTING[0].values[0]
    batch = _batch(case["inputs"]).replace(rollout_log_probs=None)
    with pytest.raises(ValueError, match="rollout_log_probs"):
        compute_credit(batch, _config(case["params"]), device="cpu")


def test_profiles() -> None:
    """verl's two trainers swap the mask before compute_advantage (ray_trainer.fit at 1dda039b and b178a3c); rLLM's
    trainers, SkyRL, OpenRLHF, TRL and prime-rl do not."""
    on = {name for name, p in PROFILES.items() if p.conventions["rollout_rs_masks_advantages"]}
    assert {"verl", "verl-legacy"} <= on
    assert not on & {"rllm", "rllm-workflow", "rllm-legacy", "skyrl", "trl", "openrlhf", "prime-rl"}
