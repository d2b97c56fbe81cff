"""The seam between the dashboard and the engine: the only module that loads runs and calls ``compute_credit``.

Everything here is cached by hashable keys: a run by its file (path, mtime, size) and afterwards by its
``content_hash``; a result by (content hash, frozen ``CreditConfig``); a table by that plus the trajectory
index. Run objects travel as the unhashed ``_h`` (handle) argument. Uploaded runs use session-scoped caches, so
nothing derived from an upload is reachable from another session; sample and data-directory runs share a
global cache. No widgets and no session state in here.

Memory (README, "Security and limits"): credit results and run-wide tables are kept in a byte budget
(``CREDITLENS_CACHE_MB``, ``budget.ByteBudget``), without the estimators' [B, T] intermediates; a run's segment
arrays are views of its batch (one copy); loader buffers are handed back to the OS after each load. Big runs
(``bigrun.is_big``) are sampled by the pages that compute several schemes: ``sampled`` gives a handle on an even
sample of whole groups that every function here accepts like a run of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
import torch

from dashboard import bigrun, budget, collector, diagnostics, leftovers, sources, tables
from dashboard.sources import RunRef
from engine import CreditConfig, CreditResult, compute_credit, list_estimators, resolve_device
from engine.credit import with_loss_agg_mode
from engine.perf import release_free_memory
from engine.runnable import runnable

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
# A CreditConfig is a frozen dataclass whose repr lists every field: hashing that is ~400× faster than
# Streamlit's generic hashing of the object, and keys stay exact.
HASH = {CreditConfig: repr}
CACHE_MB_ENV = "CREDITLENS_CACHE_MB"
# Results and run-wide tables, in bytes: one result of a 50,000 × 1,000-token run (1.1 GB, GAE) fits; a second
# scheme on such a run replaces the first (README, Benchmarks). A big run's samples have a quarter more of their own.
DEFAULT_CACHE_MB = 1536
SAMPLE_SHARE = 4
RESULT_TENSORS = 7  # [B, T] float32 tensors a result holds of its own at most (estimate before computing)
BATCH_BYTES_PER_TOKEN = 24  # int32 token and turn ids, two float masks, three float per-token fields
BIG_RESULT_BYTES = 64 << 20  # from here on, a computation hands its freed temporaries back to the OS
# From here on, a computation first collects the last page runs' garbage (dashboard/collector.py): a full collection
# walks every object alive (0.4 s with a 50,000-trajectory run loaded), worth it before a whole-run result only.
COLLECT_BEFORE_BYTES = 256 << 20
# The same before reading a file (or folder) this big. Not for the samples: on a fresh server that collection
# walked every imported library before the first page (+0.2 s first paint).
COLLECT_BEFORE_LOAD_BYTES = 32 << 20


TABLE_ENTRIES = 512
LINT_ENTRIES = 32  # a big run's findings keep up to MAX_ROWS_KEPT × MAX_HIGHLIGHT positions each
Progress = Callable[[float, str], None]  # (fraction done, message), as engine.io.load_run reports
# torch's intra-op threads in the server (``CREDITLENS_TORCH_THREADS``, default 1). Every browser session is a
# thread of its own already, and OpenMP workers spin while they wait: with 2 threads on the 2-core machine that
# the server shares with browsers and other sessions, compute_credit (GAE, 64 × 2,048 tokens) took a median
# 1.25 s of wall time and 0.34 s of CPU; with 1 thread 45–88 ms and 8 ms of CPU (load average ≈ 20).
TORCH_THREADS_ENV = "CREDITLENS_TORCH_THREADS"


def engine_threads() -> int:
    """``CREDITLENS_TORCH_THREADS`` as a positive int; 1 when unset or not one."""
    try:
        n = int(os.environ.get(TORCH_THREADS_ENV, "").strip() or 1)
    except ValueError:
        n = 1
    return n if n > 0 else 1


torch.set_num_threads(engine_threads())  # process-wide and inherited by every session's thread


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


# ---------------------------------------------------------------------------------------------- loading
# Until ``transformers`` has been imported once, engine calls that may build a tokenizer run one at a time: its
# lazy module is not safe to import from several threads, and every browser session is a thread (eight sessions
# uploading at once on a fresh server: seven got "cannot import name 'AutoTokenizer'"). Synchronisation only, no
# user data; afterwards calls run in parallel. (The lasting fix is a lock in engine.io.text.tokenize._load_tokenizer.)
_TOKENIZER_LOCK = threading.Lock()
_TOKENIZERS_READY = threading.Event()


def _tokenizer_safe(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, serialised until some call has imported transformers."""
    if _TOKENIZERS_READY.is_set():
        return fn(*args, **kwargs)
    with _TOKENIZER_LOCK:
        try:
            return fn(*args, **kwargs)
        finally:
            if "transformers" in sys.modules:
                _TOKENIZERS_READY.set()


