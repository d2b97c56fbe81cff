"""Mimic of prime-rl's episode log, ``<run_dir>/rollouts/step_N/train/effective/traces.jsonl``.

Sources:

* PrimeIntellect-ai/prime-rl, commit 559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21):
  ``src/prime_rl/monitors/file.py`` ``FileMonitor.log_episodes`` opens ``rollouts/step_{step}/{kind}/{subset}/
  traces.jsonl`` for appending and writes ``orjson.dumps(episode.to_record(), default=str,
  option=OPT_APPEND_NEWLINE | OPT_SERIALIZE_NUMPY)`` per episode.
  ``src/prime_rl/orchestrator/orchestrator.py``: each arriving episode is logged to ``train/all`` at once (before
  scoring) under ``self.progress.step``; ``finalize_train_batch`` logs the shipped batch's episodes to
  ``train/effective`` under ``step = self.progress.step`` (the training step) and then increments
  ``progress.step``. ``src/prime_rl/orchestrator/dispatcher.py`` ``Dispatcher.emit_episode`` stamps ``episode.run
  = TrainRunInfo(id, name, work=TrainWorkInfo(step=meta.step, policy=PolicySpan(start, end)))``: the step at which
  the group was *dispatched* (async: earlier than the step that trains it) and the policy versions spanned.
  ``src/prime_rl/orchestrator/algo/grpo.py``
  ``GRPOAlgorithm.score_group`` (optionally with the linear length penalty): ``rewards = tensor([trace.reward
  ...], float32)``, ``advantages = rewards - rewards.mean()`` over the group's trainable traces (``algo/base.py``
  ``iter_trainable_traces``: skip ``has_error`` (= not ok) and ``agent.trainable`` false); ``algo/routing.py``
  ``assign_advantages(trace, scalar)`` gives every node with a True mask ``[scalar] * sum(mask)``.
* PrimeIntellect-ai/verifiers, commit a60a606ecc4d309247edf9ff92c3eabca362781f (2026-08-21):
  ``verifiers/v1/episode.py`` ``Episode.to_record`` = ``model_dump(mode="json", exclude={"traces": {"__all__":
  EXCLUDE_FIELDS}}, exclude_none=True)`` (None fields vanish, e.g. unassigned ``advantages``; ``None`` values inside
  the ``rewards`` dict stay); ``verifiers/v1/graph.py`` ``MessageNode`` (``parent``, ``message``, ``sampled``,
  ``timestamp``, ``token_ids`` = the node's delta: leading template scaffold + own tokens, for an assistant the
  generation prompt + the sampled completion; ``mask`` True only on the completion; ``is_content``; ``logprobs``
  / ``advantages`` / ``reference_logprobs`` one per True mask entry); ``verifiers/v1/trace.py`` ``Trace``
  (``rewards: {name: {score, weight} | None}``, ``Trace.reward = Σ score·weight``, ``calls[].finish_reason``,
  ``stop_condition``, ``ok``, ``agent.trainable``; ``calls[].usage`` (``types.py`` ``Usage``: ``prompt_tokens``,
  ``completion_tokens``, ``cached_input_tokens``), which verifiers' training client fills with the prompt's and the
  completion's token counts (``clients/train.py``); ``num_output_tokens`` / ``num_total_tokens`` / ``num_turns``,
  what GRPO's length penalty reads).

The models below re-state only the fields the writer serialises that the loader reads or that shape the record
(the excluded raw-tensor fields are simply absent). Tokens come from CreditLens's offline Qwen2.5 tokenizer with
the ChatML scaffold the renderer attributes as described in ``graph.py``'s module docstring; log-probs are made up.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
import orjson
import torch
from pydantic import BaseModel, Field

from engine.io.text.tokenize import encode_many, get_tokenizer

IM_END = "<|im_end|>"


class Msg(BaseModel):
    role: str
    content: str | None = None
    tool_call_id: str | None = None


class MessageNode(BaseModel):
    parent: int | None = None
    message: Msg
    sampled: bool = False
    timestamp: float = Field(default_factory=time.time)
    token_ids: list[int] = Field(default_factory=list)
    mask: list[bool] = Field(default_factory=list)
    is_content: list[bool] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    advantages: list[float] | None = None
    reference_logprobs: list[float] | None = None
    loss_weights: dict[str, list[float]] | None = None


class Reward(BaseModel):
    score: float
    weight: float = 1.0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    cached_input_tokens: int | None = None


class ModelCall(BaseModel):
    node: int | None = None
    model: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


class AgentInfo(BaseModel):
    config: dict = Field(default_factory=dict)
    name: str = "agent"
    trainable: bool = True


class TraceTask(BaseModel):
    type: str = "Task"
    data: dict = Field(default_factory=dict)
    key: str | None = None
    hash: str | None = None


class Trace(BaseModel):
    version: int = 1
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task: TraceTask
    agent: AgentInfo = Field(default_factory=AgentInfo)
    nodes: list[MessageNode] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list)
    rewards: dict[str, Reward | None] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    info: dict = Field(default_factory=dict)
    is_completed: bool = True
    ok: bool = True
    stop_condition: str | None = None

    @property
    def reward(self) -> float:
        return sum(r.score * r.weight for r in self.rewards.values() if r is not None)


class GroupInfo(BaseModel):
    id: str


class PolicySpan(BaseModel):
    start: int
    end: int


class TrainWorkInfo(BaseModel):
    type: str = "train"
    step: int
    policy: PolicySpan | None = None


class TrainRunInfo(BaseModel):
    type: str = "train"
    id: str
    name: str | None = None
    work: TrainWorkInfo


class Episode(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    env: dict = Field(default_factory=lambda: {"id": "toy-env"})
    task: TraceTask
    group: GroupInfo | None = None
    run: TrainRunInfo | None = None
    ok: bool = True
    errors: list[dict] = Field(default_factory=list)
    traces: list[Trace] = Field(default_factory=list)

    def to_record(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


@dataclass
class Truth:
    """Ground truth of one trainable trace (one branch)."""

    trace_id: str
    group: str
    prompt_ids: list[int]
    response_ids: list[int]
    action_mask: list[int]
    roles: list[str]
    log_probs: list[float]  # per response token, 0 off the action tokens
    reward: float
    truncated: bool
    advantage: float
    lengths: tuple[int, int, int]  # num_output_tokens, num_total_tokens, num_turns


@dataclass
class Turn:
    """One exchange: the model's completion, then optionally a tool result."""

    completion: str
    tool: str | None = None
    length_limited: bool = False  # the completion hit max_tokens: no <|im_end|>, finish_reason "length"


