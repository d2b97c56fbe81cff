"""What an adapter gets while it reads one file: where problems go, the progress callback, size limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.io.problems import ProblemLog, ProgressFn, no_progress

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024  # one JSONL line / one JSON document; larger ones become problems


@dataclass
class LoadContext:
    """Per-file loading state shared by the reader, the adapter and the pipeline.

    ``max_bytes`` caps one record (a JSONL line, a whole JSON document). Adapters may set ``run_name``,
    ``run_tokenizer`` and ``run_metadata`` when the file says so (the native header line does). ``tokenizer`` is
    the caller's ``load_run(tokenizer=...)``, for the adapters that must count tokens while reading (SkyRL's
    per-token rewards).
    """

    file: str
    log: ProblemLog
    progress: ProgressFn = no_progress
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES
    run_name: str | None = None
    run_tokenizer: str | None = None
    run_metadata: dict = field(default_factory=dict)
    tokenizer: str | None = None

    def problem(self, line: int | None, field_: str | None, reason: str) -> None:
        self.log.add(self.file, line, field_, reason)
