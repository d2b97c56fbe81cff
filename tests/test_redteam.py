"""The red-team run of ``scripts/redteam.py`` at CI size: hostile inputs of every family loaded the way the
dashboard loads a data-directory file, in a memory-limited worker process.

Every hostile input family that a loader sees has inputs here: decompression bombs (npz, .pt, Parquet, gzip, a 50 MB
record in a JSON array and in a JSONL line), bf16 / fp16 / sparse tensors, one bad file in a folder, upper-case and
compressed suffixes and subfolders, NaN / 7 / -1 in masks, text that does not match its token ids, a 4,000-digit
integer in metadata, tokenizer paths outside the roots; plus damaged bytes of every seed file. The run must end
with no crash, no silent change and no file opened outside the roots, and the bombs within the memory ceiling.

The trainer readers' inputs (seeds from ``tests/writers/``, their ``bytes`` and ``field`` copies, the ``structure``
and ``quiet`` families, each loaded detected and forced) must end with no hang, no memory death, no traceback,
no quiet change and no read outside the roots, like the rest.
The long run (4,945 inputs: 4,000 of the old families, 800 from the trainer seeds, every structure and quiet
input, each trainer input detected and forced; 4 GiB bombs) is
``python scripts/redteam.py``; its figures are in docs/SECURITY.md.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import redteam  # noqa: E402
import redteam_trainers  # noqa: E402

from engine.io.reading import limits  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    top = tmp_path_factory.mktemp("redteam")
    return redteam.run_redteam(
        inputs=40, seed=13, bomb_gib=0.25, workers=1, mem_gb=4.0, timeout=120.0, top=top, trainer_inputs=20, quick=True
    )


NEW_FAMILIES = ("structure", "quiet")


@pytest.mark.parametrize("kind", ["hangs", "memory", "tracebacks", "crashes", "silent", "outside"])
def test_no_hang_memory_death_traceback_quiet_change_or_outside_read(report, kind):
    """Over every input, old families and the trainer readers' alike (``crashes`` also counts refusals that do not
    name the file; ``silent``: quiet changes, including a saved run that loads back different)."""
    assert not getattr(report, kind), report.text(show=100)


def test_every_family_ran(report):
    families = Counter(o.case.family for o in report.outcomes)
    assert set(families) == {"bomb", "bytes", "dtype", "field", "folder", *NEW_FAMILIES}, families
    assert families["bomb"] == 8 and families["folder"] == 7 and families["dtype"] == 4
    trainer = Counter(o.case.family for o in report.outcomes if o.case.reader is not None)
    assert trainer["bytes"] == trainer["field"] == 2 * 10, trainer  # 20 inputs, each detected and forced
    assert families["structure"] >= 10 and families["quiet"] >= 18, families


def test_every_trainer_input_is_loaded_detected_and_forced(report):
    readers = {o.case.reader for o in report.outcomes if o.case.family == "field"} - {None}
    assert readers == set(redteam_trainers.FIELDS) | {"trl_completions"}, readers  # the ten trainer readers
    assert {o.case.reader for o in report.outcomes if o.case.family in NEW_FAMILIES} >= readers - {"roll_rollout"}
    ways = Counter((o.case.name.rsplit(" (", 1)[0], o.case.fmt is None) for o in report.outcomes if o.case.reader)
    assert all(ways[(name, True)] == ways[(name, False)] for name, _ in ways), ways
    assert all(o.case.fmt in (None, o.case.reader) for o in report.outcomes if o.case.reader)


def test_outcome_kinds_tell_hangs_and_memory_from_tracebacks():
    assert redteam._ended(dead=False, exitcode=None, limit=60) == ("hang", "hang over 60 s")
    assert redteam._ended(dead=True, exitcode=-9, limit=60)[0] == "memory"  # SIGKILL
    assert redteam._ended(dead=True, exitcode=-6, limit=60)[0] == "memory"  # SIGABRT: std::bad_alloc
    assert redteam._ended(dead=True, exitcode=-11, limit=60)[0] == "traceback"  # a segfault
    assert redteam._error_kind(MemoryError()) == "memory"
    assert redteam._error_kind(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried")) == "memory"
    assert redteam._error_kind(KeyError("x")) == "traceback"


def test_bombs_are_stopped_within_the_ceiling(report):
    bombs = {o.case.name: o for o in report.outcomes if o.case.family == "bomb"}
    for name, o in bombs.items():
        assert o.kind in ("refused", "reported"), (name, o.kind, o.detail)
        assert o.peak_mib < limits.max_load_bytes() / 2**20 + 1024, (name, o.peak_mib)  # ceiling + the process


def test_realistic_tensors_load_clean(report):
    """bf16 / fp16 values and sparse masks or scores are realistic verl dumps: they load, without a problem."""
    dtypes = {o.case.name: o for o in report.outcomes if o.case.family == "dtype"}
    assert {name: o.kind for name, o in dtypes.items()} == dict.fromkeys(dtypes, "clean"), report.text()
