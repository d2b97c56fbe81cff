"""Synthetic runs for tests and offline development: small, deterministic, shaped like the sample runs.

``synthetic_kgqa`` mimics ``kgqa_multiturn`` (KG-R1 style: think/kg-query turns answered by <information>
blocks, structured turn and global rewards, log-probs, critic values); ``synthetic_python_tool`` mimics the
rLLM worked example's two rollouts (a python call, its output, an answer; reward 1 and 0); ``synthetic_long``
builds B rows of about T tokens for the speed checks. Each returns a ``LoadResult``-like object with ``.run``
and ``.problems``.

The runs are ``engine.io.data.run.Run`` objects with their token texts kept in memory (no tokenizer needed), so the
batch comes from the loader's own ``to_batch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.io.reading.problems import Problem


class TextRun(Run):
    """A ``Run`` whose token texts are stored, not decoded (ids are arbitrary)."""

    def __init__(self, trajectories: list[Trajectory], texts: list[list[str]], name: str, source: str = "synthetic"):
        super().__init__(trajectories=trajectories, name=name, source=source, tokenizer=None)
        self._texts = texts

    def token_texts(self, i: int) -> list[str]:
        return list(self._texts[i])


@dataclass
class SyntheticLoad:
    """What ``engine.io.load_run`` returns: the run and the problems found while loading."""

    run: Run
    problems: list[Problem] = field(default_factory=list)


def _segment(role: str, words: list[str], rng: np.random.Generator, per_token: bool) -> Segment:
    n = len(words)
    ids = rng.integers(10, 50_000, n).astype(np.int32)
    seg = Segment(role=role, text="".join(words), token_ids=ids)
    if per_token and role == "model":
        seg.log_probs = (-rng.gamma(1.0, 0.4, n)).astype(np.float32)
        seg.ref_log_probs = (seg.log_probs + rng.normal(0, 0.15, n)).astype(np.float32)
        seg.values = np.cumsum(rng.normal(0.01, 0.05, n)).astype(np.float32)
    return seg


def _words(text: str) -> list[str]:
    parts = text.split(" ")
    return [parts[0]] + [" " + p for p in parts[1:]]


def _build(trajs: list[tuple[Trajectory, list[list[str]], list[str]]], name: str, seed: int) -> TextRun:
    rng = np.random.default_rng(seed)
    out, texts = [], []
    for traj, seg_words, roles in trajs:
        traj.segments = [_segment(r, w, rng, True) for r, w in zip(roles, seg_words, strict=True)]
        out.append(traj)
        texts.append([w for ws in seg_words for w in ws])
    return TextRun(out, texts, name)


def synthetic_kgqa(groups: int = 4, rollouts: int = 4, seed: int = 0, hostile: bool = False) -> SyntheticLoad:
    """KG-R1-style run: ``groups`` prompts × ``rollouts``; with ``hostile`` the ids, component names and some
    tokens carry HTML (``<script>``, ``<img onerror=…>``, ``</div>``) for the escaping tests."""
    rng = np.random.default_rng(seed)
    bad = "<script>alert(1)</script>"
    trajs = []
    for g in range(groups):
        for r in range(rollouts):
            n_turns = int(rng.integers(2, 5))
            seg_words, roles, turn_rewards = [], [], []
            for k in range(n_turns):
                last = k == n_turns - 1
                think = "<think> I need the relation of entity m.0" + str(g) + " first </think>"
                if last:
                    act = think + " <answer> Paris </answer><|im_end|>"
                else:
                    act = think + f" <kg-query> get_relations(m.0{g}{k}) </kg-query><|im_end|>"
                if hostile and k == 0:
                    act = f"{bad} <img src=x onerror=alert(2)> </div> " + act
                seg_words.append(_words(act))
                roles.append("model")
                if not last:
                    info = f"<information> relation_{k} -> entity_{int(rng.integers(100))} </information>"
                    seg_words.append(_words(info))
                    roles.append("tool")
                fmt = float(rng.random() < 0.85)
                turn_rewards.append(
                    {
                        "format_score": fmt,
                        "kg_query_validity": 0.0 if last else float(rng.random() < 0.7),
                        "is_answer_score": 1.0 if last else 0.0,
                    }
                )
            em = float(rng.random() < 0.4)
            glob = {
                "exact_match": em,
                "retrieval_quality": float(em or rng.random() < 0.3),
                "_raw_exact_match": em,
                "_otc_scaling_factor": 1.0,
                "_kg_turns_used": float(n_turns - 1),
            }
            if hostile:
                turn_rewards[0][f"{bad}</div>"] = 0.5
                glob['<img src=x onerror="alert(3)">'] = 0.25
            tid = f"q{g}-r{r}" + (f"{bad}" if hostile and r == 0 else "")
            traj = Trajectory(
                id=tid,
                group_id=f"q{g}",
                prompt=f"Question {g}: which city is the capital of the country of entity m.0{g}?",
                segments=[],
                turn_rewards=turn_rewards,
                global_rewards=glob,
                metadata={"note": "</div><b>meta</b>"} if hostile else {},
            )
            trajs.append((traj, seg_words, roles))
    return SyntheticLoad(_build(trajs, "synthetic_kgqa" + ("_hostile" if hostile else ""), seed))


def synthetic_python_tool(seed: int = 1) -> SyntheticLoad:
    """rLLM's worked example (docs/TUTORIAL.md §7.2): one question, two rollouts that call python and answer "4"
    (reward 1) or "5" (0)."""
    trajs = []
    for r, (answer, reward) in enumerate((("4", 1.0), ("5", 0.0))):
        seg_words = [
            _words("Let me compute 2 + 2 with python. <tool_call> print(2 + 2) </tool_call><|im_end|>"),
            _words(f"<tool_response> {answer} </tool_response>"),
            _words(f"The answer is {answer}.<|im_end|>"),
        ]
        roles = ["model", "tool", "model"]
        traj = Trajectory(
            id=f"rollout-{r + 1}",
            group_id="q0",
            prompt="What is 2 + 2? Use the python tool.",
            segments=[],
            turn_rewards=[{"reward": 0.0}, {"reward": reward}],
            global_rewards={},
        )
        trajs.append((traj, seg_words, roles))
    return SyntheticLoad(_build(trajs, "synthetic_python_tool", seed))


def synthetic_long(rows: int = 64, tokens: int = 2048, turns: int = 6, seed: int = 2) -> SyntheticLoad:
    """``rows`` trajectories of about ``tokens`` tokens each (8 rollouts per prompt), for the speed checks."""
    rng = np.random.default_rng(seed)
    vocab = [" alpha", " beta", " gamma", " delta", "\n", " relation", " entity", ".", ","]
    trajs = []
    per_turn = max(tokens // turns, 4)
    for i in range(rows):
        seg_words, roles, turn_rewards = [], [], []
        for _ in range(turns):
            n_model = int(per_turn * 0.7)
            seg_words.append([vocab[j] for j in rng.integers(0, len(vocab), n_model)])
            roles.append("model")
            seg_words.append(
                ["<information>"] + [vocab[j] for j in rng.integers(0, len(vocab), per_turn - n_model - 1)]
            )
            roles.append("tool")
            turn_rewards.append(
                {"format_score": float(rng.random() < 0.8), "kg_query_validity": float(rng.random() < 0.6)}
            )
        traj = Trajectory(
            id=f"long-{i}",
            group_id=f"p{i // 8}",
            prompt="A long prompt.",
            segments=[],
            turn_rewards=turn_rewards,
            global_rewards={"exact_match": float(rng.random() < 0.5), "retrieval_quality": float(rng.random() < 0.5)},
        )
        trajs.append((traj, seg_words, roles))
    return SyntheticLoad(_build(trajs, f"synthetic_long_{rows}x{tokens}", seed))
