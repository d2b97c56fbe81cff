"""The red-team run of ``scripts/redteam.py`` at CI size: hostile inputs of every family loaded the way the
dashboard loads a data-directory file, in a memory-limited worker process.

Every hostile input family that a loader sees has inputs here: decompression bombs (npz, .pt, Parquet, gzip, a 50 MB
record in a JSON array and in a JSONL line), bf16 / fp16 / sparse tensors, one bad file in a folder, upper-case and
compressed suffixes and subfolders, NaN / 7 / -1 in masks, text that does not match its token ids, a 4,000-digit
integer in metadata, tokenizer paths outside the roots; plus damaged bytes of every seed file. The run must end
with no crash, no silent change and no file opened outside the roots, and the bombs within the memory ceiling.
The long run (4,000+ inputs, 4 GiB bombs) is ``python scripts/redteam.py``; its figures are in the README.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import redteam  # noqa: E402

from engine.io.reading import limits  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    top = tmp_path_factory.mktemp("redteam")
    return redteam.run_redteam(inputs=40, seed=13, bomb_gib=0.25, workers=1, mem_gb=4.0, timeout=120.0, top=top)


def test_no_crash_no_silent_change_no_outside_read(report):
    assert not report.crashes, report.text()
    assert not report.silent, report.text()
    assert not report.outside, report.text()


def test_every_family_ran(report):
    families = Counter(o.case.family for o in report.outcomes)
    assert set(families) == {"bomb", "bytes", "dtype", "field", "folder"}, families
    assert families["bomb"] == 8 and families["folder"] == 7 and families["dtype"] == 4


def test_bombs_are_stopped_within_the_ceiling(report):
    bombs = {o.case.name: o for o in report.outcomes if o.case.family == "bomb"}
    for name, o in bombs.items():
        assert o.kind in ("refused", "reported"), (name, o.kind, o.detail)
        assert o.peak_mib < limits.max_load_bytes() / 2**20 + 1024, (name, o.peak_mib)  # ceiling + the process


def test_realistic_tensors_load_clean(report):
    """bf16 / fp16 values and sparse masks or scores are realistic verl dumps: they load, without a problem."""
    dtypes = {o.case.name: o for o in report.outcomes if o.case.family == "dtype"}
    assert {name: o.kind for name, o in dtypes.items()} == dict.fromkeys(dtypes, "clean"), report.text()
