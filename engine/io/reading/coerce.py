"""Type checks for values read from untrusted records; each failure is a ``RecordError`` naming the field.

Used by every adapter so that "wrong type", "NaN reward" and "array of the wrong length" read the same way
whatever the input format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from engine.io.data.model import FLOAT_DTYPE, TOKEN_DTYPE
from engine.io.reading.problems import RecordError

FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4028235e38: beyond it a float32 is inf
BOOL_TYPES = frozenset({bool, np.bool_})


def type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def as_str(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise RecordError(field, f"expected a string, got {type_name(value)}")
    return value


def as_float(value: object, field: str) -> float:
    """A finite number a float32 can hold: a reward, an advantage, a log-prob. A boolean is refused (no trainer
    writes ``true`` for one of those; read as 1 it would be a made-up number), and so is a number beyond float32
    (the batch stores it as float32, where it would be ``inf``)."""
    if isinstance(value, bool):
        raise RecordError(field, f"expected a number, got bool {value!r} (a boolean is not a number here)")
    if not isinstance(value, (int, float)) or isinstance(value, complex):
        raise RecordError(field, f"expected a number, got {_describe(value)}")
    try:
        out = float(value)
    except OverflowError:  # an integer literal beyond float64 (JSON allows any number of digits)
        raise RecordError(field, f"number too large: {_describe(value)}") from None
    if not math.isfinite(out):
        raise RecordError(field, f"non-finite value {out}")
    if abs(out) > FLOAT32_MAX:
        raise RecordError(field, f"{out!r} is beyond float32 (±{FLOAT32_MAX:.8g}): it would be stored as inf")
    return out


def as_component(value: object, field: str) -> float:
    """A reward component: ``as_float``, except that a boolean counts as 0/1 (environments write components such
    as ``accuracy: true``, ART ``metrics``, NeMo Gym ``resolved``)."""
    return float(value) if isinstance(value, bool) else as_float(value, field)


def as_flag(value: object, field: str, missing: bool = False) -> bool:
    """A flag the writer writes as a JSON boolean: ``true`` / ``false`` (absent or null: ``missing``). Anything
    else (``"false"``, ``"no"``, ``0``) is refused: its truth value would read ``"false"`` as true."""
    if value is None:
        return missing
    if not isinstance(value, bool):
        raise RecordError(field, f"expected true or false, got {_describe(value)}")
    return value


def is_number(value: object) -> bool:
    """Plain JSON number or bool (the kinds of value a reward component can be)."""
    return isinstance(value, (bool, int, float))


def as_reward_dict(value: object, field: str) -> dict[str, float]:
    """``{name: finite float}`` of named reward components (``as_component``: booleans count as 0/1); names must
    be strings."""
    if not isinstance(value, Mapping):
        raise RecordError(field, f"expected an object of named reward components, got {type_name(value)}")
    return {as_str(k, field): as_component(v, f"{field}.{k}") for k, v in value.items()}


def as_token_ids(value: object, field: str) -> np.ndarray:
    """[n] int32 token ids from a list (or array) of non-negative integers."""
    arr = _as_array(value, field)
    if arr.size and arr.dtype.kind not in "iu":  # integral floats (1.0) are ids; range-checked before the cast
        if arr.dtype.kind != "f" or not (np.isfinite(arr).all() and (arr == np.round(arr)).all()):
            raise RecordError(field, f"expected integer token ids, got {arr.dtype.name} values")
    if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(TOKEN_DTYPE).max):
        raise RecordError(field, f"token id out of range: {int(arr.min())}..{int(arr.max())}")
    return arr.astype(TOKEN_DTYPE, copy=False)


def as_mask(value: object, field: str) -> np.ndarray:
    """[n] bool mask from 0/1 numbers or booleans (a list or an array). Anything else (NaN, 7, -1, 0.5, text) is
    a ``RecordError`` naming the first bad position: a mask is never guessed (``NaN > 0`` would drop a token,
    ``7 > 0`` keep one)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise RecordError(field, f"expected a flat mask, got shape {list(value.shape)}")
        arr = value
    elif isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value) if value else np.zeros(0, dtype=bool)
        except (ValueError, TypeError) as e:
            raise RecordError(field, f"expected a flat list of 0/1 values ({e})") from None
        if arr.ndim != 1:
            raise RecordError(field, "expected a flat list of 0/1 values")
    else:
        raise RecordError(field, f"expected a list of 0/1 values, got {type_name(value)}")
    if arr.dtype.kind == "b":
        return arr
    if arr.dtype.kind not in "iuf":
        bad = next((v for v in arr.tolist() if isinstance(v, bool) or not isinstance(v, (int, float))), None)
        raise RecordError(field, f"mask values must be 0 or 1 (or true/false), found {_describe(bad)}")
    with np.errstate(invalid="ignore"):
        ones = arr == 1
        bad = ~(ones | (arr == 0))  # NaN is neither
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise RecordError(field, f"mask values must be 0 or 1 (or true/false), found {arr[i].item()!r} at position {i}")
    return ones


