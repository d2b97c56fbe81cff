"""A run's timeline: one row of statistics per (step, scheme), computed one step source at a time.

``timeline_rows(path, schemes, previous)`` indexes the run (``engine.timeline.index``), and for each step source
loads only its files, builds each of its steps' batch, computes each scheme's credit and lint findings on it and
turns them into a row (``engine.timeline.stats.step_row``); then lets go of them before the next source, so memory
follows the largest step, not the run. Rows of ``previous`` (an earlier timeline of the same run) whose source
stamp and scheme key are unchanged are reused as they are: adding a step computes that step only.

A scheme a step cannot run (OpenRLHF on groups of unequal size, …) gives a row whose ``error`` says why and whose
statistics are NaN; a scheme that asks for what the run lacks runs as ``engine.runnable`` decides, and ``notes``
says what it changed. A step with no trajectory left (every record refused) gives no row; its source's problems
are in ``problems``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import CreditConfig
from engine.credit import compute_credit
from engine.io.data.run import Run
from engine.io.load import load_run
from engine.io.reading.problems import Problem
from engine.lint.context import LintContext
from engine.lint.logged import logged_advantages
from engine.lint.model import CHECKS
from engine.lint.runner import run_lints
from engine.perf import release_free_memory
from engine.runnable import RunHas, runnable
from engine.timeline.index import SETTLE_S, StepIndex, StepSource, index_steps
from engine.timeline.stats import StepView, step_row

# The identifying columns of a timeline row; the statistics follow (engine.timeline.stats).
KEY_COLUMNS = ("step", "scheme", "scheme_key", "source", "stamp")
# Lint checks the timeline runs on every step: all but the re-tokenization check, which re-encodes every segment's
# text (on a step of 256 × 1,000 tokens 0.12 s and 11 MiB: half the whole timeline's time and its memory peak), and
# which is about the data, not the scheme; Diagnostics runs it on the step the pages show.
SKIPPED_CHECKS = ("retokenization_mismatch",)
TIMELINE_CHECKS = tuple(name for name in CHECKS if name not in SKIPPED_CHECKS)
Progress = Callable[[float, str], None]
# a step source whose task gave nothing back (a runner on a cluster: it failed every retry)
LOST_STEP = (
    "no result came back: the step's task failed every retry (its worker died each time: out of memory, a crash); "
    "step skipped"
)
# (job, sources, schemes) -> one SourcePart per source, in any order
Runner = Callable[["StepJob", "list[StepSource]", "Mapping[str, CreditConfig]"], "Iterator[SourcePart]"]


def scheme_key(cfg: CreditConfig) -> str:
    """A short stable hash of a scheme (its every field), for cache keys."""
    text = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass
class Timeline:
    """Rows (dicts, step order, then scheme order), what was reused and computed, and the load problems."""

    rows: list[dict] = field(default_factory=list)
    index: StepIndex | None = None
    computed: int = 0  # step sources computed now
    reused: int = 0  # step sources whose rows came from ``previous`` (or ``seeds``)
    seeded: int = 0  # of those, the sources whose rows came from ``seeds``
    problems: list[Problem] = field(default_factory=list)
    # each source's problems by (source, stamp) (("", ""): the files the index could not read), kept in the
    # timeline file and reused with the source's rows
    source_problems: dict[tuple[str, str], list[Problem]] = field(default_factory=dict)


def step_rows(run: Run, schemes: Mapping[str, CreditConfig], source: StepSource | None = None) -> Iterator[dict]:
    """The rows of every step of ``run`` (a run of one step when it says none: step 0) under every scheme."""
    for step in run.steps or [None]:
        part = run.step_run(step) if step is not None else run
        if not part.trajectories:
            continue
        batch = part.to_batch(share_memory=True)
        has = RunHas.of(batch)
        for name, asked in schemes.items():
            row = {
                "step": step if step is not None else 0,
                "scheme": name,
                "scheme_key": scheme_key(asked),
                "source": source.key if source else "",
                "stamp": source.stamp_text if source else "",
                "error": "",
                "notes": "",
            }
            cfg, fixes = runnable(asked, has)
            row["notes"] = "; ".join(f"{f.field}: {f.asked} → {f.used} ({f.why})" for f in fixes)
            try:
                result = compute_credit(batch, cfg, token_extras=False)
                findings = run_lints(batch, cfg, result, part, checks=TIMELINE_CHECKS)
                logged = logged_advantages(LintContext(batch=batch, cfg=cfg, result=result, run=part))
                row |= step_row(StepView(batch, result, findings, logged))
            except ValueError as e:  # the scheme cannot run on this step: say why, keep the others
                row |= {"error": str(e), "trajectories": batch.batch_size}
            yield row


def timeline_rows(
    path: str | Path,
    schemes: Mapping[str, CreditConfig],
    previous: list[dict] | None = None,
    progress: Progress | None = None,
    fmt: str | None = None,
    settle_s: float = SETTLE_S,
    detect: Callable[[Path], str] | None = None,
    runner: Runner | None = None,
    previous_problems: Mapping[tuple[str, str], list[Problem]] | None = None,
    seeds: Callable[[], tuple[list[dict], Mapping]] | None = None,
    **load_kwargs,
) -> Timeline:
    """The timeline of the run at ``path`` under ``schemes`` ({name: config}), reusing ``previous`` rows whose
    (source, stamp, scheme key) are unchanged. ``progress(fraction, message)`` after each source; ``settle_s`` and
    ``detect`` as ``index_steps`` takes them. ``runner``: what computes the sources the cache lacks (default
    ``run_here``, one after the other in this process; ``engine.timeline.raydata`` runs them on a Ray cluster): the rows
    are the same, whatever order its parts come back in. ``previous_problems``: the problems of ``previous``'s
    sources by (source, stamp), reported again with the rows they come with. ``seeds()``: more (rows, problems) of
    the same kind (a timeline a job wrote), asked for once, at the first source ``previous`` lacks."""
    index = index_steps(path, fmt, settle_s, detect)
    keys = {name: scheme_key(cfg) for name, cfg in schemes.items()}
    cached, kept = rows_by_key(previous or []), dict(previous_problems or {})
    seeded: dict | None = None
    out = Timeline(index=index)
    out.source_problems["", ""] = index.skipped()  # the files the index could not read, first
    report = progress or (lambda fraction, message: None)
    total = max(len(index.sources), 1)
    todo = []
    for src in index.sources:
        hits = [cached.get((src.key, src.stamp_text, keys[name])) for name in schemes]
        if not all(hits) and seeds is not None:
            if seeded is None:  # the first miss: read the seeds, once
                more, more_kept = seeds()
                seeded, kept = rows_by_key(more), dict(more_kept) | kept
            more_hits = [seeded.get((src.key, src.stamp_text, keys[name])) for name in schemes]
            hits = [h or m for h, m in zip(hits, more_hits, strict=True)]
            out.seeded += all(hits)
        if all(hits):
            out.rows += [dict(r, scheme=name) for name, rows in zip(schemes, hits, strict=True) for r in rows]
            out.source_problems[src.key, src.stamp_text] = list(kept.get((src.key, src.stamp_text), []))
            out.reused += 1
        else:
            todo.append(src)
    for n, part in enumerate((runner or run_here)(StepJob(index.root, fmt, load_kwargs), todo, schemes)):
        out.rows += part.rows
        out.source_problems[part.source, part.stamp] = part.problems
        out.computed += 1
        report((out.reused + n + 1) / total, f"step {part.label}: {out.reused + n + 1} of {total}")
    out.problems = [p for key in sorted(out.source_problems) for p in out.source_problems[key]]
    sort_rows(out.rows, schemes)
    return out


def rows_by_key(rows: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    """Timeline rows by (source, stamp, scheme key): a source's rows under one scheme (one per step it holds)."""
    out: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        out.setdefault((row["source"], row["stamp"], row["scheme_key"]), []).append(row)
    return out


