"""Sample run ``search_steps``: a Search-R1 style agent over 40 training steps, 8 prompts x 8 rollouts per step.

A folder of step files (``step_0001.parquet`` ... ``step_0040.parquet``, native Parquet, each trajectory's
``step`` set) that tells a training story a per-step view can show. The same 8 prompts come back every step (as
epochs do), with the same group ids ``p0`` ... ``p7`` and rollout ids ``p<q>-r<r>``: groups must stay inside their
step. Model turns ``<think>..</think>\\n<search> q </search>``, tool segments ``\\n\\n<information>Doc 1(Title:
..) ..</information>\\n\\n``, a final ``<think>..</think>\\n<answer> a </answer><|im_end|>``.

The story (deterministic given the seed; ``STORY`` in the run metadata says where each change happens):

1. Solve rate rises, ~15% at step 1 to ~80% by step 40: each prompt is "learned" around its own step
   (``LEARNED_AT``), with a steep logistic, so at any step most prompts are nearly always or nearly never solved.
   The policy sharpens: mean entropy per model token falls from ~1.1 to ~0.45 nats, log-probs rise with it, and
   the reference log-probs drift away (the KL to the reference grows).
2. The reward changes at step 21 (``REWARD_CHANGE_STEP``): steps 1-20 score graded partial credit (1 right
   answer, 0.5 a well-formed wrong answer, 0 a malformed or missing one); from step 21 strict binary exact match
   (1 right, else 0). Before, a hard prompt's failures split between 0 and 0.5; after, they are all 0, so
   zero-variance groups (all 8 rollouts scoring the same) jump.
3. Steps 26-32 (``RETRIEVER_STRETCH``), "after a config change", the retriever returns 12 documents instead of 3
   (``metadata["retriever_top_k"]``): tool tokens per trajectory grow ~4x. Under a scheme that does not mask
   them (``state_masking=False``) credit lands on them; under Search-R1's own it does not.
4. Responses grow mildly with training (longer thoughts, more searches); from step 31 (``LONG_CORRECT_FROM``)
   correct answers double-check with another search and reason longer, so longer responses get higher
   advantages (before, the long ones are mostly truncated failures).

Per model token: ``log_probs`` (old policy), ``rollout_log_probs`` (the rollout engine's: a small train/inference
mismatch), ``ref_log_probs`` and ``entropy``, all synthesized (``metadata["synthesized"]``) and quantized to
1/256 so the files stay small; tool tokens carry none. Global reward ``score``. Marked synthetic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.io.data.model import FLOAT_DTYPE, Segment, Trajectory
from engine.io.data.run import Run
from engine.io.reading.fields import mark_synthesized
from engine.io.synth.search import PROMPT
from engine.io.synth.search import QUESTIONS as SEARCH_QUESTIONS
from engine.io.text.tokenize import fill_tokens, get_tokenizer

NAME = "search_steps"
STEPS = 40
PROMPTS = 8
ROLLOUTS = 8
REWARD_CHANGE_STEP = 21  # first step scored by strict exact match
RETRIEVER_STRETCH = (26, 32)  # inclusive: the retriever returns RETRIEVER_TOP_K_WIDE documents
RETRIEVER_TOP_K = 3
RETRIEVER_TOP_K_WIDE = 12
LONG_CORRECT_FROM = 31  # from this step on, correct answers double-check
LEARNED_AT = (-4.0, 6.0, 12.0, 17.0, 23.0, 29.0, 36.0, 58.0)  # the step around which each prompt gets solved
LEARN_WIDTH = 1.8  # steps: the logistic's scale (small: a prompt goes from rarely to nearly always solved fast)
QUANTUM = 256.0  # per-token numbers are multiples of 1/256: exact in float32, and they compress well
STORY = {
    "reward_change_step": REWARD_CHANGE_STEP,
    "reward_before": "graded: 1 right answer, 0.5 well-formed wrong answer, 0 malformed or no answer",
    "reward_after": "exact_match: 1 right answer, else 0",
    "retriever_stretch": list(RETRIEVER_STRETCH),
    "retriever_top_k": RETRIEVER_TOP_K,
    "retriever_top_k_in_stretch": RETRIEVER_TOP_K_WIDE,
    "long_correct_from": LONG_CORRECT_FROM,
}
SYNTHESIZED = ("entropy", "log_probs", "ref_log_probs", "rollout_log_probs", "text", "token_ids")

# question, search query, a document that answers it, gold answer, a plausible wrong answer (search.py's six + two)
QUESTIONS = tuple(SEARCH_QUESTIONS) + (
    (
        "what is the capital city of canada?",
        "capital of canada",
        "Ottawa is the capital city of Canada, located on the south bank of the Ottawa River in Ontario.",
        "Ottawa",
        "Toronto",
    ),
    (
        "who wrote the novel pride and prejudice?",
        "pride and prejudice author",
        "Pride and Prejudice is an 1813 novel of manners written by the English novelist Jane Austen.",
        "Jane Austen",
        "Charlotte Bronte",
    ),
)
TITLES = (
    "I Will Always Love You",
    "Eiffel Tower",
    "Saturn",
    "Girl with a Pearl Earring",
    "Gobi Desert",
    "Rugby union",
    "Ottawa",
    "Pride and Prejudice",
)
FILLER_DOCS = (
    ("List of facts", "Various facts are collected here for reference."),
    ("Trivia", "A list of trivia questions and answers from many fields."),
    ("Geography", "Geography studies the lands, features and inhabitants of the Earth."),
    ("Music history", "Popular music of the twentieth century spread through radio and records."),
    ("Painting", "Painting is the practice of applying paint to a surface such as canvas."),
    ("Astronomy", "Astronomy studies celestial objects such as stars, planets and galaxies."),
    ("Sport", "Team sports are played by opposing teams that cooperate to win."),
    ("Literature", "Literature covers written works, especially those of lasting artistic merit."),
    ("Architecture", "Architecture is the art of designing and constructing buildings."),
    ("Capital city", "A capital city is the seat of government of a country or region."),
)
THINK_OPEN = (
    "I need to find this out.",
    "Let me search for this.",
    "I should look this up first.",
    "I am not sure, so I will search.",
)
THINK_MORE = (
    "The question asks for one specific fact.",
    "I should read the documents carefully.",
    "The first result looks relevant.",
    "Several documents mention related topics.",
    "I will check the names and dates.",
    "The answer should be short.",
)
DOUBLE_CHECK = (
    "Let me double-check this with another search before answering.",
    "I want to confirm the answer from a second source.",
)


def _q(x: float) -> float:
    return round(x * QUANTUM) / QUANTUM


def _frac(step: int) -> float:
    """Training progress in [0, 1]."""
    return (step - 1) / (STEPS - 1)


def solve_probability(step: int, prompt: int) -> float:
    """P(a rollout of ``prompt`` at ``step`` answers right): from 0.02 (not learned yet) to a ceiling that rises
    from 0.90 to 0.98 with training (learned)."""
    learned = 1.0 / (1.0 + np.exp(-(step - LEARNED_AT[prompt]) / LEARN_WIDTH))
    return float(0.02 + (0.88 + 0.08 * _frac(step)) * learned)


def top_k(step: int) -> int:
    return RETRIEVER_TOP_K_WIDE if RETRIEVER_STRETCH[0] <= step <= RETRIEVER_STRETCH[1] else RETRIEVER_TOP_K


def reward_fn(step: int) -> str:
    return "graded" if step < REWARD_CHANGE_STEP else "exact_match"


def _think(rng: np.random.Generator, step: int, opener: tuple[str, ...] = THINK_OPEN) -> str:
    extra = int(rng.binomial(2, 0.15 + 0.6 * _frac(step)))  # thoughts get longer with training
    more = [THINK_MORE[int(i)] for i in rng.choice(len(THINK_MORE), size=extra, replace=False)]
    return "<think>" + " ".join([opener[int(rng.integers(len(opener)))], *more]) + "</think>\n"


def _information(qi: int, k: int, relevant: bool, rng: np.random.Generator) -> str:
    """The retriever's top ``k`` documents; the answering one among them when the query was ``relevant``."""
    pool = [(TITLES[j], QUESTIONS[j][2]) for j in range(len(QUESTIONS)) if j != qi] + list(FILLER_DOCS)
    picks = [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]
    if relevant:
        picks[int(rng.integers(min(k, 2)))] = (TITLES[qi], QUESTIONS[qi][2])
    docs = "\n".join(f'Doc {i + 1}(Title: "{t}") {d}' for i, (t, d) in enumerate(picks))
    return f"\n\n<information>{docs}</information>\n\n"


