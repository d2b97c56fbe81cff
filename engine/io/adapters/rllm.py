"""Adapter ``rllm``: rLLM Episodes / Trajectories / Steps (``to_dict()`` / ``model_dump()`` JSON, the
``EpisodeLogger`` files), legacy engine outputs and chat-completion dumps (docs/conventions/rllm.md §2.5).

Accepted records (JSONL, a JSON array, or one JSON document):

* Episode ``{"id": "task_id:rollout_idx", "trajectories": [Trajectory...], "is_correct", "termination_reason"}``
  (``Episode.to_dict()``, ``Episode.model_dump()`` as ``rllm eval`` stores it); the ``EpisodeLogger`` file of
  ``trainer.log_episodes`` names the id ``episode_id`` and adds ``task_hash``, ``training_step``, ``epoch``, ``timing``
* Trajectory ``{"uid", "name", "task", "steps": [Step...], "reward"}``; legacy "Step" mode
  ``{"steps": [{"prompt", "response", "prompt_ids", "completion_ids"}], "trajectory_reward", "mc_returns"}``
* Step ``{"prompt_ids", "response_ids", "logprobs", "chat_completions", "observation", "thought",
  "model_response", "reward", "mc_return", "done"}``, or a core Step ``{"input", "output", "action"}`` (the
  ``rllm init`` templates' ``Step(input=question, output=answer)``)
* legacy "Token" mode ``{"prompt_tokens", "response_tokens", "response_masks", "trajectory_reward"}``
* a chat-completions dump line: a list of ``{"role", "content"}`` messages (or ``{"chat_completions": [...]}``)

Each Step is one turn: its response is a model segment, the next step's new observation a tool/user segment.
Real ids are kept (``response_ids``/``completion_ids`` + ``logprobs``; observation ids from the prompt
difference when step k+1's ``prompt_ids`` extends step k's prompt + response); otherwise the chat messages
are rendered with ChatML and tokenized. Text comes from ``chat_completions``, else ``model_response`` (+
``thought``), else the core ``output``; the observation from ``chat_completions``, else ``observation``, else
the core ``input``. A step with none of these (``EpisodeLogger`` keeps no ``input``/``output``, so a core Step
logged by it is empty) is refused: it never loads as a bare ``<|im_end|>``.

Rewards: if any step reward is non-zero, each step's reward is the turn component ``step_reward`` (the
engine computes MC returns from them); otherwise the trajectory reward (``reward``, ``trajectory_reward``, or,
when it is null, the last step's reward, as rLLM's ``transform._build_trajectory_groups`` does) is the global
component ``reward``. ``is_correct`` (rLLM derives it as ``reward > 0``) is metadata only; an episode's numeric
``metrics`` go to ``metadata["reward_components"]``, never into the reward. Stored ``mc_return`` values go to
``metadata["mc_returns"]`` for reference.

Step: the ``EpisodeLogger`` record's ``training_step`` (rllm-org/rllm ``9beb6e0f``, ``rllm/utils/episode_logger.py``
``EpisodeLogger.log_episode`` writes ``"training_step": step`` and puts the file in ``get_step_dir(step, mode,
epoch)`` = ``{mode}_step_{step}_epoch_{epoch}``; the engines call ``log_episodes_batch(results, self.current_step,
...)`` with the step the trainer set, ``set_training_step(trainer_state.global_step, mode="train", epoch=...)`` in
``rllm/trainer/unified_trainer.py`` and ``set_training_step(self.global_steps, ...)`` in
``rllm/trainer/verl/agent_workflow_trainer.py``). ``STEP_FOLDER`` reads ``train_step_<N>_epoch_<E>`` for records
that say none (a record's own ``training_step`` wins; a disagreement is noted). ``val_step_<N>_epoch_<E>`` folders
(validation rollouts, not a training batch) are not step folders: a load of ``episodes/`` names them as not read;
opened on their own they load with their records' ``training_step``. ``epoch`` -> metadata.

Groups: rLLM groups ``f"{episode.task_id}:{trajectory.name}"`` with ``task_id = id.split(":")[0]``
(``rllm/trainer/algorithms/transform.py``); the same here (the default trajectory name is left out). An episode
id without a task part groups by ``task_hash`` / ``task`` (reported once per load); records that are not
episodes group by ``task``, then the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from engine.io.adapters.common import read_records, truncated_from_reason
from engine.io.adapters.generations import attach_generations, mask_segments
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_float, as_float_array, as_mask, as_token_ids, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, as_step, prompt_group_id, stable_hash
from engine.io.reading.problems import RecordError
from engine.io.text.chatml import checked_messages, render_prompt, render_response

NAME = "rllm"
DEFAULT_TRAJ_NAME = "default_traj_name"
BATCH_SUMMARY_KEYS = frozenset({"num_episodes", "episode_files", "summary_stats"})
STEP_FOLDER = re.compile(r"train_step_(\d+)_epoch_\d+")  # EpisodeLogger.get_step_dir, mode "train"


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


def batch_summary(rec: object) -> str | None:
    """Why ``rec`` is not rollouts when it is ``EpisodeLogger.log_episodes_batch``'s ``batch_summary.json``."""
    if isinstance(rec, Mapping) and BATCH_SUMMARY_KEYS <= set(rec) and isinstance(rec["episode_files"], list):
        return "rLLM EpisodeLogger batch summary: episode counts and accuracy of the episode files beside it"
    return None


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
    content = step.get("model_response") or step.get("response") or step.get("model_output") or step.get("output") or ""
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
        return _core_input(step, field)
    role = "tool" if isinstance(obs, Mapping) and "tool_outputs" in obs else "user"
    return [{"role": role, "content": _text(obs)}]


