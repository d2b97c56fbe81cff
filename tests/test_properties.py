"""Property tests (hypothesis): what must hold for any batch, and the vectorized engine against naive loops.

* tokens outside the loss mask get zero effective weight, for every estimator, rLLM mode, profile and
  aggregation;
* junk on holes (values, rewards at masked positions) never reaches verl-profile GAE advantages on valid tokens;
* GRPO is zero-mean per group; RLOO is s_i − mean_{j≠i} s_j;
* GAE at λ = 1 is the discounted reward-to-go minus the values, at λ = 0 the TD error;
* the vectorized scans equal the loops of ``benchmarks.reference_loops`` (written like the references) for random
  masks with holes: the discounted scan, GAE (skip and no-skip), REINFORCE++ (carry and reset), GRPO, RLOO and
  rLLM's per-step MC returns and advantages.

Batches are drawn structurally by hypothesis (group sizes, turns, action/tool/padding runs); the float contents
come from a seeded generator whose seed hypothesis also draws. Loop comparisons run in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from benchmarks.reference_loops import (
    discounted_cumsum_loop,
    gae_loop,
    grpo_loop,
    mc_returns_loop,
    per_step_grpo_loop,
    reinforce_pp_loop,
    rloo_loop,
)
from engine import ESTIMATORS, PROFILES, CreditConfig, TrajectoryBatch, compute_credit
from engine.config import LOSS_AGG_MODES, STEPWISE_MODES
from engine.estimators.gae import compute_gae_advantage_return, gae_raw
from engine.estimators.outcome import rloo_scalar
from engine.estimators.returns import reinforce_plus_plus
from engine.registry import EstimatorInput, get_estimator
from engine.rllm import mc_returns
from engine.scan import discounted_reverse_cumsum

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64
TURN_NAMES = ("format_score", "kg_query_validity", "is_answer_score")
GLOBAL_NAMES = ("exact_match", "retrieval_quality", "_raw_exact_match", "_otc_scaling_factor", "_kg_turns_used")


# ---------------------------------------------------------------------------------------------- strategies
@st.composite
def layouts(draw, min_group: int = 1, max_group: int = 4, max_groups: int = 3, max_turns: int = 4, same_turns=False):
    """Row layouts of a multi-turn batch: (group ids, per row a list of (kind, turn) tokens).

    kind: 'a' action token, 'i' tool/info token (a hole of the action mask), None padding. Each turn has 1–4
    action tokens; 0–3 tool tokens follow every turn but the last; 0–2 padding tokens close the row.
    """
    sizes = draw(st.lists(st.integers(min_group, max_group), min_size=1, max_size=max_groups))
    group_ids, rows = [], []
    for g, n in enumerate(sizes):
        group_turns = draw(st.integers(1, max_turns))
        for _ in range(n):
            K = group_turns if same_turns else draw(st.integers(1, max_turns))
            row = []
            for k in range(K):
                row += [("a", k)] * draw(st.integers(1, 4))
                if k < K - 1:
                    row += [("i", k)] * draw(st.integers(0, 3))
            row += [(None, -1)] * draw(st.integers(0, 2))
            rows.append(row)
            group_ids.append(g)
    order = draw(st.permutations(range(len(rows))))  # groups need not be contiguous
    return [group_ids[i] for i in order], [rows[i] for i in order]


def masks_from(rows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(attention, action, turn_ids), each (B, T), right-padded to the longest row."""
    T = max(len(r) for r in rows)
    padded = [r + [(None, -1)] * (T - len(r)) for r in rows]
    attn = torch.tensor([[kind is not None for kind, _ in r] for r in padded], dtype=torch.float32)
    act = torch.tensor([[kind == "a" for kind, _ in r] for r in padded], dtype=torch.float32)
    turn = torch.tensor([[k for _, k in r] for r in padded], dtype=torch.long)
    return attn, act, turn


