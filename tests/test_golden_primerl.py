"""Golden: prime-rl's orchestrator algorithms (``primerl_advantages.json``), run unmodified by
``references/prime_rl/generate.py`` from a checkout at 559b4477.

Each case is one rollout group of verifiers episodes; every trace the algorithm scores becomes one row of a batch
(its nodes' tokens in order, the sampled ones as the action mask, the reward on the last sampled token), and
``compute_credit`` under profile ``prime-rl`` must give every sampled token the advantage prime-rl assigned it
(CONVENTIONS.md §13). Traces prime-rl skips (errored, an untrainable agent, no sampled token) are not rows, as
the ``verifiers_traces`` loader skips them. The cases CreditLens does not reproduce are named in ``NOT_REPRODUCED``,
with the reason, so a new case is never skipped silently.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import assert_golden, load_golden

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.batch import TRACE_LENGTHS
from engine.profiles import prime_rl_algorithm

PRIMERL = "primerl_advantages.json"
CASES = load_golden(PRIMERL)["cases"]
# Why a case is not reproduced (CONVENTIONS.md §13): the inputs it needs are not in a batch.
NOT_REPRODUCED = {
    "rae": "RAE's baseline is a running average carried over from earlier training steps",
    "routing": "assign_advantages' per-token lists and their checks are the loader's business",
}


def _scored(trace: dict) -> bool:
    """The traces prime-rl's algorithms score (``iter_trainable_traces``): no error, a trainable agent, a sampled
    token."""
    return trace["trainable"] and not trace["has_error"] and any(any(n["mask"]) for n in trace["nodes"])


def _batch(case: dict) -> tuple[TrajectoryBatch, list[torch.Tensor], list[dict]]:
    """The scored traces as rows: tokens = the nodes' tokens, action mask = sampled, reward on the last sampled
    token, groups = the case's rollout group (hierarchical_grpo: its (agent, episode) keys), trace lengths = the
    trace's usage counts and turns. Also each row's expected advantage per sampled token, and the outputs of the
    rows."""
    scoped = set(case["params"]["config"].get("episode_agents", ()))
    rows, keys, expected, outputs = [], [], [], []
    for episode in case["inputs"]["episodes"]:
        for trace in episode["traces"]:
            out = next(o for o in case["outputs"]["traces"] if o["trace"] == trace["id"])
            if not _scored(trace):
                assert all(a is None for a in out["node_advantages"]), trace["id"]
                continue
            rows.append([m for node in trace["nodes"] for m in node["mask"]])
            key = (trace["agent"], episode["id"] if trace["agent"] in scoped else None)
            keys.append(key if case["params"]["algorithm"] == "hierarchical_grpo" else None)
            expected.append(torch.tensor([a for adv in out["node_advantages"] if adv is not None for a in adv]))
            outputs.append(out)
    T = max(len(r) for r in rows)
    action = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        action[i, : len(r)] = torch.tensor(r, dtype=torch.float32)
    attention = torch.zeros_like(action)
    for i, r in enumerate(rows):
        attention[i, : len(r)] = 1.0
    scores = torch.zeros_like(action)
    last = (action * torch.arange(T)).argmax(-1)
    scored = [t for e in case["inputs"]["episodes"] for t in e["traces"] if _scored(t)]
    rewards = [t["reward"] for t in scored]
    scores[torch.arange(len(rows)), last] = torch.tensor(rewards, dtype=torch.float32)
    group_of = {k: g for g, k in enumerate(dict.fromkeys(keys))}
    batch = TrajectoryBatch.from_tensors(
        token_level_scores=scores,
        response_mask=action,
        attention_mask=attention,
        index=torch.tensor([group_of[k] for k in keys]),
        trace_lengths=torch.tensor([[t[k] for k in TRACE_LENGTHS] for t in scored]),
    )
    return batch, expected, outputs


def _kind(case: dict) -> str:
    """The case's family: its name's prefix (grpo, grpo_length_penalty, max_rl, hierarchical_grpo, rae, routing)."""
    return case["name"].split("/")[0]


REPRODUCED = [c for c in CASES if _kind(c) not in NOT_REPRODUCED]


def test_every_case_is_reproduced_or_named() -> None:
    kinds = {_kind(c) for c in CASES}
    assert kinds - set(NOT_REPRODUCED) == {"grpo", "grpo_length_penalty", "max_rl", "hierarchical_grpo"}
    assert set(NOT_REPRODUCED) <= kinds
    assert len(REPRODUCED) == 23 and len(CASES) == 28
    assert load_golden(PRIMERL)["reference"]["commit"] == "559b44772e471d1538537b8805cc77f3824a5e64"


def _config(case: dict, profile: str = "prime-rl") -> CreditConfig:
    params = case["params"]
    fields = prime_rl_algorithm(params["algorithm"], params["config"].get("length_penalty"))
    return CreditConfig(profile=profile, placement="as_given", **fields)


@pytest.mark.parametrize("case", REPRODUCED, ids=[c["name"] for c in REPRODUCED])
def test_compute_credit_under_the_prime_rl_profile(case: dict) -> None:
    batch, expected, _ = _batch(case)
    res = compute_credit(batch, _config(case), device="cpu")
    for i, exp in enumerate(expected):
        got = res.advantages[i][batch.action_mask[i].bool()]
        assert_golden(got, exp, what=f"{case['name']} row {i}")


@pytest.mark.parametrize("case", REPRODUCED, ids=[c["name"] for c in REPRODUCED])
def test_zero_advantage_tokens_leave_the_loss(case: dict) -> None:
    """filter_zero_advantages (prime-rl's default): a sampled token whose advantage is exactly 0 is out of the loss
    mask and of the token-mean denominator; the others share the weight."""
    batch, _, _ = _batch(case)
    res = compute_credit(batch, _config(case), device="cpu")
    act = batch.action_mask.bool()
    nonzero = act & (res.advantages != 0)
    assert torch.equal(res.loss_mask.bool(), nonzero)
    n = int(nonzero.sum())
    expected = torch.where(nonzero, 1.0 / max(n, 1), 0.0)
    torch.testing.assert_close(res.agg_weights, expected)


def test_the_verl_profile_differs_where_prime_rl_does() -> None:
    """Under verl a group of one keeps its raw score (GRPO and MaxRL): the cases with one fail there. (MaxRL's
    μ ≤ 0 rule has no case here whose rewards are not all 0: tests/test_primerl_profile.py computes it by hand.)"""
    differ = []
    for case in REPRODUCED:
        batch, expected, _ = _batch(case)
        res = compute_credit(batch, _config(case, profile="verl"), device="cpu")
        got = torch.cat([res.advantages[i][batch.action_mask[i].bool()] for i in range(len(expected))])
        if not torch.allclose(got, torch.cat(expected), atol=1e-5, rtol=1e-5):
            differ.append(case["name"])
    assert differ == [
        "grpo/singleton",
        "max_rl/singleton",
        "hierarchical_grpo/proposer_solver",
        "hierarchical_grpo/other_roles_and_skipped",
    ]
