"""Hostile inputs: values that load but cannot be saved, one bad file in a folder, quiet
alterations (masks that are not 0/1, text that its token ids do not spell, files a folder load passes over) and
the upload copies a killed server leaves behind. Every test names the problem it expects, word for word where
the wording is the point, and the trajectories and token ids that must (or must not) be there."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_io_support import SAMPLES, write_jsonl

from engine.io import load_run, save_run
from engine.io.reading.problems import RecordError
from engine.io.text.tokenize import encode_many, get_backend

HI = 6023  # "hi" in Qwen2.5
BIG = int("9" * 4000)  # 4,000 digits: Python parses it (limit 4,300), orjson neither reads nor writes it


def rec(id_: str, text: str = "hi", ids: list[int] | None = None, **extra) -> dict:
    ids = [HI] if ids is None else ids
    return {"id": id_, "prompt": "p", "segments": [{"role": "model", "text": text, "token_ids": ids}], **extra}


def qwen_ids(text: str) -> list[int]:
    return encode_many(get_backend(None), [text])[0].tolist()


def same(a: object, b: object) -> bool:
    """Equal, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------------------------------------ unsaveable
NINES = "9" * 4000
ODD_METADATA = (
    f'{{"big": {NINES}, "neg": -{NINES}, "nan": NaN, "inf": 1e400, "ninf": -1e400, "nested": [NaN, {{"x": {NINES}}}]}}'
)


@pytest.fixture
def odd_run(tmp_path):
    """A native file whose header and record metadata hold a 4,000-digit integer, NaN and ±1e400 (JSON allows
    them; orjson refuses them, so the reader's standard-library fallback parses the lines)."""
    header = f'{{"creditlens": {{"name": "odd", "metadata": {ODD_METADATA}}}}}'
    line = json.dumps(rec("a"))[:-1] + f', "metadata": {ODD_METADATA}}}'
    path = write_jsonl(tmp_path / "odd.jsonl", [header, line])
    res = load_run(path)
    assert res.problems == [] and [t.id for t in res.run.trajectories] == ["a"]
    expected = {"big": BIG, "neg": -BIG, "nan": math.nan, "inf": math.inf, "ninf": -math.inf}
    for md in (res.run.metadata, res.run.trajectories[0].metadata):
        assert all(same(md[k], v) for k, v in expected.items())
    return res.run


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_huge_integers_nan_and_infinity_in_metadata_save_and_load_back_exactly(tmp_path, odd_run, suffix):
    out = tmp_path / f"saved{suffix}"
    save_run(odd_run, out)  # raised TypeError "Integer exceeds 64-bit range" (orjson) before
    back = load_run(out)
    assert back.problems == []
    assert same(back.run.metadata, odd_run.metadata)
    assert same(back.run.trajectories[0].metadata, odd_run.trajectories[0].metadata)
    assert back.run.content_hash == odd_run.content_hash


def test_nan_in_metadata_is_not_written_as_null(tmp_path):
    """orjson writes NaN and infinity as null: a saved run came back with None where the file had NaN."""
    line = json.dumps(rec("a"))[:-1] + ', "metadata": {"score": NaN, "best": Infinity, "ok": 0.5}}'
    run = load_run(write_jsonl(tmp_path / "nan.jsonl", [line])).run
    save_run(run, tmp_path / "saved.jsonl")
    saved = (tmp_path / "saved.jsonl").read_text().splitlines()[1]
    assert '"score": NaN' in saved and '"best": Infinity' in saved and "null" not in saved
    md = load_run(tmp_path / "saved.jsonl").run.trajectories[0].metadata
    assert math.isnan(md["score"]) and md["best"] == math.inf and md["ok"] == 0.5


