"""Hand-computed micro cases (TRL style): tiny batches, the expected numbers worked out in the comments.

* the rLLM worked example (docs/TUTORIAL.md §7.2, rLLM's three modes): one question, two rollouts × three steps,
  rewards 1.0 and 0.0, MC returns 1.0 / 0.95 / 0.9025 with γ = 0.95, under trajectory, broadcast
  (± normalize_by_steps) and per_step;
* the KG-R1 reward walkthrough (docs/TUTORIAL.md §7.1, structured rewards): final_token_only and turn_proportional
  placements, and the '_otc_scaling_factor' / '_kg_turns_used' leak under profile kg-r1 (vs verl, which excludes
  every '_' key);
* GAE at λ = 1 and λ = 0 on a 1×4 row, and hole skipping on a 1×5 row;
* rejection-sampling verdicts; loss-aggregation effective weights for every mode on a 2-row batch.

Conventions used throughout: GRPO a = (s − μ)/(σ + ε), ε = 1e-6, σ unbiased (verl torch.std) unless a profile
says population std; whitening (x − μ)·rsqrt(σ² + 1e-8) with unbiased σ² over the advantage mask.
"""

from __future__ import annotations

import math

import pytest
import torch

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.rllm import SOLVE_ALL, SOLVE_NONE, SOLVE_PARTIAL

EPS = 1e-6


def close(actual: torch.Tensor, expected, atol: float = 1e-5) -> None:
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), atol=atol, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# the rLLM worked example (docs/TUTORIAL.md §7.2): one question, two rollouts, three steps, a python tool call
# between steps
#
# position:        0   1   2   3   4   5   6   7   8
# rollout 0 (✓):  a0  a0  i0  a1  a1  i1  a2  a2  pad      a_k = action token of step k, i_k = tool output
# rollout 1 (✗):  a0  i0  a1  a1  i1  i1  a2  a2  a2       (a hole of the action mask, belongs to step k)
# step rewards:   [0, 0, 1] and [0, 0, 0]
# ---------------------------------------------------------------------------------------------------------------
ACT = [[1, 1, 0, 1, 1, 0, 1, 1, 0], [1, 0, 1, 1, 0, 0, 1, 1, 1]]
ATTN = [[1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1]]
TURN = [[0, 0, 0, 1, 1, 1, 2, 2, -1], [0, 0, 1, 1, 1, 1, 2, 2, 2]]
STEP_REWARDS = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def rllm_example_batch(as_token_scores: bool = False) -> TrajectoryBatch:
    """Step rewards as a per-turn component 'step_reward' (weight 1), or as token scores on each step's last
    action token (only rollout 0's step 2 is non-zero: position 7)."""
    common = dict(
        token_ids=torch.zeros(2, 9, dtype=torch.long),
        attention_mask=ATTN,
        action_mask=ACT,
        turn_ids=TURN,
        group_ids=[0, 0],
    )
    if as_token_scores:
        scores = torch.zeros(2, 9)
        scores[0, 7] = 1.0
        return TrajectoryBatch(token_scores=scores, **common)
    return TrajectoryBatch(
        turn_rewards=torch.tensor(STEP_REWARDS)[..., None],  # (B=2, K=3, C=1)
        turn_reward_names=("step_reward",),
        **common,
    )


def rllm_example_config(**kw) -> CreditConfig:
    # rllm-legacy = AgentPPOTrainer (the trainer the rLLM worked example walks through): verl's GRPO, unbiased std.
    # turn_weights=() → the component 'step_reward' weighs 1; turn_final_token puts each step's reward on the
    # step's last action token, so Σ over a step's tokens is its reward.
    base = dict(profile="rllm-legacy", estimator="grpo", turn_weights=(), placement="turn_final_token")
    return CreditConfig(**(base | kw))


