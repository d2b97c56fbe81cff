"""A cache bounded by bytes, not entries: what ``services`` keeps credit results and run-wide tables in.

A result of a 64-trajectory sample is ~1 MB, one of a 50,000 × 1,000-token run ~1.1 GB, so a fixed number of
entries is either far too few or far too many. ``ByteBudget.get(key, build, estimate, size)`` returns the kept
value or builds it; before a build it drops least-recently-used entries until ``estimate`` more bytes fit (so the
old result is gone before the new one is computed, not after), and after it keeps the value under its measured
``size``. The entry just built, and the one used last before it (what a table was built from), are kept even
over the budget; a build with no ``estimate`` (a table) evicts nothing first. Builds of one key run once
(later callers wait for the first); builds estimated at ``serial_bytes`` or more run one at a time, so two
sessions cannot each hold a big computation's temporaries at once. Thread-safe: every browser session is a thread.
The unit is the caller's: ``services`` also keeps loaded runs in one, each costing 1 (a count). No Streamlit here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class ByteBudget:
    """Least-recently-used values whose sizes sum to at most ``budget`` bytes (see the module docstring)."""

    def __init__(self, budget: int, serial_bytes: int = 256 << 20) -> None:
        self.budget = budget
        self.serial_bytes = serial_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[Hashable, threading.Lock] = {}
        self._big = threading.Lock()

    @property
    def used(self) -> int:
        with self._lock:
            return sum(size for _, size in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable, build: Callable[[], Any], estimate: int, size: Callable[[Any], int]) -> Any:
        """The value kept under ``key``, else ``build()`` (made room for first: ``estimate`` bytes), kept under
        ``size(value)`` bytes. An exception from ``build`` propagates and nothing is kept."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
            key_lock = self._building.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._items:  # built by the caller we waited for
                    self._items.move_to_end(key)
                    return self._items[key][0]
                if estimate > 0:  # a table built from a kept result must not evict that result first
                    self._evict(self.budget - estimate)
            try:
                if estimate >= self.serial_bytes:
                    with self._big:
                        value = build()
                else:
                    value = build()
                nbytes = size(value)
                with self._lock:
                    recent = next(reversed(self._items), None)  # what the build itself most likely used
                    self._items[key] = (value, nbytes)
                    self._evict(self.budget, keep=(key, recent))
            finally:
                with self._lock:
                    self._building.pop(key, None)
            return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def _evict(self, limit: int, keep: tuple = ()) -> None:
        """Drop least-recently-used entries (never those in ``keep``) until the sizes sum to at most ``limit``."""
        total = sum(size for _, size in self._items.values())
        for k in list(self._items):
            if total <= limit:
                break
            if k not in keep:
                total -= self._items.pop(k)[1]
