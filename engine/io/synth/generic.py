"""Seeded synthetic runs of any size: multi-turn tool-using rollouts in groups, everything marked synthesized.

Each trajectory has 1-4 turns (model segment ending in ``<|im_end|>``, then a ChatML tool observation), a
length between 0.8*T and T tokens, behaviour/reference log-probs and values on every token, and an outcome
reward ``reward`` in {0, 1} drawn with a per-group success rate. About 5% run into the length limit
(``truncated``, no end-of-turn token, reward 0).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.io.synth.augment import synthesize_per_token
from engine.io.synth.corpus import Corpus, build_corpus
from engine.io.text.tokenize import encode_many, get_tokenizer

IM_END = "<|im_end|>"
PROMPT = (
    "<|im_start|>system\nYou are a helpful agent with a search tool.<|im_end|>\n"
    "<|im_start|>user\nTask {g}: find the answer.<|im_end|>\n<|im_start|>assistant\n"
)
SYNTHESIZED = ["global_rewards", "log_probs", "ref_log_probs", "text", "token_ids", "values"]


def _split(total: int, parts: int, rng: np.random.Generator) -> list[int]:
    """``parts`` positive lengths summing to ``total`` (``total >= parts``)."""
    if parts == 1:
        return [total]
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(int).tolist()


def _trajectory(i: int, group: int, n_tokens: int, success: float, corpus: Corpus, end: np.ndarray, rng) -> Trajectory:
    truncated = bool(rng.random() < 0.05)
    tools = [corpus.tool(rng) for _ in range(int(rng.integers(0, 4)))]
    while tools and n_tokens - sum(len(ids) for ids, _ in tools) < 2 * (len(tools) + 1):
        tools.pop()
    turns = len(tools) + 1
    model_sizes = _split(n_tokens - sum(len(ids) for ids, _ in tools) - turns, turns, rng)
    segs = []
    for k, size in enumerate(model_sizes):
        ids, text = corpus.window(rng, size)
        if k < turns - 1 or not truncated:  # a truncated rollout never generated its end-of-turn token
            ids, text = np.concatenate([ids, end]), text + IM_END
        segs.append(Segment(role="model", text=text, token_ids=ids))
        if k < len(tools):
            segs.append(Segment(role="tool", text=tools[k][1], token_ids=tools[k][0]))
    reward = 0.0 if truncated else float(rng.random() < success)
    traj = Trajectory(
        id=f"synth-{i:06d}",
        group_id=f"group-{group:05d}",
        prompt=PROMPT.format(g=group),
        segments=segs,
        global_rewards={"reward": reward},
        metadata={"truncated": truncated, "synthesized": list(SYNTHESIZED)},
    )
    synthesize_per_token(traj, rng)
    return traj


def iter_synth(
    trajectories: int, tokens: int, seed: int = 0, group_size: int = 8, tokenizer: str | None = None
) -> Iterator[Trajectory]:
    """The trajectories of ``synth_run``, one at a time (``save_trajectories`` streams them to a file)."""
    if trajectories < 1 or tokens < 16:  # here, not on the first next(): before a writer opens its file
        raise ValueError("synth_run: need at least 1 trajectory and 16 tokens")
    return _synth_items(trajectories, tokens, seed, group_size, tokenizer)


def _synth_items(trajectories: int, tokens: int, seed: int, group_size: int, tokenizer: str | None):
    rng = np.random.default_rng(seed)
    corpus = build_corpus(seed, tokenizer=tokenizer)
    (end,) = encode_many(get_tokenizer(tokenizer), [IM_END])
    success = 0.5
    for i in range(trajectories):
        group = i // group_size
        if i % group_size == 0:
            success = float(rng.random())
        n = int(rng.integers(int(0.8 * tokens), tokens + 1))
        yield _trajectory(i, group, n, success, corpus, end, rng)


def synth_name(trajectories: int, tokens: int, seed: int = 0) -> str:
    return f"synth-{trajectories}x{tokens}-seed{seed}"


def synth_run(trajectories: int, tokens: int, seed: int = 0, group_size: int = 8, tokenizer: str | None = None) -> Run:
    """A run of ``trajectories`` rollouts of 0.8*``tokens`` to ``tokens`` response tokens each."""
    out = list(iter_synth(trajectories, tokens, seed, group_size, tokenizer))
    return Run(trajectories=out, name=synth_name(trajectories, tokens, seed), source="native", tokenizer="qwen2.5")
