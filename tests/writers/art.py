"""Mimic of OpenPipe ART's trajectory log, ``<art_path>/<project>/models/<model>/trajectories/<split>/<step:04d>.yaml``.

Source: OpenPipe/ART at commit 779559fd0c68ce073cbd041447f88aacf1d9f585.

* ``src/art/local/backend.py``, ``LocalBackend._log``: file ``f"{iteration:04d}.yaml"`` in the split's
  trajectories directory, content ``serialize_trajectory_groups(trajectory_groups)``.
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


def write_log(root: Path, step: int = 3) -> tuple[Path, list[Truth]]:
    """Two groups: a tool-using email agent (2 rollouts) and a one-turn task whose second rollout hit the limit;
    group 1's first rollout replays a plain assistant message (context, not trained on)."""
    system = {"role": "system", "content": "You are an email agent."}
    user = {"role": "user", "content": "When is the offsite?"}
    call = [{"id": "call_0", "type": "function", "function": {"name": "search", "arguments": '{"q": "offsite"}'}}]
    tool = {"role": "tool", "tool_call_id": "call_0", "content": "Offsite: May 3"}
    groups = [
        {
            "metadata": {"step": step},
            "trajectories": [
                trajectory(1.0, [system, user, choice("", "tool_calls", call), tool, choice("May 3.")], 1.5),
                trajectory(0.0, [system, user, choice("I do not know.")], 0.5),
            ],
        },
        {
            "metadata": {},
            "trajectories": [
                trajectory(
                    0.5,
                    [user, choice("Let me check."), {"role": "assistant", "content": "(replayed)"}, choice("Done.")],
                    0.2,
                ),
                trajectory(0.0, [user, choice("Thinking about it at great", "length")], 0.3),
            ],
        },
    ]
    call_text = '<tool_call>\n{"name": "search", "arguments": {"q": "offsite"}}\n</tool_call>'
    obs = "\n<|im_start|>user\n<tool_response>\nOffsite: May 3\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    glue = "\n<|im_start|>assistant\n"
    truth = [
        Truth(0, 1.0, False, [("model", call_text + "<|im_end|>"), ("tool", obs), ("model", "May 3.<|im_end|>")]),
        Truth(0, 0.0, False, [("model", "I do not know.<|im_end|>")]),
        Truth(
            1,
            0.5,
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
        Truth(1, 0.0, True, [("model", "Thinking about it at great"), ("system", "<|im_end|>")]),
    ]
    out = root / "proj" / "models" / "agent-001" / "trajectories" / "train"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{step:04d}.yaml"
    path.write_text(yaml.dump(groups))
    return path, truth
