"""Shared helpers for the engine.io tests (no tests here): offline mode, where the raw real rollouts live,
and small builders. Importing this module first sets ``HF_HUB_OFFLINE=1`` before anything loads transformers."""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_runs"


# The six NeMo Gym example rollout files as published (SOURCE.md and LICENSE beside them): the raw input that
# sample_runs/nemo_gym was converted from.
NEMO = REPO / "tests" / "data" / "nemo_gym"
NEMO_FILES = sorted(p.name for p in NEMO.glob("*.jsonl"))


def nemo_records(name: str) -> list[dict]:
    return [json.loads(line) for line in (NEMO / name).read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: list) -> Path:
    """Write records (dicts, or raw strings/bytes used verbatim) one per line."""
    with open(path, "wb") as f:
        for rec in records:
            if isinstance(rec, bytes):
                f.write(rec + b"\n")
            elif isinstance(rec, str):
                f.write(rec.encode() + b"\n")
            else:
                f.write(json.dumps(rec).encode() + b"\n")
    return path


def seg(role: str, ids: list[int], **per_token: list[float]) -> dict:
    """A native segment record with token ids (text filled in by the loader)."""
    return {"role": role, "token_ids": ids, **per_token}


def native(id_: str, segments: list[dict], **extra) -> dict:
    return {"id": id_, "group_id": extra.pop("group_id", "g"), "prompt": "p", "segments": segments, **extra}


def ids(tok, text: str) -> list[int]:
    """Token ids of ``text`` with the given tokenizer (no special tokens added)."""
    return np.asarray(tok.encode(text, add_special_tokens=False)).tolist()


@contextmanager
def time_limit(seconds: int):
    """Raise ``TimeoutError`` inside the block after ``seconds`` (SIGALRM; no limit where there is none): a
    watchdog that turns a hang into a failure, never a timing assertion."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def fail(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
