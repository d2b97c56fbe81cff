"""A run's per-token credit as a Parquet dataset partitioned by step, written one step source at a time.

``python -m engine compute RUN_DIR --out OUT_DIR`` (and its ``--ray`` form, ``engine.timeline.raydata``) writes::

    OUT_DIR/step=1/<file>.parquet       one row per attended token of step 1 (engine.export.token_table's columns)
    OUT_DIR/step=2/…
    OUT_DIR/_creditlens.json            the manifest: run, scheme, tokens written per step, every problem

readable by ``pandas.read_parquet(OUT_DIR)``, ``pyarrow.dataset.dataset(OUT_DIR, partitioning="hive")``, DuckDB's
``read_parquet('OUT_DIR/*/*.parquet', hive_partitioning = true)`` or ``ray.data.read_parquet``; each ignores the
``_``-prefixed manifest. Every step is computed alone, as its trainer computed its batch (a file whose records
say their steps is split into them). Within a step the rows follow the trajectories' order, then the position.

Each step source goes through ``credit_part`` (the one function both paths run) and leaves a receipt
(``_receipts/<source>.json``: its tokens per step and its problems) beside its rows; the receipt is written whole
or not at all, so a retried source replaces its own. ``finish`` then checks the dataset against the receipts
(every step's token count, read from the Parquet footers: no step missing or written twice), writes the manifest
and moves the dataset into ``OUT_DIR`` (the job writes into a staging folder beside it: a reader never sees a
half-written dataset, and a dataset already at ``OUT_DIR`` is replaced whole).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.parquet as pq

from engine.config import CreditConfig
from engine.credit import compute_credit
from engine.export import token_table
from engine.io.data.run import Run
from engine.io.reading.problems import Problem
from engine.timeline.compute import LOST_STEP, SourcePart, StepJob, guarded, source_problem
from engine.timeline.index import StepSource, index_steps

MANIFEST = "_creditlens.json"
RECEIPTS = "_receipts"


def step_tables(run: Run, cfg: CreditConfig, device: str | None = None) -> Iterator[tuple[int, pa.Table | str]]:
    """(step, token table) of every step of ``run`` (step 0 for a run that names none), each computed alone; a step
    the scheme cannot run on gives (step, why) instead."""
    for step in run.steps or [None]:
        part = run.step_run(step) if step is not None else run
        if not part.trajectories:
            continue
        number = step if step is not None else 0
        batch = part.to_batch()
        try:
            result = compute_credit(batch, cfg, device=device)
        except ValueError as e:  # the scheme cannot run on this step: say why, keep the others
            yield number, str(e)
            continue
        texts = [part.token_texts(i) for i in range(len(part.trajectories))]
        groups = [str(t.group_id) for t in part.trajectories]
        table = token_table(batch, result, texts, groups, row=True)
        if "step" in table.column_names:
            table = table.drop_columns(["step"])
        yield number, table.add_column(0, "step", pa.array([number] * table.num_rows, pa.int64()))


def credit_part(job: StepJob, src: StepSource, cfg: CreditConfig, device: str | None = None) -> SourcePart:
    """The token tables of one step source under ``cfg`` (``rows``: one table per step) and its problems; a step
    the scheme cannot run on is a problem naming it, the source's other steps are kept."""

    def work(run: Run) -> list[pa.Table]:
        tables = []
        for step, table in step_tables(run, cfg, device):
            if isinstance(table, str):
                why = f"step {step}: the scheme cannot run on this step ({table}); no tokens written"
                problems.append(Problem(src.key, None, None, why))
            else:
                tables.append(table)
        return tables

    problems: list[Problem] = []
    part = guarded(src, work, job)
    part.problems += problems
    return part


def source_id(src: StepSource) -> str:
    """A file-name-safe id of a step source, the same in every process: its receipt's and its files' name."""
    return hashlib.blake2b(src.key.encode(), digest_size=8).hexdigest()


def write_receipt(staging: Path, src: StepSource, part: SourcePart) -> None:
    """Record what ``src`` wrote (tokens per step) and its problems, atomically (a retry replaces it)."""
    receipt = {
        "source": src.key,
        "tokens": {str(int(t.column("step")[0].as_py())): t.num_rows for t in part.rows if t.num_rows},
        "problems": [asdict(p) for p in part.problems],
    }
    folder = staging / RECEIPTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{source_id(src)}.json"
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(receipt))
    os.replace(tmp, path)


def write_part_here(staging: Path, src: StepSource, part: SourcePart) -> None:
    """The single-process writer: each step's table as ``step=N/<source id>-0.parquet`` (pyarrow's dataset writer,
    the hive layout Ray's Parquet writer makes), then the receipt."""
    for table in part.rows:
        if table.num_rows:
            pq.write_to_dataset(
                table,
                staging,
                partition_cols=["step"],
                basename_template=f"{source_id(src)}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",
            )
    write_receipt(staging, src, part)


