"""Sample run ``kgqa_multiturn``: KG-R1 style knowledge-graph QA, 8 prompts x 8 rollouts (one singleton).

Each rollout alternates ``<think>..</think><kg-query>..</kg-query>`` model turns with
``\\n\\n<information>..</information>\\n\\n`` tool turns and ends with ``<answer>..</answer><|im_end|>``. Turn
rewards are KG-R1's raw components per loop step (``format_score``, ``kg_query_validity``, ``is_answer_score``,
each 0/1; the engine applies KG-R1's weights 0.15/0.1/0.1); samples that finished early get 0-reward
placeholder turns up to the batch's number of loop steps, as KG-R1's ``interaction_history`` does. Global
rewards: raw ``exact_match`` and ``retrieval_quality`` plus KG-R1's bookkeeping keys ``_raw_exact_match``,
``_raw_retrieval_quality``, ``_otc_scaling_factor`` (1.0: OTC off) and ``_kg_turns_used``.
Variety on purpose: failed and duplicate queries, a malformed turn, wrong answers, truncated rollouts, a
zero-variance group (``q5``: every rollout identical in reward) and a singleton group (``q7``).
Log-probs and values are synthesized and marked.
"""

from __future__ import annotations

import numpy as np

from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.io.synth.augment import synthesize_per_token
from engine.io.text.tokenize import fill_tokens, get_tokenizer

INSTRUCTION = (
    "Answer the given question. You can query a knowledge graph up to 5 times. Reason inside <think> and </think> "
    "first. To query, write one call between <kg-query> and </kg-query>: get_tail_relations(entity), "
    "get_head_relations(entity), get_tail_entities(entity, relation) or get_head_entities(entity, relation). "
    "Results come back between <information> and </information>. Give the final answer between <answer> and "
    "</answer>, for example <answer> Beijing </answer>. Question: {q}"
)
# question, topic entity, relation that answers it, a wrong relation, answer, wrong answer
QUESTIONS = (
    (
        "what country is the grand bahama island in?",
        "Grand Bahama",
        "location.location.containedby",
        "location.location.nearby_airports",
        "Bahamas",
        "Cuba",
    ),
    (
        "who played darth vader in the original star wars?",
        "Darth Vader",
        "film.film_character.portrayed_in_films",
        "fictional_universe.fictional_character.occupation",
        "David Prowse",
        "James Earl Jones",
    ),
    (
        "what language do they speak in brazil?",
        "Brazil",
        "location.country.official_language",
        "location.country.currency_used",
        "Portuguese",
        "Spanish",
    ),
    (
        "where did barack obama go to college?",
        "Barack Obama",
        "people.person.education",
        "people.person.place_of_birth",
        "Columbia University",
        "Honolulu",
    ),
    (
        "what currency is used in japan?",
        "Japan",
        "location.country.currency_used",
        "location.country.capital",
        "Japanese yen",
        "Tokyo",
    ),
    (
        "who wrote the novel dracula?",
        "Dracula",
        "book.written_work.author",
        "book.book.genre",
        "Bram Stoker",
        "Horror fiction",
    ),
    (
        "what is the capital of australia?",
        "Australia",
        "location.country.capital",
        "location.location.contains",
        "Canberra",
        "Sydney",
    ),
    (
        "what instrument did louis armstrong play?",
        "Louis Armstrong",
        "music.group_member.instruments_played",
        "people.person.profession",
        "Trumpet",
        "Singer",
    ),
)
# Scenario of each rollout, per question (q5 all identical: zero variance; q7 a single rollout).
SCENARIOS = (
    ("good", "direct", "wrong", "failed_then_good", "good", "guess", "direct", "wrong"),
    ("good", "duplicate", "bad_format", "good", "wrong", "duplicate_wrong", "direct", "good"),
    ("direct", "truncated", "good", "wrong", "good", "failed_then_good", "truncated", "direct"),
    ("wrong", "truncated", "guess", "wrong", "failed_then_wrong", "good", "wrong", "truncated"),
    ("good", "good", "direct", "wrong", "bad_format", "good", "failed_then_good", "direct"),
    ("direct",) * 8,
    ("long", "good", "wrong", "long", "direct", "duplicate", "guess", "good"),
    ("good",),
)
PLANS = {
    "good": ["rel", "ent", "answer"],
    "direct": ["ent", "answer"],
    "wrong": ["rel", "ent_wrong", "answer_wrong"],
    "guess": ["rel", "answer_wrong"],
    "failed_then_good": ["rel_failed", "rel", "ent", "answer"],
    "failed_then_wrong": ["rel_failed", "ent_wrong", "answer_wrong"],
    "duplicate": ["rel", "rel_dup", "ent", "answer"],
    "duplicate_wrong": ["rel", "rel_dup", "ent_wrong", "answer_wrong"],
    "bad_format": ["bad_format", "rel", "ent", "answer"],
    "truncated": ["rel", "ent_wrong", "rel_dup", "cut"],
    "long": ["bad_format", "rel_failed", "rel", "rel_dup", "ent", "answer"],
}
LOOP_STEPS = max(len(p) for p in PLANS.values())  # KG-R1 runs the loop until every sample is done
THINK = (
    "Let me look this up.",
    "I should check the knowledge graph.",
    "I need more information.",
    "Let me query the graph.",
)


