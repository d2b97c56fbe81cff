"""Checks every trajectory passes after tokenization, whatever format it came from.

A trajectory is rejected (with a ``RecordError`` naming the field) if: a segment has no tokens it should have,
a per-token array's length differs from the segment's token count, a per-token value is NaN/inf, a reward or
``metadata.reward_baseline`` is non-finite or beyond float32 (the batch is float32), ``metadata.trace_lengths``
is not an object of integer counts ≥ 0 within float32's range (``engine.batch.TRACE_LENGTHS``), a token id
(response or prompt) is outside the tokenizer's vocabulary, the response has zero tokens,
or ``metadata.exclude_from_loss`` (it zeroes the row's action mask) or ``metadata.truncated`` is not a boolean. That
the free metadata can be saved is made sure before, by the loader (``engine.io.reading.jsonable.plain``).

``text_mismatches`` finds segments whose token ids decode to other text than the text the file gave with them
(the loader notes each, keeping the record: credit is computed on the ids).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from engine.batch import TRACE_LENGTHS
from engine.io.data.model import FLOAT_DTYPE, PER_TOKEN_FIELDS, ROLE_CODES, Segment, Trajectory
from engine.io.reading.coerce import all_finite, as_float
from engine.io.reading.problems import RecordError

FLOAT_MAX = float(np.finfo(FLOAT_DTYPE).max)


def _check_number(v: float, field: str) -> None:
    """A reward the float32 batch can hold: finite and within float32 range."""
    if not math.isfinite(v):
        raise RecordError(field, f"non-finite value {v}")
    if abs(v) > FLOAT_MAX:
        raise RecordError(field, f"value {v} is beyond the float32 range of the batch")


def _check_vocab(ids, field: str, vocab_size: int | None) -> None:
    if vocab_size is not None and len(ids) and int(ids.max()) >= vocab_size:
        raise RecordError(field, f"token id {int(ids.max())} is outside the vocabulary ({vocab_size} ids)")


def validate_trajectory(traj: Trajectory, vocab_size: int | None = None) -> None:
    """Raise ``RecordError`` on the first thing that makes ``traj`` unusable (see the module docstring)."""
    if traj.prompt is None:
        raise RecordError("prompt", "missing prompt text")
    for j, seg in enumerate(traj.segments):
        where = f"segments[{j}]"
        if seg.role not in ROLE_CODES:
            raise RecordError(f"{where}.role", f"unknown role {seg.role!r}")
        if seg.token_ids is None or seg.text is None:
            raise RecordError(where, "segment has neither text nor token ids")
        n = len(seg.token_ids)
        _check_vocab(seg.token_ids, f"{where}.token_ids", vocab_size)
        for name in PER_TOKEN_FIELDS:
            arr = getattr(seg, name)
            if arr is None:
                continue
            if len(arr) != n:
                raise RecordError(f"{where}.{name}", f"has {len(arr)} values for {n} tokens")
            if len(arr) and not all_finite(arr):
                i = int(np.flatnonzero(~np.isfinite(arr))[0])
                raise RecordError(f"{where}.{name}", f"non-finite value {float(arr[i])} at token {i}")
    if traj.num_tokens == 0:
        raise RecordError("segments", "empty trajectory: the response has zero tokens")
    if traj.prompt_token_ids is not None:
        _check_vocab(traj.prompt_token_ids, "prompt_token_ids", vocab_size)
    for k, comps in enumerate(traj.turn_rewards):
        for name, v in comps.items():
            _check_number(v, f"turn_rewards[{k}].{name}")
    for name, v in traj.global_rewards.items():
        _check_number(v, f"global_rewards.{name}")
    baseline = traj.metadata.get("reward_baseline")
    if isinstance(baseline, (int, float)):  # becomes the batch's reward_baselines
        _check_number(as_float(baseline, "metadata.reward_baseline"), "metadata.reward_baseline")
    lengths = traj.metadata.get("trace_lengths")
    if lengths is not None:  # becomes the batch's trace_lengths
        if not isinstance(lengths, dict):
            raise RecordError("metadata.trace_lengths", f"expected an object of {list(TRACE_LENGTHS)}")
        for name in TRACE_LENGTHS:
            v = lengths.get(name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= FLOAT_MAX:
                raise RecordError(
                    f"metadata.trace_lengths.{name}", f"expected an integer ≥ 0 within float32's range, got {v!r}"
                )
    for flag in ("exclude_from_loss", "truncated"):  # a "no" or a 2 must not quietly count as true
        if not isinstance(traj.metadata.get(flag, False), bool):
            raise RecordError(f"metadata.{flag}", "expected true or false")


# ------------------------------------------------------------------------------------------------ text vs ids
EXCERPT = 40


@functools.lru_cache(maxsize=4)
def _id_bytes(variant: str) -> np.ndarray:
    """The raw bytes of every id of a built-in vocabulary, as an object array (a segment's bytes are one fancy
    index and one ``bytes.join``: ~25 ms per million tokens)."""
    from engine.io.text.qwen_vocab import id_bytes_table

    return np.array(id_bytes_table(variant), dtype=object)


def _loose(text: str, special: Sequence[str]) -> str:
    """``text`` without whitespace, replacement characters and special-token strings: what a writer that strips,
    re-spaces or leaves out template tokens still keeps."""
    for tok in special:
        text = text.replace(tok, "")
    return "".join(text.split()).replace("\ufffd", "")


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= EXCERPT else text[: EXCERPT - 3] + "...")


def text_mismatches(segments: Sequence[Segment], tokenizer: str | None) -> list[tuple[int, str]]:
    """``(index, reason)`` of each segment (given both ``text`` and ``token_ids``) whose ids decode to other text
    under ``tokenizer``. Differences only in whitespace, in special/added tokens (``<|im_end|>``) or in a
    character split across segments (U+FFFD) are tolerated: writers strip text or leave template tokens out of
    it. The built-in Qwen vocabularies compare each segment's bytes, one table lookup and join per segment (no
    tokenizer is loaded); other tokenizers decode through their backend."""
    from engine.io.text.qwen_vocab import VARIANTS
    from engine.io.text.tokenize import canonical_name, decode_many, get_backend

    segments = list(segments)
    if not segments:
        return []
    canon = canonical_name(tokenizer)
    texts = [s.text for s in segments]
    if canon in VARIANTS:
        table = _id_bytes(canon)
        raw = (t.encode("utf-8", "surrogatepass") for t in texts)
        got = (b"".join(table[s.token_ids].tolist()) for s in segments)
        decoded = [None if g == r else g.decode("utf-8", "replace") for g, r in zip(got, raw, strict=True)]
        special = [text for text, _ in VARIANTS[canon]]
    else:
        backend = get_backend(canon)
        decoded = [
            d if d != t else None
            for d, t in zip(decode_many(backend, [s.token_ids for s in segments]), texts, strict=True)
        ]
        added = getattr(backend, "get_added_tokens_decoder", None)
        special = [t.content for t in added().values()] if added else []
    out = []
    for k, (dec, text) in enumerate(zip(decoded, texts, strict=True)):
        if dec is None or _loose(dec, special) == _loose(text, special):
            continue
        n = len(segments[k].token_ids)
        out.append(
            (
                k,
                f"its {n:,} token ids decode to {_excerpt(dec)}, not to its text {_excerpt(text)}; kept as loaded: "
                "credit is computed on the token ids and the token view shows their text (ids from another "
                "tokenizer, or text and ids from different places?)",
            )
        )
    return out
