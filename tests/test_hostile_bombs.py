"""Hostile inputs, loader part: decompression bombs are refused from the sizes a file DECLARES,
before anything is decompressed; half-precision, sparse and wrongly typed tensors/columns become clear errors
or problems, never tracebacks; an over-large item of a JSON array is a problem, not a record.

Every bomb here is tiny on disk: a zip whose central directory declares gigabytes, an npy header declaring a
shape of 2**32, a sparse tensor whose dense shape is a terabyte, or a real small file under a ceiling lowered
to a few KiB (``CREDITLENS_MAX_LOAD_MB``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from test_io_support import REPO, native, seg, write_jsonl

from engine.io import load_run
from engine.io.reading.context import DEFAULT_MAX_LOAD_MB, MAX_LOAD_MB_ENV, max_load_bytes
from engine.io.reading.limits import _column_bytes, check_parquet, decoded_limit, values_limit

GiB = 2**30


def _low_ceiling(monkeypatch, kib: float) -> int:
    """Lower the load ceiling to ``kib`` KiB; returns the bytes a load may then decode (half of it)."""
    monkeypatch.setenv(MAX_LOAD_MB_ENV, str(kib / 1024))
    return decoded_limit()


def _verl_npz(path: Path, rows: int = 2, cols: int = 4) -> Path:
    np.savez_compressed(
        path,
        responses=np.arange(rows * cols, dtype=np.int64).reshape(rows, cols) + 1,
        attention_mask=np.ones((rows, cols), dtype=np.int64),
    )
    return path


def _declare(path: Path, sizes: dict[str, int]) -> None:
    """Rewrite zip ``path`` so that its central directory declares ``sizes[name]`` uncompressed bytes for those
    members (their data stays as it is: a few bytes that claim gigabytes)."""
    src = zipfile.ZipFile(path)
    members = [(info, src.read(info)) for info in src.infolist()]
    src.close()
    with zipfile.ZipFile(path, "w") as z:
        for info, data in members:
            z.writestr(info, data)
        for info in z.filelist:
            if info.filename in sizes:
                info.file_size = sizes[info.filename]


def _npy_bytes(shape: tuple, data: bytes = b"") -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": shape})
    return f.getvalue() + data


def _bomb_npz(path: Path) -> Path:
    """A 1 KB ``.npz`` whose responses member declares 4 GiB in the zip directory and (2**29,) int64 in its npy
    header: numpy would allocate 4 GiB before reading a byte."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("responses.npy", _npy_bytes((2**29,), bytes(64)))
        z.writestr("attention_mask.npy", _npy_bytes((2**29,), bytes(64)))
    _declare(path, {"responses.npy": 4 * GiB + 128})
    return path


# ---------------------------------------------------------------------------------------------- the ceiling
def test_the_ceiling_default_and_its_environment_override(monkeypatch):
    monkeypatch.delenv(MAX_LOAD_MB_ENV, raising=False)
    assert max_load_bytes() == DEFAULT_MAX_LOAD_MB * 2**20 == 4 * GiB
    assert decoded_limit() == 2 * GiB and values_limit() == 4 * GiB // 48
    monkeypatch.setenv(MAX_LOAD_MB_ENV, "512")
    assert max_load_bytes() == 512 * 2**20
    for bad in ("0", "-5", "lots", "inf", "nan"):
        monkeypatch.setenv(MAX_LOAD_MB_ENV, bad)
        with pytest.raises(ValueError, match=rf"^{MAX_LOAD_MB_ENV}='{bad}': expected a positive number of MiB$"):
            max_load_bytes()


