"""Process-level speed settings for programs that run the engine (the CLI, the benchmark, the dashboard).

glibc serves every allocation of 32 MB or more with a fresh ``mmap`` and returns it on free, so each large
temporary tensor ([B, T] int64 at B·T ≥ 4M) pays thousands of page faults on first touch. Raising the mmap
threshold keeps such blocks in the heap and reuses them: compute_credit on 1024 × 4096 tokens runs 2–3× faster
(docs/PERFORMANCE.md). Only up to 64 MiB: the 200 MiB tensors of a 50,000 × 1,000-token run, kept in the heap,
fragmented it and raised the peak of one computation by ~0.9 GiB; mapped, they are returned as soon as freed.
A library import never changes this; programs opt in by calling ``tune_allocator``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 << 20  # blocks up to 64 MiB come from the reusable heap
TRIM_THRESHOLD_BYTES = 512 << 20  # free heap above 512 MiB is still returned to the OS


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once: ``ctypes.util.find_library`` runs ``ldconfig -p`` in a subprocess on each
    call, and the dashboard releases memory at the end of every page run (eight sessions on two busy cores:
    each page run waited for its own ldconfig). None where it cannot be loaded."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def tune_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds; True when applied (Linux with glibc), False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = _libc().mallopt
    except AttributeError:  # no libc, or musl or another libc without mallopt
        return False
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    return ok and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1


def release_free_memory() -> None:
    """Hand memory that is free but still mapped back to the OS: glibc's heap (``malloc_trim``) and pyarrow's
    pool. A Parquet load leaves a few hundred MB of freed decode buffers in both (50,000 trajectories: 0.3 GB);
    a long-lived program that loads big runs (the dashboard) calls this after each load."""
    if "pyarrow" in sys.modules:  # never import it just for this
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        try:
            _libc().malloc_trim(0)
        except AttributeError:  # no libc, or one without malloc_trim
            pass
