"""The seam between the dashboard and the engine: the only module that calls ``compute_credit`` and the lints
(tests/test_services_seam.py holds every other dashboard module to the engine's declarations and types).

Each function takes a run's ``cache.RunHandle`` (from ``loading.open_run``) and is cached by hashable keys: a
result by (content hash, frozen ``CreditConfig``), a table by that plus the trajectory index (``cache``: per
session for uploads, shared for samples and data-directory files). No widgets and no session state in here.

Memory (docs/SECURITY.md): credit results and run-wide tables are kept in the byte budget without
the estimators' [B, T] intermediates; a run's segment arrays are views of its batch (one copy). Big runs
(``bigrun.is_big``) are sampled by the pages that compute several schemes: ``sampled`` gives a handle on an even
sample of whole groups that every function here accepts like a run of its own.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
import torch

from dashboard import bigrun, cache, collector, diagnostics, loading, schemes, tables, teach
from dashboard.cache import LINT_ENTRIES, TABLE_ENTRIES, RunHandle, SampleLoad, per_run
from engine import CreditConfig, CreditResult, compute_credit, list_estimators, resolve_device
from engine.credit import with_loss_agg_mode
from engine.perf import release_free_memory
from engine.runnable import runnable

RESULT_TENSORS = 7  # [B, T] float32 tensors a result holds of its own at most (estimate before computing)
BATCH_BYTES_PER_TOKEN = 24  # int32 token and turn ids, two float masks, three float per-token fields
BIG_RESULT_BYTES = 64 << 20  # from here on, a computation hands its freed temporaries back to the OS
# From here on, a computation first collects the last page runs' garbage (dashboard/collector.py): a full collection
# walks every object alive (0.4 s with a 50,000-trajectory run loaded), worth it before a whole-run result only.
COLLECT_BEFORE_BYTES = 256 << 20
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
def batch(h: RunHandle):
    """The run as one padded ``TrajectoryBatch`` on the engine's device; the run's arrays become views of it. A
    sample's batch is its rows of the parent's, kept in the byte budget."""
    if h.parent is None:
        return _batch(h)
    parent = batch(h.parent)
    return cache.budget_for(h).get(
        (h.key, "batch"),
        lambda: parent.select(torch_rows(h.rows)),
        estimate=BATCH_BYTES_PER_TOKEN * len(h.rows) * parent.num_tokens,
        size=cache.tensor_bytes,
    )


@per_run(entries=8, session_entries=2)
def _batch(key: str, _h: RunHandle):
    out = _h.run.to_batch(device=resolve_device(None), share_memory=True)
    release_free_memory()  # the loader's arrays, now replaced by views of the batch
    return out


def torch_rows(rows: np.ndarray) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)  # a copy: the cached rows are read-only


@per_run(entries=16, session_entries=4)
def run_info(key: str, _h: RunHandle) -> tables.RunInfo:
    return tables.run_info(_h.run, batch(_h))


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

    return cache.budget_for(h).get(
        (h.key, "result", repr(cfg)), build, estimate, lambda res: cache.result_bytes(res, b)
    )


def is_cached(h: RunHandle, cfg: CreditConfig) -> bool:
    """Whether ``compute(h, cfg)`` would return at once (for a spinner on big runs)."""
    return (h.key, "result", repr(cfg)) in cache.budget_for(h)


def compute_timed(h: RunHandle, cfg: CreditConfig) -> tuple[CreditResult, float]:
    """(result, seconds this call took: ≈0 when cached, else the engine's time plus overhead)."""
    t0 = time.perf_counter()
    res = compute(h, cfg)
    return res, time.perf_counter() - t0


@per_run(entries=TABLE_ENTRIES)
def token_texts(key: str, i: int, _h: RunHandle) -> list[str]:
    return loading.tokenizer_safe(_h.run.token_texts, i)  # a tokenizer other than the built-in Qwen ones is loaded here


@per_run(entries=TABLE_ENTRIES)
def token_table(key: str, cfg: CreditConfig, i: int, _h: RunHandle) -> pd.DataFrame:
    """Trajectory ``i`` token by token under ``cfg`` (treat as read-only: the cache shares it)."""
    return tables.token_table(_h.run, batch(_h), compute(_h, cfg), i, token_texts(_h, i))


@per_run(entries=TABLE_ENTRIES)
def mismatch_table(key: str, cfg: CreditConfig, _h: RunHandle) -> pd.DataFrame:
    """The run's tokens where trainer and rollout engine disagree most, under ``cfg`` (read-only)."""
    return tables.mismatch_table(_h.run, batch(_h), compute(_h, cfg))


def trajectory_summary(h: RunHandle, cfg: CreditConfig) -> pd.DataFrame:
    """One row per trajectory under ``cfg`` (read-only), kept in the byte budget."""
    return cache.budget_for(h).get(
        (h.key, "summary", repr(cfg)),
        lambda: tables.trajectory_summary(batch(h), compute(h, cfg)),
        estimate=0,
        size=lambda df: int(df.memory_usage(deep=True).sum()),
    )


# ---------------------------------------------------------------------------------------------- big runs
def is_big(info: tables.RunInfo) -> bool:
    return bigrun.is_big(info.trajectories, info.max_length)


@per_run(entries=32, session_entries=8)
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


@per_run(entries=LINT_ENTRIES, session_entries=8)
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
    findings = loading.tokenizer_safe(run_lints, b, cfg, result=res, run=run)  # text checks tokenize
    views = diagnostics.summarize(findings)
    return views if rows is None else diagnostics.remap_rows(views, rows)


def lint_rows(h: RunHandle) -> np.ndarray | None:
    """The rows the lints check: None (all) unless the run is big."""
    return _sample_rows(h, None) if is_big(run_info(h)) else None


@per_run(entries=TABLE_ENTRIES)
def entropy_credit(key: str, cfg: CreditConfig, bins: int, _h: RunHandle) -> pd.DataFrame:
    """The trained action tokens in ``bins`` equal-count entropy bins (lowest first): range, tokens, share of the
    batch's Σ|gradient weight| and mean gradient weight (``engine.policy.credit_by_entropy``). Empty without the
    run's entropy."""
    from engine.policy import credit_by_entropy

    b = batch(_h)
    if b.entropy is None:
        return pd.DataFrame()
    res = compute(_h, cfg)
    mask = res.loss_mask.bool() & b.action_mask.bool()
    return pd.DataFrame(credit_by_entropy(b.entropy, res.grad_weight, mask, bins))


def turn_table(h: RunHandle, cfg: CreditConfig, i: int) -> pd.DataFrame:
    return tables.turn_table(h.run, batch(h), compute(h, cfg), i)


def reward_components(h: RunHandle, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Raw reward components of every trajectory, or of ``rows``."""
    return tables.reward_components(h.run, rows)


# ---------------------------------------------------------------------------------------------- the Learn page
@st.cache_resource(show_spinner=False, hash_funcs=cache.HASH)
def kgr1_example(cfg: CreditConfig = teach.DOC_CONFIG) -> teach.KgExample:
    """KG-R1's worked example (``teach.kgr1_run``) under ``cfg`` (``final_token_only``, the document's GAE path),
    under ``turn_proportional`` (its KL path) and under GRPO: the same for every session, so computed once."""
    run = teach.kgr1_run()
    b = run.to_batch(device=teach.DOC_DEVICE)
    return teach.KgExample(
        run=run,
        batch=b,
        gae=compute_credit(b, cfg, teach.DOC_DEVICE),
        proportional=compute_credit(b, cfg.replace(placement="turn_proportional"), teach.DOC_DEVICE),
        grpo=compute_credit(b, cfg.replace(estimator="grpo"), teach.DOC_DEVICE),
        config=cfg,
    )


def rllm_modes(h: RunHandle, info: tables.RunInfo, norm_by_std: bool) -> tuple[dict[str, CreditResult], dict[str, str]]:
    """rLLM's three stepwise modes (GRPO, step γ = 0.95) on the run, made runnable on it: ({label: result},
    {label: why the engine refused it})."""
    base = CreditConfig(profile="rllm", estimator="grpo", norm_adv_by_std_in_grpo=norm_by_std, stepwise_gamma=0.95)
    results, refused = {}, {}
    for mode, label in schemes.MODE_WORDS.items():
        try:
            results[label] = compute(h, effective_config(info, base.replace(stepwise_mode=mode)))
        except (ValueError, NotImplementedError) as e:
            refused[label] = str(e)
    return results, refused


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
        # The aggregation mode reaches stage 4 only: stages 1–3 once, stage 4 once per mode
        # (engine.credit.with_loss_agg_mode), instead of computing the whole scheme once per mode.
        stages = None
        if field == "loss_agg_mode":
            try:
                stages = compute_credit(b, base, token_extras=False)  # its views are not computed: stage 4 per mode
            except (ValueError, NotImplementedError):
                stages = None
        for v in values:
            try:
                if stages is not None:
                    res = with_loss_agg_mode(stages, v).materialize()
                else:
                    res = compute_credit(b, base.replace(**{field: v}), token_extras=False).materialize()
            except (ValueError, NotImplementedError):
                continue  # a value the profile lacks, or a scheme the engine refuses
            frames.append(table(b, {labels.get(str(v), str(v)): res}))
            del res
        return pd.concat(frames, ignore_index=True) if frames else table(b, {})

    key = (h.key, "variants", repr(base), field, tuple(values), table.__qualname__, tuple(labels.items()))
    return cache.budget_for(h).get(key, build, estimate=0, size=lambda df: int(df.memory_usage(deep=True).sum()))


# ---------------------------------------------------------------------------------------------- timeline
@dataclass(frozen=True)
class TimelineView:
    """A run's timeline under one scheme: its rows (one per step), the problems of the steps it read, the files
    still being written, and how many steps were computed now (the rest came from the disk cache)."""

    frame: pd.DataFrame
    problems: tuple = ()
    pending: tuple = ()
    computed: int = 0
    index_sources: int = 0  # the step sources the run's folder holds


TIMELINE_CACHE_ENV = "CREDITLENS_TIMELINE_CACHE"


def timeline_cache_file(folder: Path, cfg: CreditConfig) -> Path:
    """Where a folder run's timeline under ``cfg`` is kept: ``$CREDITLENS_TIMELINE_CACHE`` (default
    ``$CREDITLENS_CACHE/timeline``) ``/<folder>-<hash of its path>/<scheme key>.parquet``; rows are reused while
    their step files' stamps are unchanged (``engine.timeline.store``)."""
    from engine.io.text.qwen_vocab import cache_dir
    from engine.timeline.compute import scheme_key

    root = Path(os.environ.get(TIMELINE_CACHE_ENV, "").strip() or cache_dir() / "timeline")
    folder_key = hashlib.blake2b(str(folder.resolve()).encode(), digest_size=8).hexdigest()
    return root / f"{folder.name}-{folder_key}" / f"{scheme_key(cfg)}.parquet"