def test_the_default_ceiling_lets_the_50000_by_1000_token_parquet_run_load(tmp_path, monkeypatch):
    """The big run of docs/PERFORMANCE.md, "Big runs" (50,000 x 1,000 tokens, 218 MiB) must still load: a 500-trajectory
    slice of the same synthetic run, times 100, fits what the default ceiling lets a load decode and hold."""
    from benchmarks.big_run import write_run

    monkeypatch.delenv(MAX_LOAD_MB_ENV, raising=False)
    path = tmp_path / "slice.parquet"
    write_run(path, 500, 1000, 0)
    md = pq.ParquetFile(path).metadata
    groups = [md.row_group(i) for i in range(md.num_row_groups)]
    declared = sum(
        max(g.total_byte_size, sum(_column_bytes(g.column(j)) for j in range(g.num_columns))) for g in groups
    )
    tokens = sum(
        g.column(j).num_values
        for g in groups
        for j in range(g.num_columns)
        if "token_ids" in g.column(j).path_in_schema
    )
    assert 400_000 < tokens <= 500_000  # 800 to 1,000 tokens a trajectory
    assert 100 * declared < 0.5 * decoded_limit()  # the 50,000 run declares ~0.85 GiB of the 2 GiB
    assert 100 * tokens < 0.6 * values_limit()  # ~45 M tokens of the 89 M
    check_parquet(pq.ParquetFile(path), path)  # and the slice itself passes


# ---------------------------------------------------------------------------------------------- npz
def test_npz_member_declaring_4_gib_is_refused_before_reading(tmp_path):
    path = _bomb_npz(tmp_path / "bomb.npz")
    assert path.stat().st_size < 2_000
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == (
        f"{path}: member 'responses.npy' declares 4,096.0 MiB (4,294,967,424 bytes) uncompressed, over the "
        "2,048.0 MiB (2,147,483,648 bytes) a load may decode (1/2 of the load ceiling of 4,096.0 MiB, "
        "CREDITLENS_MAX_LOAD_MB); refused before reading"
    )


def test_npy_header_declaring_shape_2_to_the_32_is_refused(tmp_path):
    """The zip directory is honest (a few bytes), the npy header inside claims 32 GiB."""
    path = tmp_path / "hdr.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("responses.npy", _npy_bytes((2**32,), bytes(16)))
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == (
        f"{path}: member 'responses.npy' (npy header: shape (4294967296,)) declares 32,768.0 MiB (34,359,738,368 "
        "bytes) uncompressed, over the 2,048.0 MiB (2,147,483,648 bytes) a load may decode (1/2 of the load "
        "ceiling of 4,096.0 MiB, CREDITLENS_MAX_LOAD_MB); refused before reading"
    )


def test_npy_header_declaring_more_than_its_member_holds_is_refused(tmp_path):
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("responses.npy", _npy_bytes((1000, 8), bytes(80)))
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == (
        f"{path}: member 'responses.npy' (npy header: shape (1000, 8)) declares an array of 64,000 bytes but the "
        "member holds only 80 bytes of data; refused before reading"
    )


def test_npz_over_a_lowered_ceiling_names_the_member_and_both_sizes(tmp_path, monkeypatch):
    path = _verl_npz(tmp_path / "run.npz", rows=64, cols=64)  # 32 KiB a member
    assert len(load_run(path).run) == 64
    allowed = _low_ceiling(monkeypatch, 48)  # 24 KiB may be decoded
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value).startswith(
        f"{path}: member 'responses.npy' declares 0.0 MiB (32,896 bytes) uncompressed, over the 0.0 MiB "
        f"({allowed:,} bytes) a load may decode"
    )


def test_npz_members_together_over_the_ceiling(tmp_path, monkeypatch):
    path = _verl_npz(tmp_path / "run.npz", rows=32, cols=64)  # two members of 16,512 bytes
    _low_ceiling(monkeypatch, 48)
    with pytest.raises(ValueError, match=r"its 2 members together declare 0\.0 MiB \(33,024 bytes\) uncompressed"):
        load_run(path)


def test_npz_whose_data_does_not_match_its_crc_is_a_clear_error(tmp_path):
    path = _verl_npz(tmp_path / "run.npz")
    with zipfile.ZipFile(path) as z:
        infos = {i.filename: i for i in z.infolist()}
    raw = bytearray(path.read_bytes())
    info = infos["responses.npy"]
    raw[info.header_offset + 30 + len(info.filename) + info.compress_size - 3] ^= 0xFF  # flip a compressed byte
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"^{path}: member 'responses.npy' is not a readable .npy array \(Bad CRC-32"):
        load_run(path)


