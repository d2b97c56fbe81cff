"""``python -m engine lint``: exit status 1 on an error-level finding, 0 otherwise, 2 on unusable input; the table
and the ``--json`` output."""

from __future__ import annotations

import json

import pytest

from engine.__main__ import main
from engine.io import save_run
from engine.lint.cases import lint_cases
from engine.lint.sample_run import lint_cases_runs


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("lint_cases")
    for stem, run in lint_cases_runs().items():
        (out / stem).parent.mkdir(parents=True, exist_ok=True)
        save_run(run, out / f"{stem}.jsonl")
    return out


@pytest.fixture(scope="module")
def reset_run(tmp_path_factory):
    """The reinforce_reset_at_holes case alone, saved as a native run."""
    path = tmp_path_factory.mktemp("reset") / "run.jsonl"
    save_run(lint_cases()["reinforce_reset_at_holes"].clean_run, path)
    return path


def test_error_finding_exits_1(reset_run, capsys):
    assert main(["lint", str(reset_run), "--profile", "verl-legacy", "--estimator", "reinforce_plus_plus"]) == 1
    out = capsys.readouterr().out
    assert "reinforce_reset_at_holes" in out and out.splitlines()[1].split()[:2] == ["severity", "check"]


def test_clean_scheme_exits_0(reset_run, capsys):
    assert main(["lint", str(reset_run), "--estimator", "reinforce_plus_plus"]) == 0
    assert "no findings" in capsys.readouterr().out


def test_warnings_only_exit_0(case_dir, capsys):
    assert main(["lint", str(case_dir), "--checks", "std_blowup,truncated_in_loss", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "std_blowup" in out and "truncated_in_loss" in out and "Dr.GRPO" in out  # explanation printed


def test_json_output_parses(case_dir, capsys):
    code = main(["lint", str(case_dir / "kgr1"), "--profile", "kg-r1", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["trajectories"] == 6 and data["scheme"]["profile"] == "kg-r1"
    checks = [f["check"] for f in data["findings"]]
    assert checks[0] == "bookkeeping_reward_leak" and data["findings"][0]["severity"] == "error"


def test_json_tokens_for_retokenization(case_dir, capsys):
    main(["lint", str(case_dir), "--json", "--checks", "retokenization_mismatch"])
    (f,) = json.loads(capsys.readouterr().out)["findings"]
    assert f["severity"] == "error" and sum(len(v) for v in f["tokens"].values()) == 5


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "does/not/exist.jsonl"],
        ["lint"],
        ["lint", "RUN", "--estimator", "no_such_estimator"],
        ["lint", "RUN", "--estimator", "gae", "--value-source", "critic", "--checks", "length_bias"],
    ],
)
def test_unusable_input_exits_2(argv, tmp_path, capsys):
    run = tmp_path / "novalues.jsonl"
    case = lint_cases()["std_blowup"]  # fresh objects: drop the critic values, so GAE has none to read
    for t in case.trajectories:
        for s in t.segments:
            s.values = None
    save_run(case.run, run)
    argv = [str(run) if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


def test_garbage_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    assert main(["lint", str(bad)]) == 2


def test_list_checks(capsys):
    assert main(["lint", "--list-checks"]) == 0
    assert "bookkeeping_reward_leak" in capsys.readouterr().out


def test_documented_flags_reproduce_each_case_scheme():
    from engine.__main__ import build_parser
    from engine.cli_compute import scheme_from_args
    from engine.lint.cli import scheme_flags

    for case in lint_cases().values():
        for cfg in (case.scheme, case.clean):
            flags = scheme_flags(cfg)
            argv = ["lint", "RUN"] + ([] if flags == "(defaults)" else flags.split())
            assert scheme_from_args(build_parser().parse_args(argv)) == cfg, (case.name, flags)