LOAD_SHARE = 0.9  # of a progress bar: reading the file; the rest is the content hash


def _load_run(path: str, progress: Progress | None = None, response_length: int | None = None, size: int = 0):
    """``load_run`` with ``progress`` (reading: 0–90 %, then the content hash), its freed buffers handed back.
    ``size``: the bytes to read (a big file's load collects garbage first). ``response_length``: the trainer's
    limit, for dumps that drop the end-of-turn token (verl's rollout JSONL)."""
    from engine.io import load_run  # the loader pulls in transformers; import it only when a run is read

    report = progress or (lambda fraction, message: None)
    if size >= COLLECT_BEFORE_LOAD_BYTES:  # the last runs' garbage may hold a big run's arrays
        collector.collect()
    loaded = _tokenizer_safe(
        load_run,
        path,
        max_bytes=None,
        progress=lambda f, msg: report(LOAD_SHARE * f, msg),
        response_length=response_length,
        tokenizer_roots=sources.allowed_roots(),  # a header's tokenizer path is read only inside these
    )
    release_free_memory()  # a big Parquet load leaves ~0.3 GB of decode buffers mapped (README, Benchmarks)
    report(LOAD_SHARE, f"{len(loaded.run):,} trajectories read; hashing their content")
    _ = loaded.run.content_hash  # the cache key of everything derived from the run: computed once, here
    report(1.0, f"{len(loaded.run):,} trajectories loaded")
    return loaded


RUNS_KEPT = 16  # loaded files kept (sample runs and data-directory files; uploads live in session state)


@st.cache_resource(show_spinner=False)
def _run_store() -> budget.ByteBudget:
    # Not st.cache_resource on the loader itself: Streamlit refuses a cached function that draws on an element
    # made outside it (the progress bar). Here each run costs 1: the budget counts runs.
    return budget.ByteBudget(RUNS_KEPT, serial_bytes=RUNS_KEPT + 1)


def _load_file(path: str, mtime_ns: int, size: int, progress: Progress | None = None, response_length=None):
    """The loaded file, read once per (path, mtime, size, response length) while it stays among the last
    ``RUNS_KEPT`` used."""
    return _run_store().get(
        (path, mtime_ns, size, response_length),
        lambda: _load_run(path, progress, response_length, size),
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
            loaded = _load_run(str(path), progress, response_length, len(data))
        except ValueError as e:
            raise ValueError(str(e).replace(folder, "")) from None
        loaded.problems = [
            dataclasses.replace(p, file=p.file.replace(folder, ""), reason=p.reason.replace(folder, ""))
            for p in loaded.problems
        ]
        return loaded


# ---------------------------------------------------------------------------------------------- schemes
def available_estimators(info: tables.RunInfo) -> list:
    """Registered estimators whose inputs this run provides (GAE always: values can be stood in for)."""
    return [e for e in list_estimators() if all(info.provides(r) for r in e.requires)]


def estimator_catalogue() -> list:
    return list_estimators()


def effective_config(info: tables.RunInfo, cfg: CreditConfig, value_source: str | None = "zeros") -> CreditConfig:
    """``cfg`` made runnable on this run (``engine.runnable``: a value stand-in for an estimator that needs
    critic values the run lacks, no in-reward KL without log-probs, no ``as_given`` without token scores)."""
    return runnable(cfg, info.run_has, value_source)[0]


def global_components_included(info: tables.RunInfo, cfg: CreditConfig) -> list[bool]:
    """Which of the run's global components enter the global reward under ``cfg``'s exclusion prefixes."""
    from engine.shaping import global_component_included

    return global_component_included(info.global_reward_names, cfg)


# ---------------------------------------------------------------------------------------------- cached per run
def _per_run(entries: int, session_entries: int = 64):
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


def batch(h: RunHandle):
    """The run as one padded ``TrajectoryBatch`` on the engine's device; the run's arrays become views of it. A
    sample's batch is its rows of the parent's, kept in the byte budget."""
    if h.parent is None:
        return _batch(h)
    parent = batch(h.parent)
    return _budget(h).get(
        (h.key, "batch"),
        lambda: parent.select(torch_rows(h.rows)),
        estimate=BATCH_BYTES_PER_TOKEN * len(h.rows) * parent.num_tokens,
        size=tensor_bytes,
    )


@_per_run(entries=8, session_entries=2)
def _batch(key: str, _h: RunHandle):
    out = _h.run.to_batch(device=resolve_device(None), share_memory=True)
    release_free_memory()  # the loader's arrays, now replaced by views of the batch
    return out


def torch_rows(rows: np.ndarray) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)  # a copy: the cached rows are read-only


