"""Bad input never crashes a load and is never silently dropped: each bad record is one clear Problem, the
good records still load; ``strict=True`` raises on the first problem with ``file:line`` and the field."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from test_io_support import native, seg, write_jsonl

from engine.io import Problem, load_run

GOOD = [seg("model", [1, 2, 3], log_probs=[-0.1, -0.2, -0.3]), seg("tool", [4, 5], log_probs=[-1.0, -1.0])]


def good(i: int) -> dict:
    return native(f"ok-{i}", GOOD)


def load_with(tmp_path, bad_lines, **kw):
    """Three good records around the bad ones; returns (run, problems)."""
    path = write_jsonl(tmp_path / "run.jsonl", [good(0), *bad_lines, good(1), good(2)])
    res = load_run(path, fmt=kw.pop("fmt", "native"), **kw)
    assert [t.id for t in res.run.trajectories] == ["ok-0", "ok-1", "ok-2"]
    return res.run, res.problems


def only_problem(problems) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_truncated_json(tmp_path):
    line = json.dumps(good(9))[:40]
    p = only_problem(load_with(tmp_path, [line])[1])
    assert p.line == 2 and "invalid JSON (truncated record?)" in p.reason
    assert str(p) == f"{tmp_path / 'run.jsonl'}:2: {p.reason}"


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        (native("x", "not a list"), "segments", "expected a list of segments, got str"),
        (
            native("x", [{"role": "model", "token_ids": [1, "two"]}]),
            "segments[0].token_ids",
            "expected a flat list of numbers, found str 'two'",
        ),
        (native("x", [{"role": 7, "text": "hi"}]), "segments[0].role", "expected a string, got int"),
        (
            native("x", [seg("model", [1])], global_rewards={"em": "yes"}),
            "global_rewards.em",
            "expected a number, got str 'yes'",
        ),
        (
            native("x", [seg("model", [1])], turn_rewards=[{"f": None}]),
            "turn_rewards[0].f",
            "expected a number, got null",
        ),
        (native("x", [seg("model", [1])], prompt=3), "prompt", "expected a string, got int"),
        (
            native("x", [seg("model", [1])], metadata={"exclude_from_loss": "yes"}),
            "metadata.exclude_from_loss",
            "expected true or false",
        ),
        ([1, 2, 3], None, "expected a JSON object per trajectory, got list"),
    ],
)
def test_wrong_types(tmp_path, record, field, reason):
    p = only_problem(load_with(tmp_path, [record])[1])
    assert (p.line, p.field, p.reason) == (2, field, reason)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_rewards(tmp_path, literal):
    line = json.dumps(native("x", [seg("model", [1])], global_rewards={"reward": 0.0})).replace("0.0", literal)
    p = only_problem(load_with(tmp_path, [line])[1])
    assert p.field == "global_rewards.reward" and p.reason.startswith("non-finite value")


def test_non_finite_per_token_values(tmp_path):
    line = json.dumps(native("x", [seg("model", [1, 2], values=[0.5, 0.25])])).replace("0.25", "NaN")
    p = only_problem(load_with(tmp_path, [line])[1])
    assert (p.field, p.reason) == ("segments[0].values", "non-finite value nan at token 1")


def test_per_token_length_mismatch(tmp_path):
    rec = native("x", [seg("model", [1, 2, 3], log_probs=[-0.1, -0.2])])
    p = only_problem(load_with(tmp_path, [rec])[1])
    assert (p.field, p.reason) == ("segments[0].log_probs", "has 2 values for 3 tokens")


def test_per_token_length_mismatch_after_tokenizing_text(tmp_path):
    rec = native("x", [{"role": "model", "text": "Hello world", "log_probs": [-0.5]}])
    p = only_problem(load_with(tmp_path, [rec])[1])
    assert (p.field, p.reason) == ("segments[0].log_probs", "has 1 values for 2 tokens")


def test_unknown_role(tmp_path):
    p = only_problem(load_with(tmp_path, [native("x", [seg("critic", [1])])])[1])
    assert (p.field, p.reason) == ("segments[0].role", "unknown role 'critic' (expected model, tool, user or system)")


def test_role_aliases_are_accepted(tmp_path):
    path = write_jsonl(
        tmp_path / "a.jsonl", [native("x", [seg("assistant", [1]), seg("observation", [2]), seg("developer", [3])])]
    )
    res = load_run(path)
    assert res.problems == [] and [s.role for s in res.run.trajectories[0].segments] == ["model", "tool", "system"]


def test_zero_token_trajectories(tmp_path):
    run, problems = load_with(tmp_path, [native("empty", []), native("blank", [{"role": "model", "text": ""}])])
    assert [(p.line, p.field, p.reason) for p in problems] == [
        (2, "segments", "empty trajectory: the response has zero tokens"),
        (3, "segments", "empty trajectory: the response has zero tokens"),
    ]


def test_duplicate_ids(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [good(0), good(1), good(0)])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["ok-0", "ok-1"]
    p = only_problem(res.problems)
    assert (p.line, p.field, p.reason) == (3, "id", "duplicate trajectory id 'ok-0'; this record is skipped")


def test_turn_ids_going_backwards(tmp_path):
    segs = [dict(seg("model", [1]), turn=0), dict(seg("tool", [2]), turn=1), dict(seg("model", [3]), turn=0)]
    p = only_problem(load_with(tmp_path, [native("x", segs)])[1])
    assert (p.field, p.reason) == ("segments[2].turn", "turn ids go backwards (1 then 0)")


def test_token_id_outside_vocabulary(tmp_path):
    p = only_problem(load_with(tmp_path, [native("x", [seg("model", [5, 999_999])])])[1])
    assert p.field == "segments[0].token_ids" and "outside the vocabulary (151665 ids)" in p.reason


def test_binary_garbage_line(tmp_path):
    garbage = bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8)).replace(b"\n", b"")
    p = only_problem(load_with(tmp_path, [garbage])[1])
    assert p.line == 2 and ("binary data" in p.reason or "invalid JSON" in p.reason)


def test_binary_file_is_an_unknown_format(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(ValueError, match="cannot detect the format of .*blob.bin"):
        load_run(path)


def test_unknown_format_name(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [good(0)])
    with pytest.raises(ValueError, match="unknown format 'csv'; known formats: native, nemo_gym, rllm"):
        load_run(path, fmt="csv")


def test_unrecognised_records(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"foo": 1, "bar": 2}])
    with pytest.raises(ValueError, match=r"first record \(\['bar', 'foo'\]\) matches no known format"):
        load_run(path)


def test_50_mb_single_line_is_skipped_without_reading_it_whole(tmp_path):
    big = native("huge", [{"role": "model", "text": "x" * (50 * 2**20)}])
    path = write_jsonl(tmp_path / "big.jsonl", [good(0), big, good(1), good(2)])
    tracemalloc.start()
    res = load_run(path, max_bytes=2**20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [t.id for t in res.run.trajectories] == ["ok-0", "ok-1", "ok-2"]
    p = only_problem(res.problems)
    assert p.line == 2 and p.reason.startswith("record of 52,428,") and "over the limit of 1,048,576 bytes" in p.reason
    assert peak < 16 * 2**20  # never held the 50 MB line


def test_default_record_limit_rejects_50_mb(tmp_path):
    big = native("huge", [{"role": "model", "text": "x" * (50 * 2**20)}])
    path = write_jsonl(tmp_path / "big.jsonl", [good(0), big])
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["ok-0"]
    assert "over the limit of 16,777,216 bytes" in only_problem(res.problems).reason


def test_strict_raises_on_first_problem_with_location(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [good(0), native("x", [seg("model", [1, 2], log_probs=[0.0])])])
    with pytest.raises(ValueError, match=r"s\.jsonl:2: segments\[0\]\.log_probs: has 1 values for 2 tokens"):
        load_run(path, strict=True)
    assert len(load_run(write_jsonl(tmp_path / "ok.jsonl", [good(0)]), strict=True).run) == 1


def test_missing_log_probs_in_some_trajectories(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [good(0), native("bare", [seg("model", [1, 2])]), good(1)])
    res = load_run(path)
    assert len(res.run) == 3
    p = only_problem(res.problems)
    assert p.field == "bare.log_probs" and "old_log_probs is left out of the batch" in p.reason
    assert res.run.to_batch().old_log_probs is None


def test_empty_and_blank_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="no JSON records found"):
        load_run(tmp_path / "empty.jsonl")
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "missing.jsonl")


def test_progress_callback(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [good(i) for i in range(600)])
    seen = []
    load_run(path, progress=lambda f, msg: seen.append((f, msg)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) >= 3
    assert seen[-1][1] == "loaded 600 trajectories"


def test_undetectable_file_in_a_directory_is_a_problem(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [good(0)])
    (tmp_path / "notes.json").write_text('{"just": "a config"}')
    res = load_run(tmp_path)
    assert [t.id for t in res.run.trajectories] == ["ok-0"]
    p = only_problem(res.problems)
    assert p.file.endswith("notes.json") and "matches no known format" in p.reason and p.reason.endswith("file skipped")
    with pytest.raises(ValueError, match="matches no known format"):
        load_run(tmp_path, strict=True)


def test_the_fallback_parser_reads_big_integers_as_orjson_does() -> None:
    """A JSON array that orjson cannot read (a 400-digit number) falls back to the standard parser; an id of
    2**64 + 1 in it must read as in any other file (orjson's float, refused as an id), not as an exact int."""
    from engine.io.reading.records import parse_json

    big = 2**64 + 1
    assert parse_json(str(big).encode()) == float(big)  # orjson
    fallback = parse_json(b"[1" + b"0" * 400 + b", " + str(big).encode() + b", 18446744073709551615]")
    assert fallback[1] == float(big) and isinstance(fallback[1], float)
    assert fallback[2] == 2**64 - 1 and isinstance(fallback[2], int)
    assert fallback[0] == 10**400  # beyond a double: kept, and the record holding it is refused
