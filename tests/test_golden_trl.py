"""Golden: TRL 1.16.0's ``GRPOTrainer`` (docs/conventions/trl.md §10), its own methods run unmodified by
``references/trl/generate.py``.

(a) ``_generate_and_score_completions``: the advantages of weighted reward functions under scale_rewards group,
batch and none and multi_objective_aggregation normalize_then_sum, with NaN rewards, unscorable rows and ties,
against ``compute_credit`` under profile ``trl`` on the batch a TRL run becomes (each reward function a global
component, NaN stored as 0 and marked absent, unscorable rows left out as the TRL loader leaves them out);
(b) ``_compute_loss``: each token's weight in the loss for loss_type grpo, bnpo, dr_grpo and dapo (the gradient of
the loss at ratio 1 with unit advantages), with tool masks and a fully masked (truncated) completion, against
``compute_credit``'s aggregation weights under ``engine.profiles.trl_loss_agg``.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import assert_golden, golden_cases, load_golden, tensor

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.profiles import trl_aggregation, trl_loss_agg

ADVANTAGES = "trl_grpo_advantages.json"
LOSS_WEIGHTS = "trl_grpo_loss_weights.json"


def _sum_then_normalize(case: dict) -> bool:
    return case["params"]["multi_objective_aggregation"] == "sum_then_normalize"


# ------------------------------------------------------------------------------------------------ (a) advantages
def trl_batch(rewards_per_func: torch.Tensor, index: list[int], names: tuple[str, ...]) -> tuple[TrajectoryBatch, list]:
    """The batch of a TRL step: one row per scorable completion (two action tokens), its reward functions as global
    components with NaN as 0 and marked absent. Returns it and the rows kept (the rest are unscorable: every function
    gave None)."""
    kept = [i for i in range(len(index)) if not bool(rewards_per_func[i].isnan().all())]
    B, T = len(kept), 2
    values = rewards_per_func[kept]
    return TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=torch.ones(B, T),
        action_mask=torch.ones(B, T),
        turn_ids=torch.zeros(B, T, dtype=torch.long),
        group_ids=torch.tensor([index[i] for i in kept]),
        global_rewards=torch.nan_to_num(values, nan=0.0),
        global_reward_names=names,
        global_rewards_present=~values.isnan(),
    ), kept


@pytest.mark.parametrize("case", golden_cases(ADVANTAGES, _sum_then_normalize))
def test_trl_advantages(case: dict) -> None:
    p, inputs, expected = case["params"], case["inputs"], case["outputs"]
    names = tuple(p["reward_func_names"])
    batch, kept = trl_batch(tensor(inputs["rewards_per_func"]), inputs["index"], names)
    cfg = CreditConfig(
        profile="trl",
        estimator="grpo",
        global_weights=dict(zip(names, p["reward_weights"], strict=True)),
        grpo_std_scope="batch" if p["scale_rewards"] == "batch" else "group",
        norm_adv_by_std_in_grpo=p["scale_rewards"] != "none",
    )
    res = compute_credit(batch, cfg, "cpu")
    golden = tensor(expected["advantages"])
    assert_golden(res.advantages[:, -1], golden[kept], what="advantages")
    assert_golden(res.extras["global_reward"], tensor(expected["rewards"])[kept], what="weighted reward")
    dropped = sorted(set(range(len(golden))) - set(kept))
    assert golden[dropped].tolist() == [0.0] * len(dropped)  # TRL gives an unscorable row 0


@pytest.mark.parametrize("case", golden_cases(ADVANTAGES, lambda c: not _sum_then_normalize(c)))
def test_trl_normalize_then_sum(case: dict) -> None:
    """normalize_then_sum is GDPO under profile trl: each function standardised in its group over the rows it
    scored, the weighted nansum whitened over the batch's rows (docs/conventions/trl.md §10)."""
    p, inputs, expected = case["params"], case["inputs"], case["outputs"]
    assert p["multi_objective_aggregation"] == "normalize_then_sum"
    names = tuple(p["reward_func_names"])
    batch, kept = trl_batch(tensor(inputs["rewards_per_func"]), inputs["index"], names)
    cfg = CreditConfig(profile="trl", **trl_aggregation("normalize_then_sum", names, p["reward_weights"]))
    res = compute_credit(batch, cfg, "cpu")
    golden = tensor(expected["advantages"])
    assert_golden(res.advantages[:, -1], golden[kept], what="advantages")
    dropped = sorted(set(range(len(golden))) - set(kept))
    assert golden[dropped].tolist() == [0.0] * len(dropped)
    verl = compute_credit(batch, cfg.replace(profile="verl"), "cpu")  # token whitening, NaN never left out
    assert not torch.allclose(verl.advantages[:, -1], golden[kept], atol=1e-5)


def test_every_advantage_case_is_reproduced() -> None:
    cases = load_golden(ADVANTAGES)["cases"]
    assert sum(not _sum_then_normalize(c) for c in cases) == 4 and len(cases) == 28


# ------------------------------------------------------------------------------------------------ (b) loss weights
@pytest.mark.parametrize("case", golden_cases(LOSS_WEIGHTS))
def test_trl_loss_weights(case: dict) -> None:
    p, inputs, expected = case["params"], case["inputs"], case["outputs"]
    completion = tensor(inputs["completion_mask"])
    tool = tensor(inputs["tool_mask"]) if "tool_mask" in inputs else torch.ones_like(completion)
    # a fully masked row is a truncated completion TRL masked (mask_truncated_completions): its tokens exist
    truncated = completion.sum(-1) == 0
    attention = torch.where(truncated[:, None], torch.ones_like(completion), completion)
    B, T = completion.shape
    batch = TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=attention,
        action_mask=attention * tool,
        turn_ids=torch.where(attention > 0, 0, -1),
        group_ids=torch.arange(B),
        token_scores=torch.zeros(B, T),
        truncated=truncated,
    )
    # TRL masks a truncated completion's tokens and keeps the row in the batch (it still counts in the seq-mean
    # modes); CreditLens's mask_truncated_samples is rLLM's, which drops the row from the batch
    batch = batch.replace(action_mask=batch.action_mask * ~truncated[:, None])
    cfg = CreditConfig(profile="trl", estimator="grpo", **trl_loss_agg(p["loss_type"], p["max_completion_length"]))
    w = compute_credit(batch, cfg, "cpu").agg_weights
    assert_golden(w, expected["weights"], what=f"{p['loss_type']} token weights")
    # the gradient TRL's loss sends to each token's log-prob at ratio 1 is −w · A
    advantages = tensor(inputs["advantages"])
    assert_golden(-w * advantages[:, None], expected["grad"], what="gradient")


def test_trl_loss_agg_refuses_what_it_cannot_map() -> None:
    with pytest.raises(ValueError, match="'ppo' is not one of"):
        trl_loss_agg("ppo")
    with pytest.raises(ValueError, match="max_completion_length"):
        trl_loss_agg("dr_grpo")
    assert trl_loss_agg("dr_grpo", 10) == {"loss_agg_mode": "seq-mean-token-sum-norm", "loss_scale_factor": 10.0}
