"""Sample run ``python_tool_two_rollouts``: the rLLM worked example (docs/TUTORIAL.md §7.2), one question, two rollouts.

Each rollout has 3 steps = 3 turns: (0) the model thinks and calls a python tool, the tool output follows;
(1) the model reads the output and verifies with a second call; (2) the final answer, "4" (correct, step
rewards [0, 0, 1]) or "5" (wrong: its is_prime counts 1 as prime, step rewards [0, 0, 0]). With rLLM's
per-step MC returns (gamma 0.95) rollout 0's steps get 0.9025 / 0.95 / 1.0 and rollout 1's 0 / 0 / 0.
Rendered with the Qwen2.5 ChatML template; no log-probs or values (none were given).
"""

from __future__ import annotations

from engine.io.data.model import Trajectory
from engine.io.data.run import Run
from engine.io.text.chatml import render_prompt, render_response
from engine.io.text.tokenize import fill_tokens, get_tokenizer

QUESTION = "How many prime numbers are there between 1 and 10? Use the python tool to compute it."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "python",
            "description": "Run Python code and return what it prints.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]
GOOD_PRIME = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))\n"
BAD_PRIME = "def is_prime(n):\n    return all(n % d for d in range(2, int(n**0.5) + 1))\n"


def _call(code: str) -> list[dict]:
    return [{"name": "python", "arguments": {"code": code}}]


def _messages(prime_src: str, count: str, listing: str, answer: str) -> list[dict]:
    return [
        {
            "role": "assistant",
            "reasoning": "I will count the primes with a short program.",
            "content": "",
            "tool_calls": _call(prime_src + "print(sum(is_prime(n) for n in range(1, 11)))"),
        },
        {"role": "tool", "content": f"{count}\n"},
        {
            "role": "assistant",
            "content": "The tool says " + count + ". Let me list them to verify.",
            "tool_calls": _call(prime_src + "print([n for n in range(1, 11) if is_prime(n)])"),
        },
        {"role": "tool", "content": f"{listing}\n"},
        {"role": "assistant", "content": f"The primes are {listing}, so the answer is \\boxed{{{answer}}}."},
    ]


def python_tool_run() -> Run:
    """The two rollouts as a ``Run`` (tokenized with the default tokenizer)."""
    prompt = render_prompt([{"role": "user", "content": QUESTION}], TOOLS)
    rollouts = [
        ("rollout-0", _messages(GOOD_PRIME, "4", "[2, 3, 5, 7]", "4"), [0.0, 0.0, 1.0], "4"),
        ("rollout-1", _messages(BAD_PRIME, "5", "[1, 2, 3, 5, 7]", "5"), [0.0, 0.0, 0.0], "5"),
    ]
    trajs = [
        Trajectory(
            id=name,
            group_id="primes-1-10",
            prompt=prompt,
            segments=render_response(msgs),
            turn_rewards=[{"step_reward": r} for r in rewards],
            metadata={"truncated": False, "answer": answer, "source": "rLLM worked example (docs/TUTORIAL.md §7.2)"},
        )
        for name, msgs, rewards, answer in rollouts
    ]
    fill_tokens(trajs, get_tokenizer(None))
    return Run(
        trajectories=trajs,
        name="python_tool_two_rollouts",
        source="native",
        tokenizer="qwen2.5",
        metadata={"synthetic": True},
    )
