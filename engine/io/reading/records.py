"""Streaming JSON record reader: JSONL line by line, or one JSON document (an array or a single object).

Memory stays bounded by ``ctx.max_bytes``: a line longer than that is skipped in chunks and reported, never
read whole. Each bad line (truncated JSON, binary garbage, not an object) becomes a problem and reading goes
on. ``orjson`` is used when installed (about 10x faster on token arrays); the standard library parses what
orjson refuses (``NaN`` literals, which Python's ``json.dumps`` writes) so that validation can say "NaN".
A record holding a lone UTF-16 surrogate (``"\\ud800"``, which no encoder can write back) is a problem too.
A file starting with ``[`` is one JSON array unless its first lines are JSON values by themselves, or it does not
parse: then it is JSONL (e.g. an rLLM chat dump, one message list a line). An array larger than ``max_bytes`` is
split into items by scanning its brackets, strings and commas chunk by chunk, so that each item is held only up
to ``max_bytes``: a larger one is reported (``[i]``) and skipped like an over-long JSONL line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator, Iterator
from typing import BinaryIO

from engine.io.reading.context import LoadContext
from engine.io.reading.problems import RecordError

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


_IN_STRING = re.compile(rb'["\\]')  # inside a string only a quote or an escape matter
_ITEMS = re.compile(rb'[\[\]{}",]')  # in the array itself: brackets, strings and the commas between items
_NESTED = re.compile(rb'[\[\]{}"]')  # deeper: brackets and strings (commas there separate nothing of ours)


class _Broken(Exception):
    """The JSON array is not well-formed at byte ``offset``."""

    def __init__(self, offset: int, reason: str, after: bool = False) -> None:
        super().__init__(reason)
        self.offset, self.reason, self.after = offset, reason, after  # after: the array itself was whole


def _array_items_raw(f: BinaryIO, limit: int) -> Iterator[tuple[bytes | None, int]]:
    """(raw bytes, size) of each item of the JSON array ``f`` is positioned at, split by scanning brackets,
    strings and commas chunk by chunk: no item is held beyond ``limit`` bytes (an item over it comes as
    ``(None, its size)``, skipped, never read whole). Raises ``_Broken`` where the text stops being one array."""
    depth, in_string, skip, closed, opened, count = 0, False, 0, False, False, 0
    whole = False  # an item's value ended at depth 1: only "," or "]" may follow
    parts: list[bytes] | None = []
    size = 0
    offset = f.tell()
    while chunk := f.read(_CHUNK):
        pos, start = min(skip, len(chunk)), 0
        skip -= pos
        if closed and chunk.strip():
            raise _Broken(offset, "text after the closing ]", after=True)
        while not closed:
            pattern = _IN_STRING if in_string else (_ITEMS if depth <= 1 else _NESTED)
            m = pattern.search(chunk, pos)
            if m is None:
                break
            ch, at = m.group(), m.start()
            pos = m.end()
            if in_string:
                if ch == b"\\":
                    pos += 1  # the escaped byte (may be in the next chunk)
                    skip = max(pos - len(chunk), 0)
                else:
                    in_string, whole = False, depth == 1
            elif depth == 1 and whole and ch in b'[{"':  # JSONL lines after a "[" line, not one array
                raise _Broken(offset + at, "two items without a comma between them")
            elif ch == b'"':
                in_string = True
            elif depth == 0:
                if ch != b"[" or opened or chunk[:at].strip(BOM + b" \t\r\n"):
                    raise _Broken(offset + at, f"expected [, found {ch.decode()!r}")
                depth, opened, start = 1, True, pos
            elif ch in b"[{":
                depth += 1
            elif depth == 1 and ch in b",]":
                size += at - start
                raw = b"".join(parts) + chunk[start:at] if parts is not None and size <= limit else None
                if ch == b"," or count or raw is None or raw.strip():  # "[]" and "[ ]" hold no item
                    count += 1
                    yield raw, size
                parts, size, start, whole = [], 0, pos, False
                if ch == b"]":
                    depth, closed = 0, True
                    if chunk[pos:].strip():
                        raise _Broken(offset + pos, "text after the closing ]", after=True)
            elif ch in b"]}":
                if depth == 1:
                    raise _Broken(offset + at, f"unexpected {ch.decode()!r}")
                depth -= 1
                whole = depth == 1
        if not closed and opened:
            size += len(chunk) - start
            if parts is not None and size <= limit:
                parts.append(chunk[start:])
            else:
                parts = None
        offset += len(chunk)
    if not closed:
        raise _Broken(offset, "the file ends inside the array (truncated?)")


def iter_json_records(path: str, ctx: LoadContext) -> Iterator[tuple[int | None, str, object]]:
    """Yield ``(line, field_prefix, value)`` for every record of a JSONL or JSON file.

    JSONL: one value per line (``line`` set, prefix ``""``). A JSON array: one record per item (``line`` None,
    prefix ``"[i]."``). A single pretty-printed JSON object: one record at line 1.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first = _first_byte(f)
        if first == b"[" and not _reads_as_jsonl(f, ctx):
            if size <= max(ctx.max_bytes, 1):  # no item can be over the limit: parse the array whole
                items = _whole_array(f, ctx)
                if items is not None:
                    yield from items
                    return
            elif not (yield from _streamed_array(f, ctx, size)):
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