def _outcome(step: int, prompt: int, rng: np.random.Generator) -> str:
    """``right`` | ``wrong`` (well-formed) | ``malformed`` | ``truncated``."""
    if rng.random() < 0.06 - 0.04 * _frac(step):
        return "truncated"
    if rng.random() < solve_probability(step, prompt):
        return "right"
    return "malformed" if rng.random() < 0.45 - 0.15 * _frac(step) else "wrong"


def _score(outcome: str, step: int) -> float:
    if outcome == "right":
        return 1.0
    return 0.5 if outcome == "wrong" and reward_fn(step) == "graded" else 0.0


def _rollout(step: int, qi: int, ri: int, rng: np.random.Generator) -> Trajectory:
    question, query, _doc, gold, wrong = QUESTIONS[qi]
    outcome = _outcome(step, qi, rng)
    k = top_k(step)
    # searches: right answers searched, the others may guess without (less so with training) or search again;
    # before LONG_CORRECT_FROM, right and wrong rollouts are about as long
    if outcome == "right":
        searches = 1 + int(rng.random() < 0.1 + 0.3 * _frac(step))
    else:
        searches = 0 if rng.random() < 0.3 - 0.2 * _frac(step) else 1 + int(rng.random() < 0.35 + 0.2 * _frac(step))
    double_check = outcome == "right" and step >= LONG_CORRECT_FROM
    segs: list[Segment] = []
    for n in range(searches):
        q = query if n == 0 else f"{gold if outcome == 'right' else wrong} {query}"
        relevant = outcome == "right" or (n == 0 and rng.random() < 0.5)
        segs.append(Segment("model", _think(rng, step) + f"<search> {q} </search>"))
        segs.append(Segment("tool", _information(qi, k, relevant, rng)))
    if double_check:  # from LONG_CORRECT_FROM on, right answers confirm with a second source and reason longer
        segs.append(Segment("model", _think(rng, step, DOUBLE_CHECK) + f"<search> {gold} {query} </search>"))
        segs.append(Segment("tool", _information(qi, k, True, rng)))
    if outcome == "truncated":
        segs.append(Segment("model", "<think>The results are not clear. Let me search once more for"))
    else:
        answer = gold if outcome == "right" else wrong
        reason = f"<think>The documents say {answer}."
        if double_check:
            reason += (
                f" The second search confirms it: both sources agree that the answer is {answer}."
                " I checked the names and the dates, so I am confident."
            )
        final = (
            f"<answer> {answer} </answer>"
            if outcome != "malformed"
            else (f"The answer is {answer}." if rng.random() < 0.5 else f"<answer> {answer}")
        )
        segs.append(Segment("model", f"{reason}</think>\n{final}<|im_end|>"))
    return Trajectory(
        id=f"p{qi}-r{ri}",
        group_id=f"p{qi}",
        prompt=PROMPT.format(q=question),
        segments=segs,
        global_rewards={"score": _score(outcome, step)},
        metadata={
            "truncated": outcome == "truncated",
            "outcome": outcome,
            "gold_answer": gold,
            "reward_fn": reward_fn(step),
            "retriever_top_k": k,
            "synthetic": True,
        },
        step=step,
    )


