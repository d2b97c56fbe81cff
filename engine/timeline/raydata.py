"""The timeline and the per-token credit of a whole run on a Ray cluster, through Ray Data.

The run's step sources (``engine.timeline.index``: found on the driver from names and stamps, no file read
whole) become a dataset of one row per source; ``map_batches`` runs on each the very function the single-process
path runs (``source_timeline``, ``credit_part``), one source per task, streamed: a worker loads one step, computes
it, hands it on and lets go. What comes out:

* the timeline: each source's rows (a few hundred bytes per step and scheme) stream back to the driver, which
  writes the timeline file as the single-process path does (``engine.timeline.store``: the same file, incremental,
  what the dashboard reads);
* the per-token credit: each source's token tables go to Ray's Parquet writer, partitioned by step, into the
  staging folder that ``engine.timeline.tokens.finish`` checks against the receipts and moves into place.

Faults: a worker process that dies mid-step fails its task, and Ray runs the task again (``MAX_RETRIES`` times):
a source's output and receipt are written under names fixed by the source (the writer's by its task), so a retry
replaces what the dead attempt left, and ``finish`` checks that every step's tokens were written once. A step file
that cannot be read, or a step that raises, is a problem in the output (``guarded``), not a failed task.

``connect("local")`` starts a Ray on this machine's cores, without the dashboard, with a small object store;
``connect("auto")`` / ``connect("ray://host:10001")`` joins an existing cluster, whose workers must have this
package importable (``docs/SCALING.md``: ``ray job submit`` with a runtime environment). Ray is imported only here,
only when asked for: the dashboard and the single-process commands do not need it.
"""

from __future__ import annotations

import os
import pickle
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from engine.config import CreditConfig
from engine.timeline.compute import LOST_STEP, SourcePart, StepJob, source_timeline
from engine.timeline.index import StepSource
from engine.timeline.tokens import credit_part, write_receipt

ROOT = Path(__file__).resolve().parents[2]  # the folder holding the ``engine`` package
LOCAL_OBJECT_STORE_BYTES = 256 << 20  # a local Ray's shared-memory store: a few steps' token tables in flight
MAX_RETRIES = 3  # a task whose worker died is run again this many times, then the job fails
INSTALL = "pip install 'ray[data]==2.60.0' (requirements-dev.txt installs it)"


def _ray():
    try:
        import ray
        import ray.data
    except ImportError as e:
        raise ImportError(f"--ray needs Ray Data, which is not installed ({e}): {INSTALL}") from None
    return ray


def connect(address: str) -> str:
    """Join the Ray at ``address`` (``local``: start one on this machine's cores; ``auto``; ``ray://host:port``);
    a description of what it joined. A process already connected stays on its cluster."""
    ray = _ray()
    if not ray.is_initialized():
        if address == "local":
            ray.init(
                num_cpus=os.cpu_count() or 1,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},  # the workers import this checkout's engine
                logging_level="WARNING",
            )
        else:
            ray.init(address=address, logging_level="WARNING")
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = sys.stderr.isatty()
        # a step whose task fails every retry (its worker killed each time: out of memory, a crash) is dropped by
        # Ray Data instead of failing the job; the driver names it as a problem (``missing_parts``, ``tokens``)
        context.max_errored_blocks = -1
    cpus = ray.cluster_resources().get("CPU", 0)
    gpus = ray.cluster_resources().get("GPU", 0)
    return f"Ray {ray.__version__} at {address}: {cpus:g} CPU(s), {gpus:g} GPU(s)"


def source_dataset(sources: list[StepSource]):
    """One row per step source (the source pickled: paths, step and stamp), one block each: one task per source."""
    ray = _ray()
    items = [{"source": pickle.dumps(src)} for src in sources]
    return ray.data.from_items(items, override_num_blocks=max(len(items), 1))


def _map(ds, fn, kwargs: dict, gpus_per_step: float):
    """``ds.map_batches(fn)``, one source per task, one CPU (and ``gpus_per_step`` GPUs) each, retried
    ``MAX_RETRIES`` times when its worker dies (Ray Data's default is to retry forever)."""
    with warnings.catch_warnings():
        # Ray 2.60 has no named parameter for max_retries; the pinned version takes it this way (removal: 2.64)
        warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
        return ds.map_batches(
            fn,
            fn_kwargs=kwargs,
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=1,
            num_gpus=gpus_per_step or None,
            ray_remote_args_fn=_retries,
        )


def _retries() -> dict:
    return {"max_retries": MAX_RETRIES}


def _timeline_task(batch: pa.Table, job: StepJob, schemes: Mapping[str, CreditConfig], step: Callable) -> pa.Table:
    parts = [step(job, pickle.loads(blob), schemes) for blob in batch.column("source").to_pylist()]
    return pa.table({"part": pa.array([pickle.dumps(p) for p in parts], pa.binary())})


def timeline_runner(gpus_per_step: float = 0.0, step: Callable = source_timeline):
    """A ``timeline_rows`` runner that computes the sources on the connected Ray: ``step(job, source, schemes)``
    on each (``source_timeline``; a test passes one that fails on purpose), its parts streamed back."""

    def run(job: StepJob, sources: list[StepSource], schemes: Mapping[str, CreditConfig]) -> Iterator[SourcePart]:
        if not sources:
            return
        kwargs = {"job": job, "schemes": dict(schemes), "step": step}
        ds = _map(source_dataset(sources), _timeline_task, kwargs, gpus_per_step)
        seen = set()
        for row in ds.iter_rows():
            part = pickle.loads(row["part"])
            seen.add(part.source)
            yield part
        yield from missing_parts(sources, seen)

    return run


def missing_parts(sources: list[StepSource], seen: set[str]) -> Iterator[SourcePart]:
    """A part with a problem for each source whose task gave nothing back (it failed every retry)."""
    for src in sources:
        if src.key not in seen:
            yield SourcePart.of(src, LOST_STEP)


def _credit_task(
    batch: pa.Table, job: StepJob, cfg: CreditConfig, staging: str, device: str | None, step: Callable
) -> pa.Table:
    tables = []
    for blob in batch.column("source").to_pylist():
        src = pickle.loads(blob)
        part = step(job, src, cfg, device)
        write_receipt(Path(staging), src, part)
        tables += [t for t in part.rows if t.num_rows]
    return pa.concat_tables(tables) if tables else pa.table({"step": pa.array([], pa.int64())})


def write_with_ray(
    job: StepJob,
    sources: list[StepSource],
    cfg: CreditConfig,
    staging: Path,
    gpus_per_step: float = 0.0,
    step: Callable = credit_part,
) -> None:
    """Every source's token tables into ``staging`` through Ray's Parquet writer, partitioned by step (``step=N/``),
    and its receipt beside them. ``step(job, source, cfg, device)``: ``credit_part``; with ``gpus_per_step`` the
    engine computes on the task's GPU."""
    if not sources:
        return
    device = "cuda" if gpus_per_step else None
    kwargs = {"job": job, "cfg": cfg, "staging": str(staging), "device": device, "step": step}
    ds = _map(source_dataset(sources), _credit_task, kwargs, gpus_per_step)
    ds.write_parquet(str(staging), partition_cols=["step"])
