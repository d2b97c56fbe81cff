"""``load_run`` / ``save_run``: the one entry point from files to a validated ``Run``.

Pipeline per file: detect the format (or take ``fmt``) -> the adapter streams trajectories, reporting bad records ->
in chunks, fill token ids / texts with the tokenizer -> make free metadata JSON (``jsonable``, noted) -> validate
each trajectory -> drop duplicates of an id already loaded (reported) -> ``Run``. Then trajectories lacking
log-probs/values that others have are reported. Segments for which a file gave both text and token ids are checked
to agree (``text_mismatches``: a note, the record is kept). A directory loads every data file in it (sorted,
suffixes in any case), as one run; every other entry but hidden files and documentation is named by a problem
(``folder_entries``: subfolders, compressed files, files of other kinds), and a file that cannot be read (whatever
it raises) is skipped whole with a problem naming it while the others load. Compressed files are refused by their
content, not their name.
A symbolic link inside a folder (to a file or a folder) is not followed: it could lead out of the run, anywhere on
the machine; it is named by a problem with where it points, and loads when the user names it (``load_run(link)``).
A prime-rl ``token_exports`` folder reads the ``rank_R.jsonl`` files of its ``step_N`` folders too; the ``STABLE``
markers beside them are not data and not reported (``adapters.prime_rl_tokens``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.io.adapters import ADAPTERS, get_adapter, prime_rl_tokens
from engine.io.data.batching import missing_field_problems
from engine.io.data.logged import logged_length_mismatch
from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.io.detect import NotRollouts, detect
from engine.io.reading.context import DEFAULT_MAX_RECORD_BYTES, LoadContext
from engine.io.reading.jsonable import plain
from engine.io.reading.problems import Problem, ProblemLog, RecordError, no_progress
from engine.io.reading.steps import PathStep, StepCheck, match_step, path_step
from engine.io.reading.validate import text_mismatches, validate_trajectory
from engine.io.text.tokenize import (
    canonical_name,
    fill_tokens,
    get_tokenizer,
    known_vocab_size,
    needs_tokenizer,
    vocab_size,
)

# What a folder load reads, suffixes in any case (pickles: refused with a message; .pth: torch.save's zip)
DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".pt", ".pth", ".npz", ".yaml", ".yml", ".pkl", ".pickle")
# Compressed files are not read (reported; a folder load skips them with a problem): gzip, bzip2, xz, zstd.
COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
# Files a folder load passes over without a word: hidden files and a data folder's documentation.
DOC_SUFFIXES = (".md", ".txt", ".rst")
DOC_STEMS = ("readme", "license", "licence", "copying", "notice", "source")
CHUNK = 512
TEXT_NOTES_PER_FILE = 20  # segments whose token ids and text disagree, noted one by one; then one count


def step_depth(folder: Path) -> int | None:
    """How many folder levels a trainer writes inside a step folder named like ``folder`` (the most any format
    whose ``step_folder`` matches it says: prime-rl's ``step_N/train/effective/`` is 2, most are 0); None when no
    format names a step folder so."""
    depths = [a.step_depth for a in ADAPTERS.values() if match_step(a.step_folder, folder.name) is not None]
    return max(depths) if depths else None


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
    return folder_entries(path)[0] if path.is_dir() else [path]


def is_data_name(name: str) -> bool:
    """Whether a folder load reads a file of this name (its suffix, in any case: ``RUN.JSONL`` too)."""
    return name.lower().endswith(DATA_SUFFIXES)


def is_doc_name(name: str) -> bool:
    """Hidden files and documentation (README, LICENSE, ``*.md``, ``*.txt``): skipped without a problem."""
    low = name.lower()
    return low.startswith(".") or low.endswith(DOC_SUFFIXES) or low.split(".", 1)[0] in DOC_STEMS


def folder_entries(folder: Path, inside: int = 0) -> tuple[list[Path], list[tuple[Path, str, str]]]:
    """(data files read, [(entry, why it is not read, scope)]) of a folder, sorted by name. Every entry but hidden
    files and documentation is one or the other: a subfolder, a compressed file or a file of another kind is
    named with its reason, never passed over silently, and so is a symbolic link (not followed: ``link_reason``).
    ``scope`` is ``"record"`` for a file that may hold rollouts the load cannot read (compressed, not a regular
    file, a link) and ``"run"`` for what a folder load does not
    read by design (subfolders, files of other kinds). A subfolder named as some trainer names a step's folder
    (``step_12``, ``train_step_3_epoch_0``, AReaL's ``<version>``: ``Adapter.step_folder``) is read too, and so are
    the folders its trainer writes inside it (``step_depth``): a run folder of step folders is one run. ``inside``:
    how many levels of subfolders ``folder`` itself may hold (it is, or is inside, a step folder).
    ``ValueError`` if the folder cannot be listed."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        raise ValueError(f"{folder}: cannot list this folder ({type(e).__name__}: {e.strerror or e})") from None
    files: list[Path] = []
    skipped: list[tuple[Path, str, str]] = []
    for p in entries:
        if p.is_symlink() and not p.name.startswith("."):
            if is_data_name(p.name) or not is_doc_name(p.name):
                skipped.append((p, link_reason(p), "record"))
            continue
        if p.is_dir() and not p.name.startswith("."):
            depth = inside - 1 if inside > 0 else step_depth(p)
            if depth is not None:
                more, skip = folder_entries(p, depth)
                files += more
                skipped += skip
            else:
                reason = "subfolder not read: a folder load reads the files directly in it; load it on its own"
                skipped.append((p, reason, "run"))
            continue
        if p.is_dir():
            continue
        data = is_data_name(p.name) and not p.name.startswith(".")  # readme.jsonl is data, .hidden.jsonl is not
        if not data and (is_doc_name(p.name) or prime_rl_tokens.is_marker(p)):
            continue
        if not p.is_file():
            skipped.append((p, "skipped: not a regular file (a broken link, a pipe or a device)", "record"))
        elif data:
            files.append(p)
        elif p.name.lower().endswith(COMPRESSED_SUFFIXES):
            skipped.append((p, "skipped: compressed files are not read; decompress it first (e.g. gunzip)", "record"))
        else:
            skipped.append((p, f"skipped: not a data file (a folder load reads {', '.join(DATA_SUFFIXES)})", "run"))
    return files, skipped


def link_reason(link: Path) -> str:
    """Why a folder load does not read the symbolic link ``link``: it may lead anywhere (out of the run, to
    ``/etc/passwd``), so only a path the user names is followed."""
    try:
        target = os.readlink(link)
    except OSError as e:
        target = f"unreadable: {e.strerror or e}"
    return f"skipped: a symbolic link (to {target}), not followed in a folder load; name it to load it"


def compression(file: Path) -> str | None:
    """The compression a file's first bytes show (``"gzip"``, ...), or None."""
    with open(file, "rb") as f:
        head = f.read(6)
    return next((kind for magic, kind in COMPRESSED.items() if head.startswith(magic)), None)


def _ours(err: BaseException) -> bool:
    """A ``ValueError`` the loader raised itself (its message names the file and says what is wrong)."""
    return type(err) is ValueError or (isinstance(err, ValueError) and type(err).__module__.startswith("engine."))


def _read_error(err: BaseException) -> str:
    """What went wrong reading a file: a ``ValueError`` of ours says it itself; anything else (``OSError``,
    ``BadZipFile``, ``RecursionError``, a library's own error) by its type and message."""
    if _ours(err):
        return str(err)
    if isinstance(err, MemoryError):  # the budgets (engine.io.reading.budgets, limits) exist to make this unreachable
        return (
            "cannot read this file (MemoryError): it ran out of memory in a structure no budget bounds, a CreditLens "
            "bug worth reporting; the memory it took is freed"
        )
    detail = (err.strerror if isinstance(err, OSError) else None) or str(err)
    return (
        f"cannot read this file ({type(err).__name__}: {detail})"
        if detail
        else f"cannot read this file ({type(err).__name__})"
    )


def _file_error(file: Path, err: BaseException) -> str:
    """``_read_error`` naming ``file`` (unless it does already): the message of a single-file load's ValueError."""
    text = _read_error(err)
    return text if str(file) in text else f"{file}: {text}"


def load_run(
    path: str | Path,
    fmt: str | None = None,
    tokenizer: str | None = None,
    strict: bool = False,
    progress: Callable[[float, str], None] | None = None,
    max_bytes: int | None = None,
    response_length: int | None = None,
    tokenizer_roots: Sequence[str | Path] | None = None,
    files: Sequence[str | Path] | None = None,
) -> LoadResult:
    """Load a run from ``path`` (file or directory) in format ``fmt`` (detected from content when None).

    ``tokenizer``: Hugging Face name or path for text that needs tokenizing and for display (default: the
    file's own tokenizer if it names one, else offline Qwen2.5). ``strict``: raise ``ValueError`` on the first
    problem. ``progress(fraction, message)`` is called while reading. ``max_bytes`` caps one record (default
    16 MiB). ``response_length``: the trainer's response length limit (verl ``data.max_response_length``); formats
    that drop the end-of-turn token (verl's rollout dump) use it to flag rows cut at the limit as truncated.
    ``tokenizer_roots``: the folders tokenizer files may be read from (the dashboard: ``sample_runs/`` and the
    data directory); a tokenizer path outside them, the caller's or one a file's header names, is refused without
    opening it (``engine.io.text.tokenize.allowed_tokenizer``). None (the command line): any path.
    ``files``: with a folder ``path``, read only these of its data files (one step of a run folder: the steps of
    the files are read as in a load of the whole folder; what else the folder holds is not reported). One of them
    gone since it was listed is a problem; all of them gone, ``FileNotFoundError``.
    Raises ``ValueError`` for an unknown/undetectable format (in a directory such a file is reported
    as a problem and skipped), ``FileNotFoundError`` for a missing path.
    Whatever else a reader raises on a file (a damaged zip, permission denied, a file gone meanwhile, a library's
    RecursionError) is a ``ValueError`` naming the file too, or in a directory a problem: that file is skipped
    whole and the others load.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    roots = None if tokenizer_roots is None else tuple(Path(r) for r in tokenizer_roots)
    if tokenizer is not None:
        from engine.io.text.tokenize import allowed_tokenizer

        tokenizer = allowed_tokenizer(tokenizer, roots, path if path.is_dir() else path.parent)
        get_tokenizer(tokenizer)  # fail fast on a tokenizer that cannot be loaded offline
    if not path.is_dir() and not path.is_file():  # a pipe would block the first read forever
        raise ValueError(f"{path}: not a regular file (a pipe or a device)")
    only = files
    start = (step_depth(path) or 0) if path.is_dir() else 0  # a step folder opened on its own: its inside too
    files, skipped = folder_entries(path, start) if path.is_dir() else ([path], [])
    if only is not None and path.is_dir():
        wanted = {Path(f) for f in only}
        gone = sorted(f for f in wanted - set(files) if not f.exists())
        files = [f for f in files if f in wanted]
        if gone and not files:
            raise FileNotFoundError(f"{', '.join(map(str, gone))}: no longer there (asked for by name)")
        skipped = [(f, "no longer there (asked for by name); not read", "record") for f in gone]
    if not files:
        why = "".join(f"; {p.name}: {reason}" for p, reason, _ in skipped[:5])
        raise ValueError(f"{path}: no data files ({', '.join(DATA_SUFFIXES)}) in this directory{why}")
    log = ProblemLog(strict=strict)
    for entry, reason, scope in skipped:
        if scope == "record":
            log.add(str(entry), None, None, reason)
        else:
            log.note(str(entry), None, reason)
    report = progress or no_progress
    trajectories: list[Trajectory] = []
    lines: list[tuple[int | None, str]] = []  # each trajectory's (line, field prefix) in its file, for step problems
    seen: set[tuple[int | None, str]] = set()
    infos = []
    steps = StepCheck(log)
    root = path if path.is_dir() else None
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
        kept = len(trajectories)
        try:
            info = _load_file(file, fmt, tokenizer, ctx, seen, trajectories, lines, root)
            infos.append(info)
            steps.assign(file, trajectories[kept:], info["path_step"], lines[kept:])
        except OutsideBatch as e:
            log.note(str(file), None, str(e))
        except NotRollouts as e:
            if not path.is_dir():
                raise ValueError(f"{file}: {e}") from None
            log.add(str(file), None, None, str(e))
        except Exception as e:  # noqa: BLE001 - whatever one file raises, the load goes on (or says which file)
            if _ours(e) and (strict or not path.is_dir()):
                raise  # the first problem ("file:line: field: reason"), or the file's own ValueError
            if not path.is_dir() or strict:
                raise ValueError(_file_error(file, e)) from None
            for traj in trajectories[kept:]:  # a file that failed half-way is skipped whole
                seen.discard(_identity(traj, ctx))
            del trajectories[kept:]
            del lines[kept:]
            log.add(str(file), None, None, f"{_read_error(e).removeprefix(f'{file}: ')}; file skipped")
    trajectories = steps.resolve(trajectories)
    for problem in missing_field_problems(trajectories, str(path)):
        log.add(problem.file, problem.line, problem.field, problem.reason)
    if reason := degenerate_groups(trajectories):
        log.note(str(path), "group_id", reason)
    if reason := logged_length_mismatch(trajectories):
        log.note(str(path), "metadata.logged_advantages", reason)
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


def _load_file(
    file: Path,
    fmt,
    tokenizer,
    ctx: LoadContext,
    seen: set[tuple[int | None, str]],
    out: list[Trajectory],
    lines: list[tuple[int | None, str]],
    root: Path | None,
) -> dict:
    """Stream one file through its adapter into ``out`` (each one's (line, prefix) into ``lines``); returns what the
    file said about its run. ``root``: the folder the run was opened at (None: a single file), for the path's step."""
    if kind := compression(file):
        raise ValueError(f"{file}: {kind}-compressed; CreditLens does not read compressed files: decompress it first")
    if fmt is None:
        found = detect(file, ctx.max_bytes)
        name = found.name
        if found.note:
            ctx.note(None, found.note)
    else:
        name = fmt
    adapter = get_adapter(name)
    found = path_step(file, adapter.step_file, adapter.step_folder, root)
    ctx.path_step = found.step
    if root is not None and (why := outside_batch(file, adapter, found, root)):
        raise OutsideBatch(why)
    items = adapter.read(file, ctx)
    texts = _TextCheck(ctx)
    # strict: validate each record before reading the next, so the error is the first bad record in the file
    for chunk in _chunks(items, 1 if ctx.log.strict else CHUNK):
        _accept(chunk, tokenizer or ctx.run_tokenizer, ctx, seen, out, texts, lines)
    texts.close()
    for key in list(ctx.run_metadata):
        try:
            ctx.run_metadata[key] = _plain_metadata(ctx.run_metadata[key], f"metadata.{key}", ctx, None, "")
        except RecordError as err:
            del ctx.run_metadata[key]
            ctx.problem(None, err.field, f"{err.reason}; this entry of the run's metadata is ignored")
    return {
        "source": name,
        "tokenizer": canonical_name(tokenizer or ctx.run_tokenizer),
        "name": ctx.run_name or file.stem,
        "metadata": ctx.run_metadata,
        "path_step": found,
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


class _TextCheck:
    """Notes for segments whose file gave both text and token ids that disagree (``validate.text_mismatches``):
    the first ``TEXT_NOTES_PER_FILE`` one by one (line, ``segments[j].text``), then one note with the count."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx, self.count = ctx, 0

    def check(self, given: list[tuple[int | None, str, int, Segment]], tok_name: str | None) -> None:
        if not given:
            return
        for k, reason in text_mismatches([seg for *_, seg in given], tok_name):
            self.count += 1
            if self.count <= TEXT_NOTES_PER_FILE:
                line, prefix, j, _ = given[k]
                self.ctx.note(f"{prefix}segments[{j}].text", reason, line)

    def close(self) -> None:
        if self.count > TEXT_NOTES_PER_FILE:
            more = self.count - TEXT_NOTES_PER_FILE
            self.ctx.note(
                "segments.text",
                f"{more:,} more segments' token ids decode to other text than theirs (kept as loaded; {self.count:,} "
                "in all): is the run's tokenizer the one that made the ids?",
            )


def _accept(
    chunk,
    tok_name: str | None,
    ctx: LoadContext,
    seen: set[tuple[int | None, str]],
    out: list[Trajectory],
    texts: _TextCheck,
    lines: list[tuple[int | None, str]],
) -> None:
    """Tokenize, validate and de-duplicate one chunk of adapter items, appending the good ones to ``out``.

    The tokenizer is only loaded when something needs it (text without ids, ids without text, or a vocabulary
    size we do not know), so native files with token ids load without it. Segments for which the file gave both
    text and token ids are checked to agree (``texts``: reported, kept as loaded).
    """
    trajs = [t for _, _, t in chunk]
    both = {
        id(t): [j for j, s in enumerate(t.segments) if s.text is not None and s.token_ids is not None] for t in trajs
    }
    if needs_tokenizer(trajs):
        ctx.check_tokenizable(chunk)
        fill_tokens(trajs, get_tokenizer(tok_name))
    vocab = known_vocab_size(tok_name)
    if vocab is None:
        vocab = vocab_size(get_tokenizer(tok_name))
    given = []
    for line, prefix, traj in chunk:
        try:
            traj.metadata = _plain_metadata(traj.metadata, "metadata", ctx, line, prefix)
            validate_trajectory(traj, vocab)
        except RecordError as err:
            ctx.log.add_error(ctx.file, line, err, f"{prefix}" if prefix else "")
            continue
        if (key := _identity(traj, ctx)) in seen:
            where = "" if key[0] is None else f" in step {key[0]}"
            reason = f"duplicate trajectory id {traj.id!r}{where}; this record is skipped"
            ctx.log.add(ctx.file, line, f"{prefix}id", reason)
            continue
        seen.add(key)
        out.append(traj)
        lines.append((line, prefix or ""))
        given += [(line, prefix, j, traj.segments[j]) for j in both[id(traj)]]
    texts.check(given, tok_name)


def _plain_metadata(value: object, field_: str, ctx: LoadContext, line: int | None, prefix: str) -> object:
    """``value`` (free metadata) with what is not JSON converted (``jsonable.plain``); each kind of conversion of a
    field is noted once per file, at the first record that needed it. ``RecordError`` for what cannot be."""
    value, changes = plain(value, field_)
    for c in changes:
        reason = f"{c.reason}; so in every record of this file that holds one"
        ctx.note(f"{prefix}{c.field}", reason, line, once=f"{ctx.file}\0{c.field}\0{c.kind}")
    return value


class OutsideBatch(ValueError):
    """A file a step folder holds beside the step's training batch (``Adapter.step_member``): a folder load leaves
    it out, noted."""


def outside_batch(file: Path, adapter, found: PathStep, root: Path) -> str | None:
    """Why a folder load at ``root`` leaves ``file`` out: it sits in a step folder of its format (``found.folder``,
    at or below ``root``) but is not where that folder holds the step's training batch (prime-rl's ``train/all`` and
    ``eval`` subsets). None to read it."""
    folder = found.folder
    if adapter.step_member is None or folder is None or not (folder == root or root in folder.parents):
        return None
    inside = file.relative_to(folder).as_posix()
    if adapter.step_member.fullmatch(inside):
        return None
    return (
        f"not read: {inside} is not the training batch of {folder.name} (a {adapter.name} step folder holds it "
        "elsewhere, e.g. prime-rl's train/effective); open this file on its own to see it"
    )


def _identity(traj: Trajectory, ctx: LoadContext) -> tuple[int | None, str]:
    """What makes a trajectory one: its id within its step (the same id in two steps is two rollouts)."""
    return (traj.step if traj.step is not None else ctx.path_step, traj.id)


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
    from engine.io.store.native import header_record, write_native_jsonl
    from engine.io.store.native_parquet import write_native_parquet

    path = Path(path)
    header = header_record(name, source, tokenizer, metadata)
    if path.suffix == ".parquet":
        write_native_parquet(trajectories, header, path)
    elif path.suffix in (".jsonl", ".json"):
        write_native_jsonl(trajectories, header, path)
    else:
        raise ValueError(f"save_run: unknown suffix {path.suffix!r}; use .jsonl or .parquet")
