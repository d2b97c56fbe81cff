"""Readable text for each token: byte-level pieces decoded (``Ġ`` -> space, ``Ċ`` -> newline), UTF-8 joined.

A character split over several byte-level tokens (e.g. an emoji or a CJK character made of 2-3 tokens) is
shown on the token that completes it; the tokens before it show ``""``. This is how streaming detokenizers
behave, and it keeps the invariant ``"".join(pieces) == decoded text``, so offsets computed from the pieces
index the decoded response text. Special/added tokens show their literal text (``<|im_end|>``).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence

import numpy as np

from engine.io.text.qwen_vocab import UNICODE_TO_BYTE

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _decoder_kind(tok) -> str:
    backend = getattr(tok, "backend_tokenizer", None)
    name = repr(backend.decoder) if backend is not None and backend.decoder is not None else ""
    if "ByteLevel" in name:
        return "byte_level"
    if "Metaspace" in name or "ByteFallback" in name:
        return "metaspace"
    return "generic"


def token_bytes(tok, ids: Sequence[int] | np.ndarray) -> list[bytes]:
    """The raw bytes each token stands for (special tokens: their UTF-8 text)."""
    ids = np.asarray(ids).tolist()
    added = {i: t.content for i, t in getattr(tok, "added_tokens_decoder", {}).items()}
    kind = _decoder_kind(tok)
    out: list[bytes] = []
    if kind == "generic":
        for i in ids:
            out.append(added[i].encode() if i in added else tok.decode([i], skip_special_tokens=False).encode())
        return out
    pieces = tok.convert_ids_to_tokens(ids)
    for i, piece in zip(ids, pieces, strict=True):
        if i in added or piece is None:
            out.append((added.get(i) or "").encode())
        elif kind == "byte_level":
            try:
                out.append(bytes(UNICODE_TO_BYTE[c] for c in piece))
            except KeyError:  # a piece outside the byte alphabet: show it as is
                out.append(piece.encode())
        else:
            m = _BYTE_FALLBACK.match(piece)
            out.append(bytes([int(m.group(1), 16)]) if m else piece.replace("\u2581", " ").encode())
    return out


def display_pieces(tok, ids: Sequence[int] | np.ndarray) -> list[str]:
    """Readable text of each token; a split character appears on the token that completes it (see module doc)."""
    return pieces_from_bytes(token_bytes(tok, ids))


def pieces_from_bytes(raw: Sequence[bytes]) -> list[str]:
    """UTF-8 decode token byte strings incrementally: a split character shows on the token completing it."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [decoder.decode(b) for b in raw]
    tail = decoder.decode(b"", final=True)
    if tail and pieces:
        pieces[-1] += tail
    return pieces


def piece_offsets(pieces: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) character span of each piece in ``"".join(pieces)``."""
    spans, pos = [], 0
    for p in pieces:
        spans.append((pos, pos + len(p)))
        pos += len(p)
    return spans
