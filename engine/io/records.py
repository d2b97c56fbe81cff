"""Streaming JSON record reader: JSONL line by line, or one JSON document (an array or a single object).

Memory stays bounded by ``ctx.max_bytes``: a line longer than that is skipped in chunks and reported, never
read whole. Each bad line (truncated JSON, binary garbage, not an object) becomes a problem and reading goes
on. ``orjson`` is used when installed (about 10x faster on token arrays); the standard library parses what
orjson refuses (``NaN`` literals, which Python's ``json.dumps`` writes) so that validation can say "NaN".
A record holding a lone UTF-16 surrogate (``"\\ud800"``, which no encoder can write back) is a problem too.
A file starting with ``[`` is one JSON array unless its first lines are JSON values by themselves, or the whole
file does not parse or is too large to read whole: then it is JSONL (e.g. an rLLM chat dump, one message list a
line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import BinaryIO

from engine.io.context import LoadContext
from engine.io.problems import RecordError

try:  # optional speed-up
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None

_CHUNK = 1 << 20
BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # orjson refuses lone surrogates; the standard library not


def record_id(stem: str, line: int | None, prefix: str) -> str:
    """The id of a record that names none: ``<file stem>:<line>`` in JSONL, ``<file stem>[i]`` in a JSON array."""
    return f"{stem}:{line}" if line is not None else f"{stem}{prefix.rstrip('.')}"


def _int_as_orjson(text: str) -> int | float:
    """An integer read the way orjson reads it (a float outside [-2**63, 2**64)), so that a record parses to the
    same value whether orjson or this fallback read its file: orjson gives up on a whole document for one number
    beyond a double (``1e400``), and such a number stays an int here (the record holding it is then refused)."""
    value = int(text)
    if -(2**63) <= value < 2**64:
        return value
    try:
        return float(value)
    except OverflowError:
        return value


def parse_json(raw: bytes, unicode_check: bool = True) -> object:
    """Parse one JSON value; ``RecordError`` with a readable reason if it is not JSON (or holds a lone surrogate,
    unless ``unicode_check`` is off: a whole JSON array is checked item by item)."""
    if raw.startswith(BOM):  # UTF-8 byte order mark, written by some Windows tools
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
        value = json.loads(text, parse_int=_int_as_orjson)
    except json.JSONDecodeError as e:
        hint = " (truncated record?)" if e.pos >= len(text.rstrip()) else ""
        raise RecordError(None, f"invalid JSON{hint}: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise RecordError(None, "invalid JSON: nested too deeply") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise RecordError(None, f"invalid JSON: {e}") from None
    if unicode_check and _SURROGATE_ESCAPE.search(raw):
        check_unicode(value)
    return value


def check_unicode(value: object) -> None:
    """``RecordError`` if a string in ``value`` holds a lone surrogate (not valid Unicode: it cannot be encoded)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(None, "text with a lone UTF-16 surrogate (a \\udXXX escape without its pair)") from None
    except RecursionError:
        raise RecordError(None, "invalid JSON: nested too deeply") from None


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
        if line_no == 1 and raw.startswith(BOM):  # a byte order mark alone does not make a line a record
            raw = raw[len(BOM) :]
        if raw.strip():
            yield line_no, raw
        if line_no % 256 == 0 and size:
            ctx.progress(min(f.tell() / size, 1.0), f"reading {os.path.basename(ctx.file)}: line {line_no:,}")


def _first_byte(f: BinaryIO) -> bytes:
    pos = f.tell()
    head = f.read(4096).lstrip(BOM + b" \t\r\n")
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
        if first == b"[" and not _reads_as_jsonl(f, ctx):
            items = _whole_array(f, ctx, size)
            if items is not None:
                yield from items
                return
            f.seek(0)
        lines = iter_lines(f, ctx, size)
        for line_no, raw in lines:
            try:
                value = parse_json(raw)
            except RecordError as err:
                if line_no == 1 and first == b"{" and size <= ctx.max_bytes:
                    after = f.tell()
                    f.seek(0)
                    doc = _try_document(f)
                    if doc is not None:
                        yield 1, "", doc
                        return
                    f.seek(after)
                ctx.log.add_error(ctx.file, line_no, err)
                continue
            yield line_no, "", value


def _try_document(f: BinaryIO) -> object | None:
    try:
        return parse_json(f.read())
    except RecordError:
        return None


def _reads_as_jsonl(f: BinaryIO, ctx: LoadContext) -> bool:
    """Is a file that starts with ``[`` JSONL whose records are arrays (an rLLM chat dump)?

    Yes if its first line is a JSON value by itself and more follows, or if one of the next few lines is a whole
    JSON array or object (lines of a pretty-printed array are fragments); otherwise it is one JSON document.
    """
    pos = f.tell()
    lines = [f.readline(ctx.max_bytes + 1) for _ in range(8)]
    f.seek(pos)
    lines = [raw for raw in lines if raw.strip()]
    for k, raw in enumerate(lines[:4]):
        if not raw.endswith(b"\n") or (k == 0 and len(lines) < 2):
            continue
        try:
            value = parse_json(raw)
        except RecordError:
            continue
        if k == 0 or (isinstance(value, (list, dict)) and value):
            return True
    return False


def _whole_array(f: BinaryIO, ctx: LoadContext, size: int) -> Iterator[tuple[int | None, str, object]] | None:
    """The items of a file that is one JSON array; None (file left to be read as JSONL, each bad line a problem)
    if it does not parse or is too large to read whole (over 64 records' worth of ``max_bytes``)."""
    if size > max(ctx.max_bytes, 1) * 64:
        return None
    raw = f.read()
    try:
        doc = parse_json(raw, unicode_check=False)
    except RecordError:
        return None
    if not isinstance(doc, list):
        ctx.problem(None, None, f"expected a JSON array of records, got {type(doc).__name__}")
        return iter(())
    return _array_items(doc, ctx, unicode_check=_SURROGATE_ESCAPE.search(raw) is not None)


def _array_items(doc: list, ctx: LoadContext, unicode_check: bool) -> Iterator[tuple[int | None, str, object]]:
    for i, item in enumerate(doc):
        if i % 256 == 0:
            ctx.progress(i / max(len(doc), 1), f"reading {os.path.basename(ctx.file)}: record {i:,}")
        if unicode_check:
            try:
                check_unicode(item)
            except RecordError as err:
                ctx.log.add_error(ctx.file, None, err, f"[{i}].")
                continue
        yield None, f"[{i}].", item
