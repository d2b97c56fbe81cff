"""Red-team files built from the writer mimics (``tests/writers/``): a damaged first record does not decide a file's
format (the records vote, and the choice is said); metadata that is not JSON is converted at load, with a note, so
that saving and converting the run never fail; a folder load does not follow symbolic links out of the folder."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from writers import areal, art, kgr1, prime_rl, slime, trl

from engine.io import load_run, save_run
from engine.io.detect import detect, detect_format
from engine.io.reading.jsonable import Change, plain
from engine.io.reading.problems import Problem, RecordError
from engine.io.text.tokenize import get_tokenizer
from engine.timeline.index import index_steps, looks_like_step_run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


def damage_first(path: Path, key: str, out: Path) -> Path:
    """``path`` with ``key`` taken out of its first record, written to ``out``."""
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    del first[key]
    out.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return out


def vote_note(name: str, agreeing: int, total: int, dissent: str) -> str:
    return (
        f"detected as {name}: {agreeing} of {total} sampled records match it ({dissent}); records that do not fit it "
        "are reported one by one; pass the format (fmt=, --format) to read the file as another"
    )


# ------------------------------------------------------------------------------------------------ detection
@pytest.fixture(scope="module")
def kgr1_results(tok, tmp_path_factory):
    a0 = kgr1.rollout(tok, "Who wrote Dracula?", ["<answer>Bram Stoker</answer><|im_end|>"], [])
    a1 = kgr1.rollout(tok, "Who wrote Dracula?", ["<answer>Mary Shelley</answer><|im_end|>"], [])
    b0 = kgr1.rollout(tok, "Which river?", ["<answer>Nile</answer><|im_end|>"], [])
    b1 = kgr1.rollout(tok, "Which river?", ["<answer>Congo</answer><|im_end|>"], [])
    return kgr1.write_eval_results(tok, tmp_path_factory.mktemp("kgr1"), [[a0, a1, b0, b1]])


@pytest.mark.parametrize("key", ["prompt", "dataset", "uid", "score"])
def test_a_damaged_first_kgr1_record_is_outvoted_and_named(kgr1_results, tmp_path, key):
    """The damaged record is taken only by the generic tagged_text sniff; the other three are KG-R1's. Before the
    vote the first record decided: the whole file was read as tagged_text."""
    path = damage_first(kgr1_results, key, tmp_path / f"no_{key}.jsonl")
    found = detect(path)
    assert found.name == "kgr1_eval" and detect_format(path) == "kgr1_eval"
    assert found.note == vote_note("kgr1_eval", 3, 4, "line 1 matches tagged_text")
    res = load_run(path)
    assert res.run.source == "kgr1_eval"
    assert [t.id for t in res.run.trajectories] == [f"test_batch000_sample{i:03d}" for i in (1, 2, 3)]
    missing = "missing: KG-R1's evaluator (_save_batch_details) writes it in every record; record skipped"
    assert res.problems[0] == Problem(str(path), None, None, found.note, scope="run")
    assert Problem(str(path), 1, key, missing) in res.problems
    assert [p for p in res.problems if p.scope == "record"] == [Problem(str(path), 1, key, missing)]
    forced = load_run(path, fmt="kgr1_eval")  # forced: the same records, and no word on detection
    assert [t.id for t in forced.run.trajectories] == [t.id for t in res.run.trajectories]
    assert forced.problems == res.problems[1:]


def test_an_undamaged_file_is_detected_without_a_word(kgr1_results):
    assert detect(kgr1_results).note is None
    assert not [p for p in load_run(kgr1_results).problems if "detected as" in p.reason]


@pytest.fixture(scope="module")
def areal_file(tok, tmp_path_factory):
    """Both tasks' samples in one file (4 lines: tasks 7 and 8, two samples each)."""
    root = tmp_path_factory.mktemp("areal")
    folder, _ = areal.write_rollouts(tok, root)
    path = root / "both.jsonl"
    path.write_text((folder / "7.jsonl").read_text() + (folder / "8.jsonl").read_text())
    return path


