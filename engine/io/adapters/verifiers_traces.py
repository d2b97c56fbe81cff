"""Adapter ``verifiers_traces``: verifiers v1 episodes, as prime-rl logs them (``rollouts/step_N/{train,eval}/
{all,effective}/traces.jsonl``) and ``vf-eval`` writes them (``<output_dir>/traces.jsonl``).

Writer: prime-rl ``FileMonitor.log_episodes`` (``src/prime_rl/monitors/file.py``, commit ``559b4477``) appends
``orjson.dumps(episode.to_record())`` per episode; ``Episode.to_record`` (PrimeIntellect-ai/verifiers
``verifiers/v1/episode.py``, commit ``a60a606e``) is ``model_dump(mode="json", exclude_none=True)`` without the
nodes' raw tensors. One line = one episode: ``id``, ``task`` (``key``, ``hash``), ``group.id``, ``ok``,
``errors``, ``traces``. A trace is a message graph: ``nodes[k]`` = ``{parent, message{role, ...}, sampled,
token_ids, mask, logprobs, advantages?, reference_logprobs?}``; ``token_ids`` is the node's *delta* to the
cumulative sequence (its leading template scaffold + its own tokens; an assistant node carries the generation
prompt then its sampled completion), ``mask`` is True on the sampled tokens, and ``logprobs`` / ``advantages`` /
``reference_logprobs`` list one value per True ``mask`` entry.

What CreditLens makes of it:

* One trajectory per branch (root-to-leaf path, leaves in node order), as prime-rl's ``trace_to_samples`` makes
  one training sample per branch: the exact ids of the path; a sampled node shared with an earlier branch is
  context here (prime-rl's ``iter_trainable_branches`` trains it once). Prompt = the ids before the first
  trained token; then runs of trained tokens are ``model`` segments (with their ``logprobs`` and reference
  log-probs), runs of other tokens take the role of the first tool/user/system message in them (an assistant
  scaffold alone is ``system`` glue). A trace with several branches is reported: prime-rl's group baseline
  counts the trace once, here every branch is a row.
* Rewards: the trace's trained scalar ``Σ score·weight`` over its non-null ``rewards`` (``Trace.reward``) ->
  global component ``reward``; each component's ``score`` and ``weight`` go to ``metadata.reward_components`` /
  ``metadata.reward_weights``, ``metrics`` to ``metadata.metrics``.
* Group = ``group.id`` (the orchestrator's rollout group); else ``task.key``/``task.hash`` with a problem.
* Truncated = ``Trace.is_truncated``: a length ``stop_condition`` or a last successful call that finished for
  ``length``.
* Logged advantages: node ``advantages`` spread onto the response tokens (0 elsewhere, as ``Branch.spread``)
  -> ``metadata.logged_advantages``.
* Trace lengths (what prime-rl's GRPO length penalty reads, ``algo/grpo.py``) -> ``metadata.trace_lengths``
  ``{num_output_tokens, num_total_tokens, num_turns}``, the trace's, on each of its rows, computed from the record
  as verifiers' ``Trace`` properties compute them (``trace.py``): a branch's calls are those whose ``node`` is on
  its path (the last call of a node wins); ``num_output_tokens`` = Σ over branches of their calls'
  ``usage.completion_tokens``; ``num_total_tokens`` = Σ over branches of the last call with usage's
  ``prompt_tokens + cached_input_tokens + completion_tokens``; a call without usage counts nothing (so no usage
  at all gives 0, as verifiers); ``num_turns`` = the number of ``sampled`` nodes.
* Step: the folder ``step_N`` (``STEP_FOLDER``). ``FileMonitor.log_episodes(episodes, step, kind, subset)`` writes
  to ``rollouts/step_{step}/{kind}/{subset}/traces.jsonl``; the orchestrator (``src/prime_rl/orchestrator/
  orchestrator.py`` at ``559b4477``, ``finalize_train_batch``) calls it with ``step = self.progress.step``, the
  step whose batch it ships to the trainer, for ``train/effective`` (the episodes trained at that step), and the
  record itself holds no training step. The record's ``run.work.step`` (verifiers ``TrainWorkInfo.step``, stamped
  by ``Dispatcher.emit_episode``) is the step at which the episode was *dispatched*; with prime-rl's async
  off-policy training an episode dispatched at step s may be trained at a later step, so it is not the batch's
  step: it is kept as ``metadata.run_work`` (with ``policy``, the policy versions that generated it), never used
  as the step. A load of ``rollouts/`` (or of a ``step_N`` folder) reads each step's ``train/effective/traces.jsonl``
  (``STEP_MEMBER``) and leaves out, noted, its ``all`` (every episode as it arrived, before scoring: no advantages,
  errored and never-trained ones too, the trained ones again) and ``eval`` files, as they are not the step's
  training batch; opened on their own they load, noted once per file.
* The message graph is checked and walked without recursion (``verifiers_graph``): a parent that is not another
  node's index, a cycle, more branches than ``CREDITLENS_MAX_TRACE_BRANCHES`` (4,096), a branch of more nodes than
  ``CREDITLENS_MAX_TRACE_PATH_NODES`` (20,000), or trained branches holding more tokens together than
  ``CREDITLENS_MAX_TRACE_BRANCH_TOKENS`` (16 M) skip the episode with a problem naming the trace and node, before
  any branch is built; branches are gathered from the nodes' shared token arrays, once each.
* Skipped with a problem: an episode without traces, and traces prime-rl does not train (``ok`` false or
  ``agent.trainable`` false: ``iter_trainable_traces`` leaves them out of the group baseline too). Those flags and
  a node's ``sampled`` are pydantic ``bool`` fields: anything but ``true`` / ``false`` (``"false"``, ``0``) is a
  problem naming the field, never read by its truth value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.io.adapters.verifiers_graph import TraceGraph
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_flag, as_float, as_float_array, as_mask, as_token_ids, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records, record_id

NAME = "verifiers_traces"
LENGTH_STOPS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "context_length")
CONTEXT_ROLES = {"tool": "tool", "user": "user", "system": "system"}
ROLE_CODES = (None, "tool", "user", "system")  # NodeTokens.role: the CONTEXT_ROLES value of a token's node
SPREAD_KEYS = ("logprobs", "reference_logprobs", "advantages")  # per-sampled-token node fields
STEP_FOLDER = re.compile(r"step_(\d+)")  # rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl
# The step's training batch inside its folder: a folder load of rollouts/ reads only these (train/all and eval are
# noted and left out: they are not the batch the step trained on).
STEP_MEMBER = re.compile(r"(?:train/effective/)?[^/]+\.jsonl")
STEP_DEPTH = 2  # step_N/{train,eval}/{all,effective}/


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and isinstance(rec.get("traces"), list) and isinstance(rec.get("task"), Mapping)


def _node(raw: object, k: int, trace_field: str) -> dict:
    """One node's arrays, checked: ids [n], mask [n] bool, per-sampled-token lists of length sum(mask); and each
    per-sampled-token list spread onto the node's tokens (``_spread``), which every branch through it shares."""
    f = f"{trace_field}.nodes[{k}]"
    if not isinstance(raw, Mapping):
        raise RecordError(f, f"expected an object, got {type_name(raw)}")
    ids = as_token_ids(raw.get("token_ids", []), f"{f}.token_ids")
    mask = as_mask(raw.get("mask", []), f"{f}.mask")
    if len(mask) != len(ids):
        raise RecordError(f"{f}.mask", f"{len(mask)} entries for {len(ids)} token ids")
    sampled = as_flag(raw.get("sampled"), f"{f}.sampled")
    node = {"ids": ids, "mask": mask, "parent": raw.get("parent"), "sampled": sampled}
    message = raw.get("message")
    node["role"] = message.get("role") if isinstance(message, Mapping) else None
    if node["role"] is not None and not isinstance(node["role"], str):
        raise RecordError(f"{f}.message.role", f"expected a role name, got {type_name(node['role'])}")
    n_sampled = int(mask.sum())
    for key in ("logprobs", "advantages", "reference_logprobs"):
        value = raw.get(key)
        if value is None or (key == "logprobs" and not value and not n_sampled):
            node[key] = None
            continue
        arr = as_float_array(value, f"{f}.{key}")
        if len(arr) != n_sampled:
            raise RecordError(f"{f}.{key}", f"{len(arr)} values for {n_sampled} sampled tokens")
        node[key] = arr
    node["trainable"] = bool(n_sampled)
    node["spread"] = {key: _spread(node, key) for key in SPREAD_KEYS}
    return node