@_per_run(entries=16, session_entries=4)
def run_info(key: str, _h: RunHandle) -> tables.RunInfo:
    return tables.run_info(_h.run, batch(_h))


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


def _budget(h: RunHandle) -> budget.ByteBudget:
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


def compute(h: RunHandle, cfg: CreditConfig) -> CreditResult:
    """The credit of scheme ``cfg`` on the run (raises the engine's ``ValueError``s), kept in the byte budget
    without the estimator's [B, T] intermediates (no page draws them)."""
    b = batch(h)
    estimate = RESULT_TENSORS * 4 * b.batch_size * b.num_tokens

    def build() -> CreditResult:
        if estimate >= COLLECT_BEFORE_BYTES:  # a page run's garbage may hold a result the budget has just dropped
            collector.collect()
        res = compute_credit(b, cfg, token_extras=False).materialize()  # every page reads the views
        if estimate >= BIG_RESULT_BYTES:
            release_free_memory()  # the computation's freed temporaries (~0.3 GB at 50,000 × 1,000)
        return res

    return _budget(h).get((h.key, "result", repr(cfg)), build, estimate, lambda res: result_bytes(res, b))


def is_cached(h: RunHandle, cfg: CreditConfig) -> bool:
    """Whether ``compute(h, cfg)`` would return at once (for a spinner on big runs)."""
    return (h.key, "result", repr(cfg)) in _budget(h)


def compute_timed(h: RunHandle, cfg: CreditConfig) -> tuple[CreditResult, float]:
    """(result, seconds this call took: ≈0 when cached, else the engine's time plus overhead)."""
    t0 = time.perf_counter()
    res = compute(h, cfg)
    return res, time.perf_counter() - t0


@_per_run(entries=TABLE_ENTRIES)
def token_texts(key: str, i: int, _h: RunHandle) -> list[str]:
    return _tokenizer_safe(_h.run.token_texts, i)  # a tokenizer other than the built-in Qwen ones is loaded here


@_per_run(entries=TABLE_ENTRIES)
def token_table(key: str, cfg: CreditConfig, i: int, _h: RunHandle) -> pd.DataFrame:
    """Trajectory ``i`` token by token under ``cfg`` (treat as read-only: the cache shares it)."""
    return tables.token_table(_h.run, batch(_h), compute(_h, cfg), i, token_texts(_h, i))


def trajectory_summary(h: RunHandle, cfg: CreditConfig) -> pd.DataFrame:
    """One row per trajectory under ``cfg`` (read-only), kept in the byte budget."""
    return _budget(h).get(
        (h.key, "summary", repr(cfg)),
        lambda: tables.trajectory_summary(batch(h), compute(h, cfg)),
        estimate=0,
        size=lambda df: int(df.memory_usage(deep=True).sum()),
    )


# ---------------------------------------------------------------------------------------------- big runs
def is_big(info: tables.RunInfo) -> bool:
    return bigrun.is_big(info.trajectories, info.max_length)


@_per_run(entries=32, session_entries=8)
def _sample_rows(key: str, keep: int | None, _h: RunHandle) -> np.ndarray:
    info = run_info(_h)
    rows = bigrun.even_groups(tables.np_(batch(_h).group_ids), bigrun.sample_size(info.max_length), keep)
    rows.setflags(write=False)
    return rows


def sampled(h: RunHandle, info: tables.RunInfo, traj: int | None = None) -> tuple[RunHandle, int | None]:
    """(handle, trajectory index in it) for the pages that sample big runs: the run itself when it is not big,
    else an even sample of whole groups plus the group of trajectory ``traj`` (see ``bigrun``). Every function
    here takes the sample's handle like a run's; its key names the parent and the group kept."""
    if not is_big(info):
        return h, traj
    keep = None
    if traj is not None:  # the group's first row: one sample per group, whichever rollout is shown
        groups = tables.np_(batch(h).group_ids)
        keep = int(np.argmax(groups == groups[traj]))
    rows = _sample_rows(h, keep)
    from engine.io.data.run import Run

    run = h.run
    sub = Run([run.trajectories[i] for i in rows], run.name, run.source, run.tokenizer, run.metadata)
    handle = RunHandle(h.ref, f"{h.key}~sample~{keep}", h.session_only, SampleLoad(sub), h, rows)
    local = None if traj is None else int(np.searchsorted(rows, traj))
    return handle, local


