"""The message graph of one verifiers trace, walked without recursion and within declared budgets.

A trace's ``nodes[k].parent`` is the index of the node it follows (None for a root); a branch is the path from a
root to a leaf (a node no other node follows), one per leaf in node order (verifiers ``graph.leaves`` /
``Trace.branches``). A file may hold any graph, so everything here is a loop over the nodes or over one branch:

* ``TraceGraph.of`` checks the parents (an index of another node, or None) and finds each node's depth by walking
  up to a node whose depth is known, so each node is walked once and a cycle is found where it closes. Then the
  number of branches and the longest branch are held against their budgets, before any node's tokens are read.
* Per-branch quantities (a node flag anywhere on the path, a sum of per-node counts, the last node with a value)
  are carried from parent to child in depth order (``down``): linear in the graph, not in the sum of path lengths.
* ``trained_branches`` chooses the branches prime-rl trains with one walk up from each leaf that stops at the
  first node an earlier leaf walked, and ``paths`` lists a kept branch's non-empty nodes only, so building the
  branches costs the graph plus the tokens they hold. ``check_tokens`` holds that total against its budget first.

Sizing of the budgets: verifiers writes one node per message, so a linear conversation of T agent turns is one
branch of about 2T + 2 nodes; prime-rl trains sequences of at most its ``seq_len`` (tens of thousands of tokens,
128k at most in its configs), one branch per trace unless an agent forks (sub-agents, resampled turns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.io.reading.budgets import declare
from engine.io.reading.coerce import type_name
from engine.io.reading.problems import RecordError

# A fork per sampled turn of a 4,096-turn agent run; real traces have one branch, forking agents a handful.
MAX_BRANCHES = declare(
    "verifiers_trace_branches",
    "CREDITLENS_MAX_TRACE_BRANCHES",
    4_096,
    "branches",
    "trace",
    "a verifiers trace's leaves: each is one trajectory (100,000 one-token leaves took 20 s and ran out of memory)",
)
# 10,000 agent turns of two messages each; agent runs rarely pass a few hundred turns.
MAX_PATH_NODES = declare(
    "verifiers_trace_path_nodes",
    "CREDITLENS_MAX_TRACE_PATH_NODES",
    20_000,
    "nodes",
    "branch",
    "messages on one root-to-leaf path of a verifiers trace",
)
# A 128k-token context branched 128 ways (about 2.5 GiB of per-token arrays while the rows are built); one branch
# fits in a 16 MiB record with room to spare (a token id takes at least 2 bytes of JSON).
MAX_BRANCH_TOKENS = declare(
    "verifiers_trace_branch_tokens",
    "CREDITLENS_MAX_TRACE_BRANCH_TOKENS",
    16_000_000,
    "tokens",
    "trace",
    "tokens of a verifiers trace's trained branches together, each branch holding its shared prefix again",
)


def _parent(raw: object, k: int, n: int, f: str) -> int:
    """Node ``k``'s parent index, -1 for a root; ``RecordError`` for anything but another node's index or None."""
    if not isinstance(raw, Mapping):
        raise RecordError(f"{f}.nodes[{k}]", f"expected an object, got {type_name(raw)}")
    p = raw.get("parent")
    if p is None:
        return -1
    if type(p) is int and 0 <= p < n and p != k:
        return p
    what = "the node itself" if type(p) is int and p == k else f"not the index of one of the trace's {n:,} nodes"
    raise RecordError(f"{f}.nodes[{k}].parent", f"{p!r}: {what}")


@dataclass(frozen=True)
class TraceGraph:
    """A trace's checked message graph. ``parent`` [N] (-1 for a root), ``depth`` [N] (nodes from the root to the
    node, itself included), ``order`` [N] (the nodes by depth: every parent before its children), ``leaves`` [L]
    (in node order: one branch each)."""

    parent: np.ndarray
    depth: np.ndarray
    order: np.ndarray
    leaves: np.ndarray
    field: str

    @classmethod
    def of(cls, raw_nodes: Sequence, f: str) -> TraceGraph:
        """Check ``raw_nodes``' parents, find the depths (one walk up per node, stopping at a known depth) and
        hold the branches against ``MAX_BRANCHES`` and ``MAX_PATH_NODES``; ``RecordError`` naming the node."""
        n = len(raw_nodes)
        parent = np.array([_parent(raw, k, n, f) for k, raw in enumerate(raw_nodes)], dtype=np.int64)
        has_child = np.zeros(n, dtype=bool)
        has_child[parent[parent >= 0]] = True
        leaves = np.flatnonzero(~has_child)
        if len(leaves) > MAX_BRANCHES.value():
            raise RecordError(f"{f}.nodes", MAX_BRANCHES.over(len(leaves), "the node graph"))
        up_of = parent.tolist()
        depth = [0] * n  # 0: not known yet
        walk = [-1] * n  # the walk (its start node) that passed a node of unknown depth
        for k in range(n):
            up, m = [], k
            while m >= 0 and depth[m] == 0:
                if walk[m] == k:
                    why = f"the parent chain from node {k} returns to node {m}: a cycle"
                    raise RecordError(f"{f}.nodes[{m}].parent", why)
                walk[m] = k
                up.append(m)
                m = up_of[m]
            d = 0 if m < 0 else depth[m]
            for node in reversed(up):
                d += 1
                depth[node] = d
        depth = np.asarray(depth, dtype=np.int64)
        if n:
            deepest = int(leaves[np.argmax(depth[leaves])])
            if depth[deepest] > MAX_PATH_NODES.value():
                what = f"the branch from its root to node {deepest}"
                raise RecordError(f"{f}.nodes[{deepest}]", MAX_PATH_NODES.over(int(depth[deepest]), what))
        return cls(parent, depth, np.argsort(depth, kind="stable"), leaves, f)

    def down(self, own: Sequence, combine: Callable, root: object) -> list:
        """``out[k] = combine(out[parent[k]], own[k])`` (``root`` in place of a root's missing parent value), in
        depth order: a per-branch quantity for every node at once, e.g. ``combine = operator.add`` sums ``own``
        over each path."""
        out: list = [None] * len(self.parent)
        parent = self.parent.tolist()
        for k in self.order.tolist():
            p = parent[k]
            out[k] = combine(root if p < 0 else out[p], own[k])
        return out

    def trained_branches(self, sampled: Sequence[bool], trainable: Sequence[bool]) -> tuple[list[int], list[int]]:
        """prime-rl's ``iter_trainable_branches``: the leaves whose branch holds a trainable node (one with a True
        mask entry) not trained by an earlier kept branch, and for each node the index of the kept branch that
        trains it first (-1: none). A sampled node is trained once, by the first kept branch through it; a
        trainable node that is not sampled keeps every branch through it.

        One walk up from each leaf, stopping at a node an earlier walk passed: such a node and all above it were
        on an earlier branch, so their sampled trainable nodes are trained already (the earlier branch was kept
        if it reached one first). Each node is walked once.
        """
        n = len(self.parent)
        parent = self.parent.tolist()
        unsampled = self.down([t and not s for s, t in zip(sampled, trainable, strict=True)], bool.__or__, False)
        walked = [False] * n
        trained_by = [-1] * n
        kept: list[int] = []
        for leaf in self.leaves.tolist():
            new, m = [], leaf
            while m >= 0 and not walked[m]:
                walked[m] = True
                if sampled[m] and trainable[m]:
                    new.append(m)
                m = parent[m]
            if new or unsampled[leaf]:
                for node in new:
                    trained_by[node] = len(kept)
                kept.append(leaf)
        return kept, trained_by

    def check_tokens(self, lengths: Sequence[int], leaves: Sequence[int]) -> None:
        """Hold the tokens of the branches to ``leaves`` (each with its whole path) against ``MAX_BRANCH_TOKENS``."""
        on_path = self.down(lengths, int.__add__, 0)
        total = sum(on_path[leaf] for leaf in leaves)
        if total > MAX_BRANCH_TOKENS.value():
            what = f"the {len(leaves):,} trained branches of the node graph"
            raise RecordError(f"{self.field}.nodes", MAX_BRANCH_TOKENS.over(total, what))

    def paths(self, leaves: Sequence[int], keep: Sequence[bool]) -> Iterator[list[int]]:
        """Each root-to-leaf path's nodes for which ``keep`` is true (the others hold nothing a row needs), found by
        jumping from a node to its nearest kept ancestor: the cost is the kept nodes, not the path's length."""
        nearest = self.down([k if want else -1 for k, want in enumerate(keep)], _nearer, -1)
        parent = self.parent.tolist()
        for leaf in leaves:
            nodes, m = [], nearest[leaf]
            while m >= 0:
                nodes.append(m)
                m = -1 if parent[m] < 0 else nearest[parent[m]]
            yield nodes[::-1]


def _nearer(above: int, own: int) -> int:
    return own if own >= 0 else above