def test_metadata_too_deep_to_save_is_refused_at_load(tmp_path):
    """300 levels load (orjson reads 1,024) but orjson writes 254 and the standard library ~900: save_run raised.
    The record is refused with a problem naming the field; the run header's entry is ignored with one."""
    deep = "[" * 300 + "]" * 300
    header = f'{{"creditlens": {{"metadata": {{"deep": {deep}, "kept": 1}}}}}}'
    bad = json.dumps(rec("deep"))[:-1] + f', "metadata": {{"x": {{"y": {deep}}}}}}}'
    path = write_jsonl(tmp_path / "deep.jsonl", [header, bad, rec("ok", metadata={"fine": [[[1]]]})])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["ok"] and res.run.metadata == {"kept": 1}
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (2, "metadata.x.y", "nested more than 64 levels deep, which no saved run can hold"),
        (
            None,
            "metadata.deep",
            "nested more than 64 levels deep, which no saved run can hold; this entry of the run's metadata is ignored",
        ),
    ]
    save_run(res.run, tmp_path / "saved.jsonl")
    assert load_run(tmp_path / "saved.jsonl").run.trajectories == res.run.trajectories


# ------------------------------------------------------------------------------------------------ bad file
def three_files(folder: Path) -> Path:
    folder.mkdir()
    for name in ("a", "b", "c"):
        write_jsonl(folder / f"{name}.jsonl", [rec(f"{name}1"), rec(f"{name}2")])
    return folder


def test_a_file_that_disappears_mid_load_is_a_problem_and_the_others_load(tmp_path, monkeypatch):
    import engine.io.load as load_mod

    folder = three_files(tmp_path / "run")
    detect = load_mod.detect

    def vanish(path, max_bytes=None):  # while a.jsonl is read, b.jsonl is deleted (listed, then gone)
        (folder / "b.jsonl").unlink(missing_ok=True)
        return detect(path, max_bytes)

    monkeypatch.setattr(load_mod, "detect", vanish)
    res = load_run(folder)
    assert [t.id for t in res.run.trajectories] == ["a1", "a2", "c1", "c2"]
    (problem,) = res.problems
    assert problem.file == str(folder / "b.jsonl") and problem.line is None and problem.field is None
    assert problem.reason == "cannot read this file (FileNotFoundError: No such file or directory); file skipped"


def test_a_zip_with_a_bad_checksum_is_a_problem_and_the_others_load(tmp_path):
    """zipfile raises BadZipFile (not a ValueError) for a damaged member: it sank the whole folder load."""
    folder = three_files(tmp_path / "run")
    arrays = {"responses": np.full((2, 3), 5, dtype=np.int64), "attention_mask": np.ones((2, 3), dtype=np.int64)}
    np.savez(folder / "dump.npz", **arrays)
    raw = bytearray((folder / "dump.npz").read_bytes())
    raw[raw.find(bytes([5, 0, 0, 0]))] = 6  # stored, not deflated: one changed byte breaks the CRC
    (folder / "dump.npz").write_bytes(bytes(raw))
    res = load_run(folder)
    assert [t.id for t in res.run.trajectories] == ["a1", "a2", "b1", "b2", "c1", "c2"]
    crc = "member 'responses.npy' is not a readable .npy array (Bad CRC-32 for file 'responses.npy')"
    assert [str(p) for p in res.problems] == [f"{folder / 'dump.npz'}: {crc}; file skipped"]
    with pytest.raises(ValueError) as err:  # alone: one clear error naming it, no traceback
        load_run(folder / "dump.npz")
    assert str(err.value) == f"{folder / 'dump.npz'}: {crc}"


