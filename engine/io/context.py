"""What an adapter gets while it reads one file: where problems go, the progress callback, size limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from engine.io.problems import UNFORESEEN, ProblemLog, ProgressFn, RecordError, malformed, no_progress

T = TypeVar("T")

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024  # one JSONL line / one JSON document; larger ones become problems


@dataclass
class LoadContext:
    """Per-file loading state shared by the reader, the adapter and the pipeline.

    ``max_bytes`` caps one record (a JSONL line, a whole JSON document). Adapters may set ``run_name``,
    ``run_tokenizer`` and ``run_metadata`` when the file says so (the native header line does). ``tokenizer`` is
    the name the caller asked for (None: the file's own or the default); ``response_length`` the trainer's
    response length limit when the caller knows it (formats that drop the end-of-turn token need it to tell a
    finished row from a cut one).
    """

    file: str
    log: ProblemLog
    progress: ProgressFn = no_progress
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES
    tokenizer: str | None = None
    response_length: int | None = None
    run_name: str | None = None
    run_tokenizer: str | None = None
    run_metadata: dict = field(default_factory=dict)

    def problem(self, line: int | None, field_: str | None, reason: str) -> None:
        self.log.add(self.file, line, field_, reason)

    def note(self, field_: str | None, reason: str, line: int | None = None, once: str | None = None) -> None:
        """What the reader assumed or recovered about this file (a run-scope problem; ``line`` where it was first
        seen; ``once``: a key, so that the note is made once per load)."""
        self.log.note(self.file, field_, reason, line, once)

    def attempt(self, line: int | None, prefix: str, convert: Callable[..., T], *args) -> T | None:
        """``convert(*args)``, or None when it could not use the record: its ``RecordError`` (or a failure no
        check anticipated, as a malformed record) becomes a problem at ``line`` / ``prefix``; the load goes on."""
        try:
            return convert(*args)
        except RecordError as err:
            self.log.add_error(self.file, line, err, prefix)
        except UNFORESEEN as err:
            self.log.add_error(self.file, line, malformed(err), prefix)
        return None