# trajectory reward R = Σ step rewards = [1, 0]; group {1, 0}: μ = 0.5,
# σ = sqrt(((1 − 0.5)² + (0 − 0.5)²)/(2 − 1)) = sqrt(0.5) = 0.707107
# a = ±0.5 / (0.707107 + 1e-6) = ±0.707106
A_TRAJ = 0.5 / (math.sqrt(0.5) + EPS)


def expected_broadcast(a0: float, a1: float) -> list[list[float]]:
    """a0 on every action token of rollout 0, a1 on rollout 1's; tool tokens and padding 0."""
    return [[a0 * m for m in ACT[0]], [a1 * m for m in ACT[1]]]


def test_rllm_example_trajectory_level():
    r = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode="trajectory"))
    close(r.token_level_scores.sum(-1), [1.0, 0.0])
    close(r.advantages, expected_broadcast(A_TRAJ, -A_TRAJ))
    # token-mean: 6 action tokens per row, N = 12 → every action token weighs 1/12 = 0.083333
    close(r.effective_weights, expected_broadcast(A_TRAJ / 12, -A_TRAJ / 12))


def test_rllm_example_trajectory_level_rllm_population_std():
    # rLLM's unified trainer uses np.std (ddof 0): σ = sqrt(0.5/2) = 0.5 → a = ±0.5/(0.5 + 1e-6) = ±0.999998
    r = compute_credit(rllm_example_batch(), rllm_example_config(profile="rllm", stepwise_mode="trajectory"))
    a = 0.5 / (0.5 + EPS)
    close(r.advantages, expected_broadcast(a, -a))


def test_rllm_example_broadcast():
    # GRPO runs on the last steps only (R on step 2's last token): ±0.707106, then copied to steps 0 and 1.
    r = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode="broadcast"))
    close(r.extras["step_scalar"], [A_TRAJ, -A_TRAJ])
    close(r.extras["n_steps"], [3.0, 3.0])
    close(r.advantages, expected_broadcast(A_TRAJ, -A_TRAJ))


def test_rllm_example_broadcast_normalize_by_steps():
    # scalar / n_steps = ±0.707106 / 3 = ±0.235702 on every step, the last one included
    r = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode="broadcast", normalize_by_steps=True))
    close(r.extras["step_scalar"], [A_TRAJ / 3, -A_TRAJ / 3])
    close(r.advantages, expected_broadcast(A_TRAJ / 3, -A_TRAJ / 3))


def test_rllm_example_per_step_mc_returns_and_advantages():
    # G_k = r_k + 0.95·G_{k+1}: rollout 0 → G_2 = 1.0, G_1 = 0.95·1.0 = 0.95, G_0 = 0.95·0.95 = 0.9025;
    # rollout 1 → 0, 0, 0. Groups: the k-th steps of the two rollouts (size 2 each).
    # step k, returns (x, 0): μ = x/2, σ = sqrt(2·(x/2)²/1) = x/√2, a = ±(x/2)/(x/√2 + 1e-6):
    #   k=0: x = 0.9025 → ±0.451250/(0.638164 + 1e-6) = ±0.7071057
    #   k=1: x = 0.95   → ±0.475000/(0.671751 + 1e-6) = ±0.7071057
    #   k=2: x = 1.0    → ±0.500000/(0.707107 + 1e-6) = ±0.7071058
    r = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode="per_step"))
    close(r.extras["step_mc_returns"], [[0.9025, 0.95, 1.0], [0.0, 0.0, 0.0]])
    close(r.extras["step_group_size"], [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]])
    a = [(x / 2) / (x / math.sqrt(2) + EPS) for x in (0.9025, 0.95, 1.0)]
    close(r.extras["step_advantage"], [a, [-v for v in a]])
    close(r.advantages, expected_broadcast(A_TRAJ, -A_TRAJ), atol=1e-6)


