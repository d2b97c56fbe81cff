"""Adapter ``rllm``: rLLM Episodes / Trajectories / Steps (``to_dict()`` JSON), legacy engine outputs and
chat-completion dumps (SPEC §2.5).

Accepted records (JSONL, a JSON array, or one JSON document):

* Episode ``{"id": "task_id:rollout_idx", "trajectories": [Trajectory...], "is_correct", "termination_reason"}``
* Trajectory ``{"uid", "name", "task", "steps": [Step...], "reward"}``; legacy "Step" mode
  ``{"steps": [{"prompt", "response", "prompt_ids", "completion_ids"}], "trajectory_reward", "mc_returns"}``
* Step ``{"prompt_ids", "response_ids", "logprobs", "chat_completions", "observation", "thought",
  "model_response", "reward", "mc_return", "done"}``
* legacy "Token" mode ``{"prompt_tokens", "response_tokens", "response_masks", "trajectory_reward"}``
* a chat-completions dump line: a list of ``{"role", "content"}`` messages (or ``{"chat_completions": [...]}``)

Each Step is one turn: its response is a model segment, the next step's new observation a tool/user segment.
Real ids are kept (``response_ids``/``completion_ids`` + ``logprobs``; observation ids from the prompt
difference when step k+1's ``prompt_ids`` extends step k's prompt + response); otherwise the chat messages
are rendered with ChatML and tokenized.

Rewards: if any step reward is non-zero, each step's reward is the turn component ``step_reward`` (the
engine computes MC returns from them); otherwise the trajectory reward (``reward``, ``trajectory_reward``,
or the episode's ``is_correct``) is the global component ``reward``. Stored ``mc_return`` values go to
``metadata["mc_returns"]`` for reference. Groups: the episode's task id (``id`` before ``:``), then ``task``,
then the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from engine.io.adapters.common import read_records, truncated_from_reason
from engine.io.adapters.generations import attach_generations, mask_segments
from engine.io.chatml import checked_messages, render_prompt, render_response
from engine.io.coerce import as_float, as_float_array, as_token_ids, type_name
from engine.io.context import LoadContext
from engine.io.fields import as_id, prompt_group_id, stable_hash
from engine.io.model import Trajectory
from engine.io.problems import RecordError

NAME = "rllm"
DEFAULT_TRAJ_NAME = "default_traj_name"


def _is_messages(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, Mapping) and "role" in m for m in value)


def sniff(rec: object) -> bool:
    if _is_messages(rec):
        return True
    if not isinstance(rec, Mapping):
        return False
    if isinstance(rec.get("trajectories"), list) or {"prompt_tokens", "response_tokens"} <= set(rec):
        return True
    steps = rec.get("steps")
    return isinstance(steps, list) and (not steps or isinstance(steps[0], Mapping))


# ------------------------------------------------------------------------------------------------ steps
def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _generation(step: Mapping, field: str) -> dict | None:
    ids = step.get("response_ids") or step.get("completion_ids")
    if not ids:
        return None
    gen = {"ids": as_token_ids(ids, f"{field}.response_ids")}
    if step.get("logprobs"):
        gen["log_probs"] = as_float_array(step["logprobs"], f"{field}.logprobs")
        if len(gen["log_probs"]) != len(gen["ids"]):
            raise RecordError(f"{field}.logprobs", f"has {len(gen['log_probs'])} values for {len(gen['ids'])} tokens")
    if step.get("prompt_ids"):
        gen["prompt_ids"] = as_token_ids(step["prompt_ids"], f"{field}.prompt_ids")
    return gen


def _chat(step: Mapping, field: str) -> list[dict] | None:
    """A step's ``chat_completions`` (checked), or None if it has none."""
    msgs = step.get("chat_completions")
    return checked_messages(msgs, f"{field}.chat_completions") if _is_messages(msgs) else None


def _context(step: Mapping, field: str) -> list[dict] | None:
    """The messages a step was prompted with (its chat_completions without its own final assistant reply)."""
    msgs = _chat(step, field)
    if msgs is None:
        return None
    return msgs[:-1] if msgs[-1].get("role") == "assistant" else msgs


def _after_last_assistant(msgs: list[dict]) -> list[dict]:
    idx = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    return msgs[idx + 1 :]


