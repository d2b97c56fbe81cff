"""Profile ``trl`` and the fields it brought (docs/conventions/trl.md §10), worked out by hand on tiny batches: ε =
1e-4, a group of one row gets 0, scale_rewards='batch' (one std over the batch, the mean per group) and seq-mean losses
that average over every row, a fully masked one too. TRL's own outputs are checked in test_golden_trl.py."""

from __future__ import annotations

import math

import pytest
import torch

from engine import CreditConfig, TrajectoryBatch, compute_credit

# two groups: rows 0-2 (rewards 1, 0, 0.5) and row 3 alone (reward 2); each row three action tokens
REWARDS = [1.0, 0.0, 0.5, 2.0]


def batch(mask_rows=(1, 1, 1, 1)) -> TrajectoryBatch:
    B, T = len(REWARDS), 3
    mask = torch.ones(B, T) * torch.tensor(mask_rows, dtype=torch.float32)[:, None]
    scores = torch.zeros(B, T)
    scores[:, -1] = torch.tensor(REWARDS)
    return TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=torch.ones(B, T),
        action_mask=mask,
        turn_ids=torch.zeros(B, T, dtype=torch.long),
        group_ids=torch.tensor([0, 0, 0, 1]),
        token_scores=scores,
    )


def row_advantages(cfg: CreditConfig) -> list[float]:
    return compute_credit(batch(), cfg, "cpu").advantages[:, 0].tolist()


def test_trl_divides_by_the_group_std_plus_1e_4_and_gives_a_singleton_0() -> None:
    # group 0: mean 0.5, unbiased std sqrt(((0.5)² + (0.5)² + 0) / 2) = 0.5; row 3 alone: 0 (verl: its raw 2)
    a = row_advantages(CreditConfig(profile="trl", estimator="grpo"))
    assert a == pytest.approx([0.5 / 0.5001, -0.5 / 0.5001, 0.0, 0.0], abs=1e-6)
    verl = row_advantages(CreditConfig(profile="verl", estimator="grpo"))
    assert verl == pytest.approx([0.5 / 0.500001, -0.5 / 0.500001, 0.0, 2.0 / 1.000001], abs=1e-6)


def test_scale_rewards_batch_divides_by_one_std_over_the_batch() -> None:
    # batch std of (1, 0, 0.5, 2): mean 0.875, Σ(x − mean)² = 0.015625 + 0.765625 + 0.140625 + 1.265625 = 2.1875
    std = math.sqrt(2.1875 / 3)
    a = row_advantages(CreditConfig(profile="trl", estimator="grpo", grpo_std_scope="batch"))
    assert a == pytest.approx([0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0.0, 0.0], abs=1e-6)


def test_scale_rewards_none_is_the_centred_reward() -> None:
    a = row_advantages(CreditConfig(profile="trl", estimator="grpo", norm_adv_by_std_in_grpo=False))
    assert a == pytest.approx([0.5, -0.5, 0.0, 0.0], abs=1e-7)


def test_grpo_std_scope_refuses_other_values() -> None:
    with pytest.raises(ValueError, match=r"CreditConfig\.grpo_std_scope: 'token' is not one of"):
        CreditConfig(grpo_std_scope="token")


@pytest.mark.parametrize(
    ("mode", "profile", "weight"),
    [
        # row 1 fully masked (TRL's mask_truncated_completions): TRL's grpo loss averages over all 4 rows, and so
        # does verl's trainer (ppo_loss passes global_batch_size = every row of the mini-batch); verl's legacy actor
        # (agg_loss without global_batch_size) and rLLM's verl 0.7.1 average over the 3 rows with a loss token;
        # each row has 3 tokens
        ("seq-mean-token-mean", "trl", 1 / (3 * 4)),
        ("seq-mean-token-mean", "verl", 1 / (3 * 4)),
        ("seq-mean-token-mean", "verl-legacy", 1 / (3 * 3)),
        ("seq-mean-token-mean", "rllm-workflow", 1 / (3 * 3)),
        ("seq-mean-token-sum-norm", "trl", 1 / (4 * 3)),  # dr_grpo: Σ / (B · max_completion_length = T)
        ("seq-mean-token-sum-norm", "verl", 1 / (4 * 3)),
        ("seq-mean-token-sum", "verl-legacy", 1 / 3),
        ("token-mean", "trl", 1 / 9),  # bnpo, dapo: Σ / N whatever the rows
        ("token-mean", "verl", 1 / 9),
    ],
)
def test_seq_mean_losses_count_the_rows_each_trainer_counts(mode: str, profile: str, weight: float) -> None:
    cfg = CreditConfig(profile=profile, estimator="grpo", loss_agg_mode=mode)
    res = compute_credit(batch(mask_rows=(1, 0, 1, 1)), cfg, "cpu")
    w = res.agg_weights
    assert w[1].abs().sum().item() == 0.0
    assert w[[0, 2, 3]].flatten().tolist() == pytest.approx([weight] * 9, rel=1e-6)


