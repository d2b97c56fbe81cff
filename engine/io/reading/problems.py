"""Load problems: what went wrong with which record, collected instead of crashing the load.

A loader never crashes on a bad record and never drops one silently: every record it cannot use becomes a
``Problem`` (file, line, field, reason) next to the good trajectories. ``strict=True`` turns the first problem
into a ``ValueError`` whose message carries the same ``file:line`` and field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input.

    ``file`` is the path as given, ``line`` the 1-based line of a JSONL record (``None`` for whole-file or
    non-line formats; tensor dumps use the row index in ``field``), ``field`` a dotted path into the record
    (``segments[2].log_probs``) or ``None``, ``reason`` a sentence a person can act on. ``scope`` is ``"record"``
    for a problem with one record and ``"run"`` for what a reader had to assume or recover about the file or
    the run as a whole (a re-added end-of-turn token, groups recovered from per-row ids): nothing was skipped.
    """

    file: str
    line: int | None
    field: str | None
    reason: str
    scope: str = "record"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"


class RecordError(ValueError):
    """Raised inside an adapter for a record it cannot use; the loader turns it into a ``Problem``."""

    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


class StrictStop(ValueError):
    """The first record problem of a ``strict`` load (its message ``file:line: field: reason``): it ends the load,
    so a reader's catch-all for unanticipated failures lets it through unchanged."""


@dataclass
class ProblemLog:
    """Collects problems for one load; with ``strict`` the first record problem raises ``ValueError`` (run-scope
    notes, which skip nothing, are only listed)."""

    strict: bool = False
    problems: list[Problem] = field(default_factory=list)
    noted: set[str] = field(default_factory=set)

    def add(self, file: str, line: int | None, field_: str | None, reason: str) -> None:
        problem = Problem(str(file), line, field_, reason)
        if self.strict:
            raise StrictStop(str(problem))
        self.problems.append(problem)

    def note(
        self, file: str, field_: str | None, reason: str, line: int | None = None, once: str | None = None
    ) -> None:
        """Record what a reader assumed or recovered (``scope="run"``): listed, never raised, since no record was
        skipped. With ``once``, only the first note under that key in this load is kept."""
        if once is not None:
            if once in self.noted:
                return
            self.noted.add(once)
        self.problems.append(Problem(str(file), line, field_, reason, scope="run"))

    def add_error(self, file: str, line: int | None, err: RecordError, prefix: str = "") -> None:
        """Record a ``RecordError``; ``prefix`` (e.g. ``"[3]."``) locates records that have no line number."""
        field_ = f"{prefix}{err.field}" if err.field else (prefix.rstrip(".") or None)
        self.add(file, line, field_, err.reason)


# What converting a record of an unanticipated shape can raise; readers report it (``malformed``) and go on.
UNFORESEEN = (KeyError, IndexError, TypeError, AttributeError, ValueError, OverflowError, RecursionError)


def malformed(err: Exception) -> RecordError:
    """The problem for a record that broke a conversion in a way no check anticipated."""
    return RecordError(None, f"malformed record ({type(err).__name__}: {err})")


ProgressFn = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """Default progress callback: ignore."""