@dataclass(frozen=True)
class SampleLoad:
    """A sample's stand-in for the loader's ``LoadResult``: its run, and no problems of its own."""

    run: object
    problems: tuple = ()


@_per_run(entries=LINT_ENTRIES, session_entries=8)
def lint_findings(key: str, cfg: CreditConfig, _h: RunHandle) -> list[diagnostics.FindingView]:
    """The credit lints (``engine.lint.run_lints``) of scheme ``cfg`` on the run, most severe first, with token
    positions capped (``diagnostics.summarize``). Reuses the cached result; raises the engine's ``ValueError``.
    On a big run they check the rows of ``lint_rows`` (an even sample of whole groups) with the run's own credit,
    and the findings name rows of the whole run."""
    from engine.lint import run_lints  # registers the checks on first use

    rows = lint_rows(_h)
    b, res, run = batch(_h), compute(_h, cfg), _h.run
    if rows is not None:
        from engine.io.data.run import Run

        b, res = b.select(torch_rows(rows)), tables.select_rows(res, torch_rows(rows))
        run = Run([run.trajectories[i] for i in rows], run.name, run.source, run.tokenizer, run.metadata)
    findings = _tokenizer_safe(run_lints, b, cfg, result=res, run=run)  # text checks tokenize
    views = diagnostics.summarize(findings)
    return views if rows is None else diagnostics.remap_rows(views, rows)


def lint_rows(h: RunHandle) -> np.ndarray | None:
    """The rows the lints check: None (all) unless the run is big."""
    return _sample_rows(h, None) if is_big(run_info(h)) else None


def turn_table(h: RunHandle, cfg: CreditConfig, i: int) -> pd.DataFrame:
    return tables.turn_table(h.run, batch(h), compute(h, cfg), i)


def reward_components(h: RunHandle, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Raw reward components of every trajectory, or of ``rows``."""
    return tables.reward_components(h.run, rows)


# ---------------------------------------------------------------------------------------------- several schemes
@dataclass(frozen=True)
class SchemeRun:
    """One scheme of a comparison: its code and label, the effective config, and the result or the error."""

    code: str
    label: str
    config: CreditConfig | None
    result: CreditResult | None
    error: str | None
    fixes: tuple[str, ...] = ()  # why the code runs with other values than it names (engine.runnable)


def compute_codes(h: RunHandle, info: tables.RunInfo, codes: list[str], value_source: str | None) -> list[SchemeRun]:
    """Each scheme code decoded, made runnable on the run and computed; failures are kept with their error."""
    from dashboard import schemes

    out = []
    for code in codes:
        try:
            cfg, fixes = runnable(schemes.decode(code), info.run_has, value_source)
            out.append(SchemeRun(code, schemes.label(code), cfg, compute(h, cfg), None, tuple(f.why for f in fixes)))
        except (ValueError, NotImplementedError) as e:
            out.append(SchemeRun(code, schemes.label(code), None, None, str(e)))
    return out


def variant_table(h: RunHandle, base: CreditConfig, field: str, values, table, labels: dict | None = None):
    """``table(batch, {label: result})`` (an ``analysis`` function) of ``base`` with ``field`` set to each of
    ``values``, one scheme at a time and the tables concatenated, so that only one result is alive (Run analytics
    varies up to five); kept in the byte budget. ``labels``: str(value) → label (default str(value)). Schemes the
    engine refuses are left out."""
    labels = labels or {}
    b = batch(h)

    def build() -> pd.DataFrame:
        frames = []
        # The aggregation mode changes only the loss weights: derive each mode from the scheme's own (cached)
        # result instead of computing the whole scheme once per mode (engine.credit.with_loss_agg_mode).
        same = None
        if field == "loss_agg_mode":
            try:
                same = compute(h, base)
            except (ValueError, NotImplementedError):
                same = None
        for v in values:
            try:
                if same is not None:
                    res = with_loss_agg_mode(same, v)
                else:
                    res = compute_credit(b, base.replace(**{field: v}), token_extras=False).materialize()
            except (ValueError, NotImplementedError):
                continue
            frames.append(table(b, {labels.get(str(v), str(v)): res}))
            del res
        return pd.concat(frames, ignore_index=True) if frames else table(b, {})

    key = (h.key, "variants", repr(base), field, tuple(values), table.__qualname__, tuple(labels.items()))
    return _budget(h).get(key, build, estimate=0, size=lambda df: int(df.memory_usage(deep=True).sum()))
