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
    reused: int = 0  # step sources whose rows came from ``previous``
    problems: list[Problem] = field(default_factory=list)


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
    **load_kwargs,
) -> Timeline:
    """The timeline of the run at ``path`` under ``schemes`` ({name: config}), reusing ``previous`` rows whose
    (source, stamp, scheme key) are unchanged. ``progress(fraction, message)`` after each source; ``settle_s`` and
    ``detect`` as ``index_steps`` takes them."""
    index = index_steps(path, fmt, settle_s, detect)
    keys = {name: scheme_key(cfg) for name, cfg in schemes.items()}
    cached: dict[tuple[str, str, str], list[dict]] = {}
    for row in previous or []:
        cached.setdefault((row["source"], row["stamp"], row["scheme_key"]), []).append(row)
    out = Timeline(index=index)
    out.problems += [Problem(str(file), None, None, f"{why}; file skipped") for file, why in index.unreadable]
    report = progress or (lambda fraction, message: None)
    total = max(len(index.sources), 1)
    for n, src in enumerate(index.sources):
        hits = [cached.get((src.key, src.stamp_text, keys[name])) for name in schemes]
        if all(hits):
            out.rows += [dict(r, scheme=name) for name, rows in zip(schemes, hits, strict=True) for r in rows]
            out.reused += 1
        else:
            res = _load(index, src, fmt, load_kwargs)
            release_free_memory()  # the file's decode buffers, before the batch is built
            out.problems += res.problems
            out.rows += list(step_rows(res.run, schemes, src))
            out.computed += 1
            del res
            release_free_memory()  # the step's decode buffers and tensors: the next step starts from the same floor
        report((n + 1) / total, f"step {src.step if src.step is not None else src.key}: {n + 1} of {total}")
    order = {name: i for i, name in enumerate(schemes)}
    out.rows.sort(key=lambda r: (r["step"], order.get(r["scheme"], len(order)), r["source"]))
    return out


def _load(index: StepIndex, src: StepSource, fmt: str | None, load_kwargs: dict):
    if index.root.is_dir():
        return load_run(index.root, fmt=fmt, files=src.files, **load_kwargs)
    return load_run(src.files[0], fmt=fmt, **load_kwargs)