def test_rllm_example_per_step_without_std_shows_the_returns():
    # Dr.GRPO (no std): a = x − x/2 = ±x/2 → step 0: ±0.45125, step 1: ±0.475, step 2: ±0.5, on each step's tokens
    r = compute_credit(
        rllm_example_batch(), rllm_example_config(stepwise_mode="per_step", norm_adv_by_std_in_grpo=False)
    )
    close(r.extras["step_advantage"], [[0.45125, 0.475, 0.5], [-0.45125, -0.475, -0.5]])
    close(
        r.advantages,
        [
            [0.45125, 0.45125, 0, 0.475, 0.475, 0, 0.5, 0.5, 0],
            [-0.45125, 0, -0.475, -0.475, 0, 0, -0.5, -0.5, -0.5],
        ],
    )


def test_rllm_example_per_step_stepwise_gamma_of_the_legacy_engine():
    # the legacy AgentExecutionEngine passed γ = 0.2: G = 0.2² = 0.04, 0.2, 1.0
    r = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode="per_step", stepwise_gamma=0.2))
    close(r.extras["step_mc_returns"], [[0.04, 0.2, 1.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("mode", ["trajectory", "broadcast", "per_step"])
def test_rllm_example_token_scores_equal_turn_rewards(mode):
    # the same rewards given as token scores (1.0 at position 7) give the same credit in every mode
    a = compute_credit(rllm_example_batch(), rllm_example_config(stepwise_mode=mode))
    b = compute_credit(
        rllm_example_batch(as_token_scores=True), rllm_example_config(stepwise_mode=mode, placement="auto")
    )
    assert b.placement == "as_given"
    close(b.advantages, a.advantages)


# rollouts of different lengths: rollout 0 (✓) has 3 steps, rollout 1 (✗) only 2
#   position:       0   1   2   3   4   5   6
#   rollout 0 (✓): a0  i0  a1  i1  a2  a2  a2
#   rollout 1 (✗): a0  i0  a1  a1  pad pad pad
UNEVEN = dict(
    token_ids=torch.zeros(2, 7, dtype=torch.long),
    attention_mask=[[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]],
    action_mask=[[1, 0, 1, 0, 1, 1, 1], [1, 0, 1, 1, 0, 0, 0]],
    turn_ids=[[0, 0, 1, 1, 2, 2, 2], [0, 0, 1, 1, -1, -1, -1]],
    group_ids=[0, 0],
    turn_rewards=torch.tensor([[[0.0], [0.0], [1.0]], [[0.0], [0.0], [0.0]]]),
    turn_mask=[[1, 1, 1], [1, 1, 0]],
    turn_reward_names=("step_reward",),
)


def test_per_step_late_step_is_a_singleton_group_and_keeps_its_raw_return():
    # step 0: (0.9025, 0) → ±0.707106; step 1: (0.95, 0) → ±0.707106;
    # step 2 exists only in rollout 0: singleton, μ = 0, σ = 1 → a = 1.0/(1 + 1e-6) = 0.999999 (raw return)
    r = compute_credit(TrajectoryBatch(**UNEVEN), rllm_example_config(stepwise_mode="per_step"))
    close(r.extras["step_group_size"], [[2.0, 2.0, 1.0], [2.0, 2.0, 0.0]])
    close(r.extras["step_advantage"][0], [0.7071057, 0.7071057, 1 / (1 + EPS)])
    close(r.advantages[0], [0.7071057, 0, 0.7071057, 0, 0.999999, 0.999999, 0.999999])


def test_broadcast_workflow_trainer_splits_groups_by_last_step():
    # rllm-workflow: uid = step id, so the last steps are grouped by (task, last-step index): rollout 0 ends at
    # step 2, rollout 1 at step 1 → two singleton groups → raw rewards: 1/(1 + 1e-6) and 0.
    r = compute_credit(
        TrajectoryBatch(**UNEVEN), rllm_example_config(profile="rllm-workflow", stepwise_mode="broadcast")
    )
    close(r.extras["step_scalar"], [1 / (1 + EPS), 0.0])
    # rllm-legacy groups the last steps by prompt: one group {1, 0} → ±0.707106
    r = compute_credit(TrajectoryBatch(**UNEVEN), rllm_example_config(stepwise_mode="broadcast"))
    close(r.extras["step_scalar"], [A_TRAJ, -A_TRAJ])


# ---------------------------------------------------------------------------------------------------------------
# the KG-R1 reward walkthrough (docs/TUTORIAL.md §7.1): structured rewards
#
# position:  0   1   2   3   4   5   6   7
# tokens:   a0  a0  i0  i0  a1  a1  a1  pad      (i0: retrieved KG information, a hole of the action mask)
# turn components (format_score ×0.15, kg_query_validity ×0.1, is_answer_score ×0.1):
#   turn 0 (failed query)  = (1, 0, 0) → r_0 = 0.15
#   turn 1 (good answer)   = (1, 0, 1) → r_1 = 0.15 + 0.1 = 0.25
# global components (exact_match ×0.3, retrieval_quality ×0.4, _raw_exact_match, _otc_scaling_factor,
# _kg_turns_used; unlisted weights are 1) = (1, 1, 1, 1.0, kg_turns):
#   verl  (excludes every '_' key):          G = 0.3 + 0.4 = 0.7
#   kg-r1 (excludes only '_raw_' keys):      G = 0.7 + 1.0 + kg_turns  (= 2.7 with one KG turn)
# ---------------------------------------------------------------------------------------------------------------
KG_GLOBAL_NAMES = ("exact_match", "retrieval_quality", "_raw_exact_match", "_otc_scaling_factor", "_kg_turns_used")


def kgr1_batch(kg_turns=(1.0,), with_log_probs: bool = False) -> TrajectoryBatch:
    B = len(kg_turns)
    lp = torch.full((B, 8), -0.5) if with_log_probs else None
    return TrajectoryBatch(
        token_ids=torch.zeros(B, 8, dtype=torch.long),
        attention_mask=[[1, 1, 1, 1, 1, 1, 1, 0]] * B,
        action_mask=[[1, 1, 0, 0, 1, 1, 1, 0]] * B,
        turn_ids=[[0, 0, 0, 0, 1, 1, 1, -1]] * B,
        group_ids=[0] * B,
        turn_rewards=[[[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]]] * B,
        turn_reward_names=("format_score", "kg_query_validity", "is_answer_score"),
        global_rewards=[[1.0, 1.0, 1.0, 1.0, k] for k in kg_turns],
        global_reward_names=KG_GLOBAL_NAMES,
        old_log_probs=lp,
        ref_log_probs=lp,
    )


@pytest.mark.parametrize("profile, G", [("verl", 0.7), ("kg-r1", 2.7)])
def test_kgr1_final_token_only(profile, G):
    # mean turn reward + G on the last action token (position 6): (0.15 + 0.25)/2 + G = 0.2 + G
    #   verl: 0.9;  kg-r1: 2.9 (the bookkeeping keys add 1.0 + 1)
    r = compute_credit(kgr1_batch(), CreditConfig(profile=profile, estimator="grpo", placement="final_token_only"))
    close(r.extras["global_reward"], [G])
    close(r.token_level_scores, [[0, 0, 0, 0, 0, 0, 0.2 + G, 0]])


@pytest.mark.parametrize("profile, G", [("verl", 0.7), ("kg-r1", 2.7)])
def test_kgr1_turn_proportional(profile, G):
    # turn 0: 0.15 over its 2 action tokens = 0.075 each; turn 1: 0.25 over 3 = 0.083333 each;
    # G over all 5 action tokens: verl 0.7/5 = 0.14, kg-r1 2.7/5 = 0.54; info tokens and padding get nothing.
    #   verl:  [0.215, 0.215, 0, 0, 0.223333, 0.223333, 0.223333, 0]   (Σ = 0.4 + 0.7 = 1.1)
    #   kg-r1: [0.615, 0.615, 0, 0, 0.623333, 0.623333, 0.623333, 0]   (Σ = 0.4 + 2.7 = 3.1)
    r = compute_credit(kgr1_batch(), CreditConfig(profile=profile, estimator="grpo", placement="turn_proportional"))
    t0, t1 = 0.075 + G / 5, 0.25 / 3 + G / 5
    close(r.token_level_scores, [[t0, t0, 0, 0, t1, t1, t1, 0]])
    close(r.token_level_scores.sum(-1), [0.4 + G])


def test_kgr1_auto_placement_follows_in_reward_kl():
    # KG-R1: turn_proportional on the in-reward KL path, final_token_only without it.
    # old = ref log-probs → KL = 0, so the rewards equal the placed scores.
    batch = kgr1_batch(with_log_probs=True)
    with_kl = compute_credit(batch, CreditConfig(profile="kg-r1", estimator="grpo", use_kl_in_reward=True))
    without = compute_credit(batch, CreditConfig(profile="kg-r1", estimator="grpo"))
    assert with_kl.placement == "turn_proportional"
    assert without.placement == "final_token_only"
    close(with_kl.token_level_rewards, with_kl.token_level_scores)
    close(with_kl.token_level_rewards.sum(-1), [3.1])
    close(without.token_level_rewards.sum(-1), [2.9])


def test_kgr1_kg_turns_leak_rewards_more_kg_turns():
    # Two rollouts, identical in everything but the number of KG queries they issued (1 and 3).
    # verl: G = 0.7 for both → scores 0.9, 0.9 → GRPO advantage 0 (σ = 0, a = 0/(0 + 1e-6) = 0).
    # kg-r1: G = 0.7 + 1 + 1 = 2.7 and 0.7 + 1 + 3 = 4.7 → scores 2.9, 4.9: μ = 3.9, σ = sqrt(2) = 1.414214
    #        → a = ∓1/(1.414214 + 1e-6) = ∓0.707106: the rollout that queried the KG more is credited.
    batch = kgr1_batch(kg_turns=(1.0, 3.0))
    verl = compute_credit(batch, CreditConfig(profile="verl", estimator="grpo", placement="final_token_only"))
    kgr1 = compute_credit(batch, CreditConfig(profile="kg-r1", estimator="grpo", placement="final_token_only"))
    close(verl.scores, [0.9, 0.9])
    close(verl.advantages, torch.zeros(2, 8))
    close(kgr1.scores, [2.9, 4.9])
    a = 1 / (math.sqrt(2) + EPS)
    # kg-r1 broadcasts over the attention mask (info tokens too); the loss mask keeps only action tokens
    close(kgr1.advantages, [[-a] * 7 + [0], [a] * 7 + [0]])
    close(kgr1.effective_weights[:, 2:4], torch.zeros(2, 2))


# ---------------------------------------------------------------------------------------------------------------
# GAE on one row by hand: γ = 0.5, r = [0, 1, 0, 2], V = [1, 0, 1, 0], no holes, V after the end = 0
# ---------------------------------------------------------------------------------------------------------------
def gae_row(lam: float, profile: str = "verl", act=(1, 1, 1, 1), r=(0.0, 1.0, 0.0, 2.0), v=(1.0, 0.0, 1.0, 0.0)):
    T = len(act)
    batch = TrajectoryBatch(
        token_ids=torch.zeros(1, T, dtype=torch.long),
        attention_mask=torch.ones(1, T),
        action_mask=[list(act)],
        turn_ids=torch.zeros(1, T, dtype=torch.long),
        group_ids=[0],
        token_scores=[list(r)],
        values=[list(v)],
    )
    return compute_credit(batch, CreditConfig(profile=profile, estimator="gae", gamma=0.5, lam=lam))


def test_gae_lambda_one_is_monte_carlo_return_minus_value():
    # λ = 1: A_t = Σ_l γ^l δ_{t+l} = G_t − V_t with G_t = r_t + γ G_{t+1}:
    #   G_3 = 2, G_2 = 0 + 0.5·2 = 1, G_1 = 1 + 0.5·1 = 1.5, G_0 = 0 + 0.5·1.5 = 0.75
    #   A_raw = G − V = [−0.25, 1.5, 0, 2]; returns = A_raw + V = G = [0.75, 1.5, 1, 2]
    # whitening: μ = 3.25/4 = 0.8125; Σ(A − μ)² = 1.12890625 + 0.47265625 + 0.66015625 + 1.41015625 = 3.671875;
    #   σ² = 3.671875/3 = 1.223958; σ = 1.106327 → A = [−0.960386, 0.621426, −0.734412, 1.073372]
    r = gae_row(lam=1.0)
    close(r.extras["advantages_raw"], [[-0.25, 1.5, 0.0, 2.0]])
    close(r.returns, [[0.75, 1.5, 1.0, 2.0]])
    close(r.advantages, [[-0.960386, 0.621426, -0.734412, 1.073372]])


def test_gae_lambda_zero_is_the_td_error():
    # λ = 0: A_t = δ_t = r_t + γ V_{t+1} − V_t:
    #   δ_0 = 0 + 0.5·0 − 1 = −1;  δ_1 = 1 + 0.5·1 − 0 = 1.5;  δ_2 = 0 + 0.5·0 − 1 = −1;  δ_3 = 2 + 0 − 0 = 2
    #   returns = δ + V = [0, 1.5, 0, 2]
    # whitening: μ = 1.5/4 = 0.375; Σ(δ − μ)² = 1.890625 + 1.265625 + 1.890625 + 2.640625 = 7.6875;
    #   σ² = 7.6875/3 = 2.5625; σ = 1.600781 → A = [−0.858956, 0.702782, −0.858956, 1.015129]
    r = gae_row(lam=0.0)
    close(r.extras["td_errors"], [[-1.0, 1.5, -1.0, 2.0]])
    close(r.extras["advantages_raw"], [[-1.0, 1.5, -1.0, 2.0]])
    close(r.returns, [[0.0, 1.5, 0.0, 2.0]])
    close(r.advantages, [[-0.858956, 0.702782, -0.858956, 1.015129]])


# a tool output at position 2 (a hole of the action mask) carrying junk: reward 5, value 9; γ = 0.5, λ = 1
HOLE = dict(act=(1, 1, 0, 1, 1), r=(0.0, 0.0, 5.0, 0.0, 1.0), v=(0.5, 0.5, 9.0, 0.5, 0.5))


def test_gae_skips_the_hole_under_verl():
    # verl ≥ PR #2337: the hole is invisible. Valid tokens 0, 1, 3, 4 with r = [0, 0, 0, 1], V = 0.5 each:
    #   G = [0.125, 0.25, 0.5, 1] (γ applied once per valid token) → A_raw = G − V = [−0.375, −0.25, 0, 0.5];
    #   the hole reports its next valid token's A_raw (position 3: 0).
    # whitening over the 4 action tokens: μ = −0.03125, σ² = 0.449219/3 = 0.149740, σ = 0.386963
    #   → [−0.888330, −0.565301, (hole) 0.080757, 0.080757, 1.372874]
    r = gae_row(lam=1.0, **HOLE)
    close(r.extras["advantages_raw"], [[-0.375, -0.25, 0.0, 0.0, 0.5]])
    close(r.returns[0, [0, 1, 3, 4]], [0.125, 0.25, 0.5, 1.0])
    close(r.advantages, [[-0.888330, -0.565301, 0.080757, 0.080757, 1.372874]])


def test_gae_steps_through_the_hole_under_kg_r1():
    # KG-R1 (old verl): every column is a TD step over the attention mask; the hole's reward and value count.
    #   G = reverse-discounted r = [1.3125, 2.625, 5.25, 0.5, 1] → A_raw = G − V = [0.8125, 2.125, −3.75, 0, 0.5]
    # whitening over all 5 attended tokens: μ = −0.0625, σ² = 19.46875/4 = 4.867188, σ = 2.206171
    #   → [0.396615, 0.991537, −1.671448, 0.028330, 0.254967]
    r = gae_row(lam=1.0, profile="kg-r1", **HOLE)
    close(r.extras["advantages_raw"], [[0.8125, 2.125, -3.75, 0.0, 0.5]])
    close(r.advantages, [[0.396615, 0.991537, -1.671448, 0.028330, 0.254967]])
    # the loss still trains only on action tokens: the hole's effective weight is 0
    assert r.effective_weights[0, 2].item() == 0.0


# ---------------------------------------------------------------------------------------------------------------
# Rejection sampling (rLLM): per prompt, on Σ_t token_level_scores — all ≥ 1 solve_all, all ≤ 0 solve_none
# ---------------------------------------------------------------------------------------------------------------
#   group:   0     0  |  1    1  |  2    2  |  3     3  |  4    4
#   score:   1     2  |  0    0  |  1    0  | 0.5   0.5 | −1    0
#   verdict: all      |  none    |  partial |  partial  |  none
REJ_SCORES = [1.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.5, -1.0, 0.0]
REJ_VERDICTS = [SOLVE_ALL] * 2 + [SOLVE_NONE] * 2 + [SOLVE_PARTIAL] * 4 + [SOLVE_NONE] * 2


def rejection_batch(truncated=None) -> TrajectoryBatch:
    B = len(REJ_SCORES)
    scores = torch.zeros(B, 2)
    scores[:, 1] = torch.tensor(REJ_SCORES)
    return TrajectoryBatch(
        token_ids=torch.zeros(B, 2, dtype=torch.long),
        attention_mask=torch.ones(B, 2),
        action_mask=torch.ones(B, 2),
        turn_ids=torch.zeros(B, 2, dtype=torch.long),
        group_ids=[0, 0, 1, 1, 2, 2, 3, 3, 4, 4],
        token_scores=scores,
        truncated=truncated,
    )


def test_rejection_verdicts_are_reported_without_filtering():
    r = compute_credit(rejection_batch(), CreditConfig(profile="rllm-legacy", estimator="grpo"))
    assert r.verdicts.tolist() == REJ_VERDICTS
    assert bool(r.kept.all())


def test_rejection_sampling_drops_solved_and_unsolved_groups_from_the_loss():
    r = compute_credit(rejection_batch(), CreditConfig(profile="rllm-legacy", estimator="grpo", rejection_sample=True))
    assert r.kept.tolist() == [False] * 4 + [True] * 4 + [False] * 2
    close(r.loss_mask.sum(-1), [0, 0, 0, 0, 2, 2, 2, 2, 0, 0])
    # token-mean over the 8 kept tokens: w = 1/8; group 2 {1, 0}: a = ±0.707106 → ±0.088388; group 3 tied: 0
    a = 0.5 / (math.sqrt(0.5) + EPS)
    close(r.effective_weights[:, 0], [0, 0, 0, 0, a / 8, -a / 8, 0, 0, 0, 0])


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_rejection_that_drops_every_group_gives_zero_weights(mode):
    # groups 0, 1 and 4 only: solve_all, solve_none, solve_none → nothing is kept, nothing is trained on.
    # Every weight must be 0 (rLLM skips such a batch; verl's masked_mean gives 0/(0 + 1e-8) = 0), not 0/0.
    batch = rejection_batch().select([0, 1, 2, 3, 8, 9])
    cfg = CreditConfig(profile="rllm-legacy", estimator="grpo", rejection_sample=True, loss_agg_mode=mode)
    r = compute_credit(batch, cfg)
    assert not bool(r.kept.any())
    close(r.agg_weights, torch.zeros(6, 2))
    close(r.effective_weights, torch.zeros(6, 2))


def test_mask_truncated_samples_drops_truncated_rows():
    truncated = [False, False, False, False, True, False, False, False, False, False]
    cfg = CreditConfig(profile="rllm-legacy", estimator="grpo", rejection_sample=True, mask_truncated_samples=True)
    r = compute_credit(rejection_batch(truncated), cfg)
    assert r.kept.tolist() == [False] * 5 + [True] * 3 + [False] * 2


# ---------------------------------------------------------------------------------------------------------------
# Loss aggregation → effective weights w·A on a 2-row batch (estimator 'reinforce': A_i = s_i on action tokens)
#
#   row 0: action [1, 1, 0, 0, 0], score 2   (n_0 = 2 tokens)
#   row 1: action [1, 1, 0, 1, 1], score −1  (n_1 = 4 tokens, a tool token at position 2)
#   N = 6 tokens, G = 2 sequences, T = 5
# ---------------------------------------------------------------------------------------------------------------
def agg_batch() -> TrajectoryBatch:
    return TrajectoryBatch(
        token_ids=torch.zeros(2, 5, dtype=torch.long),
        attention_mask=[[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]],
        action_mask=[[1, 1, 0, 0, 0], [1, 1, 0, 1, 1]],
        turn_ids=[[0, 0, -1, -1, -1], [0, 0, 0, 1, 1]],
        group_ids=[0, 1],
        token_scores=[[0.0, 2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, -1.0]],
    )


@pytest.mark.parametrize(
    "profile, mode, extra, w0, w1",
    [
        ("verl", "token-mean", {}, 1 / 6, 1 / 6),  # w = 1/N
        ("verl", "token-sum", {}, 1.0, 1.0),  # w = 1
        ("verl", "seq-mean-token-sum", {}, 1 / 2, 1 / 2),  # w = 1/G
        ("verl", "seq-mean-token-mean", {}, 1 / 4, 1 / 8),  # w = 1/(n_i·G): 1/(2·2), 1/(4·2)
        ("verl", "seq-mean-token-sum-norm", {}, 1 / 10, 1 / 10),  # verl ≥ #5366: 1/(G·T) = 1/(2·5)
        ("verl", "seq-mean-token-sum-norm", {"loss_scale_factor": 4.0}, 1 / 8, 1 / 8),  # 1/(G·S) = 1/(2·4)
        ("verl-legacy", "seq-mean-token-sum-norm", {}, 1 / 5, 1 / 5),  # older verl: 1/T
    ],
)
def test_loss_aggregation_effective_weights(profile, mode, extra, w0, w1):
    cfg = CreditConfig(profile=profile, estimator="reinforce", loss_agg_mode=mode, **extra)
    r = compute_credit(agg_batch(), cfg)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 0, 1, 1]], dtype=torch.float32)
    close(r.agg_weights, mask * torch.tensor([[w0], [w1]]))
    # effective weight = w · A: row 0 → 2·w0 on its 2 tokens, row 1 → −1·w1 on its 4 tokens
    close(r.effective_weights, mask * torch.tensor([[2 * w0], [-w1]]))


def test_token_mean_weighs_long_rows_more_than_seq_mean_token_mean():
    # Σ_t w per row — token-mean: 2/6 vs 4/6 (the long row dominates); seq-mean-token-mean: 1/2 vs 1/2
    tm = compute_credit(agg_batch(), CreditConfig(profile="verl", estimator="reinforce", loss_agg_mode="token-mean"))
    sm = compute_credit(
        agg_batch(), CreditConfig(profile="verl", estimator="reinforce", loss_agg_mode="seq-mean-token-mean")
    )
    close(tm.agg_weights.sum(-1), [1 / 3, 2 / 3])
    close(sm.agg_weights.sum(-1), [0.5, 0.5])