def job_schemes(folder: Path) -> dict[str, CreditConfig]:
    """The schemes of the timelines a job wrote into ``folder/.creditlens/`` (``python -m engine timeline``), by
    scheme key: the page offers them, and says how the sidebar's differs (only the same scheme's rows are reused)."""
    from engine.timeline.store import job_timelines, read_timeline_schemes

    return {k: c for f in job_timelines(folder) for k, c in read_timeline_schemes(f).items()}


def other_job_scheme(jobs: dict[str, CreditConfig], cfg: CreditConfig) -> CreditConfig | None:
    """A job's scheme when the run folder holds job timelines but none under ``cfg`` (None otherwise)."""
    from engine.timeline.compute import scheme_key

    return next(iter(jobs.values())) if jobs and scheme_key(cfg) not in jobs else None


def scheme_difference(a: CreditConfig, b: CreditConfig, most: int = 4) -> str:
    """The fields where ``a`` and ``b`` differ, in words: "value_source: zeros here, None there"."""
    da, db = a.to_dict(), b.to_dict()
    diff = [f"{k}: {da[k]!r} here, {db[k]!r} there" for k in da if da[k] != db.get(k)]
    return "; ".join(diff[:most]) + (f"; {len(diff) - most} more" if len(diff) > most else "")


def folder_timeline(folder: Path, cfg: CreditConfig, progress=None) -> TimelineView:
    """The timeline of a folder run, one step at a time, reusing the disk cache (a live run: only new steps) and any
    timeline a job wrote into the folder's ``.creditlens/`` (``python -m engine timeline RUN [--ray …]``)."""
    from dashboard.steps import detect
    from engine.timeline.store import job_timelines, update_timeline

    cache = timeline_cache_file(folder, cfg)
    tl = update_timeline(folder, {"scheme": cfg}, cache, progress, seeds=job_timelines(folder), detect=detect)
    return TimelineView(
        pd.DataFrame(tl.rows), tuple(tl.problems), tuple(tl.index.pending), tl.computed, len(tl.index.sources)
    )


@per_run(entries=TABLE_ENTRIES)
def _run_timeline(key: str, cfg: CreditConfig, _h: RunHandle) -> pd.DataFrame:
    from engine.timeline.compute import step_rows

    return pd.DataFrame(list(step_rows(_h.run, {"scheme": cfg})))


def run_timeline(h: RunHandle, cfg: CreditConfig) -> TimelineView:
    """The timeline of a loaded run (a file whose records name their steps, an upload; one row for a run of one
    step), computed step by step in memory."""
    return TimelineView(_run_timeline(h, cfg))
