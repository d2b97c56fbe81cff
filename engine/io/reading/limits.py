"""Decompression-bomb checks: the sizes a binary file DECLARES, held against the load ceiling before reading.

A few MB of deflated zeros can declare gigabytes. Every binary reader calls these first: ``check_zip`` (the zip
directory of a ``.npz`` or ``torch.save`` archive: each member's uncompressed size and their sum), ``check_npz`` (also
each ``.npy`` member's header: shape x dtype, which numpy allocates before reading, so a tiny member can declare
32 GiB), ``check_parquet`` (each row group's uncompressed size and what its values decode to, from the footer),
``check_values`` (how many values, i.e. tokens, a tensor or column declares), ``check_dense`` (a tensor about to be
made dense: a sparse one, a strided view) and ``check_pickle`` (how many items a ``torch.save`` pickle builds). The
ceiling is ``engine.io.reading.context.max_load_bytes`` (``$CREDITLENS_MAX_LOAD_MB``, default
4,096 MiB): decoded data may take half of it (``DECODE_FACTOR``), values ``TOKEN_BYTES`` each. Over it they raise
``ValueError`` naming the file, the member / row group / column / field, and the declared and allowed sizes; nothing has
been decompressed by then.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

from engine.io.reading.budgets import declare
from engine.io.reading.context import DECODE_FACTOR, MAX_LOAD_MB_ENV, TOKEN_BYTES, max_load_bytes, mib

# Bytes per value an Arrow column holds for each Parquet physical type (BYTE_ARRAY: its 4-byte offset; the
# bytes themselves are counted through the column chunk's uncompressed size).
_PARQUET_WIDTH = {
    "BOOLEAN": 1,
    "INT32": 4,
    "INT64": 8,
    "INT96": 12,
    "FLOAT": 4,
    "DOUBLE": 8,
    "BYTE_ARRAY": 4,
    "FIXED_LEN_BYTE_ARRAY": 16,
}
_NPY_HEADER_MAX = 1 << 16  # numpy's own default cap on a .npy header is 10,000 bytes
# A torch.save archive's pickle (``data.pkl``): what it holds besides tensors (lists, dicts, strings) becomes
# Python objects, up to ~32 times its size (a 1-byte EMPTY_LIST opcode plus a 1-byte APPEND is a 64-byte
# list; a token id as BININT2, 3 bytes, is a 36-byte int), so it may be at most 1/32 of the ceiling.
PICKLE_FACTOR = 32


# torch.load(weights_only=True) unpickles in pure Python, one opcode at a time: ~2 us an item at worst (4 M empty
# lists, one byte each, took 7.4 s on a busy 2-core machine), ~0.5 us a token id. slime's dump holds tokens, loss
# mask and log-probs as Python lists: one item a prompt token, three a response token (tests/writers/slime.py;
# 64 samples of 8,192 tokens pickle to 7 MB, 1.06 M items). A large rollout (256 samples, 8,192-token responses)
# is ~6.5 M items; 16 M leaves 2.5 times that, and at worst ~30 s of unpickling.
PICKLE_ITEMS = declare(
    "pickle_items",
    "CREDITLENS_MAX_PICKLE_ITEMS",
    16_000_000,
    "items (pickle opcodes)",
    "torch.save pickle",
    "torch.load(weights_only=True) unpickles in pure Python: 100 MB of empty lists, within the byte limits, takes "
    "minutes; each opcode is counted before unpickling",
)


def ceiling(limit: int | None = None) -> int:
    return max_load_bytes() if limit is None else limit


def decoded_limit(limit: int | None = None) -> int:
    """Bytes a load may decode: the ceiling over ``DECODE_FACTOR``."""
    return ceiling(limit) // DECODE_FACTOR


def values_limit(limit: int | None = None) -> int:
    """Values (tokens) one array or column of a load may declare: the ceiling over ``TOKEN_BYTES``."""
    return ceiling(limit) // TOKEN_BYTES


def _refuse(path: Path | str, what: str, declared: int, limit: int, verb: str = "declares") -> ValueError:
    allowed = decoded_limit(limit)
    return ValueError(
        f"{path}: {what} {verb} {mib(declared)} ({declared:,} bytes) uncompressed, over the {mib(allowed)} "
        f"({allowed:,} bytes) a load may decode (1/{DECODE_FACTOR} of the load ceiling of {mib(ceiling(limit))}, "
        f"{MAX_LOAD_MB_ENV}); refused before reading"
    )


def check_values(path: Path | str, what: str, count: int, limit: int | None = None) -> None:
    """``ValueError`` if ``what`` (a tensor, an npy member, a Parquet column) declares more values (tokens) than
    a load may hold."""
    allowed = values_limit(limit)
    if count > allowed:
        raise ValueError(
            f"{path}: {what} declares {count:,} values, over the {allowed:,} a load may hold (the load ceiling of "
            f"{mib(ceiling(limit))}, {MAX_LOAD_MB_ENV}, at {TOKEN_BYTES} bytes a token); refused before reading"
        )


def check_zip(path: Path | str, limit: int | None = None) -> list[zipfile.ZipInfo]:
    """The members of zip archive ``path`` (a ``.npz``, a ``torch.save`` file), from its central directory;
    ``ValueError`` if one member, or all together, declare more than a load may decode, or if the directory
    cannot be read."""
    allowed = decoded_limit(limit)
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as e:
        raise ValueError(f"{path}: not a readable zip archive ({type(e).__name__}: {e})") from None
    total = 0
    for info in infos:
        if info.file_size > allowed:
            raise _refuse(path, f"member {info.filename!r}", info.file_size, ceiling(limit))
        if info.filename.rsplit("/", 1)[-1] == "data.pkl" and info.file_size > ceiling(limit) // PICKLE_FACTOR:
            most = ceiling(limit) // PICKLE_FACTOR
            raise ValueError(
                f"{path}: member {info.filename!r} (the pickled lists, dicts and strings besides the tensors) declares "
                f"{mib(info.file_size)} ({info.file_size:,} bytes), over the {mib(most)} ({most:,} bytes) a load "
                f"may unpack (1/{PICKLE_FACTOR} of the load ceiling of {mib(ceiling(limit))}, {MAX_LOAD_MB_ENV}: "
                "Python objects take up to that many times their pickled size); refused before reading"
            )
        total += info.file_size
    if total > allowed:
        raise _refuse(path, f"its {len(infos):,} members together", total, ceiling(limit), "declare")
    return infos


_PAIR = -100  # GLOBAL / INST: two newline-terminated lines


def _pickle_widths() -> list[int | None]:
    """Per opcode byte: how its argument is laid out (``pickletools``' descriptors: a fixed width >= 0, a length
    prefix, up to a newline, two lines); None for a byte that is no opcode."""
    import pickletools

    widths: list[int | None] = [None] * 256
    for op in pickletools.opcodes:
        arg = op.arg
        n = 0 if arg is None else arg.n
        if arg is not None and arg.name == "stringnl_noescape_pair":
            n = _PAIR
        widths[ord(op.code)] = n
    return widths


def pickle_items(data: bytes, limit: int) -> int:
    """How many opcodes pickle ``data`` runs before its STOP (or a byte that is no opcode, which the unpickler
    refuses), counting stops past ``limit``. Each opcode builds or moves at most one item, so this bounds what
    unpickling makes and how long it takes; it reads lengths and skips payloads, never builds anything."""
    import pickletools

    widths, stop = _PICKLE_WIDTHS, ord(".")
    one, four, four_u, eight = (
        pickletools.TAKEN_FROM_ARGUMENT1,
        pickletools.TAKEN_FROM_ARGUMENT4,
        pickletools.TAKEN_FROM_ARGUMENT4U,
        pickletools.TAKEN_FROM_ARGUMENT8U,
    )
    i, end, items = 0, len(data), 0
    try:
        while i < end and items <= limit:
            op = data[i]
            w = widths[op]
            i += 1
            items += 1
            if w is None or op == stop:
                break
            if w >= 0:
                i += w
            elif w == one:
                i += 1 + data[i]
            elif w == four:
                i += 4 + max(int.from_bytes(data[i : i + 4], "little", signed=True), 0)
            elif w == four_u:
                i += 4 + int.from_bytes(data[i : i + 4], "little")
            elif w == eight:
                i += 8 + int.from_bytes(data[i : i + 8], "little")
            elif w == _PAIR:
                i = data.index(b"\n", data.index(b"\n", i) + 1) + 1
            else:  # up to a newline
                i = data.index(b"\n", i) + 1
    except (IndexError, ValueError):  # truncated: the unpickler refuses it
        pass
    return items


_PICKLE_WIDTHS = _pickle_widths()


def check_pickle(path: Path | str) -> None:
    """``ValueError`` if the ``data.pkl`` of ``torch.save`` archive ``path`` runs more opcodes than
    ``PICKLE_ITEMS`` allows; counted before it is unpickled (the archive's sizes were checked by ``check_zip``)."""
    limit = PICKLE_ITEMS.value()
    try:
        with zipfile.ZipFile(path) as z:
            info = next((i for i in z.infolist() if i.filename.rsplit("/", 1)[-1] == "data.pkl"), None)
            if info is None or info.file_size <= limit:  # an opcode takes a byte at least: no need to count
                return
            name, data = info.filename, z.read(info)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, RuntimeError, NotImplementedError) as e:
        raise ValueError(f"{path}: not a readable zip archive ({type(e).__name__}: {e})") from None
    items = pickle_items(data, limit)
    if items > limit:
        reason = PICKLE_ITEMS.over(items, f"member {name!r}")  # counting stopped at limit + 1: say "more than"
        raise ValueError(f"{path}: " + reason.replace(f"holds {items:,}", f"holds more than {limit:,}", 1))


