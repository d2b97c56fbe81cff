"""Free metadata as JSON values: what a saved run (native JSONL, Parquet, the content hash) can hold.

Readers put what a file says into ``Trajectory.metadata`` and the run's metadata, and a file can say things that are
not JSON: a slime ``status`` saved as a tensor, YAML ``!!binary`` / ``!!set``, a Parquet decimal or binary column.
Such values would load, then make ``save_run`` fail with a ``TypeError``. ``plain`` converts each one when the
record is loaded, the same way whatever the format, and says so (``Change``):

* a numpy or torch scalar -> its Python number (bool, text); an array or tensor -> nested lists of its values, at
  most ``metadata_array_values`` of them (a larger one is refused before the list is made);
* a set -> a list, sorted when its items compare (else in the set's order);
* a ``Decimal`` -> a float when the float is the same number, else its text (``"0.1000000000000000000001"``);
* bytes -> base64 text;
* a date, time or datetime -> ISO 8601 text; a timedelta -> seconds.

A tuple becomes a list, as JSON writes it (not reported: no value changes). Anything else (a complex number, an
object of some class), an object key that is not a string, or nesting deeper than ``MAX_METADATA_DEPTH`` levels is
refused with a ``RecordError`` naming the field.
"""

from __future__ import annotations

import base64
import datetime
import math
import sys
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from engine.io.reading.budgets import declare
from engine.io.reading.problems import RecordError

MAX_METADATA_DEPTH = 64  # nesting of free metadata: orjson writes 254 levels, the standard library ~900
PATH_DEPTH = 4  # a problem names the field down to this level
JSON_SCALARS = (str, int, float, bool, type(None))
# A tensor in free metadata is a file's side data (a status code, a score row), never a rollout's tokens (those are
# segments). 2**20 values is eight times the longest response of any trainer we read (128k tokens) and ~40 MiB
# as Python floats, so no real rollout meets it.
ARRAY_VALUES = declare(
    "metadata_array_values",
    "CREDITLENS_MAX_METADATA_ARRAY",
    2**20,
    "values",
    "array or tensor in free metadata",
    "an array or tensor in free metadata is stored as a list of Python numbers (~40 bytes a value)",
)


@dataclass(frozen=True)
class Change:
    """One value of free metadata converted to JSON: where (``field``, the list holding it for an item), what it was
    (``kind``, e.g. ``"a torch tensor"``) and what it became (``became``)."""

    field: str
    kind: str
    became: str

    @property
    def reason(self) -> str:
        return f"{self.kind}, which a saved run cannot hold as it is: stored as {self.became}"


def plain(value: object, field: str) -> tuple[object, list[Change]]:
    """``value`` with every non-JSON value converted (module docstring), and the conversions made (at most one per
    field and kind). ``RecordError`` (naming the field) for what cannot be converted. Values that are JSON already
    come back as they are, unconverted and uncopied."""
    changes: dict[tuple[str, str], Change] = {}
    out = _plain(value, field, 0, changes)
    return out, list(changes.values())


def _plain(node: object, where: str, depth: int, changes: dict[tuple[str, str], Change]) -> object:
    if depth > MAX_METADATA_DEPTH:
        raise RecordError(where, f"nested more than {MAX_METADATA_DEPTH} levels deep, which no saved run can hold")
    kind = type(node)
    if kind in JSON_SCALARS:
        return node
    if isinstance(node, dict):  # a subclass (OrderedDict, defaultdict) becomes a plain dict: the same items
        out = None if kind is dict else dict(node)
        for k, v in node.items():
            if not isinstance(k, str):
                raise RecordError(where, f"object key {k!r} is not a string")
            new = _plain(v, f"{where}.{k}" if depth < PATH_DEPTH else where, depth + 1, changes)
            if new is not v:
                out = dict(node) if out is None else out
                out[k] = new
        return node if out is None else out
    if isinstance(node, (list, tuple)):
        if set(map(type, node)) <= {int, float, str, bool}:  # a long list of numbers: one C loop, nothing nested
            return node if kind is list else list(node)
        items = [_plain(v, where, depth + 1, changes) for v in node]
        if kind is list and all(a is b for a, b in zip(items, node, strict=True)):
            return node
        return items
    return _convert(node, where, depth, changes)


def _convert(node: object, where: str, depth: int, changes: dict[tuple[str, str], Change]) -> object:
    """A value that is not JSON as a JSON one, noted in ``changes``; ``RecordError`` if there is no such value."""

    def noted(kind: str, became: str, value: object) -> object:
        changes.setdefault((where, kind), Change(where, kind, became))
        return value

    torch = sys.modules.get("torch")  # a tensor exists only if torch was imported
    if torch is not None and isinstance(node, torch.Tensor):
        arr = node.detach().cpu()
        _check_size(arr.numel(), where, "tensor")
        if arr.is_complex():
            raise RecordError(where, f"a complex torch tensor ({node.dtype}), which is not JSON data")
        if arr.is_floating_point() and arr.dtype != torch.float64:
            arr = arr.double()  # bf16 / fp16 / fp32 values, each exactly a float64
        value = arr.tolist()
        kind = f"a torch tensor ({str(node.dtype).removeprefix('torch.')}, shape {list(node.shape)})"
        return noted(kind, "its number" if node.dim() == 0 else "a list of its values", value)
    if isinstance(node, np.ndarray):
        _check_size(node.size, where, "array")
        kind = f"a numpy array ({node.dtype}, shape {list(node.shape)})"
        if node.dtype.kind not in "biuf":  # objects, text, bytes, dates, complex: each value converted or refused
            return noted(kind, "a list of its values", _plain(node.tolist(), where, depth, changes))
        return noted(kind, "its value" if node.ndim == 0 else "a list of its values", node.tolist())
    if isinstance(node, np.generic):
        kind = f"a numpy {node.dtype} scalar"
        return noted(kind, "its value", _plain(node.item(), where, depth, changes))
    if isinstance(node, str):  # a subclass (a str Enum): its text, the value JSON writes
        return str.__str__(node)
    if isinstance(node, int):  # an IntEnum: its number
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, (set, frozenset)):
        items = [_plain(v, where, depth + 1, changes) for v in node]
        try:
            items.sort()
            became = "a sorted list"
        except TypeError:
            became = "a list (its items do not compare: in the set's order)"
        return noted("a set", became, items)
    if isinstance(node, Decimal):
        if node.is_nan():
            return noted("a decimal NaN", "a float NaN", math.nan)
        if Decimal(float(node)) == node:  # 0.5, 3, Infinity
            return noted("a decimal number", "a float (the same number)", float(node))
        return noted("a decimal number no float holds exactly", "its text", str(node))
    if isinstance(node, (bytes, bytearray, memoryview)):
        raw = bytes(node)
        return noted("binary data", "base64 text", base64.b64encode(raw).decode("ascii"))
    if isinstance(node, (datetime.date, datetime.time)):  # datetime is a date
        return noted(f"a {type(node).__name__}", "ISO 8601 text", node.isoformat())
    if isinstance(node, datetime.timedelta):
        return noted("a timedelta", "seconds", node.total_seconds())
    raise RecordError(where, f"a {type(node).__module__}.{type(node).__qualname__} value, which is not JSON data")


def _check_size(n: int, where: str, what: str) -> None:
    if n > ARRAY_VALUES.value():
        raise RecordError(where, ARRAY_VALUES.over(n, f"this {what}"))
