"""Red-team the loaders: hostile inputs loaded in worker processes, counting hangs, memory deaths, tracebacks,
quiet changes, reads outside the allowed roots and peak memory.

    python scripts/redteam.py                 # the long run (docs/SECURITY.md)
    python scripts/redteam.py --quick         # the CI subset (tests/test_redteam.py)

Every input is loaded the way the dashboard loads a data-directory file (``load_run`` with the server's
tokenizer roots; the symlinked run folders the way the command line does, without roots), in a worker process
under an address-space limit (``--mem-gb``; 4 GiB for the trainer readers' inputs), then, if it loaded, batched,
credited (GRPO) and saved to JSONL and Parquet. Each outcome is one of:

* ``refused``: a ``ValueError``/``FileNotFoundError`` naming the file;
* ``reported``: loaded, with problems (for an input made from a trainer seed: problems its clean seed has not);
* ``clean``: loaded without a problem;
* ``resaved``: the loaded run, saved to JSONL or Parquet and loaded back, is not the same run (a quiet change);
* ``traceback``: any other exception, one after loading (batch, credit, save) or a worker killed otherwise;
  ``unlocated``: a refusal whose message does not name the file;
* ``hang``: no answer within ``--timeout`` (60 s for the trainer readers' inputs);
* ``memory``: a ``MemoryError`` (raised, or the reason a file was skipped) or a worker killed for memory (SIGKILL,
  or SIGABRT from a C++ allocation past the address-space limit).

Families: ``bytes`` (truncations, flipped bytes, garbage, duplicated/dropped lines of every seed file) must not
crash; ``field`` (one invalid value in one field: bad token ids, NaN / 7 in masks, text that does not match its ids,
wrong types, a 4,000-digit integer, a tokenizer path outside the roots, ...) must be refused or reported: loading
it ``clean`` is a *quiet change*; ``bomb`` (declared sizes far beyond what is stored: deflated zeros in npz/.pt,
RLE zeros in Parquet, a gzip bomb, a 50 MB record in a JSON array / JSONL line) must be refused or reported within
the memory limit; ``folder`` (one bad file, upper-case and compressed suffixes, subfolders) must load the good
files and report the rest. The trainer readers (TRL, prime-rl traces and token exports, slime, SkyRL, AReaL, ROLL,
ART, KG-R1, NeMo Gym) have seeds written by their writer mimics (``tests/writers/``) that feed ``bytes`` and
``field``, and two families of their own (``scripts/redteam_trainers.py``): ``structure`` (YAML alias bombs, trace
graphs of 10,000 / 100,000 nodes or a cycle, runaway responses, a pickle of millions of lists, an expanded tensor)
and ``quiet`` (booleans as token ids, log-probs or advantages, off-type reward columns, overflowing floats, string
flags, a missing first-record field, metadata JSON cannot hold, a symlink out of a run folder); each such input
is loaded twice, its format detected and forced. In every case no file outside the input, the package and the
caches may be opened (a Python audit hook in the worker records every ``open``, symlinks resolved).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from redteam_case import Case, twice

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VOCAB = 151_665
SEED_FILES = (
    "sample_runs/python_tool_two_rollouts/run.jsonl",
    "sample_runs/kgqa_multiturn/run.jsonl",
    "sample_runs/search_agent/rollouts.jsonl",
    "sample_runs/lint_cases/lint_cases.jsonl",
    "sample_runs/lint_cases/kgr1/kgr1_bookkeeping.jsonl",
    "sample_runs/nemo_gym/blackjack.jsonl",
    "sample_runs/nemo_gym/example_multi_step.jsonl",
)
MUST_FLAG = ("field", "bomb", "folder")  # families whose inputs must be refused or reported


@dataclass
class Outcome:
    case: Case
    kind: str  # refused / reported / clean / crash / unlocated
    detail: str = ""
    peak_mib: float = 0.0
    seconds: float = 0.0
    outside: list[str] = field(default_factory=list)
    n: int = -1  # trajectories loaded


# ----------------------------------------------------------------------------------------------------------- seeds


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _verl_arrays(rng: random.Random, B: int = 6, P: int = 4, T: int = 12) -> dict:
    import numpy as np

    g = np.random.default_rng(rng.randrange(2**16))
    lengths = g.integers(2, T + 1, size=B)
    resp_attn = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
    return {
        "responses": g.integers(0, VOCAB, size=(B, T)),
        "prompts": g.integers(0, VOCAB, size=(B, P)),
        "attention_mask": np.concatenate([np.ones((B, P), dtype=np.int64), resp_attn], axis=1),
        "response_mask": resp_attn.copy(),
        "old_log_probs": g.normal(size=(B, T)).astype(np.float32),
        "token_level_scores": np.where(np.arange(T)[None, :] == lengths[:, None] - 1, 1.0, 0.0).astype(np.float32),
        "uid": np.array([f"q{b // 2}" for b in range(B)]),
    }


def _save_verl(path: Path, d: dict, torch_dtype=None, sparse: tuple[str, ...] = ()) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    if path.suffix == ".npz":
        np.savez(path, **d)
    elif path.suffix == ".pt":
        out = {}
        for k, v in d.items():
            if v.dtype.kind == "U":
                out[k] = v.tolist()
                continue
            t = torch.from_numpy(np.ascontiguousarray(v))
            if torch_dtype is not None and t.is_floating_point():
                t = t.to(torch_dtype)
            out[k] = t.to_sparse() if k in sparse else t
        torch.save(out, path)
    else:
        cols = {k: [r.tolist() for r in v] if v.ndim == 2 else v.tolist() for k, v in d.items()}
        pq.write_table(pa.table(cols), path)
    return path


def make_seeds(work: Path, rng: random.Random) -> list[tuple[Path, str | None]]:
    """Clean files in every container the loaders read: the bundled samples (native, NeMo Gym, KG-R1 JSONL), the
    first sample as a JSON array and as native Parquet, and a verl batch as .npz, .pt and Parquet."""
    from engine.io import load_run, save_run

    seeds: list[tuple[Path, str | None]] = []
    for rel in SEED_FILES:
        dst = work / "seeds" / rel.replace("/", "__")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, dst)
        seeds.append((dst, None))
    first = _jsonl(ROOT / SEED_FILES[0])
    arr = work / "seeds" / "array.json"
    arr.write_text(json.dumps(first[1:], indent=1))
    seeds.append((arr, None))
    pq_path = work / "seeds" / "native.parquet"
    save_run(load_run(ROOT / SEED_FILES[1]).run, pq_path)
    seeds.append((pq_path, None))
    for suffix in (".npz", ".pt", ".parquet"):
        seeds.append((_save_verl(work / "seeds" / f"verl{suffix}", _verl_arrays(rng)), "verl_tensors"))
    return seeds


# ---------------------------------------------------------------------------------------------------- families


def bytes_cases(work: Path, seeds, rng: random.Random, n: int) -> list[Case]:
    """Damaged copies of the seeds: truncated, bytes flipped, garbage inserted, lines duplicated or dropped."""
    out = []
    for i in range(n):
        src, fmt = rng.choice(seeds)
        data = bytearray(src.read_bytes())
        how = rng.choice(("truncate", "flip", "garbage", "dup_line", "drop_line", "nul", "bom_crlf"))
        if how == "truncate":
            data = data[: rng.randrange(len(data))]
        elif how == "flip":
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == "garbage":
            at = rng.randrange(len(data))
            data[at:at] = os.urandom(rng.randint(1, 64))
        elif how in ("dup_line", "drop_line") and b"\n" in data:
            lines = bytes(data).split(b"\n")
            k = rng.randrange(len(lines))
            lines[k : k + 1] = [lines[k]] * (2 if how == "dup_line" else 0)
            data = bytearray(b"\n".join(lines))
        elif how == "nul":
            data[rng.randrange(len(data))] = 0
        else:
            data = bytearray(b"\xef\xbb\xbf" + bytes(data).replace(b"\n", b"\r\n"))
        dst = work / "bytes" / f"{i:05d}-{how}{src.suffix}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(bytes(data))
        out.append(Case("bytes", f"{how} {src.name}", str(dst), fmt))
    return out


def _segments(rec: dict) -> list[dict]:
    return [s for s in rec.get("segments", []) if isinstance(s, dict)]


BAD_IDS = (-1, VOCAB + 10, 2**63, 2**70, 1.5, "7", None, True, [1], {"a": 1})
BAD_NUMS = (float("nan"), float("inf"), "x", None, [1.0], {"a": 1}, 10**4000)
BAD_TURNS = (float("nan"), float("inf"), "x", None, [1.0], 10**4000)  # a list's turn: {"a": 1} is a valid one
BAD_MASK = (float("nan"), 7, -1, 0.5, "1")


def _native_field_mutations(rec: dict, rng: random.Random) -> list[tuple[str, object]]:
    """(what, mutated record) pairs for a native trajectory record; each must be refused or reported."""
    out = []
    segs = [s for s in _segments(rec) if s.get("token_ids")]
    if segs:
        s = rng.choice(segs)
        k = rng.randrange(len(s["token_ids"]))
        bad = rng.choice(BAD_IDS)
        s2 = dict(s, token_ids=[*s["token_ids"][:k], bad, *s["token_ids"][k + 1 :]])
        out.append((f"token_ids[{k}]={bad!r:.20}", s, s2))
        if s.get("text"):
            wrong = [rng.randrange(1000, 50_000) for _ in range(5)]
            out.append(("text 'ab' with 5 unrelated ids", s, dict(s, text="ab", token_ids=wrong)))
        for key in ("log_probs", "ref_log_probs", "values", "scores"):
            if isinstance(s.get(key), list) and s[key]:
                j = rng.randrange(len(s[key]))
                bad = rng.choice(BAD_NUMS)
                out.append((f"{key}[{j}]={bad!r:.20}", s, dict(s, **{key: [*s[key][:j], bad, *s[key][j + 1 :]]})))
                out.append((f"{key} one too long", s, dict(s, **{key: [*s[key], 0.0]})))
        out.append(("role 'hacker'", s, dict(s, role=rng.choice(("hacker", 7, None)))))
    muts = [(what, _replace_segment(rec, a, b)) for what, a, b in out]
    for key in ("turn_rewards", "global_rewards"):
        comp = rec.get(key)
        if isinstance(comp, dict) and comp:
            name = rng.choice(sorted(comp))
            if isinstance(comp[name], dict) and comp[name]:
                inner = rng.choice(sorted(comp[name]))
                muts.append(
                    (
                        f"{key}.{name}.{inner} bad",
                        dict(rec, **{key: {**comp, name: {**comp[name], inner: rng.choice(BAD_NUMS)}}}),
                    )
                )
            else:
                muts.append((f"{key}.{name} bad", dict(rec, **{key: {**comp, name: rng.choice(BAD_NUMS)}})))
        elif isinstance(comp, list) and comp:
            j = rng.randrange(len(comp))
            muts.append((f"{key}[{j}] bad", dict(rec, **{key: [*comp[:j], rng.choice(BAD_TURNS), *comp[j + 1 :]]})))
    muts.append(("segments not a list", dict(rec, segments=rng.choice(({}, "x", 3)))))
    muts.append(("id of a bad type", dict(rec, id=rng.choice(({}, [1], 1.5)))))
    md = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    muts.append(
        ("metadata.truncated not a bool", dict(rec, metadata={**md, "truncated": rng.choice(("yes", 2, None))}))
    )
    return muts


def _replace_segment(rec: dict, old: dict, new: dict) -> dict:
    return dict(rec, segments=[new if s is old else s for s in rec["segments"]])


def field_cases(work: Path, rng: random.Random, n: int) -> list[Case]:
    """One invalid value in one field of one record of a native sample (or its header, or a verl batch)."""
    out: list[Case] = []
    natives = [ROOT / SEED_FILES[k] for k in (0, 1, 3)]  # native JSONL with segments
    header_attacks = (
        ("tokenizer /etc/passwd", {"tokenizer": "/etc/passwd"}),
        ("tokenizer outside dir", {"tokenizer": str(work.parent / "outside")}),
        ("tokenizer ../ path", {"tokenizer": "../../../../etc"}),
        ("tokenizer symlink out", {"tokenizer": "LINK"}),
        ("metadata 4,000-digit int", {"metadata": {"big": 10**4000}}),
        ("metadata nested 5,000 deep", {"metadata": "DEEP"}),
    )
    (work.parent / "outside").mkdir(parents=True, exist_ok=True)
    (work.parent / "outside" / "tokenizer.json").write_text("{}")
    for i in range(n):
        src = rng.choice(natives)
        records = _jsonl(src)
        head = records[0] if "creditlens" in records[0] else None
        dst = work / "field" / f"{i:05d}" / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        roll = rng.random()
        if roll < 0.15 and head is not None:
            what, change = rng.choice(header_attacks)
            hdr = dict(head["creditlens"])
            if change.get("tokenizer") == "LINK":
                (dst.parent / "tok").symlink_to(work.parent / "outside")
                change = {"tokenizer": str(dst.parent / "tok")}
            if change.get("metadata") == "DEEP":
                dst.write_text(
                    json.dumps({"creditlens": hdr})[:-2]
                    + ', "metadata": {"d": '
                    + "[" * 5000
                    + "]" * 5000
                    + "}}}\n"
                    + "".join(json.dumps(r) + "\n" for r in records[1:])
                )
                out.append(Case("field", f"header {what}", str(dst), must_flag=True))
                continue
            records[0] = {"creditlens": {**hdr, **change}}
            _write_jsonl(dst, records)
            # a huge integer is data, kept exactly (the save-and-reload check below proves it); the rest is refused
            out.append(Case("field", f"header {what}", str(dst), must_flag="metadata" not in change))
            continue
        if roll < 0.25:
            out.append(_verl_field_case(work, i, rng))
            continue
        body = [j for j, r in enumerate(records) if "segments" in r]
        j = rng.choice(body)
        what, records[j] = rng.choice(_native_field_mutations(records[j], rng))
        _write_jsonl(dst, records)
        out.append(Case("field", what, str(dst), must_flag=True))
    return out


def _verl_field_case(work: Path, i: int, rng: random.Random) -> Case:
    import numpy as np

    d = _verl_arrays(rng)
    suffix = rng.choice((".npz", ".pt", ".parquet"))
    b, t = rng.randrange(len(d["responses"])), 0
    what = rng.choice(("mask NaN", "mask 7", "mask -1", "id out of range", "log-prob NaN", "ids as text"))
    if what.startswith("mask"):
        m = d["attention_mask"].astype(np.float64)
        m[b, d["prompts"].shape[1] + t] = {"mask NaN": np.nan, "mask 7": 7, "mask -1": -1}[what]
        d["attention_mask"] = m if what == "mask NaN" else m.astype(np.int64)
    elif what == "id out of range":
        d["responses"][b, t] = VOCAB + 5
    elif what == "log-prob NaN":
        d["old_log_probs"][b, t] = np.nan
    else:
        d["responses"] = d["responses"].astype(str)
    dst = work / "field" / f"{i:05d}-verl{suffix}"
    dst.parent.mkdir(parents=True, exist_ok=True)
    return Case("field", f"verl {what} ({suffix})", str(_save_verl(dst, d)), "verl_tensors", must_flag=True)


def dtype_cases(work: Path, rng: random.Random) -> list[Case]:
    """Realistic tensors the loaders must take without a traceback: bf16 / fp16 values, sparse tensors."""
    import torch

    out = []
    for what, kw in (
        ("bf16", {"torch_dtype": torch.bfloat16}),
        ("fp16", {"torch_dtype": torch.float16}),
        ("sparse mask", {"sparse": ("attention_mask",)}),
        ("sparse scores", {"sparse": ("token_level_scores",)}),
    ):
        dst = work / "dtype" / f"{what.replace(' ', '_')}.pt"
        dst.parent.mkdir(parents=True, exist_ok=True)
        out.append(Case("dtype", what, str(_save_verl(dst, _verl_arrays(rng), **kw)), "verl_tensors"))
    return out


def _deflated_zip_member(zf: zipfile.ZipFile, name: str, prefix: bytes, zeros: int) -> None:
    """Write ``prefix`` then ``zeros`` zero bytes into ``name``, deflated, without holding them."""
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zf.open(info, "w", force_zip64=True) as f:
        f.write(prefix)
        chunk = bytes(1 << 22)
        left = zeros
        while left:
            f.write(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))


def bomb_cases(work: Path, gib: float, rng: random.Random) -> list[Case]:
    """Small files declaring huge contents."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = work / "bomb"
    root.mkdir(parents=True, exist_ok=True)
    n = int(gib * (1 << 30))
    out = []
    # npz: a deflated member of zeros behind a real npy header (the 4 MB / 4 GiB file)
    npz = root / "zeros.npz"
    with zipfile.ZipFile(npz, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for key, dtype in (("responses", "<i8"), ("attention_mask", "<i8")):
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": dtype, "fortran_order": False, "shape": (n // 16 // 1024, 1024)}
            )
            _deflated_zip_member(zf, f"{key}.npy", header.getvalue(), n // 2)
    out.append(
        Case(
            "bomb",
            f"npz deflated zeros, {gib:g} GiB declared ({npz.stat().st_size >> 20} MiB)",
            str(npz),
            "verl_tensors",
            True,
        )
    )
    # npz whose npy header lies: shape far beyond the stored bytes
    liar = root / "liar.npz"
    with zipfile.ZipFile(liar, "w") as zf:
        for key in ("responses", "attention_mask"):
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<i8", "fortran_order": False, "shape": (1 << 28, 64)}
            )
            zf.writestr(f"{key}.npy", header.getvalue() + bytes(64))
    out.append(Case("bomb", "npz header declaring 128 GiB", str(liar), "verl_tensors", True))
    # .pt: torch's zip with a deflated storage of zeros
    pt = root / "zeros.pt"
    _pt_bomb(pt, n)
    out.append(
        Case(
            "bomb",
            f".pt deflated storage, {gib:g} GiB declared ({pt.stat().st_size >> 20} MiB)",
            str(pt),
            "verl_tensors",
            True,
        )
    )
    # Parquet: one row of a list column of zeros, RLE/dictionary-encoded to almost nothing
    rows = min(n // 4, 1 << 28)
    pqf = root / "zeros.parquet"
    offsets = pa.array([0, rows], type=pa.int32())
    col = pa.ListArray.from_arrays(offsets, pa.array(np.zeros(rows, dtype=np.int32)))
    pq.write_table(pa.table({"responses": col, "attention_mask": col}), pqf, compression="zstd")
    del col, offsets
    out.append(
        Case(
            "bomb",
            f"Parquet RLE zeros, {2 * rows * 4 / (1 << 30):.1f} GiB of ids ({pqf.stat().st_size >> 10} KiB)",
            str(pqf),
            "verl_tensors",
            True,
        )
    )
    # gzip bomb among a folder's files, and a JSON array / JSONL with one 50 MB record
    gz_dir = root / "gzdir"
    gz_dir.mkdir(exist_ok=True)
    shutil.copy(ROOT / SEED_FILES[0], gz_dir / "good.jsonl")
    with gzip.open(gz_dir / "bomb.jsonl.gz", "wb", compresslevel=1) as f:
        chunk = b" " * (1 << 22)
        for _ in range(max(1, n >> 22)):
            f.write(chunk)
    out.append(
        Case("bomb", f"folder with a gzip bomb ({gib:g} GiB)", str(gz_dir), None, True, _count(gz_dir / "good.jsonl"))
    )
    good = _jsonl(ROOT / SEED_FILES[0])[1:]
    big = dict(good[0], id="huge", metadata={"pad": "x" * (50 << 20)})
    arr = root / "big_item.json"
    arr.write_text(json.dumps([good[1], big]))
    out.append(Case("bomb", "50 MB record in a JSON array", str(arr), None, True))
    line = root / "big_line.jsonl"
    _write_jsonl(line, [good[1], big])
    out.append(Case("bomb", "50 MB JSONL line", str(line), None, True))
    deep = root / "deep.jsonl"
    deep.write_text("[" * 200_000 + "]" * 200_000 + "\n" + json.dumps(good[1]) + "\n")
    out.append(Case("bomb", "JSON nested 200,000 deep", str(deep), None, True))
    return out


def _pt_bomb(path: Path, nbytes: int) -> None:
    """A torch.save archive of {responses, attention_mask} whose storages are ``nbytes`` of zeros, deflated."""
    import torch

    small = io.BytesIO()
    numel = nbytes // 2 // 8
    # a real small archive re-zipped: its pickle re-made for ``numel`` elements, each storage member replaced by
    # ``nbytes / 2`` deflated zeros (torch.save itself would write every byte)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        tensors = {"responses": torch.zeros(0, dtype=torch.int64), "attention_mask": torch.zeros(0, dtype=torch.int64)}
        torch.save(tensors, small)
        with zipfile.ZipFile(io.BytesIO(small.getvalue())) as zin:
            for info in zin.infolist():
                if "/data/" in info.filename:
                    continue
                data = zin.read(info.filename)
                if info.filename.endswith("data.pkl"):
                    data = _patched_pickle(numel)
                out.writestr(info.filename, data)
            prefix = zin.namelist()[0].split("/")[0]
        for key in ("0", "1"):
            _deflated_zip_member(out, f"{prefix}/data/{key}", b"", numel * 8)


def _patched_pickle(numel: int) -> bytes:
    """The data.pkl of ``{"responses": zeros(2, numel // 2), "attention_mask": zeros(2, numel // 2)}``."""
    import pickle

    import torch

    class Storage:
        def __init__(self, key):
            self.key = key

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.LongStorage, obj.key, "cpu", numel) if isinstance(obj, Storage) else None

    buf = io.BytesIO()
    rebuild = torch._utils._rebuild_tensor_v2

    class T:
        def __init__(self, key):
            self.key = key

        def __reduce__(self):
            import collections

            return rebuild, (Storage(self.key), 0, (2, numel // 2), (numel // 2, 1), False, collections.OrderedDict())

    P(buf, protocol=2).dump({"responses": T("0"), "attention_mask": T("1")})
    return buf.getvalue()


def _count(path: Path) -> int:
    from engine.io import load_run

    return len(load_run(path).run.trajectories)


def folder_cases(work: Path, rng: random.Random) -> list[Case]:
    """Folders mixing a good file with a bad one, upper-case / compressed suffixes and a subfolder: the good file
    loads whole and the other entry is reported (an upper-case ``.JSONL`` is a data file: it loads too)."""
    out = []
    good, other = _count(ROOT / SEED_FILES[0]), _count(ROOT / SEED_FILES[2])
    for i, extra in enumerate(("bad.parquet", "BAD.JSONL", "x.jsonl.gz", "sub/", "bad.pt", "bad.npz", "trunc.parquet")):
        d = work / "folder" / f"{i}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / SEED_FILES[0], d / "a_good.jsonl")
        if extra.endswith("/"):
            (d / extra).mkdir(exist_ok=True)
            shutil.copy(ROOT / SEED_FILES[2], d / extra / "more.jsonl")
        elif extra == "BAD.JSONL":
            shutil.copy(ROOT / SEED_FILES[2], d / extra)
            out.append(Case("folder", f"good file + {extra}", str(d), None, False, good + other))
            continue
        elif extra.endswith(".gz"):
            (d / extra).write_bytes(gzip.compress((ROOT / SEED_FILES[2]).read_bytes()))
        elif extra == "trunc.parquet":
            (d / extra).write_bytes((work / "seeds" / "native.parquet").read_bytes()[:-100])
        else:
            (d / extra).write_bytes(os.urandom(2048))
        out.append(Case("folder", f"good file + {extra}", str(d), None, True, good))
    return out


# ------------------------------------------------------------------------------------------------------ worker

ALLOWED_PREFIXES: tuple[str, ...] = ()


def _audit(event: str, args: tuple) -> None:
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        real = os.path.realpath(path)  # a symlink inside the inputs that leads out is a read outside
        if not real.startswith(ALLOWED_PREFIXES):
            OPENED.append(path if real == path else f"{path} -> {real}")


OPENED: list[str] = []


def _peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def worker(conn, mem_gb: float, work: str) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (int(mem_gb * (1 << 30)), int(mem_gb * (1 << 30))))
    os.environ["CREDITLENS_DATA_DIR"] = work
    import torch

    from engine.io import load_run

    torch.set_num_threads(1)
    kw = _server_kwargs(work)
    global ALLOWED_PREFIXES
    ALLOWED_PREFIXES = (  # the inputs, the code, the caches (the tokenizer's fallback cache under the temp dir)
        *(str(p) + os.sep for p in (Path(work), ROOT, Path(sys.prefix), Path(sys.base_prefix))),
        *(os.path.realpath(p) + os.sep for p in (work, sys.prefix, sys.base_prefix, os.path.expanduser("~/.cache"))),
        os.path.join(tempfile.gettempdir(), "creditlens-"),
        *("/proc/", "/sys/", "/dev/", os.path.expanduser("~/.cache/"), "/usr/lib/", "/usr/share/", "/etc/ld.so"),
    )
    load_run(ROOT / SEED_FILES[0], **kw)  # the tokenizer, built once before the first input's clock starts
    sys.addaudithook(_audit)
    conn.send("ready")
    seed_notes: dict[tuple[str, str | None], Counter] = {}
    while True:
        try:
            case: Case = conn.recv()
        except EOFError:
            return
        OPENED.clear()
        _peak_reset()
        limit = int(min(case.mem_gb or mem_gb, mem_gb) * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, int(mem_gb * (1 << 30))))
        saved_env = {k: os.environ.get(k) for k in case.env}
        os.environ.update(case.env)
        t0 = time.perf_counter()
        try:
            notes = _seed_notes(case, seed_notes, kw, load_run)
            kind, detail, n = _load_case(case, {} if case.cli else kw, notes, work, load_run)
        finally:
            for k, v in saved_env.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
        conn.send((kind, detail, _peak_mib(), time.perf_counter() - t0, sorted(set(OPENED))[:5], n))


