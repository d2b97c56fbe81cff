"""Hostile structure, loader part: verifiers / prime-rl trace graphs and the text splitting of SkyRL eval and
KG-R1 evaluator rows.

A trace graph is walked without recursion and checked before its branches are built: a chain of 10,000 nodes
loads, a root with 100,000 leaves is refused against its branch budget, a cycle or a bad parent is a problem
naming the node; within the budgets the rows are what a naive per-branch loop gives. Text splitting is linear:
1 MB of spaces, of unclosed ``<|im_start|>`` headers, of unclosed ``<information>`` tags or of ``user`` lines
never answered by ``assistant`` (verl's rollout dump) splits and loads at about the per-byte cost of 1 KB of the
same (these took minutes to hours when the splitting backtracked).

Every load runs under a SIGALRM watchdog, which turns a hang into a failure; speed is asserted as ratios.
"""

from __future__ import annotations

import json
import random
import statistics
import time

import numpy as np
import orjson
import pytest
from test_io_support import time_limit
from writers import prime_rl
from writers.prime_rl import Rollout, Turn

from engine.io import load_run
from engine.io.adapters.skyrl_eval import split_response
from engine.io.adapters.verifiers_graph import MAX_BRANCH_TOKENS, MAX_BRANCHES, MAX_PATH_NODES
from engine.io.adapters.verl_rollout import chat_blocks, split_output
from engine.io.text.tags import split_tagged
from engine.io.text.tokenize import get_tokenizer

WATCHDOG_S = 120  # generous: it only turns a hang into a failure


# ---- trace graphs ------------------------------------------------------------------------------------------------


def node(parent, ids, mask, sampled=None, role=None, **extra) -> dict:
    sampled = any(mask) if sampled is None else sampled
    role = role or ("assistant" if sampled else "user")
    out = {"parent": parent, "message": {"role": role}, "sampled": sampled, "token_ids": ids, "mask": mask}
    return out | {"logprobs": [-0.5] * sum(mask)} | extra


def write_trace(tmp_path, nodes: list[dict], name: str = "traces.jsonl"):
    episode = {
        "id": "ep",
        "task": {"key": "k"},
        "group": {"id": "g"},
        "ok": True,
        "traces": [{"id": "t", "ok": True, "nodes": nodes, "rewards": {"r": {"score": 1.0, "weight": 1.0}}}],
    }
    path = tmp_path / name
    path.write_bytes(orjson.dumps(episode) + b"\n")
    return path


def load(path):
    with time_limit(WATCHDOG_S):
        return load_run(path)


def problems(res) -> list[str]:
    return [str(p) for p in res.problems]


def test_chain_of_10000_nodes_loads(tmp_path, monkeypatch):
    """A chain of 9,999 context nodes and one sampled leaf (the hang) is one row with every token in order; with
    the path budget below its length it is refused, naming the leaf and the count."""
    nodes = [node(None, [1, 2], [False, False])] + [node(k, [3 + k % 5], [False]) for k in range(9_998)]
    nodes.append(node(len(nodes) - 1, [7, 8], [True, True]))
    path = write_trace(tmp_path, nodes)
    res = load(path)
    assert problems(res) == []
    (row,) = res.run.trajectories
    assert row.prompt_token_ids.tolist() == [1, 2] + [3 + k % 5 for k in range(9_998)]
    assert [(s.role, s.token_ids.tolist(), s.log_probs.tolist()) for s in row.segments] == [
        ("model", [7, 8], [-0.5, -0.5])
    ]

    monkeypatch.setenv(MAX_PATH_NODES.env, "5000")
    res = load(path)
    assert res.run is None or res.run.trajectories == []
    assert problems(res) == [
        f"{path}:1: traces[0].nodes[9999]: the branch from its root to node 9999 holds 10,000 nodes, over the 5,000 "
        f"allowed per branch (verifiers_trace_path_nodes; raise it with {MAX_PATH_NODES.env}); refused before it "
        "is built"
    ]


def test_root_with_100000_leaves_is_refused_at_the_default_budget(tmp_path):
    """100,000 one-token sampled leaves under one root (20 s and a MemoryError, one copied path per leaf) are
    counted before a branch is built and refused against the default branch budget."""
    assert MAX_BRANCHES.value() == MAX_BRANCHES.default == 4_096
    nodes = [node(None, [1, 2], [False, False])] + [node(0, [5], [True]) for _ in range(100_000)]
    path = write_trace(tmp_path, nodes)
    res = load(path)
    assert res.run is None or res.run.trajectories == []
    assert problems(res) == [
        f"{path}:1: traces[0].nodes: the node graph holds 100,000 branches, over the 4,096 allowed per trace "
        f"(verifiers_trace_branches; raise it with {MAX_BRANCHES.env}); refused before it is built"
    ]