def _per_token(traj: Trajectory, step: int, rng: np.random.Generator) -> None:
    """Old, rollout and reference log-probs and entropy on each model token (quantized, marked synthesized)."""
    f = _frac(step)
    mean_entropy = 0.45 + 0.65 * np.exp(-2.5 * f)  # ~1.1 nats at step 1, ~0.5 at step 40: the policy sharpens
    ref_gap = 0.02 + 0.12 * f  # the policy drifts from the reference

    def quant(x: np.ndarray) -> np.ndarray:
        return (np.round(x * QUANTUM) / QUANTUM).astype(FLOAT_DTYPE)

    for seg in traj.segments:
        if seg.role != "model":
            continue
        n = seg.num_tokens
        entropy = rng.gamma(2.0, mean_entropy / 2.0, size=n)
        lp = -np.minimum(rng.exponential(0.5 * entropy + 0.01), 12.0)
        seg.entropy = quant(entropy)
        seg.log_probs = quant(lp)
        seg.rollout_log_probs = quant(np.minimum(lp + rng.normal(0.0, 0.02, size=n), 0.0))
        seg.ref_log_probs = quant(np.minimum(lp - np.abs(rng.normal(0.0, ref_gap, size=n)), 0.0))
    mark_synthesized(traj.metadata, *SYNTHESIZED)


def step_trajectories(step: int, seed: int = 0) -> list[Trajectory]:
    """The 64 rollouts of training ``step`` (1-based), tokenized with the default tokenizer."""
    if not 1 <= step <= STEPS:
        raise ValueError(f"search_steps: step {step} is outside 1..{STEPS}")
    rng = np.random.default_rng([seed, step])  # each step on its own stream: any step can be made alone
    trajs = [_rollout(step, qi, ri, rng) for qi in range(PROMPTS) for ri in range(ROLLOUTS)]
    fill_tokens(trajs, get_tokenizer(None))
    for t in trajs:
        _per_token(t, step, rng)
    return trajs


def run_metadata(seed: int = 0) -> dict:
    return {"synthetic": True, "generator": "engine.io.synth.search_steps", "seed": seed, "story": dict(STORY)}


def search_steps_run(seed: int = 0) -> Run:
    """The whole ``search_steps`` sample as one run of 40 steps (2,560 rollouts)."""
    trajs = [t for s in range(1, STEPS + 1) for t in step_trajectories(s, seed)]
    return Run(trajectories=trajs, name=NAME, source="native", tokenizer="qwen2.5", metadata=run_metadata(seed))


def write_search_steps(out: str | Path, seed: int = 0) -> Path:
    """Write the sample as the step files ``out/step_0001.parquet`` ... ``out/step_0040.parquet``."""
    from engine.io.load import save_trajectories

    out = Path(out)
    if out.suffix:
        raise ValueError(f"{NAME} is a folder of step files: give a folder path for --out, not {out.name!r}")
    out.mkdir(parents=True, exist_ok=True)
    for s in range(1, STEPS + 1):
        save_trajectories(step_trajectories(s, seed), out / f"step_{s:04d}.parquet", NAME, metadata=run_metadata(seed))
    return out
