"""What pages draw (Plotly figures, token markup), kept across reruns and browser sessions, addressed by what it
is built from.

Building a figure through Plotly's object model costs 50–150 ms of Python on a 2,048-token trajectory, and Python
runs one session's script at a time: eight people on the same page paid it eight times over. ``cached(build,
*args)`` returns ``build(*args)``, built once per distinct input. The key is a digest of the builder's name and
of every argument *by value* (arrays and frames byte for byte, never a sample of them), so a figure can only be
reused for exactly the inputs it was drawn from; an argument of a type this module cannot digest raises rather
than being skipped. What is cached is shared: callers must not change it (``exports.titled`` copies a figure).

What is built from an upload stays in that browser session's own cache (``session_only``), as everything else
derived from an upload does (``cache.per_run``).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
import torch

SHARED_ENTRIES = 96  # figures: about 0.2–1 MiB each on a 2,048-token trajectory; markup: ~0.3 MiB a window
SESSION_ENTRIES = 24


class Undigestable(TypeError):
    """An argument whose value this module cannot digest (so its figure must not be cached by it)."""


def _feed_strings(h, items: list) -> bool:
    """Feed a list of str in one go (their lengths, then their UTF-8 bytes); False if not all are str."""
    if not all(type(x) is str for x in items):
        return False
    data = [x.encode("utf-8", "surrogatepass") for x in items]
    h.update(b"strings" + struct.pack("<Q", len(data)))
    h.update(np.fromiter(map(len, data), dtype=np.int64, count=len(data)).tobytes())
    h.update(b"".join(data))
    return True


def _feed(h, obj: Any) -> None:
    """Feed ``obj``'s type and value into hash ``h``, recursively and unambiguously (lengths before contents)."""
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes | enum.Enum):
        data = repr(obj).encode("utf-8", "surrogatepass")
        h.update(type(obj).__qualname__.encode() + struct.pack("<Q", len(data)) + data)
    elif isinstance(obj, np.generic):
        _feed(h, obj.item())
    elif isinstance(obj, torch.Tensor):
        _feed(h, obj.detach().cpu().numpy())
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            h.update(b"ndarray-object" + struct.pack("<Q", arr.ndim) + struct.pack(f"<{arr.ndim}Q", *arr.shape))
            items = arr.ravel().tolist()
            if not _feed_strings(h, items):
                _feed(h, items)
            return
        head = f"ndarray|{arr.dtype.str}|{arr.shape}".encode()
        h.update(struct.pack("<Q", len(head)) + head)
        h.update(arr.view(np.uint8).reshape(-1) if arr.size else b"")
    elif isinstance(obj, pd.DataFrame):
        h.update(b"DataFrame")
        _feed(h, [str(c) for c in obj.columns])
        _feed(h, [str(t) for t in obj.dtypes])
        _feed(h, obj.index.to_numpy())
        for col in range(obj.shape[1]):
            _feed(h, obj.iloc[:, col].to_numpy())
    elif isinstance(obj, pd.Series):
        h.update(b"Series")
        _feed(h, str(obj.name))
        _feed(h, obj.index.to_numpy())
        _feed(h, obj.to_numpy())
    elif isinstance(obj, list | tuple):
        h.update(type(obj).__name__.encode() + struct.pack("<Q", len(obj)))
        if len(obj) > 8 and _feed_strings(h, list(obj)):
            return
        for x in obj:
            _feed(h, x)
    elif isinstance(obj, Mapping):
        h.update(b"Mapping" + struct.pack("<Q", len(obj)))
        for k, v in obj.items():  # in insertion order: a figure's legend follows it
            _feed(h, k)
            _feed(h, v)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type) and obj.__dataclass_params__.frozen:
        h.update(type(obj).__qualname__.encode())
        for f in dataclasses.fields(obj):
            _feed(h, f.name)
            _feed(h, getattr(obj, f.name))
    else:
        raise Undigestable(f"cannot key a cached figure on a {type(obj).__module__}.{type(obj).__qualname__}")


def digest(build: Callable, args: tuple, kwargs: dict) -> str:
    """Hex digest of ``build``'s module and name and of ``args``/``kwargs`` by value."""
    h = hashlib.blake2b(digest_size=20)
    _feed(h, f"{build.__module__}.{build.__qualname__}")
    _feed(h, args)
    _feed(h, sorted(kwargs.items()))
    return h.hexdigest()


@st.cache_resource(max_entries=SHARED_ENTRIES, show_spinner=False)
def _shared(key: str, _build: Callable[[], Any]) -> Any:
    return _build()


@st.cache_resource(max_entries=SESSION_ENTRIES, show_spinner=False, scope="session")
def _own(key: str, _build: Callable[[], Any]) -> Any:
    return _build()


def cached(build: Callable[..., Any], *args, session_only: bool = False, **kwargs) -> Any:
    """``build(*args, **kwargs)``, built once per distinct input and then shared (read-only). ``build`` must be a
    module-level function whose result depends on its arguments alone; ``session_only`` keeps the result in this
    browser session's cache (for anything derived from an upload)."""
    key = digest(build, args, kwargs)
    return (_own if session_only else _shared)(key, lambda: build(*args, **kwargs))