def _whole_array(f: BinaryIO, ctx: LoadContext) -> Iterator[tuple[int | None, str, object]] | None:
    """The items of a file that is one JSON array no larger than ``max_bytes``; None (file left to be read as
    JSONL, each bad line a problem) if it does not parse."""
    raw = f.read()
    try:
        doc = parse_json(raw, unicode_check=False)
    except RecordError:
        return None
    if not isinstance(doc, list):
        ctx.problem(None, None, f"expected a JSON array of records, got {type(doc).__name__}")
        return iter(())
    return _array_items(doc, ctx, unicode_check=_SURROGATE_ESCAPE.search(raw) is not None)


def _streamed_array(f: BinaryIO, ctx: LoadContext, size: int) -> Generator[tuple[int | None, str, object], None, bool]:
    """The items of a JSON array file larger than ``max_bytes``, read one at a time: an item over ``max_bytes``
    is a problem ``[i]`` and skipped without being held, the others load. A first pass checks that the file is
    one array (holding nothing); if it is not (JSONL whose lines are arrays, text after the ``]``, a stray
    bracket) nothing is read and True is returned: read it as JSONL. An array cut short (the file ends inside
    it) loads the items before the cut, and a problem says where it breaks off."""
    start = f.tell()
    separated = 0
    try:
        for _ in _array_items_raw(f, -1):
            separated += 1
    except _Broken as e:
        # cut short before its first comma, it may as well be JSONL after a stray "[" line: read it as such
        if e.after or not e.reason.startswith("the file ends") or not separated:
            return True
    f.seek(start)
    i = 0
    try:
        for raw, n in _array_items_raw(f, ctx.max_bytes):
            if i % 256 == 0:
                ctx.progress(min(f.tell() / max(size, 1), 1.0), f"reading {os.path.basename(ctx.file)}: record {i:,}")
            if raw is None:
                reason = f"record of {n:,} bytes is over the limit of {ctx.max_bytes:,} bytes (max_bytes); skipped"
                ctx.problem(None, f"[{i}]", reason)
            else:
                try:
                    value = parse_json(raw)
                except RecordError as err:
                    ctx.log.add_error(ctx.file, None, err, f"[{i}].")
                else:
                    yield None, f"[{i}].", value
            i += 1
    except _Broken as e:  # the file ends inside the array
        after = f"nothing after item {i - 1:,} is read" if i else "no item is whole"
        ctx.problem(None, f"[{i}]", f"the JSON array breaks off at byte {e.offset:,} ({e.reason}); {after}")
    return False


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
