"""Split tagged agent transcripts (Search-R1, KG-R1, verl tool loops) into model and tool segments.

Search-R1 and KG-R1 insert retrieved text as ``\\n\\n<information>...</information>\\n\\n`` after the model's
``<search>``/``<kg-query>`` call; those blocks (with the whitespace around them, which the environment wrote)
are ``tool`` segments and everything else is ``model``. An ``<information>`` block left open by truncation runs
to the end. verl's rollout dumps decode with ``skip_special_tokens=True``, so a tool observation shows up as
``user\\n<tool_response>...</tool_response>\\nassistant\\n``; that whole block is a tool segment too.
"""

from __future__ import annotations

import re

from engine.io.data.model import Segment

INFORMATION_BLOCK = re.compile(r"\s*(?:<information>.*?</information>\s*)+|\s*<information>.*\Z", re.DOTALL)
TOOL_RESPONSE_BLOCK = re.compile(
    r"\n?(?:user\n)?(?:\s*<tool_response>.*?</tool_response>)+\s*(?:assistant\n)?|\s*<tool_response>.*\Z", re.DOTALL
)
ACTION_TAGS = ("<search>", "<kg-query>", "<answer>", "<information>")


def looks_tagged(text: str) -> bool:
    """True if ``text`` uses Search-R1 / KG-R1 tags."""
    return any(tag in text for tag in ACTION_TAGS)


def split_tagged(text: str, pattern: re.Pattern[str] = INFORMATION_BLOCK) -> list[Segment]:
    """Text segments of a response: matches of ``pattern`` are ``tool``, the rest ``model``.

    ``"<search>q</search>\\n\\n<information>doc</information>\\n\\n<answer>x</answer>"`` ->
    model ``<search>q</search>``, tool ``\\n\\n<information>doc</information>\\n\\n``, model ``<answer>x</answer>``.
    """
    segs: list[Segment] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() == m.end():
            continue
        if m.start() > pos:
            segs.append(Segment(role="model", text=text[pos : m.start()]))
        segs.append(Segment(role="tool", text=m.group(0)))
        pos = m.end()
    if pos < len(text):
        segs.append(Segment(role="model", text=text[pos:]))
    return segs