def _problem_key(p) -> tuple:
    return (p.line, p.field, p.reason.replace(str(p.file), "FILE") if p.file else p.reason)


def _seed_notes(case: Case, cache: dict, kw: dict, load_run) -> Counter:
    """The problems the clean seed of ``case`` loads with (a trainer reader's file-wide notes): a mutated copy that
    has only these is not flagged."""
    if case.seed is None:
        return Counter()
    key = (case.seed, case.fmt)
    if key not in cache:
        cache[key] = Counter(_problem_key(p) for p in load_run(case.seed, fmt=case.fmt, **kw).problems)
    return cache[key]


def _load_case(case: Case, kw: dict, seed_notes: Counter, work: str, load_run) -> tuple[str, str, int]:
    """Load ``case``, then batch, credit and save what loaded: (outcome kind, detail, trajectories loaded)."""
    from engine.config import CreditConfig
    from engine.credit import compute_credit
    from engine.io import save_run

    try:
        res = load_run(case.path, fmt=case.fmt, **kw)
        if any("MemoryError" in p.reason for p in res.problems):  # stopped by the address-space limit, not a check
            return "memory", "; ".join(str(p) for p in res.problems if "MemoryError" in p.reason)[:300], -1
        new = Counter(_problem_key(p) for p in res.problems) - seed_notes
        kind, detail = ("reported", "; ".join(str(p) for p in res.problems[:2])) if new else ("clean", "")
        if res.problems and not new:
            detail = "only the seed's own notes"
        try:
            run = res.run
            if run.trajectories:
                compute_credit(run.to_batch(), CreditConfig(estimator="grpo")).materialize()
            with tempfile.TemporaryDirectory(dir=work) as tmp:
                for out in (Path(tmp) / "out.jsonl", Path(tmp) / "out.parquet"):
                    save_run(run, out)
                    if changed := _changed_on_reload(run, out, load_run):
                        kind, detail = "resaved", f"{out.suffix}: {changed}"
        except Exception as e:  # noqa: BLE001 - after a load, anything is a crash
            kind, detail = (
                _error_kind(e),
                f"after load: {type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc()[-1500:],
            )
        return kind, detail, len(res.run.trajectories)
    except (ValueError, FileNotFoundError) as e:
        if "MemoryError" in str(e):  # a file skipped for the MemoryError it raised: the limit stopped it
            return "memory", str(e)[:300], -1
        named = Path(case.path).name in str(e)
        return ("refused" if named else "unlocated"), str(e)[:300], -1
    except BaseException as e:  # noqa: BLE001 - the point is to catch everything
        return _error_kind(e), f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc()[-1500:], -1


