"""Format detection by content (never by file name alone); ``load_run(fmt=...)`` overrides it.

Parquet (``PAR1`` magic): by column names. Zip archives (``.pt`` from ``torch.save``, ``.npz``): slime rollout
dumps when the pickle names ``rollout_id``/``samples``/``response_length`` (bytes only), else verl tensor
dumps. A bare pickle (``DataProto.save_to_disk``, ``pickle.dump``) is refused: loading it would run code.
Anything else is read as JSON/JSONL and the first few parseable records are shown to each adapter's ``sniff`` in
registry order (native, nemo_gym, rllm, kgr1_eval, kgr1_rollout_dump, verl_rollout, tagged_text, …), those marked
``specific`` (keys only one trainer's writer writes) first. A file whose first line starts a YAML list (``- ``) is
read as YAML (OpenPipe ART's trajectory logs), of which detection reads only the first items' outline. A file
whose only record is a summary a trainer writes beside its rollouts (rLLM's ``batch_summary.json``) raises
``NotRollouts``; a folder load reports it as "skipped: summary, not rollouts".
"""

from __future__ import annotations

import itertools
import zipfile
from pathlib import Path

from engine.io.adapters import ADAPTERS, slime_rollout, summary_reason
from engine.io.reading.context import LoadContext
from engine.io.reading.problems import ProblemLog
from engine.io.reading.records import iter_json_records
from engine.io.reading.yaml_records import looks_like_yaml_list, peek_yaml_records

SNIFF_RECORDS = 5
PICKLE_PROTO, PICKLE_VERSIONS = b"\x80", {bytes([v]) for v in range(2, 6)}  # pickle's PROTO opcode, protocols 2-5
YAML_READERS = ("art_yaml",)  # the adapters whose reader parses YAML


class NotRollouts(ValueError):
    """The file is something a trainer writes beside its rollouts (a batch summary): skipped, not an error."""


def parquet_columns(path: Path) -> list[str]:
    from engine.io.store.native_parquet import open_parquet

    return list(open_parquet(path).schema_arrow.names)


def detect_format(path: str | Path, max_bytes: int | None = None) -> str:
    """Name of the adapter that reads ``path``; ``ValueError`` with the reason if none does."""
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        cols = parquet_columns(path)
        for a in ADAPTERS.values():
            if a.sniff_columns is not None and a.sniff_columns(cols):
                return a.name
        raise ValueError(f"cannot detect the format of {path}: Parquet columns {cols[:12]} match no known format")
    if magic[:1] == PICKLE_PROTO and magic[1:2] in PICKLE_VERSIONS:
        from engine.io.adapters.verl_tensors import EXPORT_HINT

        raise ValueError(
            f"{path}: a Python pickle (verl's DataProto.save_to_disk writes one), which CreditLens does not load. "
            f"{EXPORT_HINT}"
        )
    if zipfile.is_zipfile(path):
        return "slime_rollout" if slime_rollout.sniff_zip(path) else "verl_tensors"
    ctx = LoadContext(file=str(path), log=ProblemLog())
    if max_bytes:
        ctx.max_bytes = max_bytes
    is_yaml = looks_like_yaml_list(str(path))
    if is_yaml:  # only the first items' outline: the adapter composes the whole document once, when it reads it
        records = peek_yaml_records(str(path), ctx, SNIFF_RECORDS)
    else:
        records = [rec for _, _, rec in itertools.islice(iter_json_records(str(path), ctx), SNIFF_RECORDS)]
    why = summary_reason(records[0]) if len(records) == 1 else None
    if why:
        raise NotRollouts(f"skipped: summary, not rollouts ({why})")
    in_order = sorted(ADAPTERS.values(), key=lambda a: not a.specific)  # writer-specific sniffs first
    if is_yaml:
        in_order = [a for a in in_order if a.name in YAML_READERS]
    for rec in records:
        for a in in_order:
            if a.sniff is not None and a.sniff(rec):
                return a.name
    if not records:
        why = str(ctx.log.problems[0]) if ctx.log.problems else "no JSON records found"
        raise ValueError(f"cannot detect the format of {path}: {why}. Known formats: {', '.join(ADAPTERS)}")
    keys = sorted(records[0])[:12] if isinstance(records[0], dict) else type(records[0]).__name__
    raise ValueError(
        f"cannot detect the format of {path}: first record ({keys}) matches no known format; "
        f"pass fmt= one of {', '.join(ADAPTERS)}"
    )
