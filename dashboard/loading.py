"""Reading runs for the dashboard: samples, confined data-directory files and uploads, with progress, the memory
the loader frees handed back, and tokenizer construction serialised until ``transformers`` is imported.

A loaded file is kept in ``cache.run_store`` by (path, mtime, size, response length); an upload belongs to its
session's state only. What is computed from a run is ``services``'.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from dashboard import cache, collector, leftovers, sources
from dashboard.cache import RunHandle
from dashboard.sources import RunRef
from engine.perf import release_free_memory

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
# From here on, reading a file (or folder) first collects the last page runs' garbage (dashboard/collector.py).
# Not for the samples: on a fresh server that collection walked every imported library before the first page
# (+0.2 s first paint).
COLLECT_BEFORE_LOAD_BYTES = 32 << 20
Progress = Callable[[float, str], None]  # (fraction done, message), as engine.io.load_run reports
LOAD_SHARE = 0.9  # of a progress bar: reading the file; the rest is the content hash

# Until ``transformers`` has been imported once, engine calls that may build a tokenizer run one at a time: its
# lazy module is not safe to import from several threads, and every browser session is a thread (eight sessions
# uploading at once on a fresh server: seven got "cannot import name 'AutoTokenizer'"). Synchronisation only, no
# user data; afterwards calls run in parallel. (The lasting fix is a lock in engine.io.text.tokenize._load_tokenizer.)
_TOKENIZER_LOCK = threading.Lock()
_TOKENIZERS_READY = threading.Event()


def tokenizer_safe(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, serialised until some call has imported transformers."""
    if _TOKENIZERS_READY.is_set():
        return fn(*args, **kwargs)
    with _TOKENIZER_LOCK:
        try:
            return fn(*args, **kwargs)
        finally:
            if "transformers" in sys.modules:
                _TOKENIZERS_READY.set()


def read_run(
    path: str, progress: Progress | None = None, response_length: int | None = None, size: int = 0, files=None
):
    """``load_run`` with ``progress`` (reading: 0–90 %, then the content hash), its freed buffers handed back.
    ``size``: the bytes to read (a big file's load collects garbage first). ``response_length``: the trainer's
    limit, for dumps that drop the end-of-turn token (verl's rollout JSONL). ``files``: only these of the folder's
    (one step of a run folder)."""
    from engine.io import load_run  # the loader pulls in transformers; import it only when a run is read

    report = progress or (lambda fraction, message: None)
    if size >= COLLECT_BEFORE_LOAD_BYTES:  # the last runs' garbage may hold a big run's arrays
        collector.collect()
    loaded = tokenizer_safe(
        load_run,
        path,
        max_bytes=None,
        progress=lambda f, msg: report(LOAD_SHARE * f, msg),
        response_length=response_length,
        tokenizer_roots=sources.allowed_roots(),  # a header's tokenizer path is read only inside these
        files=files,
    )
    release_free_memory()  # a big Parquet load leaves ~0.3 GB of decode buffers mapped (docs/PERFORMANCE.md)
    report(LOAD_SHARE, f"{len(loaded.run):,} trajectories read; hashing their content")
    _ = loaded.run.content_hash  # the cache key of everything derived from the run: computed once, here
    report(1.0, f"{len(loaded.run):,} trajectories loaded")
    return loaded


def _load_file(path: str, mtime_ns: int, size: int, progress: Progress | None = None, response_length=None):
    """The loaded file, read once per (path, mtime, size, response length) while it stays among the last
    ``cache.RUNS_KEPT`` used."""
    return cache.run_store().get(
        (path, mtime_ns, size, response_length),
        lambda: read_run(path, progress, response_length, size),
        estimate=1,
        size=lambda _: 1,
    )


def open_run(
    ref: RunRef, uploads: dict, progress: Progress | None = None, response_length: int | None = None
) -> RunHandle:
    """The run ``ref`` points at: a sample, a confined data-directory file, or this session's upload.
    ``progress(fraction, message)`` is called while a file is read (not when the run is cached already);
    ``response_length`` reaches the loader for data-directory files (uploads are read with it in ``load_upload``).
    Raises ``KeyError`` (no such sample/upload) or ``ValueError`` (a path outside the allowed directories)."""
    if ref.kind == "upload":
        loaded = uploads[ref.name]
        return RunHandle(str(ref), loaded.run.content_hash, True, loaded)
    path = sources.sample_path(ref.name) if ref.kind == "sample" else sources.resolve_allowed(ref.name)
    limit = response_length if ref.kind == "data" else None
    loaded = _load_file(str(path), *sources.file_stamp(path), progress, limit)
    return RunHandle(str(ref), loaded.run.content_hash, False, loaded)


def load_upload(file_name: str, data: bytes, progress: Progress | None = None, response_length: int | None = None):
    """Load uploaded bytes (kept under the original file name in a private temporary folder, so the loader
    can sniff the format), then delete the file. The result belongs in this session's state only."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"{file_name}: {len(data) / 2**20:.0f} MB is over the {MAX_UPLOAD_BYTES / 2**20:.0f} MB limit")
    safe = Path(file_name).name or "upload.jsonl"
    # the server's process id in the name: a server that starts after a crash removes it (warmup.lifespan)
    with tempfile.TemporaryDirectory(prefix=leftovers.upload_prefix()) as tmp:
        path = Path(tmp) / safe
        path.write_bytes(data)
        folder = tmp + os.sep  # the server's temporary folder: messages name the file as the user uploaded it
        try:
            loaded = read_run(str(path), progress, response_length, len(data))
        except ValueError as e:
            raise ValueError(str(e).replace(folder, "")) from None
        loaded.problems = [
            dataclasses.replace(p, file=p.file.replace(folder, ""), reason=p.reason.replace(folder, ""))
            for p in loaded.problems
        ]
        return loaded