def _error_kind(e: BaseException) -> str:
    """``memory`` for an allocation the address-space limit refused (Python's or a C++ library's), else
    ``traceback``."""
    text = str(e)
    memory = isinstance(e, MemoryError) or "can't allocate memory" in text or "bad_alloc" in text
    return "memory" if memory else "traceback"


def _changed_on_reload(run, saved: Path, load_run) -> str:
    """What differs between ``run`` and ``saved`` (where it was just written) loaded back; "" when nothing."""
    back = load_run(saved).run
    if back.content_hash != run.content_hash:
        return "the trajectories differ once saved and loaded back"
    mine = dict(back.metadata)
    if mine.get("converted_from") == run.source and "converted_from" not in run.metadata:
        del mine["converted_from"]  # a saved run names the format it was converted from (engine.io.store.native)
    if json.dumps(mine, sort_keys=True, default=str) != json.dumps(run.metadata, sort_keys=True, default=str):
        return "the run's metadata differs once saved and loaded back"
    return ""


def _server_kwargs(work: str) -> dict:
    """What the dashboard passes to ``load_run`` for a data-directory file (the tokenizer roots, when it has them)."""
    import inspect

    from engine.io import load_run

    params = inspect.signature(load_run).parameters
    if "tokenizer_roots" in params:
        from dashboard.sources import allowed_roots

        return {"tokenizer_roots": allowed_roots()}
    return {}