def _core_input(step: Mapping, field: str) -> list[dict]:
    """A core Step's ``input``: chat messages as they are, anything else as one user message."""
    value = step.get("input")
    if value is None or value == "":
        return []
    if _is_messages(value):
        return checked_messages(value, f"{field}.input")
    return [{"role": "user", "content": _text(value)}]


def _check_usable(step: Mapping, msg: dict, gen: dict | None, field: str) -> None:
    """A step must carry model output: ids, an assistant message, or response text (never a bare end token)."""
    if gen is not None or msg.get("content") or msg.get("reasoning") or msg.get("tool_calls"):
        return
    chat = _chat(step, field)
    if chat is not None and chat[-1].get("role") == "assistant":  # an empty reply the model did give
        return
    have = sorted(k for k in ("action", "observation", "input") if step.get(k) not in (None, "", [], {}))
    extra = f" (it has only {', '.join(have)}, which are not the generated text)" if have else ""
    raise RecordError(
        field,
        "no model output: no response_ids, no assistant message in chat_completions, empty model_response and "
        f"no output{extra}; rLLM's EpisodeLogger does not write a core Step's input/output, so export the "
        "episodes with Episode.to_dict() / model_dump() (what `rllm eval` stores) instead",
    )


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
    core = _core_input(first, "steps[0]")
    if core:
        return render_prompt(core), None
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


def _steps_trajectory(rec: Mapping, traj_id: str, group: str | None, metadata: dict) -> Trajectory:
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
        _check_usable(step, msgs[-1], gens[-1], f"steps[{k}]")
    segs = attach_generations(render_response(msgs), gens)
    prompt, prompt_ids = _prompt(steps, rec.get("task"))
    step_rewards = [as_float(s.get("reward", 0.0), f"steps[{k}].reward") for k, s in enumerate(steps)]
    traj_reward = rec.get("reward", rec.get("trajectory_reward"))
    if traj_reward is not None:
        traj_reward = as_float(traj_reward, "reward")
    elif steps[-1].get("reward") is not None:  # rLLM's transform fills a null trajectory reward from the last step
        traj_reward = step_rewards[-1]
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
    generated = as_mask(masks, "response_masks") if masks is not None else None
    if generated is not None and len(generated) != len(ids):
        raise RecordError("response_masks", f"has {len(generated)} values for {len(ids)} tokens")
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