@pytest.mark.parametrize(
    "error",
    [
        PermissionError(13, "Permission denied"),
        RecursionError("maximum recursion depth exceeded"),
        OverflowError("cannot convert float infinity to integer"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        MemoryError(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_any_error_of_one_file_is_a_problem_naming_it(tmp_path, monkeypatch, error):
    """What a reader may raise on a file we cannot foresee (permission denied under another user, a recursion or
    an overflow deep in a library): the file is skipped whole, even half-read, and the others load."""
    import engine.io.load as load_mod

    folder = three_files(tmp_path / "run")
    real = load_mod.get_adapter

    class HalfRead:
        def __init__(self, adapter):
            self.adapter = adapter

        def __getattr__(self, name):  # the adapter's name, step naming, ...
            return getattr(self.adapter, name)

        def read(self, path, ctx):
            items = self.adapter.read(path, ctx)
            if Path(path).name == "b.jsonl":
                yield next(items)  # b1 is read, then the error
                raise error
            yield from items

    monkeypatch.setattr(load_mod, "get_adapter", lambda name: HalfRead(real(name)))
    res = load_run(folder)
    assert [t.id for t in res.run.trajectories] == ["a1", "a2", "c1", "c2"]  # nothing of b, not even b1
    (problem,) = res.problems
    assert problem.file == str(folder / "b.jsonl") and problem.reason.endswith("; file skipped")
    assert f"cannot read this file ({type(error).__name__}" in problem.reason
    with pytest.raises(ValueError, match=rf"^{folder / 'b.jsonl'}: cannot read this file \({type(error).__name__}"):
        load_run(folder / "b.jsonl")
    with pytest.raises(ValueError, match=rf"^{folder / 'b.jsonl'}: "):  # strict: the same, as a ValueError
        load_run(folder, strict=True)


@pytest.mark.slow  # a `python -m engine convert` child process (3 s)
def test_cli_convert_says_which_file_and_shows_no_traceback(tmp_path):
    bad = tmp_path / "dump.npz"
    np.savez(bad, responses=np.full((2, 3), 5, dtype=np.int64), attention_mask=np.ones((2, 3), dtype=np.int64))
    raw = bytearray(bad.read_bytes())
    raw[raw.find(bytes([5, 0, 0, 0]))] = 6
    bad.write_bytes(bytes(raw))
    out = subprocess.run(
        [sys.executable, "-m", "engine", "convert", str(bad), "--out", str(tmp_path / "x.jsonl")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert (
        out.stderr.strip()
        == f"error: {bad}: member 'responses.npy' is not a readable .npy array (Bad CRC-32 for file 'responses.npy')"
    )


# ------------------------------------------------------------------------------------------------ masks
def test_as_mask_takes_0_1_and_booleans_only():
    from engine.io.reading.coerce import as_mask

    assert as_mask([1, 0, 1], "m").tolist() == [True, False, True]
    assert as_mask(np.array([1.0, 0.0]), "m").tolist() == [True, False]
    assert as_mask([True, False], "m").tolist() == [True, False]
    assert as_mask([], "m").tolist() == []
    for value, found in (([1, 7, 0], "7 at position 1"), ([0, 1, math.nan], "nan at position 2")):
        with pytest.raises(RecordError) as err:
            as_mask(value, "m")
        assert (err.value.field, err.value.reason) == (
            "m",
            f"mask values must be 0 or 1 (or true/false), found {found}",
        )
    for value in ([0.5], [-1], [2**40]):
        with pytest.raises(RecordError, match="mask values must be 0 or 1"):
            as_mask(value, "m")
    with pytest.raises(RecordError, match=r"found str '1'"):
        as_mask(["1", "0"], "m")


def verl_arrays(mask_dtype=np.float64) -> dict:
    """Three rows, 2 prompt + 4 response columns; row 2 has one padding token."""
    attn = np.ones((3, 6), dtype=mask_dtype)
    attn[2, -1] = 0
    return {
        "responses": np.array([[HI, 11, 12, 13], [HI, 21, 22, 23], [HI, 31, 32, 0]], dtype=np.int64),
        "prompts": np.array([[1, 2]] * 3, dtype=np.int64),
        "attention_mask": attn,
        "response_mask": np.array([[1, 1, 0, 1]] * 3, dtype=mask_dtype),
        "token_level_scores": np.zeros((3, 4), dtype=np.float32),
    }


@pytest.mark.parametrize(
    ("field", "value", "position", "found"),
    [
        ("attention_mask", math.nan, 4, "nan"),  # NaN > 0 is False: the token was dropped
        ("attention_mask", 7.0, 5, "7.0"),  # on padding: 7 > 0 kept it
        ("response_mask", 7.0, 2, "7.0"),
        ("response_mask", -1.0, 0, "-1.0"),
    ],
)
def test_verl_mask_values_other_than_0_1_are_problems(tmp_path, field, value, position, found):
    arrays = verl_arrays()
    row = 2 if position == 5 else 1
    arrays[field][row, position if field == "response_mask" else position] = value
    np.savez(tmp_path / "dump.npz", **arrays)
    res = load_run(tmp_path / "dump.npz")
    assert [t.id for t in res.run.trajectories] == ["dump/row-0"] + (["dump/row-1"] if row == 2 else ["dump/row-2"])
    assert [(p.field, p.reason) for p in res.problems] == [
        (f"row[{row}].{field}", f"mask values must be 0 or 1 (or true/false), found {found} at position {position}")
    ]


def test_verl_bool_and_integer_masks_load_as_before(tmp_path):
    for dtype in (bool, np.int64):
        np.savez(tmp_path / "dump.npz", **verl_arrays(dtype))
        res = load_run(tmp_path / "dump.npz")
        assert res.problems == [] and len(res.run) == 3
        assert [len(t.segments) for t in res.run.trajectories] == [3, 3, 2]
        assert res.run.trajectories[2].num_tokens == 3  # the padding token is not a token


def test_verl_parquet_mask_of_7_is_a_problem(tmp_path):
    arrays = verl_arrays(np.int64)
    arrays["attention_mask"][0, 3] = 7
    pq.write_table(pa.table({k: [r.tolist() for r in v] for k, v in arrays.items()}), tmp_path / "dump.parquet")
    res = load_run(tmp_path / "dump.parquet")
    assert [t.id for t in res.run.trajectories] == ["dump/row-1", "dump/row-2"]
    assert [str(p) for p in res.problems] == [
        f"{tmp_path / 'dump.parquet'}: row[0].attention_mask: mask values must be 0 or 1 (or true/false), found 7 at "
        "position 3"
    ]


def test_rllm_and_verifiers_masks(tmp_path):
    token = {"prompt_tokens": [1, 2], "response_tokens": [HI, 5, 6], "trajectory_reward": 1.0}
    lines = [dict(token, response_masks=[1, 0, 1]), dict(token, response_masks=[1, 2, 1])]
    lines.append(json.dumps(dict(token, response_masks=[1, 0, 0])).replace("[1, 0, 0]", "[1, NaN, 0]"))
    res = load_run(write_jsonl(tmp_path / "rllm.jsonl", lines))
    assert [t.id for t in res.run.trajectories] == ["rllm:1"]
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (2, "response_masks", "mask values must be 0 or 1 (or true/false), found 2 at position 1"),
        (3, "response_masks", "mask values must be 0 or 1 (or true/false), found nan at position 1"),
    ]


# ------------------------------------------------------------------------------------------------ text vs ids
def test_text_its_token_ids_do_not_spell_is_reported_and_kept(tmp_path):
    path = write_jsonl(tmp_path / "ab.jsonl", [rec("ok"), rec("ab", text="ab", ids=[100, 200, 300, 400, 500])])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["ok", "ab"]
    assert res.run.trajectories[1].segments[0].token_ids.tolist() == [100, 200, 300, 400, 500]  # kept as loaded
    assert res.run.trajectories[1].segments[0].text == "ab"
    (problem,) = res.problems
    assert (problem.line, problem.field, problem.scope) == (2, "segments[0].text", "run")
    assert problem.reason == (
        "its 5 token ids decode to '\ufffd\\x0cas $pl', not to its text 'ab'; kept as loaded: credit is computed on "
        "the token ids and the token view shows their text (ids from another tokenizer, or text and ids from "
        "different places?)"
    )
    strict = load_run(path, strict=True)  # a note, never raised
    assert strict.problems == res.problems


def test_text_that_differs_only_by_whitespace_or_template_tokens_is_not_a_mismatch(tmp_path):
    ids = qwen_ids(" The answer is 4.<|im_end|>\n")
    recs = [
        rec("exact", text=" The answer is 4.<|im_end|>\n", ids=ids),
        rec("stripped", text="The answer is 4.", ids=ids),  # writers strip text and drop template tokens
        {  # a character split across two segments: each segment's text is its decoded half, U+FFFD
            "id": "split",
            "segments": [
                {"role": "model", "text": "\ufffd", "token_ids": qwen_ids("𝔘")[:1]},
                {"role": "tool", "text": "\ufffd", "token_ids": qwen_ids("𝔘")[1:]},
            ],
        },
        rec("other", text="The answer is 5.", ids=ids),
    ]
    res = load_run(write_jsonl(tmp_path / "t.jsonl", recs))
    assert len(res.run) == 4
    assert [(p.line, p.field) for p in res.problems] == [(4, "segments[0].text")]
    assert "not to its text 'The answer is 5.'" in res.problems[0].reason


def test_mismatch_notes_are_capped_per_file(tmp_path):
    recs = [rec(f"r{i}", text="xyz", ids=[HI]) for i in range(25)]
    res = load_run(write_jsonl(tmp_path / "many.jsonl", recs))
    assert len(res.run) == 25 and len(res.problems) == 21
    assert [p.line for p in res.problems[:20]] == list(range(1, 21))
    assert res.problems[20].field == "segments.text" and res.problems[20].reason.startswith(
        "5 more segments' token ids decode to other text than theirs (kept as loaded; 25 in all)"
    )


def test_samples_load_with_no_new_problems():
    """The shipped samples give text and ids that agree, except the lint case built to disagree; lint_cases'
    kgr1/ and policy/ subfolders are samples of their own, and a folder load says that it did not read them."""
    for folder in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        res = load_run(folder)
        if folder.name != "lint_cases":
            assert res.problems == [], folder.name
    res = load_run(SAMPLES / "lint_cases")
    assert [(Path(p.file).name, p.line, p.field, p.scope) for p in res.problems] == [
        ("kgr1", None, None, "run"),
        ("policy", None, None, "run"),
        ("lint_cases.jsonl", 79, "segments[0].text", "run"),
    ]
    assert "decode to ' result result result', not to its text ' step step step'" in res.problems[2].reason
    assert load_run(SAMPLES / "lint_cases" / "kgr1").problems == []
    assert load_run(SAMPLES / "lint_cases" / "policy").problems == []


# ------------------------------------------------------------------------------------------------ folders
def test_folder_reads_any_case_and_names_every_entry_it_does_not_read(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    write_jsonl(folder / "upper.JSONL", [rec("u1")])
    write_jsonl(folder / "lower.jsonl", [rec("l1")])
    import gzip

    (folder / "zipped.jsonl.gz").write_bytes(gzip.compress(json.dumps(rec("z1")).encode()))
    (folder / "sub").mkdir()
    write_jsonl(folder / "sub" / "inner.jsonl", [rec("s1")])
    (folder / "table.csv").write_text("a,b\n")
    (folder / "README.md").write_text("# docs\n")
    (folder / "LICENSE").write_text("MIT\n")
    (folder / ".hidden.jsonl").write_text("{}\n")
    (folder / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    write_jsonl(folder / "readme.jsonl", [rec("r1")])  # a data file, whatever its name
    res = load_run(folder)
    assert [t.id for t in res.run.trajectories] == ["l1", "r1", "u1"]
    assert [
        (Path(p.file).name, p.reason.split(":")[0] if ":" in p.reason else p.reason, p.scope) for p in res.problems
    ] == [
        ("gone.jsonl", "skipped", "record"),
        ("sub", "subfolder not read", "run"),
        ("table.csv", "skipped", "run"),
        ("zipped.jsonl.gz", "skipped", "record"),
    ]
    reasons = {Path(p.file).name: p.reason for p in res.problems}
    assert reasons["zipped.jsonl.gz"] == "skipped: compressed files are not read; decompress it first (e.g. gunzip)"
    assert reasons["gone.jsonl"] == (
        f"skipped: a symbolic link (to {tmp_path / 'nowhere.jsonl'}), not followed in a folder load; name it to load it"
    )
    assert reasons["sub"].startswith("subfolder not read: a folder load reads the files directly in it")
    assert reasons["table.csv"].startswith("skipped: not a data file (a folder load reads .jsonl, .json, .parquet")
    from engine.io.load import folder_entries

    files, skipped = folder_entries(folder)
    assert [p.name for p in files] == ["lower.jsonl", "readme.jsonl", "upper.JSONL"] and len(skipped) == 4


def test_a_pipe_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    import signal

    def hung(signum, frame):
        raise TimeoutError("load_run waited on the pipe")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(ValueError) as err:  # opening it for reading blocked until a writer came
            load_run(fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert str(err.value) == f"{fifo}: not a regular file (a pipe or a device)"
    write_jsonl(tmp_path / "ok.jsonl", [rec("ok")])
    res = load_run(tmp_path)
    assert [t.id for t in res.run.trajectories] == ["ok"]
    assert [str(p) for p in res.problems] == [
        f"{fifo}: skipped: not a regular file (a broken link, a pipe or a device)"
    ]


def test_a_compressed_file_alone_says_so(tmp_path):
    import gzip

    path = tmp_path / "run.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(rec("z1")).encode()))
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == f"{path}: gzip-compressed; CreditLens does not read compressed files: decompress it first"
    renamed = tmp_path / "run.jsonl"  # by content, not by name: fmt= cannot make it read gzip as JSON either
    path.rename(renamed)
    with pytest.raises(ValueError, match="gzip-compressed"):
        load_run(renamed, fmt="native")


def test_what_the_picker_lists_loads_or_says_why(tmp_path, monkeypatch):
    import gzip

    from dashboard import sources

    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    write_jsonl(data / "A.JSONL", [rec("a")])
    write_jsonl(data / "sub" / "b.jsonl", [rec("b")])
    (data / "c.jsonl.gz").write_bytes(gzip.compress(json.dumps(rec("c")).encode()))
    np.savez(data / "d.npz", **verl_arrays(np.int64))
    (data / "e.pth").write_bytes((data / "d.npz").read_bytes())  # a zip either way: the content decides
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(data))
    listed = sources.list_data_files()
    assert listed == ["A.JSONL", "c.jsonl.gz", "d.npz", "e.pth", "sub/b.jsonl"]
    outcome = {}
    for rel in listed:
        try:
            outcome[rel] = len(load_run(sources.resolve_allowed(rel)).run)
        except ValueError as e:
            assert str(data / rel) in str(e)
            outcome[rel] = "refused"
    assert outcome == {"A.JSONL": 1, "c.jsonl.gz": "refused", "d.npz": 3, "e.pth": 3, "sub/b.jsonl": 1}
    samples = tmp_path / "samples"  # a sample folder whose one run file is upper case: listed, and it loads
    (samples / "upper").mkdir(parents=True)
    write_jsonl(samples / "upper" / "RUN.JSONL", [rec("x")])
    assert sources.list_samples(samples) == {"upper": samples / "upper"}
    assert [t.id for t in load_run(samples / "upper").run.trajectories] == ["x"]


# ------------------------------------------------------------------------------------------------ uploads
def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_upload_folders_are_removed_and_live_ones_kept(tmp_path):
    from dashboard.leftovers import LEGACY_MAX_AGE_S, remove_stale_uploads

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        dead, live, own = dead_pid(), sleeper.pid, os.getpid()
        names = {
            "dead": f"creditlens-upload-{dead}-abc",
            "live": f"creditlens-upload-{live}-def",  # another server on this machine, mid-upload
            "own": f"creditlens-upload-{own}-ghi",  # this process, now
            "own_before": f"creditlens-upload-{own}-jkl",  # same id, written before this process started
            "legacy_old": "creditlens-upload-x1y2z3",
            "legacy_new": "creditlens-upload-a1b2c3",
            "other": "someone-else-upload-1",
        }
        for name in names.values():
            (tmp_path / name).mkdir()
            (tmp_path / name / "run.jsonl").write_bytes(b"x" * 1000)
        long_ago = time.time() - 10 * LEGACY_MAX_AGE_S
        os.utime(tmp_path / names["own_before"], (long_ago, long_ago))
        os.utime(tmp_path / names["legacy_old"], (long_ago, long_ago))
        removed = remove_stale_uploads(tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sorted(p.name for p in removed) == sorted([names["dead"], names["own_before"], names["legacy_old"]])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([names["live"], names["own"], names["legacy_new"], names["other"]])


def test_uploads_are_copied_under_the_server_pid_prefix(monkeypatch):
    from dashboard import loading

    seen = {}

    def fake_load(path, progress=None, response_length=None, size=0):
        seen["dir"] = Path(path).parent
        seen["exists"] = Path(path).is_file()
        return loaded

    loaded = SimpleNamespace(problems=[])
    monkeypatch.setattr(loading, "read_run", fake_load)
    assert loading.load_upload("run.jsonl", b"{}\n") is loaded
    assert seen["exists"] and seen["dir"].name.startswith(f"creditlens-upload-{os.getpid()}-")
    assert not seen["dir"].exists()  # removed after the load, as before


def test_server_start_cleans_up(tmp_path, monkeypatch):
    import asyncio
    import tempfile

    from dashboard import warmup

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv(warmup.ENV, "0")  # no warm-up thread: only the clean-up runs
    (tmp_path / f"creditlens-upload-{dead_pid()}-zz").mkdir()

    async def start():
        async with warmup.lifespan(None):
            pass

    asyncio.run(start())
    assert list(tmp_path.iterdir()) == []


def test_truncated_flag_must_be_a_boolean(tmp_path):
    """``"truncated": "no"`` read as true (bool of a non-empty string) and could mask the rollout's loss."""
    recs = [rec("ok", metadata={"truncated": False}), rec("no", metadata={"truncated": "no"})]
    recs.append(rec("two", metadata={"truncated": 2}))
    res = load_run(write_jsonl(tmp_path / "t.jsonl", recs))
    assert [t.id for t in res.run.trajectories] == ["ok"]
    assert [(p.line, p.field, p.reason) for p in res.problems] == [
        (2, "metadata.truncated", "expected true or false"),
        (3, "metadata.truncated", "expected true or false"),
    ]


@pytest.mark.parametrize("value", ["no", 2])
def test_truncated_flag_of_tagged_text_and_nemo_gym_must_be_a_boolean(tmp_path, value):
    """The tagged-text (Search-R1) and NeMo Gym readers took ``bool(rec["truncated"])``: "no" or 2 read as true."""
    from writers.nemo_gym import write_hermes

    tagged = [json.loads(line) for line in (SAMPLES / "search_agent" / "rollouts.jsonl").read_text().splitlines()[:2]]
    tagged[1]["truncated"] = value
    res = load_run(write_jsonl(tmp_path / "tagged.jsonl", tagged))
    assert [t.id for t in res.run.trajectories] == [tagged[0]["id"]]
    assert [(p.line, p.field, p.reason) for p in res.problems] == [(2, "metadata.truncated", "expected true or false")]

    path = write_hermes(tmp_path).path
    lines = path.read_text().splitlines()
    second = json.loads(lines[1])
    second["truncated"] = value
    path.write_text(lines[0] + "\n" + json.dumps(second) + "\n")
    res = load_run(path)
    assert len(res.run.trajectories) == 1 and res.run.trajectories[0].metadata["truncated"] is False
    assert [(p.line, p.field, p.reason) for p in res.problems if p.line == 2] == [
        (2, "truncated", f"expected true or false, got {value!r}")
    ]


def test_upload_problems_name_the_file_as_uploaded_not_the_servers_temporary_folder():
    """An upload is read from a copy in the server's temporary folder; its problems and errors named that copy
    (``/tmp/creditlens-upload-<pid>-…/run.jsonl``), which tells the browser user the server's paths."""
    from dashboard import loading

    good = (SAMPLES / "python_tool_two_rollouts" / "run.jsonl").read_bytes()
    loaded = loading.load_upload("run.jsonl", good + b"not json\n")
    assert [(p.file, p.line, p.reason) for p in loaded.problems] == [
        ("run.jsonl", 4, "invalid JSON: Expecting value at column 1")
    ]
    with pytest.raises(ValueError) as err:
        loading.load_upload("notes.jsonl", b"hello\n")
    assert str(err.value).startswith("cannot detect the format of notes.jsonl: ")
    assert "creditlens-upload" not in str(err.value)
