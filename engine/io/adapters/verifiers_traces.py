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
* Skipped with a problem: an episode without traces, and traces prime-rl does not train (``ok`` false or
  ``agent.trainable`` false: ``iter_trainable_traces`` leaves them out of the group baseline too).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_float, as_float_array, as_mask, as_token_ids, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records, record_id

NAME = "verifiers_traces"
LENGTH_STOPS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "context_length")
CONTEXT_ROLES = {"tool": "tool", "user": "user", "system": "system"}
STEP_FOLDER = re.compile(r"step_(\d+)")  # rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl
# The step's training batch inside its folder: a folder load of rollouts/ reads only these (train/all and eval are
# noted and left out: they are not the batch the step trained on).
STEP_MEMBER = re.compile(r"(?:train/effective/)?[^/]+\.jsonl")
STEP_DEPTH = 2  # step_N/{train,eval}/{all,effective}/


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and isinstance(rec.get("traces"), list) and isinstance(rec.get("task"), Mapping)


def _node(raw: object, k: int) -> dict:
    """One node's arrays, checked: ids [n], mask [n] bool, per-sampled-token lists of length sum(mask)."""
    f = f"nodes[{k}]"
    if not isinstance(raw, Mapping):
        raise RecordError(f, f"expected an object, got {type_name(raw)}")
    ids = as_token_ids(raw.get("token_ids", []), f"{f}.token_ids")
    mask = as_mask(raw.get("mask", []), f"{f}.mask")
    if len(mask) != len(ids):
        raise RecordError(f"{f}.mask", f"{len(mask)} entries for {len(ids)} token ids")
    parent = raw.get("parent")
    if isinstance(parent, (list, dict)):  # other non-indices are named by _branches, where the chain is followed
        raise RecordError(f"{f}.parent", f"expected a node index, got {type_name(parent)}")
    node = {"ids": ids, "mask": mask, "parent": parent, "sampled": bool(raw.get("sampled"))}
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
    return node


def _branches(nodes: list[dict]) -> list[list[int]]:
    """Root-to-leaf paths, one per leaf in node order (verifiers ``graph.leaves`` / ``Trace.branches``)."""
    has_child = {n["parent"] for n in nodes if n["parent"] is not None}
    paths = []
    for leaf in (i for i in range(len(nodes)) if i not in has_child):
        path, nid, seen = [], leaf, set()
        while nid is not None:
            if not isinstance(nid, int) or not 0 <= nid < len(nodes) or nid in seen:
                raise RecordError(
                    f"nodes[{leaf}].parent", f"parent chain reaches {nid!r}: not a node index, or a cycle"
                )
            seen.add(nid)
            path.append(nid)
            nid = nodes[nid]["parent"]
        paths.append(path[::-1])
    return paths


def _spread(node: dict, key: str, mask: np.ndarray) -> np.ndarray:
    """A compact per-sampled-token field on the node's trained positions, 0 elsewhere. [n]."""
    out = np.zeros(len(node["ids"]), dtype=np.float32)
    if node[key] is not None:
        out[node["mask"]] = node[key]
    return np.where(mask, out, 0.0).astype(np.float32)


def _segments(nodes: list[dict], path: list[int], trained: set[int]) -> tuple[np.ndarray, list[Segment], list]:
    """(prompt ids, response segments, per-response-token logged advantages or None) of one branch."""
    ids, mask, roles, lp, ref, adv = [], [], [], [], [], []
    for nid in path:
        node = nodes[nid]
        shared = node["sampled"] and nid in trained  # trained in an earlier branch: context here
        m = node["mask"] & (not shared)
        ids.append(node["ids"])
        mask.append(m)
        roles += [CONTEXT_ROLES.get(node["role"])] * len(node["ids"])
        lp.append(_spread(node, "logprobs", m))
        ref.append(_spread(node, "reference_logprobs", m))
        adv.append(_spread(node, "advantages", m))
    ids, mask = np.concatenate(ids), np.concatenate(mask)
    start = int(np.argmax(mask))
    has = {k: any(nodes[n][k] is not None for n in path) for k in ("logprobs", "reference_logprobs", "advantages")}
    lp, ref, adv = (np.concatenate(x)[start:] for x in (lp, ref, adv))
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
            role = next((r for r in roles[a:b] if r is not None), "system")
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


