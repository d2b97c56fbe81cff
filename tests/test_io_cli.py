"""``convert`` and ``synth`` subcommands, the native JSON Schema, and the import rule for engine/io."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import jsonschema
from test_io_support import NEMO, REPO, SAMPLES, write_jsonl

from engine.cli import add_convert_parser, add_synth_parser
from engine.io import load_run

SCHEMA = REPO / "engine" / "io" / "store" / "schema" / "trajectory.v1.json"


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    add_convert_parser(sub)
    add_synth_parser(sub)
    args = parser.parse_args(argv)
    return args.handler(args)


def test_synth_writes_a_loadable_run(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    assert (
        run_cli(
            ["synth", "--trajectories", "12", "--tokens", "100", "--seed", "3", "--group-size", "4", "--out", str(out)]
        )
        == 0
    )
    assert "12 synthetic trajectories" in capsys.readouterr().out
    res = load_run(out)
    assert res.problems == [] and len(res.run) == 12
    assert len({t.group_id for t in res.run.trajectories}) == 3
    assert all(80 <= t.num_tokens <= 100 for t in res.run.trajectories)
    assert "log_probs" in res.run.trajectories[0].metadata["synthesized"]
    again = tmp_path / "again.parquet"
    run_cli(
        ["synth", "--trajectories", "12", "--tokens", "100", "--seed", "3", "--group-size", "4", "--out", str(again)]
    )
    assert load_run(again).run.content_hash == res.run.content_hash  # seeded: same seed, same run


def test_synth_presets_reproduce_the_shipped_samples(tmp_path):
    for preset, shipped in [
        ("kgqa_multiturn", "kgqa_multiturn"),
        ("python_tool_two_rollouts", "python_tool_two_rollouts"),
        ("search_agent", "search_agent"),
    ]:
        out = tmp_path / f"{preset}.jsonl"
        assert run_cli(["synth", "--preset", preset, "--out", str(out)]) == 0
        assert load_run(out).run.content_hash == load_run(SAMPLES / shipped).run.content_hash


def test_convert_reports_problems_and_writes_native(tmp_path, capsys):
    src = write_jsonl(
        tmp_path / "in.jsonl", [{"prompt": "Q", "response": "<answer> a </answer>", "reward": 1.0}, "{broken"]
    )
    out = tmp_path / "out.jsonl"
    assert run_cli(["convert", str(src), "--out", str(out), "--name", "demo"]) == 0
    captured = capsys.readouterr()
    assert "in.jsonl:2: invalid JSON" in captured.err and "1 trajectories from tagged_text, 1 problems" in captured.out
    run = load_run(out).run
    assert run.name == "demo" and run.source == "native" and len(run) == 1


def test_convert_with_synthesized_fields(tmp_path):
    out = tmp_path / "bj.jsonl"
    assert run_cli(["convert", str(NEMO / "blackjack.jsonl"), "--out", str(out), "--synthesize", "--seed", "1"]) == 0
    run = load_run(out).run
    assert all(t.metadata["synthesized"] == ["log_probs", "ref_log_probs", "values"] for t in run.trajectories)
    assert run.to_batch().values is not None


def test_native_files_match_the_json_schema():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    files = [
        SAMPLES / "kgqa_multiturn" / "run.jsonl",
        SAMPLES / "python_tool_two_rollouts" / "run.jsonl",
        SAMPLES / "nemo_gym" / "blackjack.jsonl",
    ]
    for path in files:
        for line in path.read_text().splitlines():
            validator.validate(json.loads(line))
    assert not validator.is_valid({"segments": [{"role": "critic", "text": "x"}]})
    assert not validator.is_valid({"id": "x"})


def test_engine_io_imports_no_ui_libraries():
    banned = {"streamlit", "plotly", "dashboard"}
    for path in (REPO / "engine" / "io").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not {n.split(".")[0] for n in names} & banned, f"{path.relative_to(REPO)} imports {names}"
    assert Path(REPO / "engine" / "cli.py").read_text().count("import streamlit") == 0


def test_format_doc_example_loads(tmp_path):
    """The JSONL example in docs/FORMAT.md is valid as written (one record per line)."""
    import re

    block = (
        re.search(r"```json\n(.*?)```", (REPO / "docs" / "FORMAT.md").read_text(), re.S).group(1).strip().splitlines()
    )
    path = tmp_path / "doc.jsonl"
    path.write_text(block[0] + "\n" + " ".join(block[1:]) + "\n")
    res = load_run(path)
    assert res.problems == [] and res.run.name == "demo"
    assert [s.num_tokens for s in res.run.trajectories[0].segments][2] == 10
    assert res.run.to_batch().turn_rewards.tolist() == [[[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]]