def test_npz_bomb_in_a_child_under_rlimit_as_ends_with_the_clean_error_in_seconds(tmp_path):
    """The red team's server died at 24 GB on such a file. Here the load runs in a child process limited to
    1.5 GiB of address space: before the checks numpy asked for 4 GiB and died with MemoryError; now the load
    ends with the refusal, in well under a second of load time."""
    path = _bomb_npz(tmp_path / "bomb.npz")
    child = textwrap.dedent(
        f"""
        import resource, sys, time
        sys.path.insert(0, {str(REPO)!r}); sys.path.insert(0, {str(REPO / "tests")!r})
        import test_io_support  # offline
        from engine.io import load_run
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))
        start = time.perf_counter()
        try:
            load_run({str(path)!r})
        except ValueError as e:
            print(f"REFUSED {{time.perf_counter() - start:.3f}} {{e}}")
            sys.exit(3)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != MAX_LOAD_MB_ENV}
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 3, out.stdout + out.stderr
    _, seconds, message = out.stdout.strip().split(" ", 2)
    assert float(seconds) < 2.0
    assert message.startswith(f"{path}: member 'responses.npy' declares 4,096.0 MiB (4,294,967,424 bytes)")


# ---------------------------------------------------------------------------------------------- .pt
def _verl_pt(path: Path, **fields) -> Path:
    base = {
        "responses": torch.tensor([[1, 2, 3], [4, 5, 6]]),
        "attention_mask": torch.ones(2, 3, dtype=torch.long),
        "token_level_scores": torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.5]]),
    }
    torch.save({**base, **fields}, path)
    return path


def test_pt_storage_declaring_4_gib_is_refused_before_torch_load(tmp_path):
    path = _verl_pt(tmp_path / "run.pt")
    with zipfile.ZipFile(path) as z:
        storage = next(n for n in z.namelist() if n.endswith("/data/0"))
    _declare(path, {storage: 4 * GiB})
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value).startswith(
        f"{path}: member {storage!r} declares 4,096.0 MiB (4,294,967,296 bytes) uncompressed"
    )


def test_pt_pickle_over_its_share_of_the_ceiling_is_refused(tmp_path, monkeypatch):
    """``data.pkl`` unpickles into Python objects up to 32 times its size: it may take 1/32 of the ceiling."""
    path = _verl_pt(tmp_path / "run.pt", uid=[f"group-{i}" for i in range(2)])
    with zipfile.ZipFile(path) as z:
        pkl = next(i for i in z.infolist() if i.filename.endswith("/data.pkl"))
    ceiling = 32 * (pkl.file_size - 1)
    monkeypatch.setenv(MAX_LOAD_MB_ENV, str(ceiling / 2**20))
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value).startswith(
        f"{path}: member {pkl.filename!r} (the pickled lists, dicts and strings besides the tensors) declares 0.0 "
        f"MiB ({pkl.file_size:,} bytes), over the 0.0 MiB ({pkl.file_size - 1:,} bytes) a load may unpack"
    )


def test_sparse_tensor_of_a_terabyte_dense_is_refused(tmp_path):
    huge = torch.sparse_coo_tensor(torch.tensor([[0], [0]]), torch.tensor([1.0]), (2**20, 2**20))
    path = _verl_pt(tmp_path / "sparse.pt", old_log_probs=huge)
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value).startswith(
        f"{path}: field 'old_log_probs' (shape [1048576, 1048576]) declares 1,099,511,627,776 values, over the "
        "89,478,485 a load may hold"
    )


def test_sparse_tensors_over_what_is_left_to_decode_are_refused(tmp_path, monkeypatch):
    """Each sparse tensor made dense takes from what the load may still decode, checked before ``to_dense``."""
    fields = {}
    for k in range(8):
        dense = torch.zeros(20, 40, dtype=torch.float64)
        dense[k, k] = 1.0
        fields[f"extra_{k}"] = dense.to_sparse()  # 6,400 bytes dense
    path = _verl_pt(tmp_path / "sparse.pt", **fields)
    _low_ceiling(monkeypatch, 64)  # 32,768 bytes may be decoded: five fit
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == (
        f"{path}: extra_5: a sparse tensor of shape (20, 40) is 0.0 MiB (6,400 bytes) dense, over the 0.0 MiB a "
        "load may still decode (CREDITLENS_MAX_LOAD_MB); refused before densifying"
    )


def test_sparse_and_half_precision_values_load_as_float32(tmp_path):
    lp = torch.tensor([[-0.5, -0.25, -1.0], [-2.0, -0.125, -3.0]])
    path = _verl_pt(
        tmp_path / "half.pt",
        old_log_probs=[lp[0].to(torch.bfloat16), lp[1].to(torch.bfloat16)],  # a list of per-row bf16 tensors
        values=lp.to(torch.float16).to_sparse(),
        token_level_scores=torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.5]], dtype=torch.bfloat16),
    )
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["half/row-0", "half/row-1"]
    for b, traj in enumerate(res.run.trajectories):
        (model,) = traj.segments
        assert model.token_ids.tolist() == [[1, 2, 3], [4, 5, 6]][b]
        assert model.log_probs.dtype == np.float32 and model.log_probs.tolist() == lp[b].tolist()
        assert model.values.tolist() == lp[b].tolist()
        assert model.scores.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.5]][b]


@pytest.mark.parametrize(
    ("field", "dtype", "exact"), [("responses", torch.bfloat16, 256), ("uid", torch.float16, 2048)]
)
def test_half_precision_ids_are_refused(tmp_path, field, dtype, exact):
    """bf16 rounds token id 151,643 to 151,552: accepting it would silently change the ids."""
    value = (
        torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=dtype) if field == "responses" else torch.tensor([1, 2], dtype=dtype)
    )
    path = _verl_pt(tmp_path / "ids.pt", **{field: value})
    with pytest.raises(ValueError) as err:
        load_run(path)
    name = str(dtype).removeprefix("torch.")
    assert (
        str(err.value)
        == f"{path}: {field}: ids stored as {name} (exact only up to {exact}); store token and group ids as integers"
    )


def _slime_pt(path: Path, **sample) -> Path:
    s = {"tokens": [1, 2, 3, 4], "response_length": 2, "reward": 1.0, "index": 0, "group_index": 0, **sample}
    torch.save({"rollout_id": 7, "samples": [s, {**s, "index": 1}]}, path)
    return path


def test_slime_sparse_and_bf16_log_probs_load(tmp_path):
    path = _slime_pt(tmp_path / "7.pt", rollout_log_probs=torch.tensor([-0.5, -0.25]).to_sparse())
    res = load_run(path)
    assert [t.segments[0].log_probs.tolist() for t in res.run.trajectories] == [[-0.5, -0.25]] * 2
    path = _slime_pt(tmp_path / "7.pt", rollout_log_probs=torch.tensor([-0.5, -0.25], dtype=torch.bfloat16))
    assert [t.segments[0].log_probs.tolist() for t in load_run(path).run.trajectories] == [[-0.5, -0.25]] * 2


def test_slime_bf16_token_ids_are_a_problem_per_sample(tmp_path):
    path = _slime_pt(tmp_path / "7.pt", tokens=torch.tensor([1, 2, 3, 4], dtype=torch.bfloat16))
    res = load_run(path)
    assert len(res.run) == 0
    assert [str(p) for p in res.problems] == [
        f"{path}: samples[{b}].tokens: token ids stored as bfloat16, which rounds ids; store them as integers"
        for b in range(2)
    ]


def test_slime_tokens_over_the_ceiling_are_refused_before_converting(tmp_path, monkeypatch):
    path = _slime_pt(tmp_path / "7.pt", tokens=torch.arange(1, 1001))
    monkeypatch.setenv(MAX_LOAD_MB_ENV, str(48 * 1999 / 2**20))  # 1,999 tokens may be held; 2,000 declared
    with pytest.raises(ValueError) as err:
        load_run(path, fmt="slime_rollout")
    assert str(err.value).startswith(f"{path}: the tokens of its 2 samples declares 2,000 values, over the 1,999")


# ---------------------------------------------------------------------------------------------- Parquet
def _native_parquet(path: Path, n: int = 3) -> Path:
    from engine.io import save_run
    from engine.io.synth.generic import synth_run

    save_run(synth_run(n, 16, seed=0), path)
    return path


def test_parquet_row_group_over_the_ceiling_is_refused_from_its_footer(tmp_path, monkeypatch):
    path = _native_parquet(tmp_path / "run.parquet")
    assert len(load_run(path).run) == 3
    allowed = _low_ceiling(monkeypatch, 1)  # 512 bytes
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value).startswith(f"{path}: row group 0 (3 rows) declares ")
    assert f"uncompressed, over the 0.0 MiB ({allowed:,} bytes) a load may decode" in str(err.value)


def test_parquet_column_declaring_too_many_values_is_refused(tmp_path, monkeypatch):
    """Run-length encoding makes a column of a million equal ids a few bytes: what it decodes to counts."""
    path = tmp_path / "rle.parquet"
    table = pa.table({"responses": [[0] * 1_000_000], "attention_mask": [[1] * 1_000_000]})
    pq.write_table(table, path)
    assert path.stat().st_size < 20_000
    monkeypatch.setenv(MAX_LOAD_MB_ENV, str(48 * 999_999 / 2**20))  # the values limit is 999,999
    with pytest.raises(ValueError) as err:
        load_run(path)
    assert "declares 8,000,000" in str(err.value) or "declares 1,000,000 values, over the 999,999" in str(err.value)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (
            "prompt_token_ids",
            pa.array(["1 2 3"] * 3),
            "column 'prompt_token_ids' is string, expected list<int32> (token ids)",
        ),
        ("segments", pa.array(["x"] * 3), "column 'segments' is string, expected a list of segment structs"),
        (
            "segments",
            pa.array([[{"role": "model", "text": "ab", "token_ids": ["1", "2"]}]] * 3),
            "column 'segments.token_ids' is list<element: string>, expected list<int32>",
        ),
    ],
)
def test_native_parquet_column_of_the_wrong_type_is_a_clear_error(tmp_path, column, value, message):
    """Was ``AttributeError: 'StringArray' object has no attribute 'offsets'``."""
    path = _native_parquet(tmp_path / "good.parquet")
    table = pq.read_table(path)
    bad = table.set_column(table.column_names.index(column), column, value).replace_schema_metadata(
        table.schema.metadata
    )
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(ValueError) as err:
        load_run(tmp_path / "bad.parquet")
    assert str(err.value).startswith(f"{tmp_path / 'bad.parquet'}: {message}")
    assert str(err.value).endswith("(the native Parquet schema); no row of this file can be read")


def test_native_parquet_without_some_segment_fields_loads_them_as_absent(tmp_path):
    """A segment struct lacking ``log_probs`` etc. (was ``KeyError: 'log_probs'``)."""
    segs = pa.array([[{"role": "model", "text": "ab", "token_ids": [1, 2]}]] * 2)
    table = pa.table({"id": ["a", "b"], "group_id": ["g", "g"], "prompt": ["p", "p"], "segments": segs})
    pq.write_table(table, tmp_path / "r.parquet")
    res = load_run(tmp_path / "r.parquet", fmt="native")
    assert [(t.id, t.segments[0].token_ids.tolist(), t.segments[0].log_probs) for t in res.run.trajectories] == [
        ("a", [1, 2], None),
        ("b", [1, 2], None),
    ]


def test_native_parquet_json_column_of_numbers_is_a_problem_per_row(tmp_path):
    path = _native_parquet(tmp_path / "good.parquet")
    table = pq.read_table(path)
    i = table.column_names.index("metadata")
    pq.write_table(table.set_column(i, "metadata", pa.array([1, 2, 3])), tmp_path / "bad.parquet")
    res = load_run(tmp_path / "bad.parquet")
    assert [str(p) for p in res.problems] == [
        f"{tmp_path / 'bad.parquet'}: row[{i}].metadata: expected JSON text, got int" for i in range(3)
    ]


def test_verl_parquet_string_responses_are_a_problem_per_row(tmp_path):
    """Was ``TypeError: len() of unsized object``."""
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"responses": ["ab", "cd"], "attention_mask": [[1, 1], [1, 1]]}), path)
    res = load_run(path)
    assert len(res.run) == 0
    assert [str(p) for p in res.problems if "responses" in str(p)] == [
        f"{path}: row[{b}].responses: expected a row of token ids" for b in range(2)
    ]


# ---------------------------------------------------------------------------------------------- JSON arrays
GOOD = [seg("model", [1, 2, 3], log_probs=[-0.1, -0.2, -0.3])]


def test_50_mb_item_of_a_json_array_is_skipped_without_reading_it_whole(tmp_path):
    """The JSONL line cap (16 MiB) now holds per item of a JSON array too; the others load."""
    items = [
        native("ok-0", GOOD),
        native("huge", [{"role": "model", "text": "x" * (50 * 2**20)}]),
        native("ok-1", GOOD),
    ]
    path = tmp_path / "arr.json"
    path.write_text(json.dumps(items, indent=1))
    load_run(write_jsonl(tmp_path / "warm.jsonl", items[:1]))  # the tokenizer's own load is not what is measured
    tracemalloc.start()
    res = load_run(path, fmt="native")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [t.id for t in res.run.trajectories] == ["ok-0", "ok-1"]
    (problem,) = res.problems
    assert (problem.line, problem.field) == (None, "[1]")
    assert problem.reason.startswith("record of 52,428,") and problem.reason.endswith(
        " bytes is over the limit of 16,777,216 bytes (max_bytes); skipped"
    )
    assert peak < 40 * 2**20  # at most one 16 MiB item's worth (was the 50 MB file, read and parsed whole)


@pytest.mark.parametrize("chunk", [1, 2, 7, 1 << 20])
def test_a_json_array_read_item_by_item_gives_the_same_records(tmp_path, monkeypatch, chunk):
    """Over ``max_bytes`` the array is split by scanning brackets, strings and escapes: chunk boundaries
    anywhere (even inside an escape) give the records the whole-file parse gives."""
    import engine.io.reading.records as records

    tricky = ['a "quoted" ] , } { [', "back\\slash\\", "\\u00e9 \\n", "]]]"]
    items = [native(f"t{i}", GOOD, metadata={"note": tricky[i % 4], "nested": [[1, {"k": "]"}], []]}) for i in range(6)]
    path = tmp_path / "arr.json"
    path.write_text(json.dumps(items, indent=2))
    whole = load_run(path, fmt="native")
    assert not whole.problems
    monkeypatch.setattr(records, "_CHUNK", chunk)
    streamed = load_run(path, fmt="native", max_bytes=600)  # the file is larger: item by item
    assert not streamed.problems
    assert [(t.id, t.metadata) for t in streamed.run.trajectories] == [
        (t.id, t.metadata) for t in whole.run.trajectories
    ]
    assert [t.metadata["note"] for t in streamed.run.trajectories[:4]] == tricky


def test_a_json_array_cut_short_keeps_the_items_before_the_cut_and_says_where(tmp_path):
    items = [native(f"t{i}", GOOD) for i in range(4)]
    text = json.dumps(items)
    path = tmp_path / "cut.json"
    path.write_text(text[: text.index('{"id": "t3"') + 20])
    res = load_run(path, fmt="native", max_bytes=200)
    assert [t.id for t in res.run.trajectories] == ["t0", "t1", "t2"]
    assert [(p.field, p.reason) for p in res.problems] == [
        (
            "[3]",
            f"the JSON array breaks off at byte {path.stat().st_size:,} (the file ends inside the array "
            "(truncated?)); nothing after item 2 is read",
        )
    ]


def test_a_bad_item_of_a_streamed_json_array_is_a_problem_and_the_rest_load(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[" + json.dumps(native("t0", GOOD)) + ", {oops}, " + json.dumps(native("t2", GOOD)) + "]")
    res = load_run(path, fmt="native", max_bytes=150)
    assert [t.id for t in res.run.trajectories] == ["t0", "t2"]
    assert [(p.field, p.reason.split(":")[0]) for p in res.problems] == [("[1]", "invalid JSON")]


@pytest.mark.parametrize("records", [2, 1])
def test_jsonl_after_a_stray_bracket_line_is_read_as_jsonl(tmp_path, records):
    """A "[" line and then JSONL records (no commas) is not an array cut short. Read as one, every record went
    under one "[0]: ... no item is whole" problem, no line named (the fuzz suite's rLLM files found it). Read as
    JSONL, each line is accounted for: the "[" line is invalid JSON, each record over the cap is named."""
    lines = ["[", *(json.dumps(native(f"t{i}", GOOD)) for i in range(records))]
    path = write_jsonl(tmp_path / "stray.jsonl", lines)
    cap = min(len(line) for line in lines[1:]) - 10  # the records are over it: no early line reads as JSON
    res = load_run(path, fmt="native", max_bytes=cap)
    assert res.run.trajectories == []
    assert [(p.line, p.field, p.reason.split(" ")[0]) for p in res.problems] == [
        (1, None, "invalid"),
        *((line, None, "record") for line in range(2, records + 2)),
    ], [str(p) for p in res.problems]


# ---------------------------------------------------------------------------------------------- dashboard
def test_the_dashboard_upload_path_refuses_the_bomb(tmp_path):
    from dashboard import loading

    data = _bomb_npz(tmp_path / "bomb.npz").read_bytes()
    with pytest.raises(ValueError, match=r"^bomb\.npz: member 'responses\.npy' declares 4,096\.0 MiB .*refused"):
        loading.load_upload("bomb.npz", data)


def test_jsonl_record_cap_unchanged(tmp_path):
    """The JSONL path is untouched: a line over ``max_bytes`` is still a problem at its line."""
    big = native("b", [{"role": "model", "text": "x" * 5000}])
    path = write_jsonl(tmp_path / "r.jsonl", [native("a", GOOD), big])
    res = load_run(path, max_bytes=1000)
    assert [t.id for t in res.run.trajectories] == ["a"]
    n = len(json.dumps(big)) + 1
    assert [(p.line, p.reason) for p in res.problems] == [
        (2, f"record of {n:,} bytes is over the limit of 1,000 bytes (max_bytes); skipped")
    ]


def test_verl_parquet_list_columns_are_read_as_views_not_python_objects(tmp_path):
    """A verl Parquet dump's id / mask / log-prob lists were ``to_pylist``-ed (~36 bytes a value as Python ints,
    so a file within the ceiling could take ten times it); now each row is a numpy slice of the Arrow buffer,
    and the run is the one its ``.npz`` twin gives."""
    from engine.io.adapters.verl_tensors import load_arrays

    rng = np.random.default_rng(0)
    responses = rng.integers(1, 150_000, (1000, 1000)).astype(np.int32)
    lp = -rng.random((1000, 1000)).astype(np.float32)
    mask = np.ones((1000, 1000), dtype=np.int64)
    mask[3, 900:] = 0
    pq.write_table(
        pa.table({"responses": list(responses), "attention_mask": list(mask), "old_log_probs": list(lp)}),
        tmp_path / "v.parquet",
    )
    tracemalloc.start()
    arrays = load_arrays(tmp_path / "v.parquet")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20  # was ~70 MB of Python ints and floats for these 3 M values
    assert arrays["responses"][5].dtype == np.int32 and arrays["responses"][5].tolist() == responses[5].tolist()
    np.savez(tmp_path / "v.npz", responses=responses[:8], attention_mask=mask[:8], old_log_probs=lp[:8])
    pq.write_table(
        pa.table({"responses": list(responses[:8]), "attention_mask": list(mask[:8]), "old_log_probs": list(lp[:8])}),
        tmp_path / "v8.parquet",
    )
    a, b = load_run(tmp_path / "v8.parquet").run.trajectories, load_run(tmp_path / "v.npz").run.trajectories
    assert [len(t.segments[0].token_ids) for t in a] == [1000, 1000, 1000, 900, 1000, 1000, 1000, 1000]
    for x, y in zip(a, b, strict=True):
        assert x.segments[0].token_ids.tolist() == y.segments[0].token_ids.tolist()
        assert x.segments[0].log_probs.tolist() == y.segments[0].log_probs.tolist()


def _dictionary_bomb(path: Path, rows: int, text: int) -> Path:
    """A native run whose every row's prompt is one ``text``-byte string, stored once in a dictionary page: the
    file is a few KB, its footer declares about ``text`` bytes, its rows decode to ``rows * text``."""
    small = pq.read_table(_native_parquet(path.with_suffix(".small.parquet"), n=1))
    table = small.take([0] * rows)
    prompt = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["p" * text], pa.large_string()))
    table = table.set_column(table.column_names.index("prompt"), "prompt", prompt)
    pq.write_table(table.replace_schema_metadata(small.schema.metadata), path)
    return path


def test_dictionary_encoded_text_that_expands_past_the_ceiling_is_not_decoded(tmp_path, monkeypatch):
    """Footer sizes cannot see it: one 64 KiB prompt referenced by 1,000 rows is 64 KiB in the file and 62.5
    MiB decoded (the same trick with a 1 MiB string makes a 49 KB file that decodes to 100 MB per 100 rows).
    String columns are read as dictionaries and counted before they are decoded."""
    path = _dictionary_bomb(tmp_path / "dict.parquet", rows=1000, text=64 * 1024)
    assert path.stat().st_size < 50_000
    monkeypatch.setenv(MAX_LOAD_MB_ENV, "64")  # 32 MiB may be decoded
    check_parquet(pq.ParquetFile(path), path)  # the footer passes
    tracemalloc.start()
    res = load_run(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(res.run) == 0
    (problem,) = res.problems
    assert (problem.field, problem.reason.split(" decode to ")[0]) == (
        "row[0]",
        "rows 0 to 999 are not read: rows 0 to 999",
    )
    # 66,103,697: 2 × 8,008 bytes of it the (empty) rollout_log_probs and entropy columns of the native schema,
    # 8,125 its (null) step column: 1,000 int64 and their validity bits
    assert problem.reason.split(" decode to ")[1].startswith("63.0 MiB (66,103,697 bytes)")
    assert "over the 32.0 MiB (33,554,432 bytes) a load may decode" in problem.reason
    assert peak < 16 * 2**20  # was the 62.5 MiB of prompts as Python strings
    table = pq.read_table(path)
    pq.write_table(
        pa.table({"responses": [[1, 2]] * 1000, "attention_mask": [[1, 1]] * 1000, "uid": table.column("prompt")}),
        tmp_path / "verl.parquet",
    )
    with pytest.raises(ValueError) as err:
        load_run(tmp_path / "verl.parquet")
    assert str(err.value).startswith(f"{tmp_path / 'verl.parquet'}: its 1,000 rows decode to 62.")
    assert str(err.value).endswith("can expand thousands of times); refused before decoding")


def test_parquet_with_small_row_groups_loads_every_row(tmp_path):
    """String columns are read as dictionaries one row group at a time (pyarrow cannot give a nested dictionary
    column for a batch spanning two row groups); runs written with row groups of 2 rows load whole."""
    path = _native_parquet(tmp_path / "run.parquet", n=7)
    table = pq.read_table(path)
    pq.write_table(table, tmp_path / "small.parquet", row_group_size=2)
    a, b = load_run(path), load_run(tmp_path / "small.parquet")
    assert not b.problems and a.run.content_hash == b.run.content_hash and len(b.run) == 7
    uid = pa.array([f"q{i // 2}" for i in range(7)])
    verl = pa.table({"responses": [[1, 2, 3]] * 7, "attention_mask": [[1, 1, 0]] * 7, "uid": uid})
    pq.write_table(verl, tmp_path / "verl.parquet", row_group_size=2)
    res = load_run(tmp_path / "verl.parquet")
    assert [(t.group_id, t.segments[0].token_ids.tolist()) for t in res.run.trajectories] == [
        (f"q{i // 2}", [1, 2]) for i in range(7)
    ]