def trace_lengths(trace: Mapping, nodes: list[dict], f: str) -> dict[str, int]:
    """verifiers' ``Trace.num_output_tokens``, ``num_total_tokens`` and ``num_turns`` of one trace record (module
    docstring); ``nodes`` are its checked nodes."""
    by_node: dict[int, tuple[int, int] | None] = {}
    for j, call in enumerate(trace.get("calls") or []):
        if not isinstance(call, Mapping):
            raise RecordError(f"{f}.calls[{j}]", f"expected an object, got {type_name(call)}")
        if call.get("node") is not None:  # Trace.branches: {c.node: c}, the last call of a node wins
            by_node[_count(call["node"], f"{f}.calls[{j}].node")] = _call_usage(call, f"{f}.calls[{j}]")
    output = total = 0
    for path in _branches(nodes):
        usages = [u for n in path if (u := by_node.get(n)) is not None]
        output += sum(completion for completion, _ in usages)
        total += usages[-1][1] if usages else 0
    return {"num_output_tokens": output, "num_total_tokens": total, "num_turns": sum(n["sampled"] for n in nodes)}


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
    """An episode's trained traces, one trajectory per trainable branch; ``line`` / ``prefix`` (``[i].`` in a JSON
    array) locate the problems reported about a trace that is skipped or split."""
    if not isinstance(ep, Mapping):
        raise RecordError(None, f"expected an episode object, got {type_name(ep)}")
    traces = ep.get("traces")
    if traces is not None and not isinstance(traces, list):
        raise RecordError("traces", f"expected a list of traces, got {type_name(traces)}")
    if not traces:
        errors = [e.get("message") for e in ep.get("errors") or [] if isinstance(e, Mapping)]
        raise RecordError("traces", f"episode without traces (ok={ep.get('ok')}, errors: {errors}); nothing to load")
    group, ep_id = _group(ep, ctx, line, prefix), str(ep.get("id", record_id(stem, line, prefix)))
    run = ep.get("run")
    work = run.get("work") if isinstance(run, Mapping) else None
    out = []
    for t, trace in enumerate(traces):
        f = f"traces[{t}]"
        if not isinstance(trace, Mapping):
            raise RecordError(f, f"expected a trace object, got {type_name(trace)}")
        agent = trace.get("agent") or {}
        if not isinstance(agent, Mapping):
            raise RecordError(f"{f}.agent", f"expected an object, got {type_name(agent)}")
        if not trace.get("ok") or agent.get("trainable") is False:
            why = "ok is false" if not trace.get("ok") else "agent.trainable is false"
            ctx.problem(
                line, f"{prefix}{f}", f"{why}: prime-rl neither trains this trace nor counts it in its group; skipped"
            )
            continue
        out += _trace_rows(trace, f, ep_id, group, line, ctx, prefix)
    if isinstance(work, Mapping):  # the dispatch step and policy span: not the training step (module docstring)
        for traj in out:
            traj.metadata["run_work"] = dict(work)
    return out


def _trace_rows(
    trace: Mapping, f: str, ep_id: str, group: str, line, ctx: LoadContext, prefix: str = ""
) -> list[Trajectory]:
    for key, kind in (("nodes", list), ("calls", list), ("metrics", Mapping)):
        if trace.get(key) and not isinstance(trace[key], kind):
            raise RecordError(
                f"{f}.{key}", f"expected {'a list' if kind is list else 'an object'}, got {type_name(trace[key])}"
            )
    nodes = [_node(raw, k) for k, raw in enumerate(trace.get("nodes") or [])]
    reward, scores, weights = _rewards(trace, f)
    tid = str(trace.get("id", f"{ep_id}/{f}"))
    trained: set[int] = set()
    paths = []
    for path in _branches(nodes):  # prime-rl iter_trainable_branches: a shared sampled node trains once
        if any(nodes[n]["mask"].any() and n not in trained for n in path):
            paths.append((path, set(trained)))
            trained |= {n for n in path if nodes[n]["sampled"] and nodes[n]["mask"].any()}
    if not paths:
        raise RecordError(f"{f}.nodes", "no sampled token in any branch: nothing the policy generated")
    if len(paths) > 1:
        ctx.problem(
            line,
            f"{prefix}{f}",
            f"{len(paths)} branches loaded as {len(paths)} trajectories (one per prime-rl training sample); "
            "prime-rl's group baseline counts the trace once",
        )
    lengths = trace_lengths(trace, nodes, f)
    rows = []
    for b, (path, before) in enumerate(paths):
        prompt_ids, segs, adv = _segments(nodes, path, before)
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
                id=tid if len(paths) == 1 else f"{tid}/branch-{b}",
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
