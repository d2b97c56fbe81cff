"""The seam between the dashboard and the engine: the only module that loads runs and calls ``compute_credit``.

Everything here is cached by hashable keys: a run by its file (path, mtime, size) and afterwards by its
``content_hash``; a result by (content hash, frozen ``CreditConfig``); a table by that plus the trajectory
index. Run objects travel as the unhashed ``_h`` (handle) argument. Uploaded runs use session-scoped caches, so
nothing derived from an upload is reachable from another session; sample and data-directory runs share a
global cache. No widgets and no session state in here.
"""

from __future__ import annotations

import functools
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import diagnostics, sources, tables
from dashboard.sources import RunRef
from engine import CreditConfig, CreditResult, compute_credit, get_estimator, list_estimators, resolve_device

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
# A CreditConfig is a frozen dataclass whose repr lists every field: hashing that is ~400× faster than
# Streamlit's generic hashing of the object, and keys stay exact.
HASH = {CreditConfig: repr}
RESULT_ENTRIES = 256
TABLE_ENTRIES = 512
LINT_ENTRIES = 32  # a big run's findings keep up to MAX_ROWS_KEPT × MAX_HIGHLIGHT positions each


@dataclass(frozen=True, eq=False)
class RunHandle:
    """A loaded run and how to cache what is derived from it. ``loaded`` is the loader's ``LoadResult``."""

    ref: str
    key: str
    session_only: bool
    loaded: object

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
# user data; afterwards calls run in parallel. (The lasting fix is a lock in engine.io.tokenize._load_tokenizer.)
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


def _load_run(path: str):
    from engine.io import load_run  # the loader pulls in transformers; import it only when a run is read

    return _tokenizer_safe(load_run, path, max_bytes=None)


@st.cache_resource(max_entries=16, show_spinner="Loading run…")
def _load_file(path: str, mtime_ns: int, size: int):
    return _load_run(path)


def open_run(ref: RunRef, uploads: dict) -> RunHandle:
    """The run ``ref`` points at: a sample, a confined data-directory file, or this session's upload.
    Raises ``KeyError`` (no such sample/upload) or ``ValueError`` (a path outside the allowed directories)."""
    if ref.kind == "upload":
        loaded = uploads[ref.name]
        return RunHandle(str(ref), loaded.run.content_hash, True, loaded)
    path = sources.sample_path(ref.name) if ref.kind == "sample" else sources.resolve_allowed(ref.name)
    loaded = _load_file(str(path), *sources.file_stamp(path))
    return RunHandle(str(ref), loaded.run.content_hash, False, loaded)


def load_upload(file_name: str, data: bytes):
    """Load uploaded bytes (kept under the original file name in a private temporary folder, so the loader
    can sniff the format), then delete the file. The result belongs in this session's state only."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"{file_name}: {len(data) / 2**20:.0f} MB is over the {MAX_UPLOAD_BYTES / 2**20:.0f} MB limit")
    safe = Path(file_name).name or "upload.jsonl"
    with tempfile.TemporaryDirectory(prefix="creditlens-upload-") as tmp:
        path = Path(tmp) / safe
        path.write_bytes(data)
        return _load_run(str(path))


# ---------------------------------------------------------------------------------------------- schemes
def available_estimators(info: tables.RunInfo) -> list:
    """Registered estimators whose inputs this run provides (GAE always: values can be stood in for)."""
    return [e for e in list_estimators() if all(info.provides(r) for r in e.requires)]


def estimator_catalogue() -> list:
    return list_estimators()


def effective_config(info: tables.RunInfo, cfg: CreditConfig, value_source: str | None = "zeros") -> CreditConfig:
    """``cfg`` made runnable on this run: a value stand-in for GAE without critic values, no in-reward KL
    without log-probs, no ``as_given`` placement without token scores."""
    changes: dict = {}
    if "values" in get_estimator(cfg.estimator).requires and not info.has_values:
        if cfg.value_source in (None, "critic"):
            changes["value_source"] = value_source if value_source not in (None, "critic") else "zeros"
    if cfg.use_kl_in_reward and not info.has_log_probs:
        changes["use_kl_in_reward"] = False
    if cfg.placement == "as_given" and not info.has_token_scores:
        changes["placement"] = "auto"
    return cfg.replace(**changes) if changes else cfg


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


@_per_run(entries=8, session_entries=2)
def batch(key: str, _h: RunHandle):
    """The run as one padded ``TrajectoryBatch`` on the engine's device."""
    return _h.run.to_batch(device=resolve_device(None))


@_per_run(entries=16, session_entries=4)
def run_info(key: str, _h: RunHandle) -> tables.RunInfo:
    return tables.run_info(_h.run, batch(_h))


@_per_run(entries=RESULT_ENTRIES)
def compute(key: str, cfg: CreditConfig, _h: RunHandle) -> CreditResult:
    """The credit of scheme ``cfg`` on the run (raises the engine's ``ValueError``s)."""
    return compute_credit(batch(_h), cfg)


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


@_per_run(entries=RESULT_ENTRIES)
def trajectory_summary(key: str, cfg: CreditConfig, _h: RunHandle) -> pd.DataFrame:
    """One row per trajectory under ``cfg`` (read-only)."""
    return tables.trajectory_summary(batch(_h), compute(_h, cfg))


@_per_run(entries=LINT_ENTRIES, session_entries=8)
def lint_findings(key: str, cfg: CreditConfig, _h: RunHandle) -> list[diagnostics.FindingView]:
    """The credit lints (``engine.lint.run_lints``) of scheme ``cfg`` on the run, most severe first, with token
    positions capped (``diagnostics.summarize``). Reuses the cached result; raises the engine's ``ValueError``."""
    from engine.lint import run_lints  # registers the checks on first use

    findings = _tokenizer_safe(run_lints, batch(_h), cfg, result=compute(_h, cfg), run=_h.run)  # text checks tokenize
    return diagnostics.summarize(findings)


def turn_table(h: RunHandle, cfg: CreditConfig, i: int) -> pd.DataFrame:
    return tables.turn_table(h.run, batch(h), compute(h, cfg), i)


def reward_components(h: RunHandle) -> pd.DataFrame:
    return tables.reward_components(h.run)


# ---------------------------------------------------------------------------------------------- several schemes
@dataclass(frozen=True)
class SchemeRun:
    """One scheme of a comparison: its code and label, the effective config, and the result or the error."""

    code: str
    label: str
    config: CreditConfig | None
    result: CreditResult | None
    error: str | None


def compute_codes(h: RunHandle, info: tables.RunInfo, codes: list[str], value_source: str | None) -> list[SchemeRun]:
    """Each scheme code decoded, made runnable on the run and computed; failures are kept with their error."""
    from dashboard import schemes

    out = []
    for code in codes:
        try:
            cfg = effective_config(info, schemes.decode(code), value_source)
            out.append(SchemeRun(code, schemes.label(code), cfg, compute(h, cfg), None))
        except (ValueError, NotImplementedError) as e:
            out.append(SchemeRun(code, schemes.label(code), None, None, str(e)))
    return out


def compute_variants(h: RunHandle, base: CreditConfig, field: str, values) -> dict[str, CreditResult]:
    """``base`` with ``field`` set to each of ``values`` (label → result); schemes the engine refuses are left
    out."""
    out = {}
    for v in values:
        try:
            out[str(v)] = compute(h, base.replace(**{field: v}))
        except (ValueError, NotImplementedError):
            continue
    return out