def sort_rows(rows: list[dict], schemes: Mapping[str, CreditConfig]) -> None:
    """Timeline order, in place: step, then the schemes' order, then source (whoever computed the rows)."""
    order = {name: i for i, name in enumerate(schemes)}
    rows.sort(key=lambda r: (r["step"], order.get(r["scheme"], len(order)), r["source"]))


@dataclass(frozen=True)
class StepJob:
    """What every step source of one run is read with: the run's root (a folder, or one file), the format (None:
    detected) and ``load_run``'s other options. Plain data: a Ray worker receives it pickled."""

    root: Path
    fmt: str | None = None
    load_kwargs: Mapping = field(default_factory=dict)

    def load(self, src: StepSource):
        """``load_run`` of ``src``'s files alone (a file gone since the index listed it: ``load_run`` says so)."""
        if self.root.is_dir():
            return load_run(self.root, fmt=self.fmt, files=src.files, **self.load_kwargs)
        return load_run(src.files[0], fmt=self.fmt, **self.load_kwargs)


@dataclass
class SourcePart:
    """What one step source gives: its rows (timeline rows, or token tables) and its load problems; ``label``
    names the source in progress messages (its step, or its file); ``source`` and ``stamp`` are its key and stamp."""

    label: str = ""
    source: str = ""
    stamp: str = ""
    rows: list = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @classmethod
    def of(cls, src: StepSource, why: str | None = None) -> SourcePart:
        """An empty part of ``src``; with ``why``, one problem naming its files (nothing of it could be computed)."""
        part = cls(str(src.step) if src.step is not None else src.key, src.key, src.stamp_text)
        if why is not None:
            part.problems.append(source_problem(src, why))
        return part


def source_problem(src: StepSource, why: str) -> Problem:
    """A problem with a whole step source: it names the source's files."""
    return Problem(", ".join(str(f) for f in src.files), None, None, why)


def run_here(job: StepJob, sources: list[StepSource], schemes: Mapping[str, CreditConfig]) -> Iterator[SourcePart]:
    """The timeline's default runner: each source in turn, in this process."""
    for src in sources:
        yield source_timeline(job, src, schemes)


def source_timeline(job: StepJob, src: StepSource, schemes: Mapping[str, CreditConfig]) -> SourcePart:
    """The timeline rows of one step source under ``schemes``: load its files, compute each of its steps, let go.
    The one function the single-process timeline and a Ray job both run on every source."""
    return guarded(src, lambda run: list(step_rows(run, schemes, src)), job)


def guarded(src: StepSource, work: Callable[[Run], list], job: StepJob) -> SourcePart:
    """Load ``src`` and run ``work`` on its run, memory released before and after. Whatever the load or the work
    raises besides a scheme's refusal (a file gone meanwhile, a reader's or the engine's error, memory) is a
    problem naming the source's files, not a failed run: the other steps go on."""
    part = SourcePart.of(src)
    try:
        res = job.load(src)
        release_free_memory()  # the file's decode buffers, before the batch is built
        part.problems += res.problems
        part.rows = work(res.run)
        del res
    except Exception as e:  # any failure of one step source is reported, the run goes on
        part.problems.append(source_problem(src, f"could not be computed ({type(e).__name__}: {e}); step skipped"))
    release_free_memory()  # the step's decode buffers and tensors: the next step starts from the same floor
    return part
