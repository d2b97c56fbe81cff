"""Sample run ``search_agent``: Search-R1 style rollouts, 6 prompts x 5 rollouts, outcome reward only.

Written in the ``tagged_text`` input format (one JSON record per rollout: prompt, response, reward, group),
so loading it exercises that adapter: ``<information>`` blocks become tool segments. Responses end with the
``<|im_end|>`` the model generated; rollouts that hit the turn limit have no answer, reward 0, ``truncated``.
"""

from __future__ import annotations

import numpy as np

PROMPT = (
    "<|im_start|>user\nAnswer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. If you lack knowledge, call a search engine by <search> query </search> "
    "and it will return the top searched results between <information> and </information>. You can search as many "
    "times as you want. When you are ready, give the answer inside <answer> and </answer>, without detailed "
    "illustrations. Question: {q}<|im_end|>\n<|im_start|>assistant\n"
)
# question, search query, a document that answers it, gold answer, a plausible wrong answer
QUESTIONS = (
    (
        "who sang the song i will always love you first?",
        "i will always love you original singer",
        '"I Will Always Love You" is a song written and originally recorded in 1973 by Dolly Parton.',
        "Dolly Parton",
        "Whitney Houston",
    ),
    (
        "when was the eiffel tower built?",
        "eiffel tower construction year",
        "The Eiffel Tower was constructed from 1887 to 1889 as the entrance arch to the 1889 World's Fair.",
        "1889",
        "1901",
    ),
    (
        "which planet has the most moons?",
        "planet with most moons",
        "As of 2023, Saturn has 146 confirmed moons, the most of any planet in the Solar System.",
        "Saturn",
        "Jupiter",
    ),
    (
        "who painted the girl with a pearl earring?",
        "girl with a pearl earring painter",
        "Girl with a Pearl Earring is an oil painting by Dutch Golden Age painter Johannes Vermeer, dated c. 1665.",
        "Johannes Vermeer",
        "Rembrandt",
    ),
    (
        "what is the largest desert in asia?",
        "largest desert in asia",
        "The Gobi Desert is the largest desert region in Asia, covering parts of northern China and southern Mongolia.",
        "Gobi Desert",
        "Taklamakan Desert",
    ),
    (
        "how many players are on a rugby union team?",
        "rugby union team number of players",
        "A rugby union team has fifteen players on the field: eight forwards and seven backs.",
        "15",
        "13",
    ),
)
OUTCOMES = (  # per question, per rollout: "right" | "wrong" | "two_search" | "no_search" | "truncated"
    ("right", "two_search", "wrong", "right", "no_search"),
    ("right", "right", "right", "right", "right"),
    ("wrong", "two_search", "wrong", "truncated", "right"),
    ("right", "no_search", "two_search", "wrong", "right"),
    ("truncated", "wrong", "right", "wrong", "wrong"),
    ("two_search", "right", "right", "no_search", "truncated"),
)


def _info(doc: str, rng: np.random.Generator) -> str:
    other = (
        'Doc 2(Title: "List of facts") Various facts are collected here for reference.',
        'Doc 2(Title: "Trivia") A list of trivia questions and answers.',
    )
    return f'\n\n<information>Doc 1(Title: "Wikipedia") {doc}\n{other[int(rng.integers(2))]}</information>\n\n'


def _response(q: tuple, outcome: str, rng: np.random.Generator) -> str:
    question, query, doc, gold, wrong = q
    search = f"<think>I need to find this out.</think>\n<search> {query} </search>"
    if outcome == "no_search":
        return f"<think>I think I know this.</think>\n<answer> {wrong} </answer><|im_end|>"
    if outcome == "truncated":
        noisy = f"<think>The results are not clear.</think>\n<search> {question} </search>"
        return (
            search
            + _info("No relevant result.", rng)
            + noisy
            + _info("No relevant result.", rng)
            + "<think>Let me search once more for"
        )
    parts = [search + _info(doc, rng)]
    if outcome == "two_search":
        parts.append(f"<think>Let me confirm.</think>\n<search> {gold} {query} </search>" + _info(doc, rng))
    answer = wrong if outcome == "wrong" else gold
    return "".join(parts) + f"<think>The documents say {answer}.</think>\n<answer> {answer} </answer><|im_end|>"


def search_records(seed: int = 0) -> list[dict]:
    """The ``search_agent`` sample as tagged_text records (30 rollouts in 6 groups of 5)."""
    rng = np.random.default_rng(seed)
    out = []
    for qi, (q, outcomes) in enumerate(zip(QUESTIONS, OUTCOMES, strict=True)):
        for ri, outcome in enumerate(outcomes):
            out.append(
                {
                    "id": f"s{qi}-r{ri}",
                    "group_id": f"s{qi}",
                    "prompt": PROMPT.format(q=q[0]),
                    "response": _response(q, outcome, rng),
                    "reward": float(outcome in ("right", "two_search")),
                    "truncated": outcome == "truncated",
                    "metadata": {"outcome": outcome, "gold_answer": q[3], "synthetic": True},
                }
            )
    return out