def _assistant(step: Mapping, field: str) -> dict:
    msgs = _chat(step, field)
    if msgs is not None and msgs[-1].get("role") == "assistant":
        last = msgs[-1]
        return {
            "role": "assistant",
            "content": _text(last.get("content")),
            "reasoning": last.get("reasoning"),
            "tool_calls": last.get("tool_calls"),
        }
    content = step.get("model_response") or step.get("response") or step.get("model_output") or ""
    thought = step.get("thought") or None
    return {
        "role": "assistant",
        "content": _text(content) if not isinstance(content, Mapping) else _text(content.get("content")),
        "reasoning": thought if thought is None or isinstance(thought, str) else _text(thought),
    }


def _observation(step: Mapping, field: str) -> list[dict]:
    ctx = _context(step, field)
    if ctx is not None:
        return _after_last_assistant(ctx)
    obs = step.get("observation")
    if obs is None or obs == "":
        return []
    role = "tool" if isinstance(obs, Mapping) and "tool_outputs" in obs else "user"
    return [{"role": role, "content": _text(obs)}]


def _prompt(steps: Sequence[Mapping], task: object) -> tuple[str | None, object]:
    """(prompt text or None when ids will be decoded, prompt ids or None)."""
    first = steps[0]
    gen = _generation(first, "steps[0]")
    if gen is not None and gen.get("prompt_ids") is not None:
        return None, gen["prompt_ids"]
    ctx = _context(first, "steps[0]")
    if ctx is not None:
        return render_prompt(ctx), None
    if first.get("prompt"):
        return _text(first["prompt"]), None
    obs = first.get("observation")
    if obs not in (None, ""):
        return render_prompt([{"role": "user", "content": _text(obs)}]), None
    question = task.get("question") or task.get("prompt") if isinstance(task, Mapping) else task
    return render_prompt([{"role": "user", "content": _text(question)}]), None


def _number(x: object) -> float | None:
    """A stored number for display (None when it is not one, or does not fit a float)."""
    try:
        return float(x) if isinstance(x, (int, float)) else None
    except OverflowError:
        return None


def _default_group(rec: Mapping, prompt: str | None, prompt_ids) -> str:
    """Rollouts of one task form a group: hash the task if the record has one, else the prompt."""
    if rec.get("task") is not None:
        return f"task-{stable_hash(rec['task'])}"
    return prompt_group_id(prompt if prompt is not None else prompt_ids.tolist())


def _steps_trajectory(
    rec: Mapping, traj_id: str, group: str | None, fallback_reward: float | None, metadata: dict
) -> Trajectory:
    steps = rec["steps"]
    if not steps:
        raise RecordError("steps", "empty trajectory: no steps")
    for k, s in enumerate(steps):
        if not isinstance(s, Mapping):
            raise RecordError(f"steps[{k}]", f"expected a step object, got {type_name(s)}")
    msgs: list[dict] = []
    gens = []
    for k, step in enumerate(steps):
        if k > 0:
            msgs += _observation(step, f"steps[{k}]")
        msgs.append(_assistant(step, f"steps[{k}]"))
        gens.append(_generation(step, f"steps[{k}]"))
    segs = attach_generations(render_response(msgs), gens)
    prompt, prompt_ids = _prompt(steps, rec.get("task"))
    step_rewards = [as_float(s.get("reward", 0.0), f"steps[{k}].reward") for k, s in enumerate(steps)]
    traj_reward = rec.get("reward", rec.get("trajectory_reward"))
    traj_reward = as_float(traj_reward, "reward") if traj_reward is not None else fallback_reward
    turn, glob = [], {}
    if any(r != 0.0 for r in step_rewards):
        turn = [{"step_reward": r} for r in step_rewards]
        if traj_reward is not None:
            metadata["trajectory_reward"] = traj_reward
    elif traj_reward is not None:
        glob = {"reward": traj_reward}
    mc = rec.get("mc_returns") if isinstance(rec.get("mc_returns"), list) else [s.get("mc_return") for s in steps]
    if any(isinstance(x, (int, float)) and x for x in mc):
        metadata["mc_returns"] = [_number(x) for x in mc]
    return Trajectory(
        id=traj_id,
        group_id=group or _default_group(rec, prompt, prompt_ids),
        prompt=prompt,
        segments=segs,
        turn_rewards=turn,
        global_rewards=glob,
        metadata=metadata,
        prompt_token_ids=prompt_ids,
    )


