"""A run folder as an ordered list of step sources, without loading it: what the timeline streams over and what a
live run's picker lists.

``index_steps(path)`` lists the folder's data files as ``load_run`` would (``engine.io.load.folder_entries``: step
folders included), detects each file's format and reads its step from its name or folder (the adapter's
``STEP_FILE`` / ``STEP_FOLDER``). Files of one step (the shards of a step folder) form one ``StepSource``; a file
whose path says no step is a source of its own, whose records say their steps when it is loaded. A source's
``stamp`` (name, mtime, size of each file) is what a cached timeline row is keyed by.

A file still being written is not listed but ``pending`` with the reason, until it is complete: a JSONL file whose
last line has no newline yet, a Parquet file without its footer, a zip archive (``.pt``, ``.npz``) without its
central directory, or any data file modified less than ``settle_s`` seconds ago (a trainer writes a step's JSONL
line by line). A pending file is never an error: the next index reads it once it is done.
"""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.io.adapters import ADAPTERS, get_adapter
from engine.io.detect import NotRollouts, detect_format
from engine.io.load import data_files, folder_entries, is_data_name
from engine.io.reading.problems import Problem
from engine.io.reading.steps import match_step, path_step

SETTLE_S = 2.0  # a data file modified this recently may still be being written


@dataclass(frozen=True)
class StepSource:
    """Files the timeline loads together: one step's files (``step`` from their path), or one file whose records
    say their steps (``step`` None). ``stamp``: (relative name, mtime_ns, size) of each file."""

    files: tuple[Path, ...]
    step: int | None
    stamp: tuple[tuple[str, int, int], ...]

    @property
    def key(self) -> str:
        """The source's name in a timeline table: its first file, relative to the run folder."""
        return self.stamp[0][0]

    @property
    def stamp_text(self) -> str:
        return ";".join(f"{name}:{mtime}:{size}" for name, mtime, size in self.stamp)


@dataclass
class StepIndex:
    """The sources of a run in step order (sources whose records say their steps last, by name), the files still
    being written (``pending``: (file, why)) and the files that cannot be read as rollouts (``unreadable``)."""

    root: Path
    sources: list[StepSource] = field(default_factory=list)
    pending: list[tuple[Path, str]] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def skipped(self, pending: bool = False) -> list[Problem]:
        """The files the index could not read as rollouts (and, with ``pending``, those still being written), as
        problems: a job that reads the run as it is now names them."""
        listed = self.unreadable + (self.pending if pending else [])
        return [Problem(str(file), None, None, f"{why}; file skipped") for file, why in listed]

    @property
    def steps(self) -> list[int]:
        """The steps the file and folder names say (a source whose records say its steps is not counted)."""
        return sorted({s.step for s in self.sources if s.step is not None})


def unfinished(file: Path, now: float | None = None, settle_s: float = SETTLE_S) -> str | None:
    """Why ``file`` looks still being written, or None when it looks complete."""
    try:
        st = file.stat()
        with open(file, "rb") as f:
            head = f.read(4)
            f.seek(max(st.st_size - 4, 0))
            tail = f.read(4)
    except OSError as e:
        return f"cannot be read yet ({type(e).__name__})"
    name = file.name.lower()
    if st.st_size == 0:
        return "empty: still being written"
    if head == b"PAR1" and tail != b"PAR1":
        return "its Parquet footer is not written yet"
    if name.endswith(".jsonl") and not tail.endswith(b"\n"):
        return "its last line is not finished"
    if name.endswith((".pt", ".pth", ".npz")) and head.startswith(b"PK") and not zipfile.is_zipfile(file):
        return "its zip directory is not written yet"
    age = (time.time() if now is None else now) - st.st_mtime
    if age < settle_s:
        return f"modified {max(age, 0):.1f} s ago: still being written"
    return None


def looks_like_step_run(folder: Path) -> bool:
    """Whether ``folder`` reads as one run of several steps by its names alone (no file opened): two or more of its
    data files named as some trainer names a step's file, or two or more step folders (``Adapter.step_file`` /
    ``step_folder``). The dashboard lists such a folder as one run."""
    if not folder.is_dir():
        return False
    files = step_dirs = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    for p in entries:
        if p.name.startswith(".") or p.is_symlink():  # a folder load does not follow links (load.folder_entries)
            continue
        if p.is_dir():
            step_dirs += any(match_step(a.step_folder, p.name) is not None for a in ADAPTERS.values())
        elif is_data_name(p.name):
            files += any(match_step(a.step_file, p.name) is not None for a in ADAPTERS.values())
    return files >= 2 or step_dirs >= 2


def index_steps(
    path: str | Path,
    fmt: str | None = None,
    settle_s: float = SETTLE_S,
    detect: Callable[[Path], str] | None = None,
) -> StepIndex:
    """The step sources of ``path`` (a run folder, or one file). ``detect(file)``: the format of a file (default
    ``detect_format``; the dashboard passes one cached by the file's stamp). ``FileNotFoundError`` for a missing
    path."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such file or directory: {root}")
    index = StepIndex(root)
    folder = root if root.is_dir() else None
    files = folder_entries(root)[0] if folder is not None else data_files(root)
    now = time.time()
    by_step: dict[int, list[Path]] = {}
    loose: list[Path] = []
    for file in files:
        if why := unfinished(file, now, settle_s):
            index.pending.append((file, why))
            continue
        try:
            adapter = get_adapter(fmt or (detect or detect_format)(file))
        except (NotRollouts, ValueError, OSError) as e:
            index.unreadable.append((file, str(e)))
            continue
        step = path_step(file, adapter.step_file, adapter.step_folder, folder).step
        if step is None:
            loose.append(file)
        else:
            by_step.setdefault(step, []).append(file)
    base = root if folder is not None else root.parent
    for step in sorted(by_step):
        index.sources.append(_source(tuple(by_step[step]), step, base))
    index.sources += [_source((f,), None, base) for f in loose]
    return index


def _source(files: tuple[Path, ...], step: int | None, base: Path) -> StepSource:
    stamp = []
    for f in files:
        st = os.stat(f)
        stamp.append((str(f.relative_to(base)), st.st_mtime_ns, st.st_size))
    return StepSource(files, step, tuple(stamp))