def all_finite(arr: np.ndarray) -> bool:
    """True if no NaN/inf in ``arr``: one float64 sum (NaN/inf propagate), the exact check only if that fails."""
    return bool(np.isfinite(arr.sum(dtype=np.float64))) or bool(np.isfinite(arr).all())


def as_float_array(value: object, field: str, allow_nonfinite: bool = False) -> np.ndarray:
    """[n] float32 array of finite numbers (``allow_nonfinite``: NaN and ±inf written as such are kept). A number
    beyond float32, which the cast would turn into inf, is refused either way, naming its position."""
    arr = _as_array(value, field)
    if arr.size and arr.dtype.kind not in "iuf":
        raise RecordError(field, f"expected numbers, got {arr.dtype.name} values")
    with np.errstate(over="ignore"):  # beyond float32 becomes inf: told apart from a written inf just below
        out = arr.astype(FLOAT_DTYPE, copy=False)
    if out.size and not all_finite(out):
        bad = ~np.isfinite(out)
        if out.dtype != arr.dtype:
            with np.errstate(invalid="ignore"):
                over = bad & np.isfinite(arr)
            if over.any():
                i = int(np.flatnonzero(over)[0])
                raise RecordError(
                    field,
                    f"{arr[i].item()!r} at token {i} is beyond float32 (±{FLOAT32_MAX:.8g}): it would be stored as inf",
                )
        if not allow_nonfinite:
            i = int(np.flatnonzero(bad)[0])
            raise RecordError(field, f"non-finite value {float(out[i])} at token {i}")
    return out


def _as_array(value: object, field: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise RecordError(field, f"expected a flat list, got shape {list(value.shape)}")
        return value
    if not isinstance(value, (list, tuple)):
        raise RecordError(field, f"expected a list, got {type_name(value)}")
    if not value:
        return np.zeros(0, dtype=FLOAT_DTYPE)
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise RecordError(field, f"expected a flat list of numbers ({e})") from None
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        bad = next((v for v in value if isinstance(v, bool) or not isinstance(v, (int, float))), None)
        raise RecordError(field, f"expected a flat list of numbers, found {_describe(bad)}")
    if not BOOL_TYPES.isdisjoint(map(type, value)):  # np.asarray([5, True]) is int64 [5, 1]: True read as 1
        i = next(i for i, v in enumerate(value) if type(v) in BOOL_TYPES)
        raise RecordError(field, f"expected numbers, found bool {bool(value[i])!r} at position {i} (not a number here)")
    return arr


def _describe(value: object) -> str:
    """``str 'yes'``, ``null``, ``list [1, 2]``: the type and a short repr for error messages."""
    return "null" if value is None else f"{type_name(value)} {_short(value)}"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