def test_leaves_within_the_budget_share_the_root(tmp_path, monkeypatch):
    """Under a raised branch budget 5,000 leaves are 5,000 rows, each with the root's 300 tokens as its prompt;
    with the token budget below what the branches hold together, the trace is refused with the count."""
    monkeypatch.setenv(MAX_BRANCHES.env, "5000")
    root = list(range(300))
    nodes = [node(None, root, [False] * 300)] + [node(0, [1000 + k], [True]) for k in range(5_000)]
    path = write_trace(tmp_path, nodes)
    res = load(path)
    assert problems(res) == [
        f"{path}:1: traces[0]: 5000 branches loaded as 5000 trajectories (one per prime-rl training sample); "
        "prime-rl's group baseline counts the trace once"
    ]
    rows = res.run.trajectories
    assert [r.id for r in rows] == [f"t/branch-{k}" for k in range(5_000)]
    assert all(r.prompt_token_ids.tolist() == root for r in rows)
    assert [r.segments[0].token_ids.tolist() for r in rows] == [[1000 + k] for k in range(5_000)]

    monkeypatch.setenv(MAX_BRANCH_TOKENS.env, "1000000")
    res = load(path)
    assert problems(res) == [
        f"{path}:1: traces[0].nodes: the 5,000 trained branches of the node graph holds 1,505,000 tokens, over "
        f"the 1,000,000 allowed per trace (verifiers_trace_branch_tokens; raise it with {MAX_BRANCH_TOKENS.env}); "
        "refused before it is built"
    ]


@pytest.mark.parametrize(
    "parents, field, reason",
    [
        ([None, 2, 1], "nodes[1].parent", "the parent chain from node 1 returns to node 1: a cycle"),
        ([1, 2, 0], "nodes[0].parent", "the parent chain from node 0 returns to node 0: a cycle"),
        ([None, 1], "nodes[1].parent", "1: the node itself"),
        ([None, 5], "nodes[1].parent", "5: not the index of one of the trace's 2 nodes"),
        ([None, -1], "nodes[1].parent", "-1: not the index of one of the trace's 2 nodes"),
        ([None, True], "nodes[1].parent", "True: not the index of one of the trace's 2 nodes"),
        ([None, "0"], "nodes[1].parent", "'0': not the index of one of the trace's 2 nodes"),
        ([None, 0.0], "nodes[1].parent", "0.0: not the index of one of the trace's 2 nodes"),
    ],
)
def test_bad_parents_are_problems(tmp_path, parents, field, reason):
    """A cycle, a node its own parent, a missing parent index or one that is no index: a problem naming the node,
    never a hang."""
    nodes = [node(p, [k], [k > 0]) for k, p in enumerate(parents)]
    path = write_trace(tmp_path, nodes)
    res = load(path)
    assert res.run is None or res.run.trajectories == []
    assert problems(res) == [f"{path}:1: traces[0].{field}: {reason}"]


def test_cycle_of_10000_nodes_and_a_tail_is_a_problem(tmp_path):
    """A 10,000-node ring with a chain of 10,000 nodes hanging from it: found in one walk, not a hang."""
    ring = [node((k + 1) % 10_000, [1], [False]) for k in range(10_000)]
    tail = [node(9_999 + k, [2], [False]) for k in range(10_000)]  # node 10,000 + k follows node 9,999 + k
    tail[-1] = node(19_998, [3], [True])
    path = write_trace(tmp_path, ring + tail)
    res = load(path)
    assert problems(res) == [
        f"{path}:1: traces[0].nodes[0].parent: the parent chain from node 0 returns to node 0: a cycle"
    ]


def test_a_node_not_an_object_is_named(tmp_path):
    path = write_trace(tmp_path, [node(None, [1], [True]), [0]])
    assert problems(load(path)) == [f"{path}:1: traces[0].nodes[1]: expected an object, got list"]


