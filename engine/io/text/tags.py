"""Split tagged agent transcripts (Search-R1, KG-R1) into model and tool segments.

Search-R1 and KG-R1 insert retrieved text as ``\\n\\n<information>...</information>\\n\\n`` after the model's
``<search>``/``<kg-query>`` call; those blocks (with the whitespace around them, which the environment wrote)
are ``tool`` segments and everything else is ``model``. An ``<information>`` block left open by truncation runs
to the end.

The blocks are found by a scan linear in the text: each character is looked at a bounded number of times, so a
response of a megabyte of spaces or of unclosed tags splits as fast per byte as a short one (the regular expression
``\\s*(?:<information>.*?</information>\\s*)+|\\s*<information>.*\\Z`` that states the same blocks backtracks
quadratically on such text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from engine.io.data.model import Segment

OPEN, CLOSE = "<information>", "</information>"
_NON_SPACE = re.compile(r"\S")
ACTION_TAGS = ("<search>", "<kg-query>", "<answer>", "<information>")


def looks_tagged(text: str) -> bool:
    """True if ``text`` uses Search-R1 / KG-R1 tags."""
    return any(tag in text for tag in ACTION_TAGS)


def _skip_space(text: str, i: int) -> int:
    """The first index ≥ ``i`` that is not whitespace (``len(text)`` if none)."""
    m = _NON_SPACE.search(text, i)
    return m.start() if m else len(text)


def information_blocks(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each tool block, in order: the whitespace before an ``<information>`` tag, one or more
    closed ``<information>...</information>`` blocks each with the whitespace after it; or, for a tag never
    closed, the whitespace before it and the rest of the text.

    Each search starts where the previous block ended and an unclosed tag ends the scan, so every character is
    scanned at most twice: linear in ``len(text)``.
    """
    pos, n = 0, len(text)
    while (tag := text.find(OPEN, pos)) >= 0:
        start = pos + len(text[pos:tag].rstrip())  # with the whitespace run before the tag
        close = text.find(CLOSE, tag + len(OPEN))
        if close < 0:  # left open by truncation: the rest of the text
            yield start, n
            return
        end = _skip_space(text, close + len(CLOSE))
        while text.startswith(OPEN, end) and (close := text.find(CLOSE, end + len(OPEN))) >= 0:
            end = _skip_space(text, close + len(CLOSE))
        yield start, end
        pos = end


def split_tagged(text: str) -> list[Segment]:
    """Text segments of a response: ``<information>`` blocks (``information_blocks``) are ``tool``, the rest
    ``model``.

    ``"<search>q</search>\\n\\n<information>doc</information>\\n\\n<answer>x</answer>"`` ->
    model ``<search>q</search>``, tool ``\\n\\n<information>doc</information>\\n\\n``, model ``<answer>x</answer>``.
    """
    return split_at(text, information_blocks(text), lambda block: "tool")


def split_at(text: str, blocks: Iterable[tuple[int, int]], role: Callable[[str], str]) -> list[Segment]:
    """``text`` cut at ``blocks`` (``(start, end)``, in order, not overlapping): each block a segment of
    ``role(block text)``, the text between and around them ``model`` segments."""
    segs: list[Segment] = []
    pos = 0
    for start, end in blocks:
        if start > pos:
            segs.append(Segment(role="model", text=text[pos:start]))
        segs.append(Segment(role=role(text[start:end]), text=text[start:end]))
        pos = end
    if pos < len(text):
        segs.append(Segment(role="model", text=text[pos:]))
    return segs
