"""rLLM's two episode writers, re-stated: ``EpisodeLogger`` (training, ``trainer.log_episodes``) and
``EvalEpisodeStore`` (``rllm eval``, where the ``rllm init`` templates' core ``Step(input=, output=)`` land).

Source: rllm-org/rllm at ``9beb6e0f676a46d38858991fd79ac5f8e0b16d4c`` (2026-08-15).

``rllm/utils/episode_logger.py``, ``EpisodeLogger`` (mimicked by ``log_episodes_batch``):

* ``__init__``: ``log_dir = base_dir / subdirectory`` (the trainers pass ``subdirectory="episodes"``).
* ``get_step_dir``: ``{mode}_step_{step}_epoch_{epoch}/``.
* ``compute_task_hash``: ``sha256(json.dumps(task, sort_keys=True, default=str))``, first 8 hex digits.
* ``get_episode_filename``: ``episode_hash{task_hash}_id{episode.id with ':' and '/' replaced by '_'}.json``.
* ``log_episode``: one ``json.dumps(..., indent=2, default=str)`` document per file, keys ``training_step, epoch,
  episode_id, session_id, task, task_hash, is_correct, termination_reason`` (the enum's ``.value``, e.g.
  ``"env_done"``) ``, metrics, metadata, timing, trajectories``; each trajectory ``name, uid, reward, num_steps,
  timing, steps``; each step ONLY ``observation, thought, action, reward, done, model_response,
  chat_completions, timing``. Lossy: no ``prompt_ids``/``response_ids``/``logprobs`` (text only, re-tokenized on
  load), and no core ``input``/``output`` (a ``Step(input=..., output=...)`` is written with nothing generated).
* ``log_episodes_batch``: the episode files, then ``batch_summary.json`` (``training_step, epoch, mode,
  num_episodes, episode_files, summary_stats{total_correct, total_incorrect, accuracy,
  avg_trajectories_per_episode}``, ``indent=2``) in the same step folder.

What the episodes hold, from the engine and workflow that produce them:

* ``rllm/engine/unified_workflow_engine.py::process_task_with_retry``: ``episode.id = f"{task_id}:{rollout_idx}"``,
  rollout_idx counting the repeats of one task id (``execute_tasks``); ``Episode.task_id = id.split(":")[0]``
  (``rllm/types.py``), and ``rllm/trainer/algorithms/transform.py::_build_trajectory_groups`` groups by
  ``f"{task_id}:{trajectory.name}"``.
* ``rllm/workflows/workflow.py::Workflow.postprocess_episode``: ``trajectory.reward = Σ step rewards``,
  ``is_correct = Σ trajectory rewards > 0``, ``metrics = {f"{name}_acc": mean trajectory reward}``.
* ``rllm/types.py::Step.from_model_output``: ``chat_completions = messages + [{"role": "assistant", "content",
  "reasoning"}]``, ``model_response = content``, ``thought = reasoning or ""``.

``rllm/eval/episode_store.py::EvalEpisodeStore.write`` (mimicked by ``store_eval_episode``):
``episodes/episode_{idx:06d}_{task id}.json`` holding ``episode.model_dump(mode="json")`` plus ``eval_idx``;
``model_dump`` keeps every pydantic field, so core steps keep ``input``/``output`` next to the empty training
fields (``prompt_ids: []``, ``chat_completions: []``, ``model_response: ""``, ...).

The ground truth is what the policy saw under Qwen2.5's chat template: a model turn is its content plus
``<|im_end|>``; the glue ``\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>assistant\\n`` is not generated.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SYSTEM = "Solve the task. Use the calculator when needed."


@dataclass
class Truth:
    """What the loader must recover for one trajectory."""

    id: str
    group: str
    segments: list[tuple[str, str]]  # (role, text) in response order
    turn_rewards: list[dict] = field(default_factory=list)
    global_rewards: dict = field(default_factory=dict)
    truncated: bool = False


# ------------------------------------------------------------------------------------------------ EpisodeLogger
def task_hash(task: object, length: int = 8) -> str:
    return hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:length]


def episode_filename(episode: dict) -> str:
    safe = str(episode["id"]).replace(":", "_").replace("/", "_")
    return f"episode_hash{task_hash(episode['task'])}_id{safe}.json"


def log_episodes_batch(base_dir: Path, episodes: list[dict], step: int, mode: str = "train", epoch: int = 0) -> Path:
    """Write ``episodes`` as ``EpisodeLogger.log_episodes_batch`` does; returns the step folder."""
    step_dir = Path(base_dir) / "episodes" / f"{mode}_step_{step}_epoch_{epoch}"
    step_dir.mkdir(parents=True, exist_ok=True)
    for ep in episodes:
        data = {
            "training_step": step,
            "epoch": epoch,
            "episode_id": ep["id"],
            "session_id": ep.get("session_id"),
            "task": ep["task"],
            "task_hash": task_hash(ep["task"]),
            "is_correct": ep["is_correct"],
            "termination_reason": ep["termination_reason"],
            "metrics": ep["metrics"],
            "metadata": ep.get("metadata", {}),
            "timing": {},
            "trajectories": [
                {
                    "name": t["name"],
                    "uid": t["uid"],
                    "reward": t["reward"],
                    "num_steps": len(t["steps"]),
                    "timing": {},
                    "steps": [
                        {
                            "observation": s.get("observation"),
                            "thought": s.get("thought", ""),
                            "action": s.get("action"),
                            "reward": s.get("reward", 0.0),
                            "done": s.get("done", False),
                            "model_response": s.get("model_response", ""),
                            "chat_completions": s.get("chat_completions", []),
                            "timing": {},
                        }
                        for s in t["steps"]
                    ],
                }
                for t in ep["trajectories"]
            ],
        }
        (step_dir / episode_filename(ep)).write_text(json.dumps(data, indent=2, default=str) + "\n")
    correct = sum(1 for ep in episodes if ep["is_correct"])
    summary = {
        "training_step": step,
        "epoch": epoch,
        "mode": mode,
        "num_episodes": len(episodes),
        "episode_files": [episode_filename(ep) for ep in episodes],
        "summary_stats": {
            "total_correct": correct,
            "total_incorrect": len(episodes) - correct,
            "accuracy": correct / len(episodes),
            "avg_trajectories_per_episode": sum(len(ep["trajectories"]) for ep in episodes) / len(episodes),
        },
    }
    (step_dir / "batch_summary.json").write_text(json.dumps(summary, indent=2))
    return step_dir


# ------------------------------------------------------------------------------------------------ episodes
def _rollout(task_id: str, rollout_idx: int, question: str, replies: list[str], observations: list[str], done: bool):
    """One episode of a tool-calling workflow: reply k, then (if any) observation k as the next user turn."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    steps, segments = [], []
    for k, reply in enumerate(replies):
        messages = messages + [{"role": "assistant", "content": reply, "reasoning": None}]
        steps.append({"chat_completions": messages, "model_response": reply, "thought": "", "action": reply})
        segments.append(("model", reply + IM_END))
        if k < len(observations):
            messages = messages + [{"role": "user", "content": observations[k]}]
            segments.append(("user", f"\n{IM_START}user\n{observations[k]}{IM_END}\n{IM_START}assistant\n"))
    correct = done and replies[-1].endswith("\\boxed{4}")
    for s in steps:
        s["reward"] = 0.0
    steps[-1]["reward"] = 1.0 if correct else 0.0
    steps[-1]["done"] = done
    reward = sum(s["reward"] for s in steps)  # Workflow.compute_trajectory_reward
    episode = {
        "id": f"{task_id}:{rollout_idx}",
        "task": {"question": question, "ground_truth": "4"},
        "is_correct": reward > 0,  # Workflow.assign_episode_correctness
        "termination_reason": "env_done" if done else "max_response_length_exceeded",
        "metrics": {"solver_acc": float(reward)},  # Workflow.collect_metrics
        "trajectories": [{"name": "solver", "uid": str(uuid.uuid4()), "reward": reward, "steps": steps}],
    }
    if any(s["reward"] for s in steps):
        rewards = {"turn_rewards": [{"step_reward": s["reward"]} for s in steps]}
    else:
        rewards = {"global_rewards": {"reward": reward}}
    truth = Truth(f"{task_id}:{rollout_idx}", f"{task_id}:solver", segments, truncated=not done, **rewards)
    return episode, truth


