"""Mimic of OpenPipe ART's trajectory log, ``<art_path>/<project>/models/<model>/trajectories/<split>/<step:04d>.yaml``.

Source: OpenPipe/ART at commit 779559fd0c68ce073cbd041447f88aacf1d9f585.

* ``src/art/local/backend.py``, ``LocalBackend._log`` (lines 240-258): ``iteration = self.__get_step(model)``
  (for a ``TrainableModel``, else 0), file ``f"{iteration:04d}.yaml"`` in ``get_trajectories_split_dir(model_dir,
  split)`` = ``<model_dir>/trajectories/<split>`` (``src/art/utils/output_dirs.py``), content
  ``serialize_trajectory_groups(trajectory_groups)``. ``__get_step`` is ``get_model_step``
  (``src/art/utils/get_model_step.py``, ``get_step_from_dir``): the largest all-digit folder name in the model's
  folder, i.e. its latest checkpoint ``<model_dir>/<step:04d>``. ``_train_model`` (line 315) logs the ``train``
  split before training; ``LocalService.train`` (``src/art/local/service.py`` line 151) saves the new checkpoint as
  ``get_step_from_dir(output_dir) + 1``. So a step's file is named by the checkpoint its batch was trained from;
  nothing in the YAML says the step.
* ``src/art/utils/trajectory_logging.py``: ``serialize_trajectory_groups`` = ``yaml.dump([group dicts])``;
  ``trajectory_group_to_dict`` = ``{"trajectories": [...], "metadata": group.metadata}`` (entries that are not a
  ``Trajectory``, i.e. exceptions, skipped); ``trajectory_to_dict`` = ``{"reward", "metrics", "metadata",
  "messages_and_choices", "logs"}`` (``tools`` is not written); ``message_or_choice_to_dict``: a plain message
  dict as is, a ``Choice`` via ``to_dict()`` with ``logprobs`` popped.
* ``src/art/trajectories.py``: ``Trajectory.finish`` adds ``metrics["duration"]``; ``TrajectoryGroup`` is the unit
  ART normalizes rewards in (``src/art/local/tokenize.py``, ``tokenize_trajectory_groups``: advantage =
  (reward - group mean) / (group std + 1e-6), not logged); only Choices are trained on (their logprob tokens).

The Choice dicts here have the fields an OpenAI-compatible (vLLM) chat completion response sets and that
``Choice.to_dict()`` keeps (``finish_reason``, ``index``, ``message`` with ``content``, ``role``,
``tool_calls``, ``refusal``..., ``stop_reason``). Lossy in the log: token ids and logprobs, and the tools.
The ground truth returned: per trajectory the rendered ChatML response texts by role (ART re-tokenizes with the
model's chat template), reward, group, truncation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass
class Truth:
    group: int
    reward: float
    truncated: bool
    segments: list[tuple[str, str]]  # the response as the Qwen2.5 chat template renders it: (role, text)


def choice(content: str, finish_reason: str = "stop", tool_calls: list | None = None) -> dict:
    """``Choice.to_dict()`` of a chat completion choice, logprobs already popped by ``message_or_choice_to_dict``."""
    return {
        "finish_reason": finish_reason,
        "index": 0,
        "message": {
            "content": content,
            "refusal": None,
            "role": "assistant",
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": tool_calls or [],
            "reasoning_content": None,
        },
        "stop_reason": None,
    }


def trajectory(reward: float, messages_and_choices: list, duration: float) -> dict:
    return {
        "reward": reward,
        "metrics": {"duration": duration, "correct": reward > 0},
        "metadata": {"scenario_id": "s1"},
        "messages_and_choices": messages_and_choices,
        "logs": [],
    }


def get_step_from_dir(output_dir: Path) -> int:
    """ART's ``get_step_from_dir``: the model's latest checkpoint, the largest all-digit folder name (0 if none)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    return max((int(d.name) for d in output_dir.iterdir() if d.is_dir() and d.name.isdigit()), default=0)


def write_log(
    root: Path, step: int = 3, rewards: tuple[float, float, float, float] = (1.0, 0.0, 0.5, 0.0)
) -> tuple[Path, list[Truth]]:
    """Two groups: a tool-using email agent (2 rollouts) and a one-turn task whose second rollout hit the limit;
    group 1's first rollout replays a plain assistant message (context, not trained on). ``step``: the model's
    latest checkpoint (its folder is made, as ``LocalService.train`` left it at the step before); ``rewards``: the
    four rollouts' (the same prompts at every step, as from epoch to epoch)."""
    system = {"role": "system", "content": "You are an email agent."}
    user = {"role": "user", "content": "When is the offsite?"}
    call = [{"id": "call_0", "type": "function", "function": {"name": "search", "arguments": '{"q": "offsite"}'}}]
    tool = {"role": "tool", "tool_call_id": "call_0", "content": "Offsite: May 3"}
    r = rewards
    groups = [
        {
            "metadata": {"step": step},  # the user's TrajectoryGroup.metadata (ART writes it as given; not ART's step)
            "trajectories": [
                trajectory(r[0], [system, user, choice("", "tool_calls", call), tool, choice("May 3.")], 1.5),
                trajectory(r[1], [system, user, choice("I do not know.")], 0.5),
            ],
        },
        {
            "metadata": {},
            "trajectories": [
                trajectory(
                    r[2],
                    [user, choice("Let me check."), {"role": "assistant", "content": "(replayed)"}, choice("Done.")],
                    0.2,
                ),
                trajectory(r[3], [user, choice("Thinking about it at great", "length")], 0.3),
            ],
        },
    ]
    call_text = '<tool_call>\n{"name": "search", "arguments": {"q": "offsite"}}\n</tool_call>'
    obs = "\n<|im_start|>user\n<tool_response>\nOffsite: May 3\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    glue = "\n<|im_start|>assistant\n"
    truth = [
        Truth(0, r[0], False, [("model", call_text + "<|im_end|>"), ("tool", obs), ("model", "May 3.<|im_end|>")]),
        Truth(0, r[1], False, [("model", "I do not know.<|im_end|>")]),
        Truth(
            1,
            r[2],
            False,
            [
                ("model", "Let me check.<|im_end|>"),
                ("system", glue),
                ("system", "(replayed)<|im_end|>"),  # a plain assistant message: context, not trained on
                ("system", glue),
                ("model", "Done.<|im_end|>"),
            ],
        ),
        # cut by the length limit: the template's <|im_end|> after it was not generated
        Truth(1, r[3], True, [("model", "Thinking about it at great"), ("system", "<|im_end|>")]),
    ]
    model_dir = root / "proj" / "models" / "agent-001"  # get_model_dir: <art_path>/<project>/models/<name>
    if step:
        (model_dir / f"{step:04d}").mkdir(parents=True, exist_ok=True)  # get_step_checkpoint_dir
    iteration = get_step_from_dir(model_dir)
    out = model_dir / "trajectories" / "train"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{iteration:04d}.yaml"
    path.write_text(yaml.dump(groups))
    return path, truth
