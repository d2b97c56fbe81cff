"""Golden: KG-R1 (structured turn/global rewards, multi-turn and uniform GRPO, the fork's token-level converter,
old-verl GAE) and Search-R1 (GRPO and GAE over the attention mask), docs/conventions/kg-r1.md §3 and
docs/conventions/search-r1.md §4.

KG-R1's ``structured_rewards`` become a ``TrajectoryBatch``: ``turn_rewards`` [B, K, 1] with ``turn_mask`` (the
turns each sample's dict lists, placeholder turns included), ``global_rewards`` [B, 6] with the dict's keys as
component names. The reward manager already weighted the values, so ``global_weights=()`` (all 1). Its turn
tensor (1-based, −1 off-action) becomes 0-based ``turn_ids``: an info token belongs to the turn before it; the
−1 tail after the last action token is padding.
(a) ``engine.shaping`` / the registered estimators / ``compute_gae_advantage_return``, (b) ``compute_credit``.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import (
    REFERENCE_ERRORS,
    assert_golden,
    credit_from_verl,
    golden_cases,
    is_error,
    run_estimator,
    tensor,
)

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.estimators.gae import compute_gae_advantage_return
from engine.shaping import place_rewards, weighted_global_reward, weighted_turn_rewards


def kgr1_batch(inputs: dict) -> TrajectoryBatch:
    mask = tensor(inputs["response_mask"])
    B, T = mask.shape
    turn_1based = torch.tensor(inputs["turn_sequence_tensor_full"])[:, -T:]  # right-aligned to the response
    pos = torch.arange(T).expand(B, T)
    last_action = torch.where(mask.bool(), pos, -1).max(-1, keepdim=True).values
    attention = (pos <= last_action).float()
    turn_ids = torch.cummax(turn_1based.clamp(min=0), dim=-1).values - 1  # info tokens: the turn before them
    turn_ids = torch.where(attention.bool(), turn_ids, -1)

    structured = inputs["structured_rewards"]
    K = max(len(s["turn_rewards"]) for s in structured)
    turn_rewards, turn_mask = torch.zeros(B, K, 1), torch.zeros(B, K)
    for b, s in enumerate(structured):
        for k, r in s["turn_rewards"].items():
            turn_rewards[b, int(k) - 1, 0], turn_mask[b, int(k) - 1] = r, 1.0
    names = tuple(structured[0]["global_rewards"])
    assert all(tuple(s["global_rewards"]) == names for s in structured)
    global_rewards = torch.tensor([[float(s["global_rewards"][n]) for n in names] for s in structured])
    return TrajectoryBatch.from_tensors(
        response_mask=mask, attention_mask=attention, turn_ids=turn_ids,
        index=torch.tensor(inputs.get("index", range(B))),
        turn_rewards=turn_rewards, turn_mask=turn_mask, turn_reward_names=("turn_reward",),
        global_rewards=global_rewards, global_reward_names=names,
    )  # fmt: skip


def kgr1_config(**fields) -> CreditConfig:
    return CreditConfig(profile="kg-r1", global_weights=(), **fields)


# --------------------------------------------------------------------------- multi-turn and uniform GRPO

KGR1_GRPO = {"kgr1_grpo_multiturn.json": "grpo_multiturn", "kgr1_grpo_uniform.json": "grpo_uniform"}
KGR1_GRPO_CASES = [
    pytest.param(golden, p.values[0], id=f"{golden.removesuffix('.json')}/{p.id}")
    for golden in KGR1_GRPO
    for p in golden_cases(golden)
]


def _grpo_config(golden, case) -> CreditConfig:
    p = case["params"]
    return kgr1_config(
        estimator=KGR1_GRPO[golden], epsilon=p["epsilon"], norm_adv_by_std_in_grpo=p["norm_adv_by_std_in_grpo"]
    )


@pytest.mark.parametrize("golden,case", KGR1_GRPO_CASES)
def test_kgr1_grpo_estimator(golden, case):
    batch, cfg = kgr1_batch(case["inputs"]), _grpo_config(golden, case)
    turn_r, turn_mask = weighted_turn_rewards(batch, cfg)
    out = run_estimator(
        cfg.estimator, cfg, token_level_rewards=torch.zeros_like(batch.action_mask),
        response_mask=batch.attention_mask, group_ids=batch.group_ids, turn_ids=batch.turn_ids,
        action_mask=batch.action_mask, turn_rewards=turn_r, turn_mask=turn_mask,
        global_reward=weighted_global_reward(batch, cfg),
    )  # fmt: skip
    assert_golden(out.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(out.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("golden,case", KGR1_GRPO_CASES)
def test_kgr1_grpo_compute_credit(golden, case):
    res = compute_credit(kgr1_batch(case["inputs"]), _grpo_config(golden, case), device="cpu")
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


# --------------------------------------------------------------- the fork's convert_structured_to_token_level

CONVERT = "kgr1_convert_structured_to_token_level.json"


@pytest.mark.parametrize("case", golden_cases(CONVERT))
def test_kgr1_convert_place_rewards(case):
    batch, cfg = kgr1_batch(case["inputs"]), kgr1_config()
    turn_r, turn_mask = weighted_turn_rewards(batch, cfg)
    args = (batch, case["params"]["distribution_strategy"], turn_r, turn_mask, weighted_global_reward(batch, cfg))
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            place_rewards(*args, batch.action_mask, cfg.turn_score_reduce)
        return
    scores = place_rewards(*args, batch.action_mask, cfg.turn_score_reduce)
    assert_golden(scores, case["outputs"]["token_level_rewards"], what="token_level_rewards")


@pytest.mark.parametrize("case", golden_cases(CONVERT))
def test_kgr1_convert_compute_credit(case):
    batch = kgr1_batch(case["inputs"])
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            compute_credit(batch, kgr1_config(placement=case["params"]["distribution_strategy"]), device="cpu")
        return
    res = compute_credit(batch, kgr1_config(placement=case["params"]["distribution_strategy"]), device="cpu")
    assert_golden(res.token_level_scores, case["outputs"]["token_level_rewards"], what="token_level_scores")


# -------------------------------------------------------------------------- old-verl GAE (KG-R1, Search-R1)
# The goldens call the GAE function on the values as given; the trainers' critics mask them before GAE
# (gae_value_mask), so compute_credit gets gae_value_mask="none" to see the same values. The golden's mask
# is the response slice of the attention mask, the mask both trainers hand to GAE (advantage_mask="attention").

OLD_GAE = {
    "kgr1_gae_no_hole_skip.json": ("kg-r1", "response_mask"),
    "searchr1_grpo_gae.json": ("search-r1", "eos_mask"),
}
OLD_GAE_CASES = [
    pytest.param(golden, p.values[0], id=f"{golden.removesuffix('.json')}/{p.id}")
    for golden in OLD_GAE
    for p in golden_cases(golden, where=lambda c: "values" in c["inputs"])
]


@pytest.mark.parametrize("golden,case", OLD_GAE_CASES)
def test_old_gae_function(golden, case):
    i, p, mask_key = case["inputs"], case["params"], OLD_GAE[golden][1]
    adv, ret = compute_gae_advantage_return(
        tensor(i["token_level_rewards"]), tensor(i["values"]), tensor(i[mask_key]), p["gamma"], p["lam"],
        skip_holes=False,
    )  # fmt: skip
    assert_golden(adv, case["outputs"]["advantages"], what="advantages")
    assert_golden(ret, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("golden,case", OLD_GAE_CASES)
def test_old_gae_compute_credit(golden, case):
    profile, mask_key = OLD_GAE[golden]
    p = case["params"]
    cfg = CreditConfig(
        profile=profile, estimator="gae", placement="as_given", gae_value_mask="none", gamma=p["gamma"], lam=p["lam"]
    )
    res = credit_from_verl(case["inputs"], cfg, mask_key=mask_key, values=tensor(case["inputs"]["values"]))
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")


# ------------------------------------------------------------------------------------------- Search-R1 GRPO

SEARCHR1_GRPO = golden_cases("searchr1_grpo_gae.json", where=lambda c: c["name"].startswith("grpo/"))


@pytest.mark.parametrize("case", SEARCHR1_GRPO)
def test_searchr1_grpo_estimator(case):
    i = case["inputs"]
    cfg = CreditConfig(profile="search-r1", estimator="grpo", epsilon=case["params"]["epsilon"])
    out = run_estimator(
        "grpo", cfg, token_level_rewards=tensor(i["token_level_rewards"]), response_mask=tensor(i["eos_mask"]),
        group_ids=torch.tensor(i["index"]),
    )  # fmt: skip
    assert_golden(out.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(out.returns, case["outputs"]["returns"], what="returns")


@pytest.mark.parametrize("case", SEARCHR1_GRPO)
def test_searchr1_grpo_compute_credit(case):
    """Search-R1 hands GRPO its attention mask (profile advantage_mask="attention"); the eos_mask=info_mask
    cases are the counterfactual where holes are masked, i.e. the same call with that mask as attention."""
    cfg = CreditConfig(profile="search-r1", estimator="grpo", placement="as_given", epsilon=case["params"]["epsilon"])
    res = credit_from_verl(case["inputs"], cfg, mask_key="eos_mask")
    assert_golden(res.advantages, case["outputs"]["advantages"], what="advantages")
    assert_golden(res.returns, case["outputs"]["returns"], what="returns")