@dataclass
class Rollout:
    system: str
    user: str
    turns: list[Turn]
    rewards: dict[str, tuple[float, float] | None]  # name -> (score, weight), None = scoring did not run
    ok: bool = True
    trainable: bool = True
    metrics: dict = field(default_factory=dict)


def _ids(tok, text: str) -> list[int]:
    return encode_many(tok, [text])[0].tolist()


def build_trace(tok, task: TraceTask, r: Rollout, seed: int) -> tuple[Trace, list[str]]:
    """A linear message graph with the renderer's token attribution; returns the trace and per-token roles."""
    rng = np.random.default_rng(seed)
    nodes: list[MessageNode] = []
    roles: list[str] = []

    def add(message: Msg, pre: str, body: str, sampled: bool = False, scaffold: str = "") -> None:
        ctx_ids = _ids(tok, pre + (body if not sampled else ""))
        gen_ids = _ids(tok, body) if sampled else []
        logprobs = [float(x) for x in np.round(-rng.random(len(gen_ids)), 4).astype(np.float32)]
        nodes.append(
            MessageNode(
                parent=len(nodes) - 1 if nodes else None,
                message=message,
                sampled=sampled,
                token_ids=ctx_ids + gen_ids,
                mask=[False] * len(ctx_ids) + [True] * len(gen_ids),
                logprobs=logprobs,
            )
        )
        roles.extend([scaffold or message.role] * len(ctx_ids) + ["model"] * len(gen_ids))

    add(Msg(role="system", content=r.system), "", f"<|im_start|>system\n{r.system}{IM_END}")
    add(Msg(role="user", content=r.user), "\n", f"<|im_start|>user\n{r.user}{IM_END}")
    calls = []
    for k, turn in enumerate(r.turns):
        body = turn.completion + ("" if turn.length_limited else IM_END)
        add(Msg(role="assistant", content=turn.completion), "\n<|im_start|>assistant\n", body, True, "glue")
        completion = sum(nodes[-1].mask)
        usage = Usage(prompt_tokens=sum(len(n.token_ids) for n in nodes) - completion, completion_tokens=completion)
        calls.append(
            ModelCall(
                node=len(nodes) - 1,
                model="toy",
                finish_reason="length" if turn.length_limited else "stop",
                usage=usage,
            )
        )
        if turn.tool is not None:
            text = f"<|im_start|>user\n<tool_response>\n{turn.tool}\n</tool_response>{IM_END}"
            add(Msg(role="tool", content=turn.tool, tool_call_id=f"call-{k}"), "\n", text)
    trace = Trace(
        task=task,
        agent=AgentInfo(trainable=r.trainable),
        nodes=nodes,
        calls=calls,
        rewards={k: None if v is None else Reward(score=v[0], weight=v[1]) for k, v in r.rewards.items()},
        metrics=r.metrics,
        ok=r.ok,
    )
    return trace, roles


def lengths(trace: Trace) -> tuple[int, int, int]:
    """verifiers' Trace.num_output_tokens, num_total_tokens, num_turns of a linear trace (one branch): Σ completion
    tokens, the last call's prompt + completion tokens, the sampled nodes."""
    output = sum(c.usage.completion_tokens for c in trace.calls)
    last = trace.calls[-1].usage
    return output, last.prompt_tokens + last.completion_tokens, sum(n.sampled for n in trace.nodes)