def full_batch(group_ids, rows, seed: int) -> TrajectoryBatch:
    """A batch with every optional input: KG-R1-style structured rewards, values, log-probs, Σ_v π² and IS
    weights, ReMax baselines, the trainer's logged advantages, some truncated rows."""
    g = torch.Generator().manual_seed(seed)
    attn, act, turn = masks_from(rows)
    B, T = act.shape
    K = int(turn.max()) + 1
    n_turns = turn.max(-1).values + 1
    old = -2 * torch.rand(B, T, generator=g)
    pi = old.exp()
    return TrajectoryBatch(
        token_ids=torch.randint(0, 100, (B, T), generator=g),
        attention_mask=attn,
        action_mask=act,
        turn_ids=turn,
        group_ids=group_ids,
        old_log_probs=old,
        ref_log_probs=old + 0.3 * torch.randn(B, T, generator=g),
        values=torch.randn(B, T, generator=g),
        sum_pi_squared=pi.square() + (1 - pi).square() * torch.rand(B, T, generator=g),
        rollout_is_weights=0.5 + torch.rand(B, T, generator=g),
        reward_baselines=torch.rand(B, generator=g),
        turn_rewards=(torch.rand(B, K, 3, generator=g) < 0.6).float(),
        turn_mask=(torch.arange(K) < n_turns[:, None]).float(),
        turn_reward_names=TURN_NAMES,
        global_rewards=torch.cat(
            [(torch.rand(B, 3, generator=g) < 0.5).float(), torch.ones(B, 1), n_turns[:, None]], -1
        ),
        global_reward_names=GLOBAL_NAMES,
        truncated=torch.rand(B, generator=g) < 0.2,
        logged_advantages=torch.randn(B, T, generator=torch.Generator().manual_seed(seed + 1)) * attn,
    )


@st.composite
def masked_tensors(draw, max_B: int = 5, max_T: int = 150, hole_probs=(0.0, 0.2, 0.5, 0.9)):
    """(rewards, values, mask) in float64: each row a random length ≤ T and random holes inside it."""
    B = draw(st.integers(1, max_B))
    T = draw(st.integers(1, max_T))
    p = draw(st.sampled_from(hole_probs))
    seed = draw(st.integers(0, 2**32 - 1))
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, T + 1, (B, 1), generator=g)
    mask = ((torch.arange(T) < lengths) & (torch.rand(B, T, generator=g) >= p)).to(F64)
    rewards = torch.randn(B, T, generator=g, dtype=F64)
    values = torch.randn(B, T, generator=g, dtype=F64)
    return rewards, values, mask


gammas = st.one_of(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]), st.floats(0.0, 1.0))


def assert_close(actual, expected, atol=1e-9, rtol=1e-7, msg=""):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg or None)


# ---------------------------------------------------------------------------------------------- masked credit
def _config(profile: str, estimator: str, mode: str, agg: str, **kw) -> CreditConfig:
    if agg == "token-sum" and not PROFILES[profile].token_sum_supported:
        agg = "token-mean"  # that profile's verl has no token-sum
    if agg.startswith("seq-mean") and not PROFILES[profile].seq_mean_supported:
        agg = "token-mean"  # Search-R1's policy loss is a token mean
    if agg == "prompt-mean-token-mean" and not PROFILES[profile].prompt_mean_supported:
        agg = "token-mean"  # SkyRL's prompt_mean: profile skyrl only
    if estimator == "logged":
        mode = "trajectory"  # the trainer's own advantages: no step rewards to recompute (the config refuses it)
    return CreditConfig(profile=profile, estimator=estimator, stepwise_mode=mode, loss_agg_mode=agg, **kw)


@FAST
@given(
    layout=layouts(min_group=2, same_turns=True),
    seed=st.integers(0, 2**32 - 1),
    estimator=st.sampled_from(sorted(ESTIMATORS)),
    mode=st.sampled_from(STEPWISE_MODES),
    profile=st.sampled_from(sorted(PROFILES)),
    agg=st.sampled_from(LOSS_AGG_MODES),
    flags=st.fixed_dictionaries(
        {
            "state_masking": st.booleans(),
            "use_kl_in_reward": st.booleans(),
            "rejection_sample": st.booleans(),
            "mask_truncated_samples": st.booleans(),
        }
    ),
)
def test_tokens_outside_the_loss_mask_get_no_weight(layout, seed, estimator, mode, profile, agg, flags):
    batch = full_batch(*layout, seed)
    cfg = _config(profile, estimator, mode, agg, **flags)
    sizes = torch.unique(batch.group_ids, return_counts=True)[1]
    if cfg.trainer.group_sizes == "equal" and sizes.unique().numel() > 1:  # OpenRLHF cannot have made this batch
        with pytest.raises(ValueError, match="prompt groups of one size"):
            compute_credit(batch, cfg)
        return
    r = compute_credit(batch, cfg)  # the loss mask may be empty
    allowed = batch.action_mask if flags["state_masking"] else batch.attention_mask
    assert bool((r.loss_mask <= allowed).all())
    assert bool((r.loss_mask[~r.kept] == 0).all())
    outside = r.loss_mask == 0
    nan_singletons = "nan" in (cfg.grpo_singleton, cfg.rloo_singleton) and bool((sizes == 1).any())
    assert nan_singletons or bool(torch.isfinite(r.effective_weights).all())  # OpenRLHF: a group of one is NaN
    assert bool((r.effective_weights[outside] == 0).all())
    assert bool((r.agg_weights[outside] == 0).all())