def npy_header(f, name: str, path: Path | str) -> tuple[tuple[int, ...], int, int]:
    """(shape, itemsize, header length) of the ``.npy`` header read from ``f``; ``ValueError`` if it is not one
    numpy writes."""
    import numpy as np
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(f, max_header_size=_NPY_HEADER_MAX)
        elif version == (2, 0):
            shape, _, dtype = npy.read_array_header_2_0(f, max_header_size=_NPY_HEADER_MAX)
        else:
            raise ValueError(f"npy format version {version} (CreditLens reads 1.0 and 2.0)")
    except (ValueError, EOFError, OSError, SyntaxError, TypeError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: member {name!r} is not a readable .npy array ({e})") from None
    return tuple(int(n) for n in shape), np.dtype(dtype).itemsize, f.tell()


def check_npz(path: Path | str, limit: int | None = None) -> None:
    """``check_zip``, then each ``.npy`` member's header: the array it declares (shape x dtype, allocated by
    numpy before any data is read) must fit what a load may decode and hold, and the member's own size."""
    infos = check_zip(path, limit)
    with zipfile.ZipFile(path) as z:
        for info in infos:
            if not info.filename.endswith(".npy"):
                continue
            try:
                with z.open(info) as f:
                    shape, itemsize, header = npy_header(f, info.filename, path)
            except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError) as e:
                raise ValueError(f"{path}: member {info.filename!r} cannot be read ({type(e).__name__}: {e})") from None
            shown = f"member {info.filename!r} (npy header: shape {shape})"
            count = math.prod(shape)
            if count * itemsize > decoded_limit(limit):
                raise _refuse(path, shown, count * itemsize, ceiling(limit))
            check_values(path, shown, count, limit)
            if count * itemsize > info.file_size - header:
                raise ValueError(
                    f"{path}: {shown} declares an array of {count * itemsize:,} bytes but the member holds only "
                    f"{max(info.file_size - header, 0):,} bytes of data; refused before reading"
                )


