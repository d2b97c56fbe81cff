"""``load_run`` / ``save_run``: the one entry point from files to a validated ``Run``.

Pipeline per file: detect the format (or take ``fmt``) -> the adapter streams trajectories, reporting bad
records -> in chunks, fill token ids / texts with the tokenizer -> validate each trajectory -> drop duplicates
of an id already loaded (reported) -> ``Run``. Then trajectories lacking log-probs/values that others have are
reported. A directory loads every data file in it (sorted), as one run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.io.adapters import get_adapter
from engine.io.batching import missing_field_problems
from engine.io.context import DEFAULT_MAX_RECORD_BYTES, LoadContext
from engine.io.detect import NotRollouts, detect_format
from engine.io.model import Trajectory
from engine.io.problems import Problem, ProblemLog, RecordError, no_progress
from engine.io.run import Run
from engine.io.tokenize import canonical_name, fill_tokens, get_tokenizer, known_vocab_size, needs_tokenizer, vocab_size
from engine.io.validate import validate_trajectory

DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".pt", ".npz", ".yaml", ".yml", ".pkl", ".pickle")  # pickles: refused
CHUNK = 512


@dataclass
class LoadResult:
    """The good trajectories as a ``Run`` plus every problem found (empty when the input was clean)."""

    run: Run
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def data_files(path: Path) -> list[Path]:
    """The file itself, or the data files of a directory (sorted, README/LICENSE etc. skipped)."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
    return [path]