def naive_rows(nodes: list[dict]) -> list[tuple[list[int], list[int], list[float]]]:
    """The rows of a trace as the plain per-branch loop makes them: each leaf's path copied whole, a sampled node
    trained once by the first branch through it. ``(ids, action mask, log-probs)`` per kept branch."""
    has_child = {n["parent"] for n in nodes if n["parent"] is not None}
    trained: set[int] = set()
    rows = []
    for leaf in (k for k in range(len(nodes)) if k not in has_child):
        path, k = [], leaf
        while k is not None:
            path.insert(0, k)
            k = nodes[k]["parent"]
        if not any(any(nodes[k]["mask"]) and k not in trained for k in path):
            continue
        ids, mask, lps = [], [], []
        for k in path:
            n = nodes[k]
            shared = n["sampled"] and k in trained
            lp = iter(n["logprobs"])
            for i, m in zip(n["token_ids"], n["mask"], strict=True):
                ids.append(i)
                mask.append(int(m and not shared))
                value = next(lp) if m else 0.0
                lps.append(value if m and not shared else 0.0)
        trained |= {k for k in path if nodes[k]["sampled"] and any(nodes[k]["mask"])}
        rows.append((ids, mask, lps))
    return rows


def loaded_rows(res) -> list[tuple[list[int], list[int], list[float]]]:
    rows = []
    for t in res.run.trajectories:
        ids, mask, lps = t.prompt_token_ids.tolist(), [0] * len(t.prompt_token_ids), [0.0] * len(t.prompt_token_ids)
        for s in t.segments:
            ids += s.token_ids.tolist()
            mask += [int(s.role == "model")] * len(s.token_ids)
            lps += s.log_probs.tolist() if s.role == "model" else [0.0] * len(s.token_ids)
        rows.append((ids, mask, lps))
    return rows


def random_nodes(rng: random.Random) -> list[dict]:
    nodes = []
    for k in range(rng.randint(2, 14)):
        parent = None if k == 0 or rng.random() < 0.1 else rng.randrange(k)
        sampled = rng.random() < 0.5
        length = rng.choice([0, 1, 2, 3])
        mask = [sampled and rng.random() < 0.7 for _ in range(length)]
        ids = [rng.randrange(1, 200) for _ in range(length)]
        nodes.append(node(parent, ids, mask, sampled=sampled, logprobs=[-round(rng.random(), 3) for _ in mask if _]))
    return nodes


def test_trace_rows_equal_the_naive_per_branch_loop(tmp_path):
    """On 300 random forests (forks, several roots, empty nodes, sampled nodes shared by branches) the rows are
    exactly those of the naive loop: same tokens, action masks and log-probs, in the same order."""
    rng = random.Random(7)
    checked = 0
    for case in range(300):
        nodes = random_nodes(rng)
        expected = naive_rows(nodes)
        res = load(write_trace(tmp_path, nodes, f"t{case}.jsonl"))
        if not expected:
            assert any("no sampled token in any branch" in p for p in problems(res))
            continue
        got = loaded_rows(res)
        assert [(i, m) for i, m, _ in got] == [(i, m) for i, m, _ in expected], nodes
        for (_, _, a), (_, _, b) in zip(got, expected, strict=True):
            assert np.allclose(a, b, atol=1e-6), nodes
        checked += 1
    assert checked > 150


def test_realistic_traces_load_as_the_writer_wrote_them(tmp_path):
    """Traces from the prime-rl writer mimic (system, user, turns with tool results, a length-limited last turn)
    load with the writer's exact prompt ids, response ids, action masks and log-probs."""
    groups = {
        f"g{i}": [
            Rollout(
                "sys",
                f"question {i}.{j}",
                [Turn("let me look " * j, tool=f"result {j}" if j % 2 else None), Turn("done", length_limited=j == 2)],
                {"a": (float(j), 0.5), "b": None},
            )
            for j in range(4)
        ]
        for i in range(3)
    }
    path, truths = prime_rl.write_step(str(tmp_path), 1, groups)
    rows = loaded_rows(load(path))
    assert len(rows) == len(truths) == 12
    for (ids, mask, lps), truth in zip(rows, truths, strict=True):
        n = len(truth.prompt_ids)
        assert ids == truth.prompt_ids + truth.response_ids
        assert mask[n:] == truth.action_mask and not any(mask[:n])
        assert np.allclose(lps[n:], truth.log_probs, atol=1e-6)


# ---- text splitting ----------------------------------------------------------------------------------------------

