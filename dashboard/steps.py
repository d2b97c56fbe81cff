"""A run of several training steps in the dashboard: which steps it holds, the one step the pages show, and what a
live run has added since the page was drawn.

A folder of step files or step folders (``engine.timeline.index``) is indexed by the file and folder names, and only
the chosen step's files are read (``open_step``): a run of hundreds of steps opens as fast as one of them. A file
whose records name several steps (a native run file, an upload) is read whole and the pages see the chosen step of
it (``narrow``). Either way a step is a run of its own to every page: its own handle, cache key and batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from dashboard import cache, loading, sources
from dashboard.cache import RunHandle, SampleLoad
from dashboard.sources import RunRef
from dashboard.state import K
from engine.io.detect import detect_format
from engine.timeline.index import StepIndex, StepSource, index_steps, looks_like_step_run

FOLLOW_EVERY_S = 3  # a live run's folder is looked at this often


@st.cache_resource(max_entries=8192, show_spinner=False)
def _format(path: str, mtime_ns: int, size: int) -> str:
    """A file's format (``detect_format``), once per content stamp (a pure function of the file)."""
    return detect_format(path)


def detect(file: Path) -> str:
    stat = file.stat()
    return _format(str(file), stat.st_mtime_ns, stat.st_size)


def run_folder(ref: RunRef) -> Path | None:
    """The folder a sample or data-directory run reads, when it is a folder of several steps; None otherwise."""
    if ref.kind == "upload":
        return None
    try:
        path = sources.sample_path(ref.name) if ref.kind == "sample" else sources.resolve_allowed(ref.name)
    except (KeyError, ValueError):
        return None
    return path if looks_like_step_run(path) else None


def folder_index(folder: Path) -> StepIndex:
    """The folder's step sources now (file formats detected once per file stamp)."""
    return index_steps(folder, detect=detect)


@dataclass(frozen=True)
class Steps:
    """What the step picker offers: the steps, and where they come from (a folder ``index``, or the loaded run)."""

    steps: list[int]
    index: StepIndex | None = None

    @property
    def latest(self) -> int:
        return self.steps[-1]

    def source(self, step: int) -> StepSource:
        return next(s for s in self.index.sources if s.step == step)


def folder_steps(ref: RunRef) -> Steps | None:
    """The steps of a folder run read by names (None: not a folder of several steps, or its names say none)."""
    folder = run_folder(ref)
    if folder is None:
        return None
    index = folder_index(folder)
    return Steps(index.steps, index) if len(index.steps) >= 2 else None


def open_step(
    ref: RunRef, steps: Steps, step: int, progress: loading.Progress | None = None, response_length=None
) -> RunHandle:
    """Step ``step`` of a folder run: only its files are read, kept in the run store by their stamps."""
    src = steps.source(step)
    folder = steps.index.root
    size = sum(n for _, _, n in src.stamp)
    limit = response_length if ref.kind == "data" else None

    def read():
        loaded = loading.read_run(str(folder), progress, limit, size, files=src.files)
        loaded.run.name = f"{folder.name} · step {step}"
        return loaded

    loaded = cache.run_store().get((str(folder), "step", step, src.stamp, limit), read, estimate=1, size=lambda _: 1)
    handle = RunHandle(str(ref), loaded.run.content_hash, False, loaded)
    return narrow(handle, step) if len(loaded.run.steps) > 1 else handle


def narrow(handle: RunHandle, step: int) -> RunHandle:
    """Step ``step`` of a loaded run whose records name several steps, as a run of its own (its load problems are
    the whole file's). An upload's step stays in this session."""
    key = (handle.key, "step", step)
    if handle.session_only:
        views = st.session_state.setdefault(K.STEP_VIEWS, {})
        if key not in views:
            views.clear()  # one step of one upload at a time
            views[key] = SampleLoad(handle.run.step_run(step), tuple(handle.problems))
        loaded = views[key]
    else:
        loaded = cache.run_store().get(
            key,
            lambda: SampleLoad(handle.run.step_run(step), tuple(handle.problems)),
            estimate=1,
            size=lambda _: 1,
        )
    return RunHandle(handle.ref, loaded.run.content_hash, handle.session_only, loaded)


def live_stamp(index: StepIndex) -> tuple:
    """What a live run's page was drawn from: its sources' stamps and the files still being written."""
    return tuple(s.stamp for s in index.sources), tuple(str(f) for f, _ in index.pending)
