"""How the dashboard keeps what it derives from a run: cache keys, per-session and shared caches, byte budgets.

A run travels as a ``RunHandle``: its key is the run's ``content_hash`` (a big run's sample adds the group it
keeps). ``per_run`` caches a function of a run twice, globally for samples and data-directory files and per browser
session for uploads, so nothing derived from an upload is reachable from another session. Results and run-wide
tables are kept in a byte budget (``CREDITLENS_CACHE_MB``, ``budget.ByteBudget``), a big run's samples in a
budget of their own; loaded files in a store of the last ``RUNS_KEPT``. No engine calls and no widgets in here:
``services`` decides what to compute, this module how long to keep it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from dashboard import budget
from engine import CreditConfig, CreditResult

# A CreditConfig is a frozen dataclass whose repr lists every field: hashing that is ~400× faster than
# Streamlit's generic hashing of the object, and keys stay exact.
HASH = {CreditConfig: repr}
CACHE_MB_ENV = "CREDITLENS_CACHE_MB"
# Results and run-wide tables, in bytes: one result of a 50,000 × 1,000-token run (1.1 GB, GAE) fits; a second
# scheme on such a run replaces the first (docs/PERFORMANCE.md). A big run's samples have a quarter more of their own.
DEFAULT_CACHE_MB = 1536
SAMPLE_SHARE = 4
TABLE_ENTRIES = 512
LINT_ENTRIES = 32  # a big run's findings keep up to MAX_ROWS_KEPT × MAX_HIGHLIGHT positions each
RUNS_KEPT = 16  # loaded files kept (sample runs and data-directory files; uploads live in session state)


@dataclass(frozen=True, eq=False)
class RunHandle:
    """A loaded run and how to cache what is derived from it. ``loaded`` is the loader's ``LoadResult``. A sample
    of a big run (``sampled``) is a handle too: ``rows`` are its rows in ``parent``, ``loaded`` holds a run of
    just those trajectories, and its batch is the parent's rows."""

    ref: str
    key: str
    session_only: bool
    loaded: object
    parent: RunHandle | None = None
    rows: np.ndarray | None = None

    @property
    def run(self):
        return self.loaded.run

    @property
    def problems(self) -> list:
        return list(self.loaded.problems)


@dataclass(frozen=True)
class SampleLoad:
    """A sample's stand-in for the loader's ``LoadResult``: its run, and no problems of its own."""

    run: object
    problems: tuple = ()


# ---------------------------------------------------------------------------------------------- per run
def per_run(entries: int, session_entries: int = 64):
    """Cache ``fn(key, *args, _h)`` twice: globally for samples and data-directory files, per browser session for
    uploads (so nothing derived from an upload is reachable from another session). The wrapper takes the run
    handle first: ``wrapper(h, *args)``."""

    def deco(fn):
        shared = st.cache_resource(max_entries=entries, show_spinner=False, hash_funcs=HASH)(fn)
        own = st.cache_resource(max_entries=session_entries, show_spinner=False, scope="session", hash_funcs=HASH)(fn)

        @functools.wraps(fn)
        def call(h: RunHandle, *args):
            return (own if h.session_only else shared)(h.key, *args, h)

        return call

    return deco


@st.cache_resource(show_spinner=False)
def run_store() -> budget.ByteBudget:
    """The loaded files (``loading.open_run``). Not st.cache_resource on the loader itself: Streamlit refuses a
    cached function that draws on an element made outside it (the progress bar). Each run costs 1: the budget
    counts runs."""
    return budget.ByteBudget(RUNS_KEPT, serial_bytes=RUNS_KEPT + 1)


# ---------------------------------------------------------------------------------------------- byte budget
def cache_budget_bytes() -> int:
    """``CREDITLENS_CACHE_MB`` (default ``DEFAULT_CACHE_MB``) in bytes; a value that is not a positive number
    falls back to the default."""
    raw = os.environ.get(CACHE_MB_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_CACHE_MB
    except ValueError:
        mb = DEFAULT_CACHE_MB
    return int((mb if mb > 0 else DEFAULT_CACHE_MB) * 2**20)


@st.cache_resource(show_spinner=False)
def _shared_budget(share: int) -> budget.ByteBudget:
    return budget.ByteBudget(cache_budget_bytes() // share)


@st.cache_resource(show_spinner=False, scope="session")
def _session_budget(share: int) -> budget.ByteBudget:
    return budget.ByteBudget(cache_budget_bytes() // share)


def budget_for(h: RunHandle) -> budget.ByteBudget:
    """Where ``h``'s results and tables are kept: a big run's samples (``sampled``) in a budget of their own, a
    ``SAMPLE_SHARE``-th of the whole, so that the sampled pages never push out the run's own result."""
    share = SAMPLE_SHARE if h.parent is not None else 1
    return _session_budget(share) if h.session_only else _shared_budget(share)


def _storages(obj) -> dict[int, int]:
    """{storage address: bytes} of the tensors in a dataclass (a batch, a result with its views and extras)."""
    named = (
        obj.quantities()
        if isinstance(obj, CreditResult)
        else {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    )
    values = list(named.values()) + list(getattr(obj, "extras", {}).values())
    return {v.untyped_storage().data_ptr(): v.untyped_storage().nbytes() for v in values if isinstance(v, torch.Tensor)}


def tensor_bytes(obj) -> int:
    """Bytes of the tensors a dataclass holds, each storage once."""
    return sum(_storages(obj).values())


def result_bytes(res: CreditResult, b) -> int:
    """Bytes a result holds of its own: its tensors' storages, each once, less those the batch already holds."""
    shared = _storages(b)
    return sum(n for ptr, n in _storages(res).items() if ptr not in shared)