HEADER = "\n<|im_start|>user\n"
HOSTILE = {
    "spaces": lambda n: " " * (n - 1) + "x",
    "unclosed headers": lambda n: "a" + HEADER * ((n - 1) // len(HEADER)),
    "unclosed tags": lambda n: "<information>" * (n // len("<information>")),
    "spaces then a tag": lambda n: " \n" * ((n - 15) // 2) + "x<information>",
    "user lines": lambda n: "\nuser\n" * (n // 6),
}
SMALL, BIG = 1_000, 1_000_000


def seconds(fn, arg, repeat: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the seconds one ``fn(arg)`` takes, each round timing ``repeat`` calls."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn(arg)
        times.append((time.perf_counter() - start) / repeat)
    return statistics.median(times)


@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize(
    "split",
    [split_tagged, split_response, split_output],
    ids=["split_tagged", "skyrl_split_response", "verl_split_output"],
)
def test_splitting_is_linear_in_the_text(split, kind):
    """Splitting 1 MB costs at most 10x per byte what 1 KB does (measured: under 1x, since a split has a fixed
    cost; a quadratic split is about 1,000x here)."""
    make = HOSTILE[kind]
    with time_limit(WATCHDOG_S):
        small = seconds(split, make(SMALL), 2_000) / SMALL
        big = seconds(split, make(BIG), 2) / BIG
    assert big / small < 10, f"{kind}: {big / small:.1f}x the per-byte time of 1 KB"


def test_split_pieces_are_the_text():
    """The segments of each hostile text are the text, cut where the blocks are."""
    for make in HOSTILE.values():
        text = make(SMALL)
        for split in (split_tagged, split_response):
            assert "".join(s.text for s in split(text)) == text
    assert [s.role for s in split_tagged(HOSTILE["spaces then a tag"](SMALL))] == ["model", "tool"]
    assert [s.role for s in split_response("a" + HEADER + "obs<|im_end|>" + HEADER * 3)] == ["model", "user", "model"]


def test_verl_chat_blocks_are_the_regular_expressions_spans():
    """``chat_blocks`` (a forward scan) finds the spans the regular expression it replaced found, on 20,000 random
    texts made of the pieces that matter (it searched to the end of the text from every ``user``)."""
    import re

    chat_block = re.compile(r"(\n?)user(\n.*?)\nassistant\n", re.DOTALL)
    rng = random.Random(0)
    pieces = ["\n", "user", "assistant", "x", " ", "user\n", "\nassistant\n", "<tool_response>"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        want = [(m.start(), m.end(), m.group(1), m.group(2)) for m in chat_block.finditer(text)]
        assert list(chat_blocks(text)) == want, text


def skyrl_row(response: str) -> dict:
    prompt = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
    return {
        "input_prompt": prompt,
        "output_response": response,
        "score": 1.0,
        "stop_reason": "stop",
        "env_class": "env",
        "env_extras": {},
        "data_source": "d",
    }


def kgr1_row(response: str) -> dict:
    meta = {"response_length": 1, "prompt_length": 1}
    return {
        "uid": "test_batch000_sample000",
        "dataset": "d",
        "batch_idx": 0,
        "sample_idx": 0,
        "prompt": "question" + response,
        "response": response,
        "score": 1.0,
        "metrics": {},
        "metadata": meta,
    }


@pytest.mark.parametrize("kind", ["spaces", "unclosed headers", "unclosed tags"])
@pytest.mark.parametrize("row", [skyrl_row, kgr1_row], ids=["skyrl_eval", "kgr1_eval"])
def test_loading_hostile_text_is_linear(tmp_path, row, kind):
    """A whole load (detection, splitting, tokenizing) of a 1 MB response costs at most 30x per byte what a 1 KB
    one does (measured: about 3x; a quadratic path is about 1,000x), and keeps every character."""
    get_tokenizer()  # built once, outside the timing
    paths = {}
    for n in (SMALL, BIG):
        paths[n] = tmp_path / f"{n}.jsonl"
        paths[n].write_text(json.dumps(row(HOSTILE[kind](n))) + "\n")
    with time_limit(WATCHDOG_S):
        small = seconds(load_run, paths[SMALL], 20) / paths[SMALL].stat().st_size
        start = time.perf_counter()
        res = load_run(paths[BIG])
        big = (time.perf_counter() - start) / paths[BIG].stat().st_size
    (traj,) = res.run.trajectories
    assert "".join(s.text for s in traj.segments) == HOSTILE[kind](BIG)
    assert big / small < 30, f"{kind}: {big / small:.1f}x the per-byte time of 1 KB"
