"""What an adapter gets while it reads one file: where problems go, the progress callback, size limits."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from engine.io.reading.problems import (
    UNFORESEEN,
    ProblemLog,
    ProgressFn,
    RecordError,
    StrictStop,
    malformed,
    no_progress,
)

T = TypeVar("T")

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024  # one JSONL line / one JSON document; larger ones become problems

# The memory ceiling of one load (``$CREDITLENS_MAX_LOAD_MB``, MiB): what loading one file may take. The binary
# readers (.npz / .pt zip archives, npy arrays, Parquet row groups, sparse tensors made dense) hold the sizes a
# file DECLARES against it before anything is decompressed, at two measured costs: decoded data is held about
# twice (Arrow / npy buffers and the arrays made from them), and each token costs about 48 bytes once loaded (the
# 50,000 x 1,000-token native Parquet run, 218 MiB on disk, declares 0.85 GiB and 45 M tokens and peaks at
# 1.9 GiB while loading; a verl .npz dump takes 46 bytes a token). The default, 4 GiB, lets that run load with
# room to spare and refuses a 4 MB upload of deflated zeros that declares 4 GiB.
DEFAULT_MAX_LOAD_MB = 4096
MAX_LOAD_MB_ENV = "CREDITLENS_MAX_LOAD_MB"
DECODE_FACTOR = 2  # bytes of memory per declared decoded byte
TOKEN_BYTES = 48  # bytes of memory per loaded token


def max_load_bytes() -> int:
    """The load ceiling in bytes: ``$CREDITLENS_MAX_LOAD_MB`` (MiB) if set, else ``DEFAULT_MAX_LOAD_MB``."""
    raw = os.environ.get(MAX_LOAD_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_LOAD_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not 0 < mb < float("inf"):
        raise ValueError(f"{MAX_LOAD_MB_ENV}={raw!r}: expected a positive number of MiB")
    return int(mb * 2**20)


def mib(n: int) -> str:
    """``n`` bytes as MiB for messages (``4,096.0 MiB``)."""
    return f"{n / 2**20:,.1f} MiB"


@dataclass
class LoadContext:
    """Per-file loading state shared by the reader, the adapter and the pipeline.

    ``max_bytes`` caps one record (a JSONL line, a whole JSON document). Adapters may set ``run_name``,
    ``run_tokenizer`` and ``run_metadata`` when the file says so (the native header line does). ``tokenizer`` is
    the name the caller asked for (None: the file's own or the default); ``response_length`` the trainer's
    response length limit when the caller knows it (formats that drop the end-of-turn token need it to tell a
    finished row from a cut one). ``tokenizer_roots``: the folders a tokenizer the file names may be read from
    (None: any path; see ``set_run_tokenizer``); ``refused_tokenizer`` the name the file gave when it was refused.
    ``path_step``: the training step the file's name or folder gives (``engine.io.reading.steps``), for records that
    state none; None when the path says none.
    """

    file: str
    log: ProblemLog
    progress: ProgressFn = no_progress
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES
    dense_bytes: int = 0  # this file's tensors' bytes made dense / float32 so far (held against limits.decoded_limit)
    tokenizer: str | None = None
    response_length: int | None = None
    run_name: str | None = None
    run_tokenizer: str | None = None
    run_metadata: dict = field(default_factory=dict)
    tokenizer_roots: tuple[Path, ...] | None = None
    refused_tokenizer: str | None = None
    path_step: int | None = None

    def problem(self, line: int | None, field_: str | None, reason: str) -> None:
        self.log.add(self.file, line, field_, reason)

    def set_run_tokenizer(self, name: str, line: int | None, field_: str) -> None:
        """Take the tokenizer the file names (``field_`` at ``line``) as the run's. Under ``tokenizer_roots`` a name
        that is neither built-in nor a ``tokenizer.json`` inside a root is refused without opening it: a problem
        here, the run keeps its token ids and shows their text with the default tokenizer, and text without token
        ids makes the file refused (``check_tokenizable``). A caller's ``tokenizer`` overrides the file's: then the
        file's is not read at all and not checked."""
        from engine.io.text.tokenize import DEFAULT_TOKENIZER, TokenizerRefused, allowed_tokenizer

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
        except StrictStop:
            raise
        except UNFORESEEN as err:
            self.log.add_error(self.file, line, malformed(err), prefix)
        return None