@FAST
@given(layout=layouts(), seed=st.integers(0, 2**32 - 1), gamma=gammas, lam=gammas)
def test_junk_on_holes_does_not_reach_verl_gae(layout, seed, gamma, lam):
    group_ids, rows = layout
    attn, act, turn = masks_from(rows)
    assume(act.sum() >= 2)  # whitening needs two valid tokens (verl raises too)
    g = torch.Generator().manual_seed(seed)
    B, T = act.shape
    scores, values = torch.randn(B, T, generator=g) * act, torch.randn(B, T, generator=g)
    junk = 1e3 * torch.randn(B, T, generator=g)
    holes = act == 0  # tool tokens and padding
    clean = TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=attn,
        action_mask=act,
        turn_ids=turn,
        group_ids=group_ids,
        token_scores=scores,
        values=values,
    )
    dirty = clean.replace(token_scores=torch.where(holes, junk, scores), values=torch.where(holes, -junk, values))
    cfg = CreditConfig(profile="verl", estimator="gae", gamma=gamma, lam=lam)
    a, b = compute_credit(clean, cfg), compute_credit(dirty, cfg)
    valid = act.bool()
    assert_close(b.advantages[valid], a.advantages[valid], atol=1e-5, rtol=1e-5)
    assert_close(b.returns[valid], a.returns[valid], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------- group estimators
@st.composite
def grouped_scores(draw, min_group: int = 2):
    """(scores [B] float32, group ids [B]) with groups of size ≥ min_group in random order."""
    sizes = draw(st.lists(st.integers(min_group, 6), min_size=1, max_size=5))
    ids = [g for g, n in enumerate(sizes) for _ in range(n)]
    ids = [ids[i] for i in draw(st.permutations(range(len(ids))))]
    values = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(-10, 10, width=32))
    scores = draw(st.lists(values, min_size=len(ids), max_size=len(ids)))
    return torch.tensor(scores, dtype=torch.float32), torch.tensor(ids)


def outcome_credit(scores, ids, estimator, profile="verl", **kw):
    """compute_credit on a B×3 batch whose token scores sum to ``scores`` (all on the last token)."""
    B = scores.numel()
    ts = torch.zeros(B, 3)
    ts[:, 2] = scores
    batch = TrajectoryBatch(
        token_ids=torch.zeros(B, 3, dtype=torch.long),
        attention_mask=torch.ones(B, 3),
        action_mask=torch.ones(B, 3),
        turn_ids=torch.zeros(B, 3, dtype=torch.long),
        group_ids=ids,
        token_scores=ts,
    )
    return compute_credit(batch, CreditConfig(profile=profile, estimator=estimator, **kw))


@FAST
@given(data=grouped_scores(), norm=st.booleans(), profile=st.sampled_from(["verl", "rllm"]))
def test_grpo_is_zero_mean_per_group(data, norm, profile):
    scores, ids = data
    r = outcome_credit(scores, ids, "grpo", profile=profile, norm_adv_by_std_in_grpo=norm)
    a = r.extras["row_advantage"].double()
    scale = 1e-5 * (1 + scores.abs().max().item())
    for g in ids.unique():
        sel = ids == g
        n = int(sel.sum())
        if norm:
            # Σ_g (s − μ)/(σ + ε) = 0: check the numerator, undoing the common 1/(σ + ε) (float noise in s − μ is
            # amplified by up to 1/ε for near-tied groups, as in verl)
            sigma = r.extras["group_std"][sel][0].double()
            assert abs(float(a[sel].sum() * (sigma + 1e-6))) <= scale * n
        else:
            assert abs(float(a[sel].sum())) <= scale * n  # Dr.GRPO: exactly centred


@FAST
@given(data=grouped_scores(min_group=1), estimator=st.sampled_from(["rloo", "rloo_vectorized"]))
def test_rloo_is_leave_one_out(data, estimator):
    scores, ids = data
    r = outcome_credit(scores, ids, estimator)
    a = r.extras["row_advantage"]
    s = scores.double().tolist()
    for i, gi in enumerate(ids.tolist()):
        others = [s[j] for j, gj in enumerate(ids.tolist()) if gj == gi and j != i]
        if others:
            expected = s[i] - sum(others) / len(others)
        else:  # singleton: verl's loop keeps the raw score, rloo_vectorized gives 0
            expected = s[i] if estimator == "rloo" else 0.0
        assert math.isclose(a[i].item(), expected, abs_tol=1e-5 * (1 + max(map(abs, s)))), (i, expected)


