"""Seeded token material for synthetic runs: real Qwen tokens of plain English, so texts render sanely and
re-tokenizing a segment's text gives back its ids.

* a long phrase stream; model segments are windows of it that start at a phrase boundary;
* a pool of tool observations, each rendered in ChatML and tokenized whole.
Both are tokenized once, which keeps ``python -m engine synth --trajectories 10000 --tokens 2000`` fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.io.text.display import display_pieces
from engine.io.text.tokenize import encode_many, get_tokenizer

PHRASES = (
    " Let me think about this step by step.",
    " The tool returned a result.",
    " I should check the answer.",
    " First, search for the entity.",
    " The relation points to a film.",
    " That does not look right.",
    " According to the retrieved documents,",
    " the answer is probably correct.",
    " I will call the tool again.",
    " The population of the city grew quickly.",
    " We compute the sum of the numbers.",
    " This matches the question.",
    " The director was born in 1952.",
    " Next, verify the date.",
    " The result is 42.",
    " Searching again.",
    " The document mentions the river.",
    " The code prints the value.",
    " Hmm, an error occurred.",
    " Done.",
)
TOOL_OPEN = "\n<|im_start|>user\n<tool_response>\n"
TOOL_CLOSE = "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class Corpus:
    """``ids`` [N] int32 with readable ``pieces`` (one per token) and phrase ``starts``; ``tools``: (ids, text)."""

    ids: np.ndarray
    pieces: list[str]
    starts: np.ndarray
    tools: list[tuple[np.ndarray, str]]

    def window(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, str]:
        """``n`` consecutive tokens starting at a phrase boundary: (ids [n], their text)."""
        usable = self.starts[self.starts <= len(self.ids) - n]
        if len(usable) == 0:  # longer than the stream: repeat it
            reps = -(-n // len(self.ids))
            return np.tile(self.ids, reps)[:n], "".join((self.pieces * reps)[:n])
        start = int(usable[rng.integers(len(usable))])
        return self.ids[start : start + n], "".join(self.pieces[start : start + n])

    def tool(self, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        """A whole tool observation segment (ChatML glue included)."""
        return self.tools[int(rng.integers(len(self.tools)))]


def build_corpus(seed: int = 0, phrases: int = 4000, tools: int = 32, tokenizer: str | None = None) -> Corpus:
    """Tokenize each phrase once, concatenate ``phrases`` random picks; render and tokenize ``tools`` outputs."""
    tok = get_tokenizer(tokenizer)
    rng = np.random.default_rng(seed)
    encoded = encode_many(tok, list(PHRASES))
    order = rng.integers(0, len(PHRASES), size=phrases)
    lengths = np.array([len(encoded[i]) for i in order])
    ids = np.concatenate([encoded[i] for i in order])
    tool_texts = [
        TOOL_OPEN
        + "".join(PHRASES[i] for i in rng.integers(0, len(PHRASES), size=int(rng.integers(2, 12)))).strip()
        + TOOL_CLOSE
        for _ in range(tools)
    ]
    return Corpus(
        ids=ids,
        pieces=display_pieces(tok, ids),
        starts=np.concatenate([[0], np.cumsum(lengths)[:-1]]),
        tools=list(zip(encode_many(tok, tool_texts), tool_texts, strict=True)),
    )
