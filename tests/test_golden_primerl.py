"""Golden: prime-rl's orchestrator algorithms (``primerl_advantages.json``), run unmodified by
``references/prime_rl/generate.py`` from a checkout at 559b4477.

Each case is one rollout group of verifiers episodes; every trace the algorithm scores becomes one row of a batch
(its nodes' tokens in order, the sampled ones as the action mask, the reward on the last sampled token), and
``compute_credit`` under profile ``prime-rl`` must give every sampled token the advantage prime-rl assigned it
(docs/conventions/prime-rl.md §13). Traces prime-rl skips (errored, an untrainable agent, no sampled token) are not
rows, as the ``verifiers_traces`` loader skips them. ``assign_advantages``' own cases (``routing``) are the loader's
side: the per-token lists prime-rl stores on a trace's nodes, written as prime-rl writes them, must load as the values
given, one per sampled token in order, and the lists it refuses must be refused by the loader too. The cases CreditLens
does not reproduce are named in ``NOT_REPRODUCED``, with the reason, so a new case is never skipped silently.
"""

from __future__ import annotations

import json

import pytest
import torch
from golden_utils import assert_golden, load_golden

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.batch import TRACE_LENGTHS
from engine.io import LoadResult, load_run
from engine.profiles import prime_rl_algorithm

PRIMERL = "primerl_advantages.json"
CASES = load_golden(PRIMERL)["cases"]
# Why a case is not reproduced (docs/conventions/prime-rl.md §13): the inputs it needs are not in a batch.
NOT_REPRODUCED = {
    "rae": "RAE's baseline is a per-(env, agent) running average over every group the orchestrator scored since it "
    "started, in scoring order; prime-rl neither saves nor logs it, and its trace files do not give that order",
}
LOADER = {"routing"}  # assign_advantages' per-token lists: checked through the verifiers_traces loader


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


REPRODUCED = [c for c in CASES if _kind(c) not in NOT_REPRODUCED and _kind(c) not in LOADER]
ROUTING = [c for c in CASES if _kind(c) in LOADER]


def test_every_case_is_reproduced_or_named() -> None:
    kinds = {_kind(c) for c in CASES}
    assert kinds - set(NOT_REPRODUCED) - LOADER == {"grpo", "grpo_length_penalty", "max_rl", "hierarchical_grpo"}
    assert set(NOT_REPRODUCED) <= kinds and LOADER <= kinds
    assert len(REPRODUCED) == 23 and len(ROUTING) == 3 and len(CASES) == 28
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


def _record(case: dict) -> tuple[dict, dict]:
    """The case's episode as prime-rl writes it (``Episode.to_record()``): a linear message graph with made-up token
    ids, the case's masks, and the node lists prime-rl's assign_advantages stored (none where it raised); also the
    trace."""
    (episode,) = case["inputs"]["episodes"]
    (trace,) = episode["traces"]
    stored = case["outputs"].get("traces", [{"node_advantages": [None] * len(trace["nodes"])}])[0]["node_advantages"]
    nodes = []
    for k, (node, adv) in enumerate(zip(trace["nodes"], stored, strict=True)):
        raw = {"message": {"role": node["role"]}, "sampled": node["sampled"], "mask": node["mask"]}
        raw |= {"token_ids": list(range(100 + 10 * k, 100 + 10 * k + node["num_tokens"]))}
        nodes.append(raw | ({"parent": k - 1} if k else {}) | ({"advantages": adv} if adv is not None else {}))
    record = {
        "id": episode["id"],
        "task": {"key": "k"},
        "group": {"id": "g"},
        "traces": [
            {
                "id": trace["id"],
                "agent": {"name": trace["agent"], "trainable": trace["trainable"]},
                "ok": not trace["has_error"],
                "rewards": {"reward": {"score": trace["reward"]}},
                "nodes": nodes,
            }
        ],
    }
    return record, trace


def _load(record: dict, tmp_path) -> LoadResult:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return load_run(path, fmt="verifiers_traces")


@pytest.mark.parametrize("case", ROUTING, ids=[c["name"] for c in ROUTING])
def test_assign_advantages_lists_load_as_prime_rl_stored_them(case: dict, tmp_path) -> None:
    """The values prime-rl's assign_advantages spreads over a trace's sampled tokens (compact order across nodes,
    scaffold and tool tokens skipped) load as the row's logged advantages on its action tokens, in order. Where it
    raises, no node list can hold the values; the loader refuses the same misalignment in a record: a node whose mask
    and token ids differ in length, or whose list does not have one value per sampled token (the values cut per node
    in compact order, as assign_advantages would)."""
    record, trace = _record(case)
    values = case["inputs"]["values"]
    if "error" not in case["outputs"]:
        res = _load(record, tmp_path)
        assert res.problems == [] and len(res.run.trajectories) == 1
        row = res.run.trajectories[0]
        action = res.run.to_batch().action_mask[0, : row.num_tokens].bool().tolist()
        logged = [a for a, m in zip(row.metadata["logged_advantages"], action, strict=True) if m]
        assert_golden(torch.tensor(logged), torch.tensor(values), what=case["name"])
        return
    nodes = record["traces"][0]["nodes"]
    if case["outputs"]["error"].startswith("ValueError: node masks must align"):
        (k,) = [k for k, n in enumerate(trace["nodes"]) if len(n["mask"]) != n["num_tokens"]]
        expected = f"nodes[{k}].mask: {len(nodes[k]['mask'])} entries for {len(nodes[k]['token_ids'])} token ids"
    else:
        assert case["outputs"]["error"].startswith("ValueError: advantages must align")
        offset, short = 0, []
        for k, node in enumerate(nodes):
            if n := sum(node["mask"]):
                node["advantages"], offset = values[offset : offset + n], offset + n
                short += [(k, len(node["advantages"]), n)] if len(node["advantages"]) != n else []
        k, got, n = short[0]
        expected = f"nodes[{k}].advantages: {got} values for {n} sampled"
    res = _load(record, tmp_path)
    assert res.run is None or res.run.trajectories == []
    assert any(expected in str(p) for p in res.problems), [str(p) for p in res.problems]