def staging_folder(out: Path) -> Path:
    """A fresh folder beside ``out`` that the job writes into (moved to ``out`` by ``finish``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:12]}"


def counted_tokens(staging: Path) -> dict[int, int]:
    """{step: rows} of the dataset in ``staging``, from the Parquet footers (no data page read)."""
    counts: dict[int, int] = {}
    for entry in sorted(staging.iterdir()):
        if entry.is_dir() and entry.name.startswith("step="):
            step = int(entry.name.removeprefix("step="))
            counts[step] = sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(entry.glob("*.parquet")))
    return counts


def finish(staging: Path, out: Path, manifest: dict, problems: list[Problem], sources: list[StepSource]) -> dict:
    """Check the dataset in ``staging`` against its receipts, write the manifest, move it to ``out``; the manifest.
    ``problems``: the index's own (files it could not read), listed first; then each of ``sources`` that left no
    receipt (its task failed every retry: Ray dropped it), then the sources' own. ``RuntimeError`` when a step's
    tokens on disk differ from its receipt (a step missing or written twice): nothing is moved."""
    receipts = [json.loads(p.read_text()) for p in sorted((staging / RECEIPTS).glob("*.json"))]
    done = {r["source"] for r in receipts}
    problems = problems + [source_problem(src, LOST_STEP) for src in sources if src.key not in done]
    expected: dict[int, int] = {}
    for r in receipts:
        for step, n in r["tokens"].items():
            expected[int(step)] = expected.get(int(step), 0) + n
    found = counted_tokens(staging)
    if found != expected:
        wrong = sorted(s for s in expected.keys() | found.keys() if expected.get(s) != found.get(s))
        shown = ", ".join(f"step {s}: {found.get(s, 0)} on disk, {expected.get(s, 0)} computed" for s in wrong[:5])
        raise RuntimeError(f"the dataset in {staging} does not match what its steps computed ({shown})")
    listed = [asdict(p) for p in problems]
    listed += [p for r in sorted(receipts, key=lambda r: r["source"]) for p in r["problems"]]
    manifest = manifest | {
        "steps": sorted(found),
        "tokens": {str(s): found[s] for s in sorted(found)},
        "sources": len(receipts),
        "problems": listed,
    }
    shutil.rmtree(staging / RECEIPTS, ignore_errors=True)  # none when the run had no step to compute
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)
    return manifest


def read_manifest(out: str | Path) -> dict:
    """The manifest of a dataset ``compute`` wrote (``{}`` when there is none)."""
    path = Path(out) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}


def read_credit(out: str | Path) -> pa.Table:
    """The whole dataset as one table in (step, row, position) order: each step's trajectories as its batch holds
    them, whatever files the writer split it into; ``step`` as int64."""
    partitioning = pds.partitioning(pa.schema([("step", pa.int64())]), flavor="hive")
    table = pds.dataset(out, format="parquet", partitioning=partitioning).to_table()
    columns = ["step", *(c for c in table.column_names if c != "step")]  # the partition key first, as written
    return table.select(columns).sort_by([("step", "ascending"), ("row", "ascending"), ("position", "ascending")])


def problems_of(manifest: dict) -> list[Problem]:
    return [Problem(**p) for p in manifest.get("problems", [])]


def write_here(
    job: StepJob, sources: list[StepSource], cfg: CreditConfig, staging: Path, device: str | None = None
) -> None:
    """The single-process writer: each source in turn, in this process."""
    for src in sources:
        write_part_here(staging, src, credit_part(job, src, cfg, device))


# (job, sources, scheme, staging folder) -> every source's tables and receipt in the staging folder
Writer = Callable[[StepJob, list[StepSource], CreditConfig, Path], None]


def compute_dataset(
    path: str | Path,
    cfg: CreditConfig,
    out: str | Path,
    fmt: str | None = None,
    writer: Writer | None = None,
    runner: str = "this process",
    **load_kwargs,
) -> dict:
    """Compute ``cfg`` on every step of the run at ``path`` and write the dataset at ``out``; its manifest.
    ``writer`` computes and writes the sources (default: one after the other here; ``engine.timeline.raydata``
    on Ray). The run is read as it is now: a file still being written is a problem, not read."""
    out = Path(out)
    index = index_steps(path, fmt, settle_s=0.0)
    staging = staging_folder(out)
    try:
        staging.mkdir()
        (writer or write_here)(StepJob(index.root, fmt, load_kwargs), index.sources, cfg, staging)
        head = {"run": str(index.root), "scheme": cfg.to_dict(), "computed_by": runner}
        return finish(staging, out, head, index.skipped(pending=True), index.sources)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