def test_rows_dropped_from_the_batch_leave_the_seq_mean_count() -> None:
    # rLLM's rejection sampling drops row 3 (its group of one is all solved: 2 ≥ 1) from the trainer's batch; under
    # seq_mean_rows="all" the seq-mean divides by the 3 rows left, the fully masked row 1 among them: 1 / (3 · 3)
    cfg = CreditConfig(estimator="grpo", loss_agg_mode="seq-mean-token-mean", rejection_sample=True)
    res = compute_credit(batch(mask_rows=(1, 0, 1, 1)), cfg, "cpu")
    assert res.kept.tolist() == [True, True, True, False]
    w = res.agg_weights
    assert w[[1, 3]].abs().sum().item() == 0.0
    assert w[[0, 2]].flatten().tolist() == pytest.approx([1 / 9] * 6, rel=1e-6)


# ------------------------------------------------------------------------------------------------ dashboard
def test_sidebar_offers_the_std_scope_for_grpo_and_the_link_carries_it() -> None:
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from dashboard import schemes
    from dashboard.state import cfg_key
    from engine import config

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    at.query_params["run"] = "python_tool_two_rollouts"
    at.query_params["scheme"] = "grpo,p:trl,gs:batch"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    scope = at.sidebar.segmented_control(key=cfg_key("grpo_std_scope"))
    assert scope.options == list(config.choices("grpo_std_scope")) and scope.value == "batch"
    assert scope.help == config.FIELD_HELP["grpo_std_scope"]
    assert at.session_state[cfg_key("profile")] == "trl"
    assert at.query_params["scheme"] == "grpo,p:trl,gs:batch,vs:zeros"  # the sample has no critic: stand-in named
    # without std normalisation (TRL's scale_rewards='none') there is no std to scope
    at.sidebar.toggle(key=cfg_key("norm_adv_by_std_in_grpo")).set_value(False).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [c for c in at.sidebar.segmented_control if c.key == cfg_key("grpo_std_scope")]
    # the compare page names what the TRL profile changes
    text = schemes.differences(CreditConfig(estimator="grpo"), schemes.decode("grpo,p:trl,gs:batch"))
    assert text == (
        "profile: verl → TRL (ε 1e-06 → 0.0001; GRPO singleton raw score → 0; KL clamp k3 only → none; "
        "GDPO whitening over tokens → over rows; "
        "GSPO gradient each token's own → spread over the row; CISPO clip clip(ρ, 1 − ε_low, 1 + ε_high) → "
        "min(ρ, ε_high); dual clip form min(−A·c, loss), half at ρ = c → min(ρ, c), whole at ρ = c; log-ratio "
        "clamp ±20 → none; DPPO weight −A·min(ρ, c), detached → −A·ρ; rollout "
        "rejection acts before the advantages → in the loss only; global keys left out '_' "
        "keys → none); "
        "GRPO std over: group → batch"
    )


def test_a_cleared_segmented_control_falls_back_to_its_declared_default() -> None:
    import types

    from dashboard.state import fit_scheme
    from engine.runnable import RunHas

    info = types.SimpleNamespace(has_values=False, run_has=RunHas(values=False, log_probs=False, token_scores=True))
    values = dict(
        estimator="grpo",
        value_source="zeros",
        stepwise_mode=None,  # what a cleared st.segmented_control holds
        grpo_std_scope=None,
        policy_ratio_base=None,
        rollout_is_threshold="2.0",
        use_kl_in_reward=False,
        placement="auto",
    )
    assert fit_scheme(values, info, ["grpo"]) == {
        "stepwise_mode": "trajectory",
        "grpo_std_scope": "group",
        "policy_ratio_base": "trainer",
    }
    fixed = {"stepwise_mode": "per_step", "grpo_std_scope": "batch", "policy_ratio_base": "trainer"}
    assert fit_scheme(values | fixed, info, ["grpo"]) == {}
    # a typed IS threshold verl refuses goes back to the default
    assert fit_scheme(values | fixed | {"rollout_is_threshold": "2_1"}, info, ["grpo"]) == {
        "rollout_is_threshold": "2.0"
    }


@pytest.mark.parametrize("mode", ["seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum"])
def test_search_r1_has_only_a_token_mean(mode: str) -> None:
    # Search-R1 a14dc3a: compute_policy_loss = masked_mean(pg_losses, eos_mask), no loss_agg_mode
    # (docs/conventions/search-r1.md §4)
    with pytest.raises(ValueError, match=f"'{mode}' does not exist in profile 'search-r1'"):
        CreditConfig(profile="search-r1", loss_agg_mode=mode)
    assert CreditConfig(profile="search-r1").loss_agg_mode == "token-mean"
    if mode != "token-sum":  # KG-R1's old verl agg_loss has the seq-mean modes (not token-sum)
        assert CreditConfig(profile="kg-r1", loss_agg_mode=mode).loss_agg_mode == mode