@pytest.mark.parametrize("key", ["task_id", "seqlen", "completion"])
def test_a_damaged_first_areal_record_is_outvoted_and_named(areal_file, tmp_path, key):
    path = damage_first(areal_file, key, tmp_path / "areal.jsonl")
    found = detect(path)
    if key == "completion":  # no longer a tagged transcript either: no rival, nothing to say
        assert (found.name, found.note) == ("areal_rollout", None)
    else:
        assert (found.name, found.note) == (
            "areal_rollout",
            vote_note("areal_rollout", 3, 4, "line 1 matches tagged_text"),
        )
    for res in (load_run(path), load_run(path, fmt="areal_rollout")):
        assert res.run.source == "areal_rollout"
        assert [t.id for t in res.run.trajectories] == ["task-7/sample-1", "task-8/sample-0", "task-8/sample-1"]
        reason = "missing: AReaL's _dump_trajectory writes it in every record; record skipped"
        assert [p for p in res.problems if p.scope == "record"] == [Problem(str(path), 1, key, reason)]


def test_a_tie_goes_to_the_writer_specific_format(areal_file, tmp_path):
    """One damaged AReaL record (tagged_text) and one good one (areal_rollout, a writer-specific sniff): AReaL."""
    two = tmp_path / "two.jsonl"
    two.write_text("\n".join(areal_file.read_text().splitlines()[:2]) + "\n")
    path = damage_first(two, "seqlen", tmp_path / "tie.jsonl")
    found = detect(path)
    assert (found.name, found.note) == ("areal_rollout", vote_note("areal_rollout", 1, 2, "line 1 matches tagged_text"))


def test_a_json_array_of_verifiers_episodes_names_each_item(tmp_path):
    """Problems an episode reports itself carry its item (``[i].``), as every other reader's do."""
    from test_io_writer_prime_rl import GROUPS

    path, _ = prime_rl.write_step(str(tmp_path / "run"), 7, GROUPS, failed=1)
    episodes = [json.loads(line) for line in Path(path).read_text().splitlines()]
    for ep in episodes:
        ep.pop("group")  # grouped by task key then, with a problem per episode
    (tmp_path / "episodes.json").write_text(json.dumps(episodes))
    res = load_run(tmp_path / "episodes.json")
    assert res.run.source == "verifiers_traces"
    fields = [(p.line, p.field) for p in res.problems]
    assert fields == [(None, f"[{i}].group") for i in range(7)] + [(None, "[6].traces[0]"), (None, "[7].traces")]
    jsonl = load_run(path)  # the JSONL file says lines
    assert [(p.line, p.field) for p in jsonl.problems] == [(7, "traces[0]"), (8, "traces")]


# ------------------------------------------------------------------------------------------------ metadata
def test_plain_converts_each_kind_and_says_so():
    out, changes = plain(
        {
            "tensor": torch.tensor(2),
            "half": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
            "blob": b"\x00\xff",
            "tags": {"b", "a"},
            "half_dec": Decimal("0.5"),
            "tenth": Decimal("0.1"),
            "when": datetime.datetime(2024, 1, 2, 3, 4, 5),
            "took": datetime.timedelta(minutes=2),
            "f32": np.float32(0.25),
            "grid": np.array([[1, 2], [3, 4]], dtype=np.int16),
            "pair": (1, 2),
            "fine": {"x": [1.0, 2.0]},
        },
        "metadata",
    )
    assert out == {
        "tensor": 2,
        "half": [1.5, -2.0],
        "blob": base64.b64encode(b"\x00\xff").decode(),  # "AP8="
        "tags": ["a", "b"],
        "half_dec": 0.5,
        "tenth": "0.1",  # 0.1 has no float: its text
        "when": "2024-01-02T03:04:05",
        "took": 120.0,
        "f32": 0.25,
        "grid": [[1, 2], [3, 4]],
        "pair": [1, 2],
        "fine": {"x": [1.0, 2.0]},
    }
    json.dumps(out, allow_nan=False)
    assert [(c.field, c.became) for c in changes] == [
        ("metadata.tensor", "its number"),
        ("metadata.half", "a list of its values"),
        ("metadata.blob", "base64 text"),
        ("metadata.tags", "a sorted list"),
        ("metadata.half_dec", "a float (the same number)"),
        ("metadata.tenth", "its text"),
        ("metadata.when", "ISO 8601 text"),
        ("metadata.took", "seconds"),
        ("metadata.f32", "its value"),
        ("metadata.grid", "a list of its values"),
    ]
    assert changes[0] == Change("metadata.tensor", "a torch tensor (int64, shape [])", "its number")
    json_only = {"a": [1, 2.5, "x", None, True], "b": {"c": {}}}
    same, none = plain(json_only, "metadata")
    assert same is json_only and none == []