def _column_bytes(col) -> int:
    """What a Parquet column chunk decodes to, from its metadata: its uncompressed pages, or its values times
    their Arrow width where that is more (run-length or dictionary encoding can make pages far smaller than
    the values they hold)."""
    width = _PARQUET_WIDTH.get(col.physical_type, 8)
    values = max(col.num_values, 0) * width
    if col.physical_type == "BYTE_ARRAY":
        return max(col.total_uncompressed_size, 0) + values
    return max(col.total_uncompressed_size, values, 0)


def check_parquet(pf, path: Path | str, limit: int | None = None) -> None:
    """Every row group of ``pq.ParquetFile`` ``pf``, by its footer (read before any page): what it declares
    (the larger of its total uncompressed size and what its column chunks' values decode to) must fit what a
    load may decode, one row group and all together; and no column may declare more values than a load may
    hold."""
    md = pf.metadata
    total = 0
    values: dict[str, int] = {}
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        columns = [rg.column(j) for j in range(rg.num_columns)]
        declared = max(rg.total_byte_size, sum(_column_bytes(c) for c in columns), 0)
        if declared > decoded_limit(limit):
            raise _refuse(path, f"row group {i} ({rg.num_rows:,} rows)", declared, ceiling(limit))
        total += declared
        for c in columns:
            values[c.path_in_schema] = values.get(c.path_in_schema, 0) + max(c.num_values, 0)
    if total > decoded_limit(limit):
        what = f"its {md.num_row_groups:,} row groups ({md.num_rows:,} rows) together"
        raise _refuse(path, what, total, ceiling(limit), "declare")
    if values:
        name, count = max(values.items(), key=lambda kv: kv[1])
        check_values(path, f"column {name!r}", count, limit)