def _ended(dead: bool, exitcode: int | None, limit: float) -> tuple[str, str]:
    """The outcome of a worker that died or ran past ``limit``: a ``hang``; ``memory`` when killed by SIGKILL (the
    kernel's out-of-memory killer) or SIGABRT (a C++ allocation past the address-space limit aborts the process);
    otherwise a ``traceback`` (a segfault, an exit)."""
    if not dead:
        return "hang", f"hang over {limit:.0f} s"
    return ("memory" if exitcode in (-9, -6) else "traceback"), f"worker killed (exit {exitcode})"


class Pool:
    """``workers`` worker processes, each restarted after a crash or a hang."""

    def __init__(self, workers: int, mem_gb: float, work: Path, timeout: float):
        self.ctx = mp.get_context("spawn")
        self.mem_gb, self.work, self.timeout = mem_gb, str(work), timeout
        self.slots = [self._start() for _ in range(workers)]

    def _start(self):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=worker, args=(child, self.mem_gb, self.work), daemon=True)
        p.start()
        while not parent.poll(1):  # it builds the tokenizer first
            if not p.is_alive():
                raise RuntimeError(f"a red-team worker did not start (exit {p.exitcode})")
        parent.recv()
        return [p, parent, None, 0.0]

    def run(self, cases: list[Case], on_done) -> None:
        todo = list(reversed(cases))
        while todo or any(s[2] for s in self.slots):
            for s in self.slots:
                if s[2] is None and todo:
                    s[2], s[3] = todo.pop(), time.perf_counter()
                    s[1].send(s[2])
            time.sleep(0.005)
            for i, s in enumerate(self.slots):
                if s[2] is None:
                    continue
                if s[1].poll():
                    try:
                        on_done(Outcome(s[2], *s[1].recv()))
                        s[2] = None
                        continue
                    except EOFError:
                        pass
                dead = not s[0].is_alive()
                limit = s[2].timeout or self.timeout
                late = time.perf_counter() - s[3] > limit
                if dead or late:
                    on_done(Outcome(s[2], *_ended(dead, s[0].exitcode, limit), seconds=time.perf_counter() - s[3]))
                    s[0].kill()
                    self.slots[i] = self._start()

    def close(self) -> None:
        for s in self.slots:
            s[1].close()
            s[0].join(5)
            s[0].kill()