def training_batch() -> tuple[list[dict], list[Truth]]:
    """Two tasks × three rollouts, task ids as the trainer makes them (one uuid per prompt)."""
    t_a, t_b = "5b0c6d1e-task-a", "9f3e2a77-task-b"
    specs = [
        (t_a, 0, "What is 2+2?", ["calc(2+2)", "The answer is \\boxed{4}"], ["4"], True),
        (t_a, 1, "What is 2+2?", ["The answer is \\boxed{5}"], [], True),
        (t_a, 2, "What is 2+2?", ["calc(2*2)", "calc(2**2)", "Still"], ["4", "4"], False),
        (t_b, 0, "Compute 8/2.", ["\\boxed{4}"], [], True),
        (t_b, 1, "Compute 8/2.", ["calc(8/2)", "\\boxed{4.0}"], ["4.0"], True),
        (t_b, 2, "Compute 8/2.", ["\\boxed{4}"], [], True),
    ]
    pairs = [_rollout(*spec) for spec in specs]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# ------------------------------------------------------------------------------------------------ rllm eval
def core_step(input_: object, output: object, done: bool) -> dict:
    """``Step(input=..., output=..., done=...).model_dump(mode="json")``: every field, training ones empty."""
    return {
        "id": str(uuid.uuid4()),
        "input": input_,
        "output": output,
        "action": None,
        "reward": 0.0,
        "done": done,
        "metadata": None,
        "prompt_ids": [],
        "response_ids": [],
        "logprobs": [],
        "routing_matrices": None,
        "chat_completions": [],
        "observation": None,
        "thought": "",
        "model_response": "",
        "model_output": None,
        "mc_return": 0.0,
        "advantage": None,
        "weight_version": None,
    }


