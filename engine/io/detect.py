"""Format detection by content (never by file name alone); ``load_run(fmt=...)`` overrides it.

Parquet (``PAR1`` magic): by column names. Zip archives (``.pt`` from ``torch.save``, ``.npz``): slime rollout
dumps when the pickle names ``rollout_id``/``samples``/``response_length`` (bytes only), else verl tensor
dumps. A bare pickle (``DataProto.save_to_disk``, ``pickle.dump``) is refused: loading it would run code.
Anything else is read as JSON/JSONL and its records vote: each of the first ``SNIFF_RECORDS`` parseable records
goes to the first adapter whose ``sniff`` takes it, in registry order (native, nemo_gym, rllm, kgr1_eval,
kgr1_rollout_dump, verl_rollout, tagged_text, …) with those marked ``specific`` (keys only one trainer's writer
writes) first; the adapter with the most records wins, a tie going to the earlier one. So one damaged record (a
first KG-R1 result without ``prompt``, which only the generic ``tagged_text`` takes) does not decide the file.
When some records went to another format, ``detect`` says which it chose and why (``Detection.note``, a run-scope
problem of the load); otherwise it says nothing (a record no format takes is reported when the file is read).
A file whose first line starts a YAML list (``- ``) is read as YAML (OpenPipe ART's trajectory logs), of which
detection reads only the first items' outline. A file whose only record is a summary a trainer writes beside its
rollouts (rLLM's ``batch_summary.json``) raises ``NotRollouts``; a folder load reports it as "skipped: summary,
not rollouts".
"""

from __future__ import annotations

import itertools
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from engine.io.adapters import ADAPTERS, slime_rollout, summary_reason
from engine.io.reading.context import LoadContext
from engine.io.reading.problems import ProblemLog
from engine.io.reading.records import iter_json_records
from engine.io.reading.yaml_records import SNIFF_DEPTH, iter_yaml_records, looks_like_yaml_list

SNIFF_RECORDS = 16  # records that vote on a file's format: enough that a few damaged ones are outvoted
PICKLE_PROTO, PICKLE_VERSIONS = b"\x80", {bytes([v]) for v in range(2, 6)}  # pickle's PROTO opcode, protocols 2-5
YAML_READERS = ("art_yaml",)  # the adapters whose reader parses YAML


class NotRollouts(ValueError):
    """The file is something a trainer writes beside its rollouts (a batch summary): skipped, not an error."""


def parquet_columns(path: Path) -> list[str]:
    from engine.io.store.native_parquet import open_parquet

    return list(open_parquet(path).schema_arrow.names)


@dataclass(frozen=True)
class Detection:
    """The format detected for a file; ``note``: why, when some sampled records went to another (else None)."""

    name: str
    note: str | None = None


def detect_format(path: str | Path, max_bytes: int | None = None) -> str:
    """Name of the adapter that reads ``path``; ``ValueError`` with the reason if none does."""
    return detect(path, max_bytes).name


def detect(path: str | Path, max_bytes: int | None = None) -> Detection:
    """The adapter that reads ``path`` and, if the records sampled disagreed, why it won (module docstring);
    ``ValueError`` with the reason if none does."""
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        cols = parquet_columns(path)
        for a in ADAPTERS.values():
            if a.sniff_columns is not None and a.sniff_columns(cols):
                return Detection(a.name)
        raise ValueError(f"cannot detect the format of {path}: Parquet columns {cols[:12]} match no known format")
    if magic[:1] == PICKLE_PROTO and magic[1:2] in PICKLE_VERSIONS:
        from engine.io.adapters.verl_tensors import EXPORT_HINT

        raise ValueError(
            f"{path}: a Python pickle (verl's DataProto.save_to_disk writes one), which CreditLens does not load. "
            f"{EXPORT_HINT}"
        )
    if zipfile.is_zipfile(path):
        return Detection("slime_rollout" if slime_rollout.sniff_zip(path) else "verl_tensors")
    ctx = LoadContext(file=str(path), log=ProblemLog())
    if max_bytes:
        ctx.max_bytes = max_bytes
    is_yaml = looks_like_yaml_list(str(path))
    if is_yaml:  # only the first items' outline: the adapter composes the whole document once, when it reads it
        sampled = list(iter_yaml_records(str(path), ctx, first=SNIFF_RECORDS, depth=SNIFF_DEPTH))
    else:
        sampled = list(itertools.islice(iter_json_records(str(path), ctx), SNIFF_RECORDS))
    records = [rec for _, _, rec in sampled]
    why = summary_reason(records[0]) if len(records) == 1 else None
    if why:
        raise NotRollouts(f"skipped: summary, not rollouts ({why})")
    in_order = sorted(ADAPTERS.values(), key=lambda a: not a.specific)  # writer-specific sniffs first
    if is_yaml:
        in_order = [a for a in in_order if a.name in YAML_READERS]
    votes = [next((a.name for a in in_order if a.sniff is not None and a.sniff(rec)), None) for rec in records]
    counts = Counter(v for v in votes if v is not None)
    if counts:
        rank = {a.name: k for k, a in enumerate(in_order)}
        name = min(counts, key=lambda n: (-counts[n], rank[n]))  # most records; a tie to the earlier adapter
        return Detection(name, _vote_note(name, sampled, votes))
    if not records:
        why = str(ctx.log.problems[0]) if ctx.log.problems else "no JSON records found"
        raise ValueError(f"cannot detect the format of {path}: {why}. Known formats: {', '.join(ADAPTERS)}")
    keys = sorted(records[0])[:12] if isinstance(records[0], dict) else type(records[0]).__name__
    raise ValueError(
        f"cannot detect the format of {path}: first record ({keys}) matches no known format; "
        f"pass fmt= one of {', '.join(ADAPTERS)}"
    )


VOTE_EXAMPLES = 3  # dissenting records named in a detection note


def _vote_note(name: str, sampled: list[tuple[int | None, str, object]], votes: list[str | None]) -> str | None:
    """Why ``name`` was chosen when some sampled records went to another format (None when none did),
    e.g. ``detected as kgr1_eval: 3 of 4 sampled records match it (line 1 matches tagged_text); ...``."""
    others = []
    for (line, prefix, _), vote in zip(sampled, votes, strict=True):
        if vote != name:
            where = f"line {line}" if line is not None else f"item {prefix.rstrip('.')}"
            others.append(f"{where} matches {vote or 'no known format'}")
    if all(vote in (name, None) for vote in votes):  # no rival: a record no format takes is reported when read
        return None
    more = f"; {len(others) - VOTE_EXAMPLES} more" if len(others) > VOTE_EXAMPLES else ""
    return (
        f"detected as {name}: {len(votes) - len(others)} of {len(votes)} sampled records match it "
        f"({'; '.join(others[:VOTE_EXAMPLES])}{more}); records that do not fit it are reported one by one; pass the "
        "format (fmt=, --format) to read the file as another"
    )