@pytest.mark.parametrize(
    "value, why",
    [
        (1j, "a builtins.complex value, which is not JSON data"),
        (torch.tensor([1j]), "a complex torch tensor (torch.complex64), which is not JSON data"),
        ({1: "a"}, "object key 1 is not a string"),
        (Path("/etc"), "a pathlib.PosixPath value, which is not JSON data"),
    ],
)
def test_plain_refuses_what_has_no_json_value_naming_the_field(value, why):
    with pytest.raises(RecordError) as err:
        plain({"ok": 1, "bad": value}, "metadata")
    assert (err.value.field, err.value.reason) == ("metadata.bad", why)


def test_a_huge_metadata_array_is_refused_before_its_list_is_made(monkeypatch):
    monkeypatch.setenv("CREDITLENS_MAX_METADATA_ARRAY", "10")
    with pytest.raises(RecordError) as err:
        plain({"big": np.zeros(11)}, "metadata")
    assert err.value.field == "metadata.big"
    assert err.value.reason.startswith("this array holds 11 values, over the 10 allowed per array or tensor")


def saves_and_converts(res, tmp_path: Path, source: Path) -> None:
    """The loaded run saves as JSONL and Parquet and reloads equal; ``python -m engine convert`` exits 0 (a child
    process that imports the engine: its tests are slow)."""
    for name in ("saved.jsonl", "saved.parquet"):
        save_run(res.run, tmp_path / name)
        back = load_run(tmp_path / name)
        assert back.problems == [] and back.run.trajectories == res.run.trajectories, name
    out = subprocess.run(
        [sys.executable, "-m", "engine", "convert", str(source), "--out", str(tmp_path / "converted.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert load_run(tmp_path / "converted.jsonl").run.trajectories == res.run.trajectories


@pytest.mark.slow  # saves_and_converts: a child process (6-7 s)
def test_a_slime_status_saved_as_a_tensor(tmp_path):
    from test_io_writer_slime import GROUPS

    path, _ = slime.save_debug_rollout_data(str(tmp_path / "rollout_data" / "{rollout_id}.pt"), GROUPS, rollout_id=3)
    dump = torch.load(path, weights_only=True)
    for s in dump["samples"]:
        s["status"] = torch.tensor(2)
    torch.save(dump, tmp_path / "3.pt")
    res = load_run(tmp_path / "3.pt")
    assert [t.metadata["status"] for t in res.run.trajectories] == [2] * 5
    assert [t.metadata["truncated"] for t in res.run.trajectories] == [False] * 5
    notes = {p.field: p.reason for p in res.problems if p.scope == "run"}
    assert notes["samples[0].metadata.status"] == (
        "a torch tensor (int64, shape []), which a saved run cannot hold as it is: stored as its number; so in "
        "every record of this file that holds one"
    )
    assert notes["samples[0].status"] == (
        "Tensor, not one of slime's Sample.Status texts (to_dict writes its value): whether the sample was truncated "
        "is unknown, so it is read as not truncated"
    )
    saves_and_converts(res, tmp_path, tmp_path / "3.pt")


@pytest.mark.slow  # saves_and_converts: a child process (6-7 s)
def test_art_binary_and_set_tags(tmp_path):
    path, _ = art.write_log(tmp_path)
    text = Path(path).read_text()
    assert text.startswith("- metadata:\n    step: 3\n")
    tagged = "- metadata:\n    step: 3\n    blob: !!binary aGVsbG8=\n    tags: !!set {b: null, a: null}\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("- metadata:\n    step: 3\n", tagged, 1))
    res = load_run(bad)
    group = res.run.trajectories[0].metadata["art_group"]
    assert group == {"step": 3, "blob": base64.b64encode(b"hello").decode(), "tags": ["a", "b"]}
    assert [(p.field, p.reason.split(",")[0]) for p in res.problems] == [
        ("[0].trajectories[0].metadata.art_group.blob", "binary data"),
        ("[0].trajectories[0].metadata.art_group.tags", "a set"),
    ]
    saves_and_converts(res, tmp_path, bad)


@pytest.mark.slow  # saves_and_converts: a child process (6-7 s)
def test_trl_decimal_and_binary_columns(tmp_path):
    from test_io_writer_trl import COMPLETIONS, PROMPTS, accuracy, fmt

    written = trl.write_completions(str(tmp_path / "trl"), 12, PROMPTS, COMPLETIONS, {"accuracy": accuracy, "f": fmt})
    table = pq.read_table(written.path)
    n = table.num_rows
    exact = [Decimal("0.50")] * (n - 1) + [Decimal("0.10")]
    table = table.append_column("dec", pa.array(exact, pa.decimal128(5, 2)))
    table = table.append_column("bin", pa.array([b"\x00\x01"] * n, pa.binary()))
    path = tmp_path / "completions_00012.parquet"
    pq.write_table(table, path)
    res = load_run(path)
    rows = {t.id: t.metadata["logged_columns"] for t in res.run.trajectories}
    assert {r["dec"] for r in rows.values()} <= {0.5, "0.10"} and {r["bin"] for r in rows.values()} == {"AAE="}
    changes = [(p.field, p.reason.split(",")[0]) for p in res.problems if "saved run" in p.reason]
    assert ("row[0].metadata.logged_columns.dec", "a decimal number") in changes
    assert ("row[0].metadata.logged_columns.bin", "binary data") in changes
    assert (f"row[{n - 1}].metadata.logged_columns.dec", "a decimal number no float holds exactly") in changes
    saves_and_converts(res, tmp_path, path)


# ------------------------------------------------------------------------------------------------ links
def native(id_: str) -> str:
    return json.dumps({"id": id_, "prompt": "p", "segments": [{"role": "model", "text": "hi"}]}) + "\n"


@pytest.fixture
def linked(tmp_path):
    """A run folder holding a link to /etc/passwd, to a run file elsewhere and to a step folder elsewhere."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    (elsewhere / "step_2").mkdir(parents=True)
    run.mkdir()
    (run / "a.jsonl").write_text(native("a"))
    (elsewhere / "b.jsonl").write_text(native("b"))
    (elsewhere / "step_2" / "c.jsonl").write_text(native("c"))
    os.symlink("/etc/passwd", run / "passwd.jsonl")
    os.symlink(elsewhere / "b.jsonl", run / "b.jsonl")
    os.symlink(Path("..") / "elsewhere" / "step_2", run / "step_2")
    return run


def test_a_folder_load_does_not_follow_links(linked):
    res = load_run(linked)
    assert [t.id for t in res.run.trajectories] == ["a"]
    targets = {
        "b.jsonl": linked.parent / "elsewhere" / "b.jsonl",
        "passwd.jsonl": "/etc/passwd",
        "step_2": "../elsewhere/step_2",
    }
    assert res.problems == [
        Problem(
            str(linked / name),
            None,
            None,
            f"skipped: a symbolic link (to {target}), not followed in a folder load; name it to load it",
        )
        for name, target in sorted(targets.items())
    ]


def test_a_link_the_user_names_is_followed(linked):
    assert [t.id for t in load_run(linked / "b.jsonl").run.trajectories] == ["b"]
    step = load_run(linked / "step_2")
    assert [(t.id, t.step) for t in step.run.trajectories] == [("c", 2)] and step.problems == []


def test_the_timeline_lists_no_link(linked):
    index = index_steps(linked, settle_s=0)
    assert [s.files for s in index.sources] == [(linked / "a.jsonl",)]
    os.symlink(linked.parent / "elsewhere" / "step_2", linked / "step_3")
    assert not looks_like_step_run(linked)  # two step folders, both links: not a run of steps