def _turn(action: str, q: tuple, rng: np.random.Generator) -> tuple[str, str | None, dict[str, float], bool]:
    """(model text, information text or None, raw turn components, retrieved the gold answer?) for one step."""
    question, entity, rel, wrong_rel, answer, wrong = q
    think = f"<think>{THINK[int(rng.integers(len(THINK)))]}</think>\n"
    ok = {"format_score": 1.0, "kg_query_validity": 1.0, "is_answer_score": 0.0}
    bad = {"format_score": 1.0, "kg_query_validity": 0.0, "is_answer_score": 0.0}
    relations = f"{rel}, {wrong_rel}, common.topic.notable_types"
    if action in ("rel", "rel_dup"):
        info = f'Tail relations of "{entity}": {relations}'
        return (
            think + f'<kg-query>get_tail_relations("{entity}")</kg-query>',
            info,
            ok if action == "rel" else bad,
            False,
        )
    if action == "rel_failed":
        typo = entity.lower().replace(" ", "_") + "s"
        return (
            think + f'<kg-query>get_tail_relations("{typo}")</kg-query>',
            f'Error: entity "{typo}" not found in the knowledge graph.',
            bad,
            False,
        )
    if action in ("ent", "ent_wrong"):
        r, value = (rel, answer) if action == "ent" else (wrong_rel, wrong)
        info = f'Tail entities of "{entity}" via {r}: {value}'
        return think + f'<kg-query>get_tail_entities("{entity}", "{r}")</kg-query>', info, ok, action == "ent"
    if action == "bad_format":
        return (
            think + f'<kg-query>get_tail_relations("{entity}")',
            "Your previous action is invalid: close the query with </kg-query>.",
            {k: 0.0 for k in ok},
            False,
        )
    if action == "cut":
        return (
            "<think>The graph did not give the answer yet, so I will try another relation and then compare the",
            None,
            {k: 0.0 for k in ok},
            False,
        )
    value = answer if action == "answer" else wrong
    text = f"<think>The knowledge graph points to {value}.</think>\n<answer> {value} </answer><|im_end|>"
    return text, None, {"format_score": 1.0, "kg_query_validity": 0.0, "is_answer_score": 1.0}, False


def _rollout(qi: int, ri: int, scenario: str, rng: np.random.Generator) -> Trajectory:
    q = QUESTIONS[qi]
    segs, turns, retrieved, queries = [], [], False, 0
    for action in PLANS[scenario]:
        text, info, comps, got = _turn(action, q, rng)
        segs.append(Segment(role="model", text=text))
        if info is not None:
            segs.append(Segment(role="tool", text=f"\n\n<information>{info}</information>\n\n"))
            queries += 1
        turns.append(comps)
        retrieved = retrieved or got
    turns += [{"format_score": 0.0, "kg_query_validity": 0.0, "is_answer_score": 0.0}] * (LOOP_STEPS - len(turns))
    em = float(PLANS[scenario][-1] == "answer")
    rq = float(retrieved)
    prompt = f"<|im_start|>user\n{INSTRUCTION.format(q=q[0])}<|im_end|>\n<|im_start|>assistant\n"
    return Trajectory(
        id=f"q{qi}-r{ri}",
        group_id=f"q{qi}",
        prompt=prompt,
        segments=segs,
        turn_rewards=turns,
        global_rewards={
            "exact_match": em,
            "retrieval_quality": rq,
            "_raw_exact_match": em,
            "_raw_retrieval_quality": rq,
            "_otc_scaling_factor": 1.0,
            "_kg_turns_used": float(queries),
        },
        metadata={"truncated": scenario == "truncated", "scenario": scenario, "gold_answer": q[4]},
    )


def kgqa_run(seed: int = 0) -> Run:
    """The ``kgqa_multiturn`` sample (57 rollouts), tokenized with the default tokenizer."""
    rng = np.random.default_rng(seed)
    trajs = [_rollout(qi, ri, s, rng) for qi, scen in enumerate(SCENARIOS) for ri, s in enumerate(scen)]
    fill_tokens(trajs, get_tokenizer(None))
    for t in trajs:
        synthesize_per_token(t, rng)
    return Run(
        trajectories=trajs,
        name="kgqa_multiturn",
        source="native",
        tokenizer="qwen2.5",
        metadata={"synthetic": True, "generator": "engine.io.synth.kgqa", "seed": seed},
    )