def template_episode(
    task_id: str, rollout_idx: int, question: str, outputs: list[str], reward: float
) -> tuple[dict, Truth]:
    """What the ``react_agent.py.tpl`` template returns (``Step(input=question if turn == 0 else "", output=...)``),
    after the engine sets ``episode.id`` and the evaluator the trajectory reward, as ``model_dump(mode="json")``.

    Truth: each output is a model turn; later steps have no input, so only the template's assistant header
    separates them (the tool results the agent saw in between are not in the steps)."""
    steps = [core_step(question if k == 0 else "", out, k == len(outputs) - 1) for k, out in enumerate(outputs)]
    traj = {
        "uid": str(uuid.uuid4()),
        "name": "solver",
        "task": None,
        "steps": steps,
        "reward": reward,
        "input": None,
        "output": None,
        "signals": {"accuracy": reward},
        "metadata": None,
    }
    segments = []
    for k, out in enumerate(outputs):
        if k:
            segments.append(("system", f"\n{IM_START}assistant\n"))
        segments.append(("model", out + IM_END))
    truth = Truth(f"{task_id}:{rollout_idx}", f"{task_id}:solver", segments, global_rewards={"reward": reward})
    episode = {
        "id": f"{task_id}:{rollout_idx}",
        "task": {"id": task_id, "question": question},
        "termination_reason": "env_done",
        "is_correct": reward > 0,
        "session_id": None,
        "trajectories": [traj],
        "artifacts": {"answer": outputs[-1]},
        "metrics": {},
        "metadata": {},
    }
    return episode, truth


def store_eval_episode(run_dir: Path, idx: int, episode: dict) -> Path:
    """``EvalEpisodeStore.write``: ``episodes/episode_{idx:06d}_{task id}.json`` with ``eval_idx`` stamped in."""
    folder = Path(run_dir) / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(episode["task"]["id"])) or "_"
    path = folder / f"episode_{idx:06d}_{safe}.json"
    path.write_text(json.dumps(episode | {"eval_idx": idx}, indent=2))
    return path