def load_run(
    path: str | Path,
    fmt: str | None = None,
    tokenizer: str | None = None,
    strict: bool = False,
    progress: Callable[[float, str], None] | None = None,
    max_bytes: int | None = None,
    response_length: int | None = None,
    tokenizer_roots: Sequence[str | Path] | None = None,
) -> LoadResult:
    """Load a run from ``path`` (file or directory) in format ``fmt`` (detected from content when None).

    ``tokenizer``: Hugging Face name or path for text that needs tokenizing and for display (default: the
    file's own tokenizer if it names one, else offline Qwen2.5). ``strict``: raise ``ValueError`` on the first
    problem. ``progress(fraction, message)`` is called while reading. ``max_bytes`` caps one record (default
    16 MiB). ``response_length``: the trainer's response length limit (verl ``data.max_response_length``); formats
    that drop the end-of-turn token (verl's rollout dump) use it to flag rows cut at the limit as truncated.
    ``tokenizer_roots``: the folders tokenizer files may be read from (the dashboard: ``sample_runs/`` and the
    data directory); a tokenizer path outside them, the caller's or one a file's header names, is refused without
    opening it (``engine.io.tokenize.allowed_tokenizer``). None (the command line): any path.
    Raises ``ValueError`` for an unknown/undetectable format (in a directory such a file is reported
    as a problem and skipped), ``FileNotFoundError`` for a missing path.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    roots = None if tokenizer_roots is None else tuple(Path(r) for r in tokenizer_roots)
    if tokenizer is not None:
        from engine.io.tokenize import allowed_tokenizer

        tokenizer = allowed_tokenizer(tokenizer, roots, path if path.is_dir() else path.parent)
        get_tokenizer(tokenizer)  # fail fast on a tokenizer that cannot be loaded offline
    files = data_files(path)
    if not files:
        raise ValueError(f"{path}: no data files ({', '.join(DATA_SUFFIXES)}) in this directory")
    log = ProblemLog(strict=strict)
    report = progress or no_progress
    trajectories: list[Trajectory] = []
    seen: set[str] = set()
    infos = []
    for n, file in enumerate(files):
        ctx = LoadContext(
            file=str(file),
            log=log,
            max_bytes=max_bytes or DEFAULT_MAX_RECORD_BYTES,
            tokenizer=tokenizer,
            response_length=response_length,
            tokenizer_roots=roots,
        )
        ctx.progress = _scaled(report, n, len(files))
        try:
            infos.append(_load_file(file, fmt, tokenizer, ctx, seen, trajectories))
        except NotRollouts as e:
            if not path.is_dir():
                raise ValueError(f"{file}: {e}") from None
            log.add(str(file), None, None, str(e))
        except ValueError as e:
            if not path.is_dir() or strict:
                raise
            log.add(str(file), None, None, f"{e}; file skipped")
    for problem in missing_field_problems(trajectories, str(path)):
        log.add(problem.file, problem.line, problem.field, problem.reason)
    if reason := degenerate_groups(trajectories):
        log.note(str(path), "group_id", reason)
    report(1.0, f"loaded {len(trajectories):,} trajectories")
    return LoadResult(run=_make_run(path, infos, trajectories, log), problems=log.problems)


def degenerate_groups(trajectories: list[Trajectory]) -> str | None:
    """Why the run's groups look wrong: every trajectory alone in its group (group-relative estimators then
    see raw scores). None for a run of one trajectory, or with at least one real group."""
    if len(trajectories) < 2 or len({t.group_id for t in trajectories}) < len(trajectories):
        return None
    return (
        f"every one of the {len(trajectories):,} trajectories is alone in its group, so GRPO, RLOO and the other "
        "group-relative estimators see raw scores; if rollouts of one prompt were meant to share a group, the "
        "group field of this format did not say so (check uid / group_id)"
    )


def _load_file(file: Path, fmt, tokenizer, ctx: LoadContext, seen: set[str], out: list[Trajectory]) -> dict:
    """Stream one file through its adapter into ``out``; returns what the file said about its run."""
    name = fmt or detect_format(file, ctx.max_bytes)
    items = get_adapter(name).read(file, ctx)
    # strict: validate each record before reading the next, so the error is the first bad record in the file
    for chunk in _chunks(items, 1 if ctx.log.strict else CHUNK):
        _accept(chunk, tokenizer or ctx.run_tokenizer, ctx, seen, out)
    return {
        "source": name,
        "tokenizer": canonical_name(tokenizer or ctx.run_tokenizer),
        "name": ctx.run_name or file.stem,
        "metadata": ctx.run_metadata,
    }


def _make_run(path: Path, infos: list[dict], trajectories: list[Trajectory], log: ProblemLog) -> Run:
    """One ``Run`` from the per-file infos (a directory of several files is named after the directory)."""
    tok_names = [i["tokenizer"] for i in infos] or [canonical_name(None)]
    if len(set(tok_names)) > 1:
        reason = f"files use different tokenizers {sorted(set(tok_names))}; token texts use {tok_names[0]}"
        log.add(str(path), None, "tokenizer", reason)
    sources = list(dict.fromkeys(i["source"] for i in infos))
    metadata: dict = {}
    for info in infos:
        metadata.update(info["metadata"])
    return Run(
        trajectories=trajectories,
        name=infos[0]["name"] if len(infos) == 1 else path.name,
        source="+".join(sources),
        tokenizer=tok_names[0],
        metadata=metadata,
    )


def _accept(chunk, tok_name: str | None, ctx: LoadContext, seen: set[str], out: list[Trajectory]) -> None:
    """Tokenize, validate and de-duplicate one chunk of adapter items, appending the good ones to ``out``.

    The tokenizer is only loaded when something needs it (text without ids, ids without text, or a vocabulary
    size we do not know), so native files with token ids load without it.
    """
    trajs = [t for _, _, t in chunk]
    if needs_tokenizer(trajs):
        ctx.check_tokenizable(chunk)
        fill_tokens(trajs, get_tokenizer(tok_name))
    vocab = known_vocab_size(tok_name)
    if vocab is None:
        vocab = vocab_size(get_tokenizer(tok_name))
    for line, prefix, traj in chunk:
        try:
            validate_trajectory(traj, vocab)
        except RecordError as err:
            ctx.log.add_error(ctx.file, line, err, f"{prefix}" if prefix else "")
            continue
        if traj.id in seen:
            ctx.log.add(ctx.file, line, f"{prefix}id", f"duplicate trajectory id {traj.id!r}; this record is skipped")
            continue
        seen.add(traj.id)
        out.append(traj)


def _chunks(items: Iterable, size: int) -> Iterable[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _scaled(report, n: int, total: int):
    def inner(fraction: float, message: str) -> None:
        report((n + min(max(fraction, 0.0), 1.0)) / total, message)

    return inner


def save_run(run: Run, path: str | Path) -> None:
    """Write ``run`` in the native format: ``.jsonl`` (or ``.json``) or ``.parquet``, chosen by suffix."""
    save_trajectories(run.trajectories, path, run.name, run.source, run.tokenizer, run.metadata)


def save_trajectories(
    trajectories: Iterable[Trajectory],
    path: str | Path,
    name: str = "",
    source: str = "native",
    tokenizer: str | None = "qwen2.5",
    metadata: dict | None = None,
) -> None:
    """Write trajectories as a native run file without holding them all: ``trajectories`` may be a generator
    (``engine.io.synth.generic.iter_synth``); the header fields are those of ``Run``."""
    from engine.io.native import header_record, write_native_jsonl
    from engine.io.native_parquet import write_native_parquet

    path = Path(path)
    header = header_record(name, source, tokenizer, metadata)
    if path.suffix == ".parquet":
        write_native_parquet(trajectories, header, path)
    elif path.suffix in (".jsonl", ".json"):
        write_native_jsonl(trajectories, header, path)
    else:
        raise ValueError(f"save_run: unknown suffix {path.suffix!r}; use .jsonl or .parquet")