# ------------------------------------------------------------------------------------------------ records
def _token_mode(rec: Mapping, default_id: str) -> Trajectory:
    ids = as_token_ids(rec["response_tokens"], "response_tokens")
    masks = rec.get("response_masks")
    generated = as_token_ids(masks, "response_masks") if masks is not None else None
    if generated is not None and len(generated) != len(ids):
        raise RecordError("response_masks", f"has {len(generated)} values for {len(ids)} tokens")
    if generated is not None and generated.size and generated.max() > 1:
        raise RecordError("response_masks", "mask values must be 0 or 1")
    prompt_ids = as_token_ids(rec.get("prompt_tokens"), "prompt_tokens")
    reward = rec.get("trajectory_reward")
    metadata = {"truncated": truncated_from_reason(rec.get("termination_reason"))}
    return Trajectory(
        id=as_id(rec["id"], "id") if rec.get("id") is not None else default_id,
        group_id=prompt_group_id(prompt_ids.tolist()),
        prompt=None,
        segments=mask_segments(
            ids, generated if generated is not None else np.ones(len(ids), dtype=bool), other_role="user"
        ),
        global_rewards={"reward": as_float(reward, "trajectory_reward")} if reward is not None else {},
        metadata=metadata,
        prompt_token_ids=prompt_ids,
    )


def _messages_record(msgs: list, default_id: str, reward: object, field: str = "") -> Trajectory:
    msgs = checked_messages(msgs, field)
    first = next((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), None)
    if first is None:
        raise RecordError(None, "no assistant message: the response has zero tokens")
    prompt = render_prompt(msgs[:first])
    return Trajectory(
        id=default_id,
        group_id=prompt_group_id(prompt),
        prompt=prompt,
        segments=render_response(msgs[first:]),
        global_rewards={"reward": as_float(reward, "reward")} if reward is not None else {},
    )


def _episode(rec: Mapping, default_id: str) -> list[Trajectory]:
    ep_id = as_id(rec.get("id", default_id), "id")
    task_id = ep_id.split(":")[0]
    fallback = float(rec["is_correct"]) if isinstance(rec.get("is_correct"), bool) else None
    if not rec["trajectories"]:
        raise RecordError("trajectories", "empty episode: no trajectories")
    out = []
    for j, t in enumerate(rec["trajectories"]):
        if not isinstance(t, Mapping) or not isinstance(t.get("steps"), list):
            raise RecordError(f"trajectories[{j}]", "expected a trajectory object with a list of steps")
        name = t.get("name") or DEFAULT_TRAJ_NAME
        group = task_id if name == DEFAULT_TRAJ_NAME else f"{task_id}:{name}"
        reason = rec.get("termination_reason")
        metadata = {
            "truncated": truncated_from_reason(reason),
            "episode_id": ep_id,
            "termination_reason": reason,
            "is_correct": rec.get("is_correct"),
        }
        suffix = "" if len(rec["trajectories"]) == 1 else f"/{name}-{j}"
        try:
            out.append(_steps_trajectory(t, f"{ep_id}{suffix}", group, fallback, metadata))
        except RecordError as err:
            raise RecordError(
                f"trajectories[{j}].{err.field}" if err.field else f"trajectories[{j}]", err.reason
            ) from None
    return out


def convert(rec: object, default_id: str) -> list[Trajectory]:
    if _is_messages(rec):
        return [_messages_record(rec, default_id, None)]
    if not isinstance(rec, Mapping):
        raise RecordError(None, f"expected an rLLM record (object or message list), got {type_name(rec)}")
    if isinstance(rec.get("trajectories"), list):
        return _episode(rec, default_id)
    if "response_tokens" in rec:
        return [_token_mode(rec, default_id)]
    if isinstance(rec.get("steps"), list):
        reason = rec.get("termination_reason")
        metadata = {"truncated": truncated_from_reason(reason)} if reason is not None else {}
        traj_id = as_id(rec["uid"], "uid") if rec.get("uid") is not None else default_id
        return [_steps_trajectory(rec, traj_id, None, None, metadata)]
    if _is_messages(rec.get("chat_completions")):
        return [_messages_record(rec["chat_completions"], default_id, rec.get("reward"), "chat_completions")]
    raise RecordError(None, "not an rLLM episode, trajectory, token-mode record or message list")


def read(path: Path, ctx: LoadContext):
    return read_records(path, ctx, convert)
