"""Keep the token ids a trainer actually saw when a source gives them.

Two shapes occur: (1) per generation ``prompt_ids`` + generated ``ids`` (+ ``log_probs``), as in NeMo Gym's
``generation_token_ids`` or rLLM's ``Step.prompt_ids/response_ids``; (2) one flat response with a 0/1 mask of
generated tokens, as in verl's ``response_mask`` or rLLM's ``response_masks``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.io.data.model import Segment


def observation_ids(prev: dict | None, cur: dict | None) -> np.ndarray | None:
    """Ids between two generations: ``cur.prompt_ids`` minus ``prev.prompt_ids + prev.ids`` when it extends them."""
    if not prev or not cur or prev.get("prompt_ids") is None or cur.get("prompt_ids") is None:
        return None
    head = np.concatenate([prev["prompt_ids"], prev["ids"]])
    nxt = cur["prompt_ids"]
    if len(nxt) > len(head) and np.array_equal(nxt[: len(head)], head):
        return nxt[len(head) :]
    return None


def attach_generations(segs: list[Segment], gens: Sequence[dict | None]) -> list[Segment]:
    """Replace rendered text by real ids where known.

    ``gens[k]`` belongs to the k-th model segment: ``{"ids", "log_probs"?, "prompt_ids"?}`` or ``None``. A model
    segment with a generation gets its ids (text decoded later); the non-model segments between generations k-1
    and k become one segment holding the exact observation ids when generation k's prompt extends k-1's.
    """
    model_pos = [i for i, s in enumerate(segs) if s.role == "model"]
    segs = list(segs)
    for pos, gen in zip(model_pos, gens, strict=False):
        if gen is not None:
            segs[pos] = Segment(role="model", token_ids=gen["ids"], log_probs=gen.get("log_probs"))
    out: list[Segment] = []
    for k, pos in enumerate(model_pos):
        between = segs[(model_pos[k - 1] + 1) if k else 0 : pos]
        diff = observation_ids(gens[k - 1] if 0 < k <= len(gens) else None, gens[k] if k < len(gens) else None)
        if between and diff is not None:
            between = [Segment(role=between[0].role, token_ids=diff)]
        out += between + [segs[pos]]
    out += segs[(model_pos[-1] + 1) if model_pos else 0 :]
    return out


def mask_segments(
    ids: np.ndarray, generated: np.ndarray, other_role: str = "tool", **per_token: np.ndarray | None
) -> list[Segment]:
    """Split a flat response into segments at changes of the generated-token mask.

    ``ids`` [n], ``generated`` [n] bool; runs of 1 -> ``model``, runs of 0 -> ``other_role``; each optional
    per-token array [n] (``log_probs=...``) is sliced along.
    """
    n = len(ids)
    if n == 0:
        return []
    flags = np.asarray(generated, dtype=bool)
    cuts = np.flatnonzero(flags[1:] != flags[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [n]])
    segs = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        extra = {k: (v[a:b] if v is not None else None) for k, v in per_token.items()}
        segs.append(Segment(role="model" if flags[a] else other_role, token_ids=ids[a:b], **extra))
    return segs