def check_dense(path: Path | str, name: str, shape, itemsize: int, allowed: int, what: str = "a sparse tensor") -> int:
    """Bytes of tensor ``name`` (``what``: a sparse one, a strided view) once made dense; ``ValueError`` over
    ``allowed`` bytes (what is left of what a load may decode; checked before anything is made of it)."""
    dense = math.prod(int(n) for n in shape) * itemsize
    if dense > allowed:
        raise ValueError(
            f"{path}: {name}: {what} of shape {tuple(int(n) for n in shape)} is {mib(dense)} "
            f"({dense:,} bytes) dense, over the {mib(max(allowed, 0))} a load may still decode "
            f"({MAX_LOAD_MB_ENV}); refused before densifying"
        )
    return dense


HALF_DTYPES = ("bfloat16", "float16")  # read as float32; ids stored this way are rounded (exact to 256 / 2,048)


def tensor_array(value, path: Path | str, name: str, allowed: int):
    """Torch tensor ``value`` as a numpy array (``verl_export.plain_tensor``: bf16/fp16 as float32, sparse made
    dense, a strided view copied out) and its dense bytes (elements x item size, 4 for bf16/fp16), held against
    ``allowed`` (what the load may still decode, ``check_dense``) before anything is made of it: a tensor's
    stored bytes say nothing of its dense size (``torch.tensor([1]).expand(2**28)`` stores 8 bytes and is 2 GiB
    dense). ``ValueError`` naming ``path: name`` over it or when torch cannot convert."""
    import torch

    from engine.io.store.verl_export import plain_tensor

    dtype = str(value.dtype).removeprefix("torch.")
    itemsize = 4 if dtype in HALF_DTYPES else value.element_size()
    if value.layout != torch.strided:
        what = "a sparse tensor"
    elif value.is_contiguous():
        what = "a tensor"
    else:
        what = f"a strided view ({value.untyped_storage().nbytes():,} bytes stored)"
    made = check_dense(path, name, value.shape, itemsize, allowed, what)
    try:
        return plain_tensor(value).numpy(), made
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: {name}: a {dtype} tensor that cannot be read ({e})") from None


def text_columns(pf) -> list[str]:
    """Paths of the byte-array (string) leaf columns of ``pq.ParquetFile`` ``pf``: to be read as dictionaries
    (``read_dictionary``), so that what they decode to is known before any value is materialised."""
    return [c.path for c in pf.schema if c.physical_type == "BYTE_ARRAY"]


def decoded_bytes(arr) -> int:
    """Bytes ``arr`` (an Arrow array, chunked array, record batch or table) takes once every dictionary in it
    is decoded: a dictionary-encoded string column is counted as its values' lengths (one 1 MiB entry referenced
    a thousand times is a GiB), without decoding it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        return sum(decoded_bytes(chunk) for chunk in arr.chunks)
    if isinstance(arr, (pa.RecordBatch, pa.Table)):
        return sum(decoded_bytes(column) for column in arr.columns)
    t = arr.type
    if pa.types.is_dictionary(t):
        lengths = pc.binary_length(arr.dictionary)
        return int(pc.sum(pc.take(lengths, arr.indices)).as_py() or 0) + 8 * len(arr)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return 8 * (len(arr) + 1) + decoded_bytes(arr.flatten())
    if pa.types.is_struct(t):
        return sum(decoded_bytes(child) for child in arr.flatten())
    return arr.nbytes


def decoded_over(path: Path | str, what: str, decoded: int, limit: int | None = None) -> str | None:
    """Why ``decoded`` bytes (what a file's values decode to, counted so far) are too many, or None."""
    allowed = decoded_limit(limit)
    if decoded <= allowed:
        return None
    return (
        f"{what} decode to {mib(decoded)} ({decoded:,} bytes), over the {mib(allowed)} ({allowed:,} bytes) a load "
        f"may decode (1/{DECODE_FACTOR} of the load ceiling of {mib(ceiling(limit))}, {MAX_LOAD_MB_ENV}; "
        "dictionary-encoded text can expand thousands of times)"
    )