def score_group(episodes: list[Episode], length_penalty: tuple[float, float, float] | None = None) -> None:
    """GRPOAlgorithm.score_group (with ``length_penalty`` = the linear penalty's (w_out, w_in, w_turns), as grpo.py
    computes it) + assign_advantages(trace, scalar)."""
    traces = [
        t for ep in episodes for t in ep.traces if t.ok and t.agent.trainable and any(any(n.mask) for n in t.nodes)
    ]
    rewards = torch.tensor([t.reward for t in traces], dtype=torch.float32)
    advantages = rewards - rewards.mean()
    if length_penalty is not None:
        output, total, turns = torch.tensor([lengths(t) for t in traces], dtype=rewards.dtype).unbind(-1)
        inp = total - output
        w_out, w_in, w_turns = length_penalty
        frac = (
            w_out * (output / output.max().clamp(min=1))
            + w_in * (inp / inp.max().clamp(min=1))
            + w_turns * (turns / turns.max().clamp(min=1))
        )
        shaped = rewards - rewards.mean() * frac
        advantages = shaped - shaped.mean()
    for trace, adv in zip(traces, advantages.tolist(), strict=True):
        for node in trace.nodes:
            if any(node.mask):
                node.advantages = [float(adv)] * sum(node.mask)


def write_step(
    run_dir: str,
    step: int,
    groups: dict[str, list[Rollout]],
    failed: int = 0,
    length_penalty: tuple[float, float, float] | None = None,
    dispatch_step: int | None = None,
    all_subset: bool = False,
) -> tuple[str, list[Truth]]:
    """Score each group like prime-rl's GRPO (with ``length_penalty``, if given) and append its episodes to the
    step's effective traces.jsonl, ``<run_dir>/rollouts/step_<step>/train/effective/traces.jsonl``.

    ``dispatch_step``: the step the episodes were dispatched at (their ``run.work.step``; default ``step``, the
    synchronous case). ``all_subset``: also append each episode, as it arrived (unscored), to ``train/all``.

    ``failed``: that many extra episodes that errored before any trace (``ok`` false, no traces) are appended
    to the last group (they appear in the ``all`` subset; here they test the loader's refusal)."""
    tok = get_tokenizer()
    path = os.path.join(run_dir, "rollouts", f"step_{step}", "train", "effective", "traces.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    truths: list[Truth] = []
    seed = 0
    for gid, rollouts in groups.items():
        task = TraceTask(data={"question": rollouts[0].user}, key=f"key-{gid}", hash=f"hash-{gid}")
        episodes = []
        for r in rollouts:
            seed += 1
            trace, roles = build_trace(tok, task, r, seed)
            work = TrainWorkInfo(
                step=step if dispatch_step is None else dispatch_step, policy=PolicySpan(start=0, end=1)
            )
            run = TrainRunInfo(id="run-1", name="toy", work=work)
            episodes.append((Episode(task=task, group=GroupInfo(id=gid), run=run, traces=[trace], ok=r.ok), roles))
        if all_subset:  # logged on arrival, before the sink scores the group
            arrived = os.path.join(run_dir, "rollouts", f"step_{step}", "train", "all", "traces.jsonl")
            os.makedirs(os.path.dirname(arrived), exist_ok=True)
            with open(arrived, "ab") as f:
                for ep, _ in episodes:
                    f.write(orjson.dumps(ep.to_record(), option=orjson.OPT_APPEND_NEWLINE))
        score_group([ep for ep, _ in episodes], length_penalty)
        for ep, roles in episodes:
            trace = ep.traces[0]
            if not (trace.ok and trace.agent.trainable):
                continue
            ids = [i for n in trace.nodes for i in n.token_ids]
            mask = [m for n in trace.nodes for m in n.mask]
            lps = [0.0] * len(ids)
            pos = [i for i, m in enumerate(mask) if m]
            for i, v in zip(pos, [v for n in trace.nodes for v in n.logprobs], strict=True):
                lps[i] = v
            start = pos[0]
            truths.append(
                Truth(
                    trace_id=trace.id,
                    group=gid,
                    prompt_ids=ids[:start],
                    response_ids=ids[start:],
                    action_mask=[int(m) for m in mask[start:]],
                    roles=roles[start:],
                    log_probs=lps[start:],
                    reward=trace.reward,
                    truncated=trace.calls[-1].finish_reason == "length",
                    advantage=next(n.advantages[0] for n in trace.nodes if n.advantages),
                    lengths=lengths(trace),
                )
            )
        records = [ep for ep, _ in episodes]
        if failed and gid == list(groups)[-1]:
            records += [
                Episode(
                    task=task, group=GroupInfo(id=gid), ok=False, errors=[{"type": "Timeout", "message": "sandbox"}]
                )
                for _ in range(failed)
            ]
        opts = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
        with open(path, "ab") as f:
            for ep in records:
                f.write(orjson.dumps(ep.to_record(), default=str, option=opts))
    return path, truths
