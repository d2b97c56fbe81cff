"""Streaming JSON record reader: JSONL line by line, or one JSON document (an array or a single object).

Memory stays bounded by ``ctx.max_bytes``: a line longer than that is skipped in chunks and reported, never
read whole. Each bad line (truncated JSON, binary garbage, not an object) becomes a problem and reading goes
on. ``orjson`` is used when installed (about 10x faster on token arrays); the standard library parses what
orjson refuses (``NaN`` literals, which Python's ``json.dumps`` writes) so that validation can say "NaN".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import BinaryIO

from engine.io.context import LoadContext
from engine.io.problems import RecordError

try:  # optional speed-up
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None

_CHUNK = 1 << 20


def parse_json(raw: bytes) -> object:
    """Parse one JSON value; ``RecordError`` with a readable reason if it is not JSON."""
    if raw.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark, written by some Windows tools
        raw = raw[3:]
    if orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(None, f"binary data, not UTF-8 JSON text (bad byte at offset {e.start})") from None
    if "\x00" in text:
        raise RecordError(None, "binary data (NUL bytes), not JSON text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (truncated record?)" if e.pos >= len(text.rstrip()) else ""
        raise RecordError(None, f"invalid JSON{hint}: {e.msg} at column {e.colno}") from None


def _skip_rest_of_line(f: BinaryIO) -> int:
    """Consume the remainder of an over-long line in 1 MiB chunks; returns the bytes skipped."""
    skipped = 0
    while True:
        chunk = f.readline(_CHUNK)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def iter_lines(f: BinaryIO, ctx: LoadContext, size: int) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of each non-blank line within the size limit."""
    line_no = 0
    while True:
        raw = f.readline(ctx.max_bytes + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > ctx.max_bytes and not raw.endswith(b"\n"):
            total = len(raw) + _skip_rest_of_line(f)
            ctx.problem(
                line_no,
                None,
                f"record of {total:,} bytes is over the limit of {ctx.max_bytes:,} bytes (max_bytes); skipped",
            )
            continue
        if raw.strip():
            yield line_no, raw
        if line_no % 256 == 0 and size:
            ctx.progress(min(f.tell() / size, 1.0), f"reading {os.path.basename(ctx.file)}: line {line_no:,}")


def _first_byte(f: BinaryIO) -> bytes:
    pos = f.tell()
    head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    f.seek(pos)
    return head[:1]


def iter_json_records(path: str, ctx: LoadContext) -> Iterator[tuple[int | None, str, object]]:
    """Yield ``(line, field_prefix, value)`` for every record of a JSONL or JSON file.

    JSONL: one value per line (``line`` set, prefix ``""``). A JSON array: one record per item (``line`` None,
    prefix ``"[i]."``). A single pretty-printed JSON object: one record at line 1.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first = _first_byte(f)
        if first == b"[":
            yield from _whole_array(f, ctx, size)
            return
        lines = iter_lines(f, ctx, size)
        for line_no, raw in lines:
            try:
                value = parse_json(raw)
            except RecordError as err:
                if line_no == 1 and first == b"{" and size <= ctx.max_bytes:
                    f.seek(0)
                    doc = _try_document(f)
                    if doc is not None:
                        yield 1, "", doc
                        return
                    f.seek(len(raw))
                ctx.log.add_error(ctx.file, line_no, err)
                continue
            yield line_no, "", value


def _try_document(f: BinaryIO) -> object | None:
    try:
        return parse_json(f.read())
    except RecordError:
        return None


def _whole_array(f: BinaryIO, ctx: LoadContext, size: int) -> Iterator[tuple[int | None, str, object]]:
    limit = max(ctx.max_bytes, 1) * 64
    if size > limit:
        ctx.problem(
            None, None, f"JSON document of {size:,} bytes is too large to read whole (limit {limit:,}); use JSONL"
        )
        return
    try:
        doc = parse_json(f.read())
    except RecordError as err:
        ctx.log.add_error(ctx.file, None, err)
        return
    if not isinstance(doc, list):
        ctx.problem(None, None, f"expected a JSON array of records, got {type(doc).__name__}")
        return
    for i, item in enumerate(doc):
        if i % 256 == 0:
            ctx.progress(i / max(len(doc), 1), f"reading {os.path.basename(ctx.file)}: record {i:,}")
        yield None, f"[{i}].", item