# ---------------------------------------------------------------------------------------------- GAE limits
def reward_to_go(rewards, mask, gamma, skip_holes: bool) -> torch.Tensor:
    """G_t = r_t + γ G_next, per row in Python; next = next valid token (skip) or next column (no skip)."""
    out = torch.zeros_like(rewards)
    for i in range(rewards.shape[0]):
        G = 0.0
        for t in reversed(range(rewards.shape[1])):
            if skip_holes and not mask[i, t]:
                continue
            G = rewards[i, t].item() + gamma * G
            out[i, t] = G
    return out


def next_value(values, mask, skip_holes: bool) -> torch.Tensor:
    """V of the next valid token (skip) or of the next column (no skip); 0 past the end."""
    out = torch.zeros_like(values)
    for i in range(values.shape[0]):
        nxt = 0.0
        for t in reversed(range(values.shape[1])):
            out[i, t] = nxt
            if mask[i, t] or not skip_holes:
                nxt = values[i, t].item()
    return out


@FAST
@given(data=masked_tensors(max_T=40), gamma=gammas, skip=st.booleans())
def test_gae_lambda_one_is_reward_to_go_minus_values(data, gamma, skip):
    rewards, values, mask = data
    adv_raw, _ = gae_raw(rewards, values, mask, gamma, 1.0, skip)
    valid = mask.bool()
    G = reward_to_go(rewards, mask, gamma, skip)
    assert_close(adv_raw[valid], (G - values)[valid], atol=1e-8)
    if mask.sum() >= 2:
        _, returns = compute_gae_advantage_return(rewards, values, mask, gamma, 1.0, skip)
        assert_close(returns[valid], G[valid], atol=1e-8)


@FAST
@given(data=masked_tensors(max_T=40), gamma=gammas, skip=st.booleans())
def test_gae_lambda_zero_is_the_td_error(data, gamma, skip):
    rewards, values, mask = data
    adv_raw, delta = gae_raw(rewards, values, mask, gamma, 0.0, skip)
    td = rewards + gamma * next_value(values, mask, skip) - values
    valid = mask.bool()
    assert_close(adv_raw[valid], td[valid])
    assert_close(delta[valid], td[valid])