def _episode_group(rec: Mapping, ep_id: str | None) -> tuple[str | None, str]:
    """(group of the episode's default trajectory or None to group by task/prompt, where it came from)."""
    if ep_id is not None and ":" in ep_id:
        return ep_id.split(":")[0], "episode id"
    if isinstance(rec.get("task_hash"), str) and rec["task_hash"]:
        return f"task-{rec['task_hash']}", "task_hash"
    if rec.get("task") is not None:
        return f"task-{stable_hash(rec['task'])}", "task"
    return None, "prompt"


def _numeric_metrics(rec: Mapping) -> dict[str, float]:
    metrics = rec.get("metrics")
    if not isinstance(metrics, Mapping):
        return {}
    return {str(k): float(v) for k, v in metrics.items() if _number(v) is not None and not isinstance(v, bool)}


def _episode(rec: Mapping, default_id: str) -> list[Trajectory]:
    key = "id" if rec.get("id") is not None else "episode_id" if rec.get("episode_id") is not None else None
    ep_id = as_id(rec[key], key) if key else None
    task_group, group_from = _episode_group(rec, ep_id)
    ep_id = ep_id if ep_id is not None else default_id
    if not rec["trajectories"]:
        raise RecordError("trajectories", "empty episode: no trajectories")
    components = _numeric_metrics(rec)
    step = as_step(rec["training_step"], "training_step") if rec.get("training_step") is not None else None
    out = []
    for j, t in enumerate(rec["trajectories"]):
        if not isinstance(t, Mapping) or not isinstance(t.get("steps"), list):
            raise RecordError(f"trajectories[{j}]", "expected a trajectory object with a list of steps")
        name = t.get("name") or DEFAULT_TRAJ_NAME
        group = None
        if task_group is not None:
            group = task_group if name == DEFAULT_TRAJ_NAME else f"{task_group}:{name}"
        reason = rec.get("termination_reason")
        metadata = {
            "truncated": truncated_from_reason(reason),
            "episode_id": ep_id,
            "termination_reason": reason,
            "is_correct": rec.get("is_correct"),
            "group_from": group_from,
        }
        if components:
            metadata["reward_components"] = dict(components)
        for extra in ("training_step", "epoch"):
            if rec.get(extra) is not None:
                metadata[extra] = rec[extra]
        suffix = "" if len(rec["trajectories"]) == 1 else f"/{name}-{j}"
        try:
            out.append(_steps_trajectory(t, f"{ep_id}{suffix}", group, metadata))
            out[-1].step = step
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
        return [_steps_trajectory(rec, traj_id, None, metadata)]
    if _is_messages(rec.get("chat_completions")):
        return [_messages_record(rec["chat_completions"], default_id, rec.get("reward"), "chat_completions")]
    why = batch_summary(rec)
    if why:
        raise RecordError(None, f"skipped: summary, not rollouts ({why})")
    raise RecordError(None, "not an rLLM episode, trajectory, token-mode record or message list")


NO_TASK_PART = "episode ids carry no task part (task_id:rollout_idx)"
GROUP_NOTES = {
    "task_hash": f"{NO_TASK_PART}; rollouts are grouped by the episode's task_hash",
    "task": f"{NO_TASK_PART}; rollouts are grouped by a hash of the episode's task",
    "prompt": f"{NO_TASK_PART} and there is no task; rollouts are grouped by prompt",
}


def read(path: Path, ctx: LoadContext):
    for line, prefix, traj in read_records(path, ctx, convert):
        note = GROUP_NOTES.get(traj.metadata.get("group_from"))
        if note:
            ctx.note("episode_id", note, line, once=f"rllm-group-{traj.metadata['group_from']}")
        yield line, prefix, traj