# -------------------------------------------------------------------------------------------------------- main


def build_cases(work: Path, rng: random.Random, n: int, bomb_gib: float, n_trainer: int, quick: bool) -> list[Case]:
    """``n`` bytes + field inputs of the native and verl seeds, ``n_trainer`` of the trainer readers' seeds (each
    loaded twice: detected and forced), and the bomb, folder, dtype, structure and quiet families on top."""
    import redteam_trainers as trainers

    seeds = make_seeds(work, rng)
    tseeds = trainers.trainer_seeds(work)
    n_bytes, n_field = n // 2, n - n // 2
    t_bytes = []
    for c in bytes_cases(work / "tbytes", [(p, r) for r, p in tseeds.items()], rng, n_trainer // 2):
        c.reader, c.timeout, c.mem_gb = c.fmt, trainers.HANG_S, trainers.MEM_GB
        t_bytes += twice(c)
    return [
        *bomb_cases(work, bomb_gib, rng),
        *trainers.structure_cases(work, tseeds, quick),
        *folder_cases(work, rng),
        *dtype_cases(work, rng),
        *trainers.quiet_cases(work, tseeds, quick, ROOT / SEED_FILES[0], ROOT / SEED_FILES[2]),
        *field_cases(work, rng, n_field),
        *trainers.trainer_field_cases(work, tseeds, rng, n_trainer - n_trainer // 2),
        *bytes_cases(work, seeds, rng, n_bytes),
        *t_bytes,
    ]


KINDS = ("refused", "reported", "clean", "resaved", "traceback", "unlocated", "hang", "memory")


@dataclass
class Report:
    outcomes: list[Outcome]
    wall: float

    def _kind(self, *kinds: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind in kinds]

    @property
    def hangs(self) -> list[Outcome]:
        return self._kind("hang")

    @property
    def memory(self) -> list[Outcome]:
        return self._kind("memory")

    @property
    def tracebacks(self) -> list[Outcome]:
        """Exceptions other than a located refusal, killed workers, refusals that do not name the file."""
        return self._kind("traceback", "unlocated")

    @property
    def crashes(self) -> list[Outcome]:
        return self._kind("traceback", "unlocated", "hang", "memory")

    @property
    def silent(self) -> list[Outcome]:
        """Quiet changes: an input that must be flagged loaded clean, a run not the same once saved and loaded
        back, a load that did not hold the trajectories it must."""
        return [
            o
            for o in self.outcomes
            if (o.case.must_flag and o.kind == "clean")
            or o.kind == "resaved"
            or (o.case.expect_n is not None and o.kind in ("clean", "reported") and o.n != o.case.expect_n)
        ]

    @property
    def outside(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outside]

    @property
    def bad(self) -> int:
        return len(self.crashes) + len(self.silent) + len(self.outside)

    def text(self, show: int = 15) -> str:
        by_family: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            by_family[o.case.family][o.kind] += 1
        lines = [f"{'family':9} {'inputs':>7} " + " ".join(f"{k:>9}" for k in KINDS)]
        for fam, c in sorted(by_family.items()):
            lines.append(f"{fam:9} {sum(c.values()):>7,} " + " ".join(f"{c[k]:>9,}" for k in KINDS))
        allowed = Counter(
            o.case.name.split(" (")[0] for o in self.outcomes if o.case.family == "field" and o.kind == "clean"
        )
        if allowed:  # inputs that are data, not errors (a huge integer is kept exactly: the reload check says so)
            lines.append("field inputs loaded clean: " + ", ".join(f"{k} ×{v}" for k, v in allowed.most_common()))
        lines.append("by reader (inputs/bad): " + self._by_reader())
        peak = max(self.outcomes, key=lambda o: o.peak_mib)
        lines += [
            "",
            f"inputs {len(self.outcomes):,} in {self.wall:.0f} s; hangs {len(self.hangs)}; memory deaths "
            f"{len(self.memory)}; tracebacks {len(self.tracebacks)}; quiet changes {len(self.silent)}; "
            f"reads outside the roots {len(self.outside)}",
            f"peak worker memory {peak.peak_mib:,.0f} MiB ({peak.case.family}: {peak.case.name})",
        ]
        for family in ("bomb", "structure"):
            lines += self._slowest(family)
        for title, items in (
            ("HANG", self.hangs),
            ("MEMORY", self.memory),
            ("TRACEBACK", self.tracebacks),
            ("QUIET", self.silent),
            ("OUTSIDE", self.outside),
        ):
            for o in items[:show]:
                first = (o.detail.splitlines() or [""])[0][:300] or str(o.outside)
                lines.append(
                    f"{title}: [{o.case.family}] {o.case.name} ({o.case.path})"
                    + (f" [{o.n} trajectories, {o.case.expect_n} expected]" if o.case.expect_n is not None else "")
                    + f": {first}"
                )
            if len(items) > show:
                lines.append(f"{title}: ... and {len(items) - show} more")
        return "\n".join(lines)

    def _by_reader(self) -> str:
        bad = {id(o) for o in (*self.crashes, *self.silent, *self.outside)}
        total, flagged = Counter(), Counter()
        for o in self.outcomes:
            total[o.case.reader or "native/verl"] += 1
            flagged[o.case.reader or "native/verl"] += id(o) in bad
        return ", ".join(f"{r} {total[r]:,}/{flagged[r]:,}" for r in sorted(total))

    def _slowest(self, family: str) -> list[str]:
        """Each input of ``family`` (bombs, costly structures) with its peak memory and time."""
        items = [o for o in self.outcomes if o.case.family == family]
        if not items:
            return []
        slow = max(items, key=lambda o: o.seconds)
        lines = [
            f"{family}: peak {max(o.peak_mib for o in items):,.0f} MiB, slowest {slow.seconds:.2f} s ({slow.case.name})"
        ]
        for o in items:
            first = o.detail.splitlines()[0][:140] if o.detail else ""
            lines.append(f"  {o.kind:9} {o.peak_mib:7,.0f} MiB {o.seconds:6.2f} s  {o.case.name}: {first}")
        return lines


def run_redteam(
    inputs: int,
    seed: int,
    bomb_gib: float,
    workers: int,
    mem_gb: float,
    timeout: float,
    top: Path,
    trainer_inputs: int = 0,
    quick: bool = True,
):
    """Write the inputs under ``top/data`` (``outside/`` beside it is what must never be read) and load them all.
    ``quick``: a few inputs of each structure and quiet kind instead of all of them."""
    rng = random.Random(seed)
    work = top / "data"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cases = build_cases(work, rng, inputs, bomb_gib, trainer_inputs, quick)
    print(f"{len(cases):,} inputs written in {time.perf_counter() - t0:.0f} s under {work}", flush=True)
    outcomes: list[Outcome] = []
    pool = Pool(workers, mem_gb, work, timeout)
    try:
        pool.run(cases, outcomes.append)
    finally:
        pool.close()
    return Report(outcomes, time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=4000, help="bytes + field inputs (bombs, folders, dtypes on top)")
    ap.add_argument(
        "--trainer-inputs",
        type=int,
        default=400,
        help="bytes + field inputs of the trainer readers' seeds, each loaded twice (structure, quiet on top)",
    )
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the CI subset: 120 + 40 inputs, 0.25 GiB bombs, a few structures and quiet values",
    )
    ap.add_argument("--bomb-gib", type=float, default=4.0, help="declared size of the bombs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mem-gb", type=float, default=6.0, help="address-space limit of each worker")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before an input counts as a hang")
    ap.add_argument("--keep", help="keep the generated inputs in this directory")
    ap.add_argument("--show", type=int, default=15, help="failures listed per kind")
    args = ap.parse_args(argv)
    if args.quick:
        args.inputs, args.bomb_gib = min(args.inputs, 120), min(args.bomb_gib, 0.25)
        args.trainer_inputs = min(args.trainer_inputs, 40)
    top = Path(args.keep or tempfile.mkdtemp(prefix="clrt-"))  # not "creditlens-": see ALLOWED_PREFIXES
    try:
        report = run_redteam(
            args.inputs,
            args.seed,
            args.bomb_gib,
            args.workers,
            args.mem_gb,
            args.timeout,
            top,
            args.trainer_inputs,
            args.quick,
        )
        print(report.text(args.show))
        return 1 if report.bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