# ---------------------------------------------------------------------------------------------- engine == loop
@FAST
@given(data=masked_tensors(max_B=3, max_T=300), c=gammas)
def test_discounted_scan_equals_the_loop(data, c):
    x = data[0]
    assert_close(discounted_reverse_cumsum(x, c), discounted_cumsum_loop(x, c), atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("c", [0.0, 0.9, 0.999, 1.0])
def test_discounted_scan_equals_the_loop_across_two_chunk_levels(c):
    # T = 4200 > 64·64: the chunk carries themselves need a second, recursive level
    x = torch.randn(2, 4200, generator=torch.Generator().manual_seed(0), dtype=F64)
    assert_close(discounted_reverse_cumsum(x, c), discounted_cumsum_loop(x, c), atol=1e-8, rtol=1e-8)


@FAST
@given(data=masked_tensors(), gamma=gammas, lam=gammas, skip=st.booleans())
def test_gae_equals_the_loop(data, gamma, lam, skip):
    rewards, values, mask = data
    assume(mask.sum() >= 2)
    adv, ret = compute_gae_advantage_return(rewards, values, mask, gamma, lam, skip)
    adv_loop, ret_loop = gae_loop(rewards, values, mask, gamma, lam, skip)
    # every position, holes and padding included: the loop carries its state through holes exactly as the
    # engine's "next valid token" expansion does, and whitening touches every position
    assert_close(ret, ret_loop, atol=1e-8, rtol=1e-8)
    assert_close(adv, adv_loop, atol=1e-6, rtol=1e-6)


@FAST
@given(data=masked_tensors(), gamma=gammas, hole_mode=st.sampled_from(["carry", "reset"]))
def test_reinforce_pp_equals_the_loop(data, gamma, hole_mode):
    rewards, _, mask = data
    assume(mask.sum() >= 2)
    B, T = mask.shape
    inp = EstimatorInput(rewards, mask, torch.arange(B), torch.zeros(B, T, dtype=torch.long), mask)
    cfg = CreditConfig(estimator="reinforce_plus_plus", gamma=gamma, reinforce_hole_mode=hole_mode)
    out = reinforce_plus_plus(inp, cfg)
    adv_loop, ret_loop = reinforce_pp_loop(rewards, mask, gamma, hole_mode)
    assert_close(out.advantages, adv_loop, atol=1e-6, rtol=1e-6)
    # every position: at a hole the old 'reset' loop keeps the hole's own reward plus the valid run after it
    assert_close(out.returns, ret_loop, atol=1e-8, rtol=1e-8)


@FAST
@given(data=grouped_scores(min_group=1), norm=st.booleans(), ddof=st.sampled_from([0, 1]))
def test_grpo_equals_the_loop(data, norm, ddof):
    scores, ids = data
    rewards = torch.stack([scores.double(), torch.zeros_like(scores, dtype=F64)], -1)  # (B, 2)
    mask = torch.ones_like(rewards)
    mask[::3, 1] = 0  # some rows shorter
    inp = EstimatorInput(rewards, mask, ids, torch.zeros_like(ids)[:, None].expand(-1, 2), mask)
    cfg = CreditConfig(estimator="grpo", norm_adv_by_std_in_grpo=norm, std_ddof=ddof)
    adv = get_estimator("grpo").fn(inp, cfg).advantages
    adv_loop, _ = grpo_loop(rewards, mask, ids.tolist(), 1e-6, norm, ddof)
    assert_close(adv, adv_loop, atol=1e-7, rtol=1e-7)


@FAST
@given(data=grouped_scores(min_group=1), singleton=st.sampled_from(["raw", "zero"]))
def test_rloo_equals_the_loop(data, singleton):
    scores, ids = data
    rewards = scores.double()[:, None]
    a, _ = rloo_scalar(rewards.sum(-1), ids, singleton)
    adv_loop, _ = rloo_loop(rewards, torch.ones_like(rewards), [f"uid-{i}" for i in ids.tolist()], singleton)
    assert_close(a, adv_loop[:, 0], atol=1e-9, rtol=1e-9)


@FAST
@given(
    rows=st.lists(st.lists(st.floats(-2, 2), min_size=1, max_size=6), min_size=1, max_size=5),
    gamma=gammas,
)
def test_mc_returns_equal_the_loop(rows, gamma):
    K = max(len(r) for r in rows)
    padded = torch.tensor([r + [0.0] * (K - len(r)) for r in rows], dtype=F64)  # steps past the end hold 0
    expected = [r + [0.0] * (K - len(r)) for r in mc_returns_loop(rows, gamma)]
    assert_close(mc_returns(padded, gamma), torch.tensor(expected, dtype=F64), atol=1e-9, rtol=1e-9)


@FAST
@given(
    layout=layouts(max_group=4),
    seed=st.integers(0, 2**32 - 1),
    gamma=gammas,
    norm=st.booleans(),
    profile=st.sampled_from(["rllm-legacy", "rllm"]),
)
def test_per_step_mode_equals_the_loop(layout, seed, gamma, norm, profile):
    # rLLM per_step: each step scored by its MC return, grouped by (prompt, step index); a late step of a
    # longer rollout is often a singleton and keeps its raw return
    group_ids, rows = layout
    attn, act, turn = masks_from(rows)
    B, T = act.shape
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, T, generator=g) * act
    batch = TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=attn,
        action_mask=act,
        turn_ids=turn,
        group_ids=group_ids,
        token_scores=scores,
    )
    cfg = CreditConfig(
        profile=profile, estimator="grpo", stepwise_mode="per_step", stepwise_gamma=gamma, norm_adv_by_std_in_grpo=norm
    )
    r = compute_credit(batch, cfg)
    n_turns = (turn.max(-1).values + 1).tolist()
    step_rewards = [
        [float(scores[i][turn[i] == k].double().sum()) for k in range(n_turns[i])] for i in range(B)
    ]  # Σ of a step's token rewards
    returns = mc_returns_loop(step_rewards, gamma)
    adv = per_step_grpo_loop(step_rewards, group_ids, gamma, 1e-6, norm, cfg.std_ddof)
    for i in range(B):
        k = n_turns[i]
        assert_close(r.extras["step_mc_returns"][i, :k].double(), torch.tensor(returns[i], dtype=F64), atol=1e-5)
        assert_close(r.extras["step_advantage"][i, :k].double(), torch.tensor(adv[i], dtype=F64), atol=2e-4, rtol=1e-4)
        # each action token of step k carries that step's advantage
        tok = torch.tensor(adv[i], dtype=F64)[turn[i].clamp(min=0)] * act[i]
        assert_close(r.advantages[i].double(), tok, atol=2e-4, rtol=1e-4)
