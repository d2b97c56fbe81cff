"""Process-level speed settings for programs that run the engine (the CLI, the benchmark, the dashboard).

glibc serves every allocation of 32 MB or more with a fresh ``mmap`` and returns it on free, so each large
temporary tensor ([B, T] int64 at B·T ≥ 4M) pays thousands of page faults on first touch. Raising the mmap
threshold keeps such blocks in the heap and reuses them: compute_credit on 1024 × 4096 tokens runs 2–3× faster
(README, Benchmarks). A library import never changes this; programs opt in by calling ``tune_allocator``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 256 << 20  # blocks up to 256 MiB come from the reusable heap
TRIM_THRESHOLD_BYTES = 512 << 20  # free heap above 512 MiB is still returned to the OS


def tune_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds; True when applied (Linux with glibc), False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or another libc without mallopt
        return False
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    return ok and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