def _spread(node: dict, key: str) -> np.ndarray:
    """A compact per-sampled-token field on the node's trained positions, 0 elsewhere. [n]."""
    out = np.zeros(len(node["ids"]), dtype=np.float32)
    if node[key] is not None:
        out[node["mask"]] = node[key]
    return out


@dataclass(frozen=True)
class NodeTokens:
    """Every node's tokens laid end to end in node order, which every branch reads from (a branch is a gather of
    its nodes' ranges, not a copy of its prefix per node): ``start`` [N + 1] (node k's tokens are
    ``start[k]:start[k + 1]``), ``ids`` / ``mask`` / ``role`` [T] (``ROLE_CODES``) and ``spread[key]`` [T]
    (``_spread``); ``sampled`` [N]."""

    start: np.ndarray
    ids: np.ndarray
    mask: np.ndarray
    role: np.ndarray
    spread: dict[str, np.ndarray]
    sampled: np.ndarray

    @classmethod
    def of(cls, nodes: list[dict]) -> NodeTokens:
        lens = np.array([len(n["ids"]) for n in nodes], dtype=np.int64)
        codes = np.array([ROLE_CODES.index(CONTEXT_ROLES.get(n["role"])) for n in nodes], dtype=np.int8)
        return cls(
            start=np.concatenate([[0], np.cumsum(lens)]),
            ids=np.concatenate([n["ids"] for n in nodes]),
            mask=np.concatenate([n["mask"] for n in nodes]),
            role=np.repeat(codes, lens),
            spread={key: np.concatenate([n["spread"][key] for n in nodes]) for key in SPREAD_KEYS},
            sampled=np.array([n["sampled"] for n in nodes], dtype=bool),
        )

    def gather(self, path: list[int], shared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token positions [n] of the nodes of ``path`` in order, and which of them belong to a ``shared`` [len(path)]
        node."""
        path_ = np.asarray(path, dtype=np.int64)
        lens = self.start[path_ + 1] - self.start[path_]
        before = np.cumsum(lens) - lens
        where = np.arange(int(lens.sum())) + np.repeat(self.start[path_] - before, lens)
        return where, np.repeat(shared, lens)


def _segments(
    tokens: NodeTokens, path: list[int], branch: int, trained_by: np.ndarray, has: dict[str, bool]
) -> tuple[np.ndarray, list[Segment], list | None]:
    """(prompt ids, response segments, per-response-token logged advantages or None) of kept branch ``branch``:
    its ``path`` (the non-empty nodes, root first) gathered once; a sampled node trained by an earlier branch
    (``trained_by``) is context here. ``has[key]``: some node of the whole path holds ``key``."""
    on_path = trained_by[path]
    where, shared = tokens.gather(path, tokens.sampled[path] & (on_path >= 0) & (on_path < branch))
    ids, mask, roles = tokens.ids[where], tokens.mask[where] & ~shared, tokens.role[where]
    start = int(np.argmax(mask))
    lp, ref, adv = (np.where(shared, np.float32(0), tokens.spread[key][where])[start:] for key in SPREAD_KEYS)
    segs, resp, rmask, roles = [], ids[start:], mask[start:], roles[start:]
    cuts = np.flatnonzero(rmask[1:] != rmask[:-1]) + 1
    for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(resp)]]), strict=True):
        if rmask[a]:
            segs.append(
                Segment(
                    role="model",
                    token_ids=resp[a:b],
                    log_probs=lp[a:b] if has["logprobs"] else None,
                    ref_log_probs=ref[a:b] if has["reference_logprobs"] else None,
                )
            )
        else:
            named = np.flatnonzero(roles[a:b])  # the first tool/user/system token's role; else template glue
            role = ROLE_CODES[roles[a + named[0]]] if named.size else "system"
            segs.append(Segment(role=role, token_ids=resp[a:b]))
    return ids[:start], segs, (adv.tolist() if has["advantages"] else None)


def _rewards(trace: Mapping, f: str) -> tuple[float, dict, dict]:
    raw = trace.get("rewards") or {}
    if not isinstance(raw, Mapping):
        raise RecordError(f"{f}.rewards", f"expected an object, got {type_name(raw)}")
    scores, weights = {}, {}
    for name, r in raw.items():
        if r is None:  # scoring did not run: Trace.reward skips it
            continue
        if not isinstance(r, Mapping):
            raise RecordError(f"{f}.rewards.{name}", f"expected {{score, weight}}, got {type_name(r)}")
        scores[name] = as_float(r.get("score"), f"{f}.rewards.{name}.score")
        weights[name] = as_float(r.get("weight", 1.0), f"{f}.rewards.{name}.weight")
    total = float(np.float64(sum(scores[k] * weights[k] for k in scores)))
    return total, scores, weights


def is_truncated(trace: Mapping) -> bool:
    """``Trace.is_truncated``: a length stop condition, or the last successful call finished for length."""
    if trace.get("stop_condition") in LENGTH_STOPS:
        return True
    calls = [c for c in trace.get("calls") or [] if isinstance(c, Mapping) and c.get("error") is None]
    return bool(calls and calls[-1].get("finish_reason") == "length")


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RecordError(field, f"expected a token count (an integer ≥ 0), got {value!r}")
    return value


def _call_usage(call: Mapping, f: str) -> tuple[int, int] | None:
    """(completion tokens, total tokens) of one call's provider ``usage`` (``Usage.total_tokens`` = prompt +
    cached input + completion), or None when the call has none."""
    usage = call.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise RecordError(f"{f}.usage", f"expected an object, got {type_name(usage)}")
    prompt = _count(usage.get("prompt_tokens"), f"{f}.usage.prompt_tokens")
    completion = _count(usage.get("completion_tokens"), f"{f}.usage.completion_tokens")
    cached = usage.get("cached_input_tokens")
    cached = 0 if cached is None else _count(cached, f"{f}.usage.cached_input_tokens")
    return completion, prompt + cached + completion


def trace_lengths(trace: Mapping, graph: TraceGraph, nodes: list[dict], f: str) -> dict[str, int]:
    """verifiers' ``Trace.num_output_tokens``, ``num_total_tokens`` and ``num_turns`` of one trace record (module
    docstring); ``graph`` and ``nodes`` are its checked graph and nodes. Each branch's sums are carried down the
    graph (``TraceGraph.down``), not summed again along every path."""
    by_node: dict[int, tuple[int, int] | None] = {}
    for j, call in enumerate(trace.get("calls") or []):
        if not isinstance(call, Mapping):
            raise RecordError(f"{f}.calls[{j}]", f"expected an object, got {type_name(call)}")
        if call.get("node") is not None:  # Trace.branches: {c.node: c}, the last call of a node wins
            by_node[_count(call["node"], f"{f}.calls[{j}].node")] = _call_usage(call, f"{f}.calls[{j}]")
    usage = [by_node.get(k) for k in range(len(nodes))]  # a call without usage counts nothing
    output = graph.down([0 if u is None else u[0] for u in usage], int.__add__, 0)
    last = graph.down([None if u is None else u[1] for u in usage], _later, None)
    leaves = graph.leaves.tolist()
    return {
        "num_output_tokens": sum(output[leaf] for leaf in leaves),
        "num_total_tokens": sum(last[leaf] or 0 for leaf in leaves),
        "num_turns": sum(n["sampled"] for n in nodes),
    }


def _later(above: int | None, own: int | None) -> int | None:
    return above if own is None else own


def _group(ep: Mapping, ctx: LoadContext, line: int | None, prefix: str) -> str:
    group = ep.get("group")
    if isinstance(group, Mapping) and group.get("id") is not None:
        return as_id(group["id"], "group.id")
    task = ep.get("task") or {}
    key = task.get("key") or task.get("hash")
    if key is None:
        raise RecordError("group", "no group.id and no task.key/task.hash: the rollout group is unknown")
    ctx.problem(line, f"{prefix}group", f"no group.id; grouped by task {'key' if task.get('key') else 'hash'} {key!r}")
    return f"task-{key}"


def convert(ep: object, line: int | None, ctx: LoadContext, stem: str, prefix: str = "") -> list[Trajectory]:
    """The trajectories of one episode; problems it reports itself name ``line`` or, in a JSON array, the item
    (``prefix``, ``[i].``)."""
    if not isinstance(ep, Mapping):
        raise RecordError(None, f"expected an episode object, got {type_name(ep)}")
    traces = ep.get("traces")
    if traces is not None and not isinstance(traces, list):
        raise RecordError("traces", f"expected a list of traces, got {type_name(traces)}")
    if not traces:
        errors = [e.get("message") for e in ep.get("errors") or [] if isinstance(e, Mapping)]
        raise RecordError("traces", f"episode without traces (ok={ep.get('ok')}, errors: {errors}); nothing to load")
    group, ep_id = _group(ep, ctx, line, prefix), str(ep.get("id", record_id(stem, line, prefix)))
    ok = ep.get("ok")
    if ok is not None and not isinstance(ok, bool):  # prime-rl decides by each trace's ok; the episode's is unused
        shown = f"{type_name(ok)} {ok!r}"[:60]
        ctx.note(f"{prefix}ok", f"expected true or false, got {shown}; not used (each trace's ok decides)", line)
    run = ep.get("run")
    work = run.get("work") if isinstance(run, Mapping) else None
    out = []
    for t, trace in enumerate(traces):
        f = f"traces[{t}]"
        if not isinstance(trace, Mapping):
            raise RecordError(f, f"expected a trace object, got {type_name(trace)}")
        try:
            why = _untrained(trace, f)
        except RecordError as err:
            ctx.problem(
                line, f"{prefix}{err.field}", f"{err.reason}; trace skipped (whether prime-rl trains it is unknown)"
            )
            continue
        if why:
            ctx.problem(
                line, f"{prefix}{f}", f"{why}: prime-rl neither trains this trace nor counts it in its group; skipped"
            )
            continue
        out += _trace_rows(trace, f, ep_id, group, line, ctx, prefix)
    if isinstance(work, Mapping):  # the dispatch step and policy span: not the training step (module docstring)
        for traj in out:
            traj.metadata["run_work"] = dict(work)
    return out


def _untrained(trace: Mapping, f: str) -> str | None:
    """Why prime-rl's ``iter_trainable_traces`` leaves the trace out (``ok`` false, ``agent.trainable`` false), or
    None. Both are booleans in the record (pydantic ``bool`` fields); a ``"false"`` or a ``0`` is refused, never read
    by its truth value. A missing ``ok`` is false (the writer always writes it), a missing ``trainable`` true (its
    default)."""
    agent = trace.get("agent")
    if agent is not None and not isinstance(agent, Mapping):
        raise RecordError(f"{f}.agent", f"expected an object, got {type_name(agent)}")
    if not as_flag(trace.get("ok"), f"{f}.ok"):
        return "ok is false" if "ok" in trace else "ok is missing"
    if not as_flag((agent or {}).get("trainable"), f"{f}.agent.trainable", missing=True):
        return "agent.trainable is false"
    return None


def _trace_rows(
    trace: Mapping, f: str, ep_id: str, group: str, line, ctx: LoadContext, prefix: str = ""
) -> list[Trajectory]:
    for key, kind in (("calls", list), ("metrics", Mapping)):
        if trace.get(key) and not isinstance(trace[key], kind):
            raise RecordError(
                f"{f}.{key}", f"expected {'a list' if kind is list else 'an object'}, got {type_name(trace[key])}"
            )
    raw_nodes = trace.get("nodes") or []
    if not isinstance(raw_nodes, list):
        raise RecordError(f"{f}.nodes", f"expected a list of nodes, got {type_name(raw_nodes)}")
    graph = TraceGraph.of(raw_nodes, f)  # parents, cycles and branch budgets, before any node's tokens are read
    nodes = [_node(raw, k, f) for k, raw in enumerate(raw_nodes)]
    reward, scores, weights = _rewards(trace, f)
    tid = str(trace.get("id", f"{ep_id}/{f}"))
    kept, trained_by = graph.trained_branches([n["sampled"] for n in nodes], [n["trainable"] for n in nodes])
    if not kept:
        raise RecordError(f"{f}.nodes", "no sampled token in any branch: nothing the policy generated")
    graph.check_tokens([len(n["ids"]) for n in nodes], kept)
    if len(kept) > 1:
        ctx.problem(
            line,
            f"{prefix}{f}",
            f"{len(kept)} branches loaded as {len(kept)} trajectories (one per prime-rl training sample); "
            "prime-rl's group baseline counts the trace once",
        )
    has = {key: graph.down([n[key] is not None for n in nodes], bool.__or__, False) for key in SPREAD_KEYS}
    lengths = trace_lengths(trace, graph, nodes, f)
    rows, tokens, trained_by = [], NodeTokens.of(nodes), np.asarray(trained_by, dtype=np.int64)
    paths = graph.paths(kept, [len(n["ids"]) > 0 for n in nodes])
    for b, (leaf, path) in enumerate(zip(kept, paths, strict=True)):
        prompt_ids, segs, adv = _segments(tokens, path, b, trained_by, {key: has[key][leaf] for key in SPREAD_KEYS})
        metadata: dict = {
            "truncated": is_truncated(trace),
            "episode_id": ep_id,
            "reward_components": scores,
            "reward_weights": weights,
            "trace_lengths": dict(lengths),
        }
        if trace.get("metrics"):
            metadata["metrics"] = dict(trace["metrics"])
        if adv is not None:
            metadata["logged_advantages"] = adv
        rows.append(
            Trajectory(
                id=tid if len(kept) == 1 else f"{tid}/branch-{b}",
                group_id=group,
                prompt=None,
                segments=segs,
                global_rewards={"reward": reward},
                metadata=metadata,
                prompt_token_ids=prompt_ids,
            )
        )
    return rows


def _subset_note(path: Path, ctx: LoadContext) -> None:
    """A prime-rl ``step_N/{kind}/{subset}/traces.jsonl`` that is not the step's training batch (``train/effective``)
    is said once per file."""
    subset, kind = path.parent.name, path.parent.parent.name
    if kind not in ("train", "eval") or subset not in ("all", "effective") or ctx.path_step is None:
        return
    if subset == "all":
        ctx.note(
            None,
            f"prime-rl's {kind}/all subset: every episode as it arrived (logged before scoring, so without "
            "advantages; errored, rejected and never-shipped episodes included; the trained ones are in "
            f"{kind}/effective too): not the batch step {ctx.path_step} trained on",
        )
    elif kind == "eval":
        ctx.note(None, f"prime-rl eval episodes of step {ctx.path_step}: evaluated, not trained")


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    _subset_note(Path(path), ctx)
    stem = Path(path).stem
    for line, prefix, rec in iter_json_records(str(path), ctx):
        for traj in ctx.attempt(line, prefix, convert, rec, line, ctx, stem, prefix) or ():
            yield line, prefix, traj
