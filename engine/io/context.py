"""What an adapter gets while it reads one file: where problems go, the progress callback, size limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
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
    finished row from a cut one). ``tokenizer_roots``: the folders a tokenizer the file names may be read from
    (None: any path; see ``set_run_tokenizer``); ``refused_tokenizer`` the name the file gave when it was refused.
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
    tokenizer_roots: tuple[Path, ...] | None = None
    refused_tokenizer: str | None = None

    def problem(self, line: int | None, field_: str | None, reason: str) -> None:
        self.log.add(self.file, line, field_, reason)

    def set_run_tokenizer(self, name: str, line: int | None, field_: str) -> None:
        """Take the tokenizer the file names (``field_`` at ``line``) as the run's. Under ``tokenizer_roots`` a name
        that is neither built-in nor a ``tokenizer.json`` inside a root is refused without opening it: a problem
        here, the run keeps its token ids and shows their text with the default tokenizer, and text without token
        ids makes the file refused (``check_tokenizable``). A caller's ``tokenizer`` overrides the file's: then the
        file's is not read at all and not checked."""
        from engine.io.tokenize import DEFAULT_TOKENIZER, TokenizerRefused, allowed_tokenizer

        if self.tokenizer is None and self.tokenizer_roots is not None:
            try:
                name = allowed_tokenizer(name, self.tokenizer_roots, Path(self.file).parent)
            except TokenizerRefused as e:
                self.refused_tokenizer = name
                self.problem(
                    line,
                    field_,
                    f"{e}; token ids are kept and shown as {DEFAULT_TOKENIZER} text, and records with text but no "
                    "token ids cannot be loaded",
                )
                return
        self.run_tokenizer = name

    def check_tokenizable(self, items: list) -> None:
        """``ValueError`` refusing this file when ``items`` (``(line, prefix, trajectory)``) hold text to tokenize
        while the file's tokenizer was refused: another tokenizer could silently give other token ids."""
        if self.refused_tokenizer is None:
            return
        for line, prefix, traj in items:
            for j, seg in enumerate(traj.segments):
                if seg.token_ids is None and seg.text is not None:
                    where = f"line {line}" if line is not None else prefix.rstrip(".")
                    raise ValueError(
                        f"{self.file}: {where}: {prefix}segments[{j}] has text but no token_ids, and the file's "
                        f"tokenizer {self.refused_tokenizer!r} was refused (not one a server-side load may read); "
                        "tokenizing with another tokenizer could give other ids than the trainer's, so the file is "
                        "not loaded"
                    )

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
