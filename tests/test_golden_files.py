"""The bundled golden files: their README's table matches them, every file is checked by a golden test, and
extra directories add cases without running a bundled case twice."""

from __future__ import annotations

import json
import re
from pathlib import Path

import golden_utils
import pytest
from golden_utils import GOLDEN_DIR

FILES = sorted(p.name for p in GOLDEN_DIR.glob("*.json"))
README = (GOLDEN_DIR / "README.md").read_text()
GOLDEN_TESTS = {
    p.name: p.read_text() for p in Path(__file__).parent.glob("test_golden_*.py") if p.name != Path(__file__).name
}


def _commit(reference: dict) -> str:
    if "commit" in reference:
        return reference["commit"][:8]
    if "commits" in reference:
        return ", ".join(f"{k} {v[:8]}" for k, v in reference["commits"].items())
    return reference["package"].split(" ")[0]  # a released package, pinned by version (its file's sha256 kept)


def test_the_set_is_bundled() -> None:
    assert len(FILES) == 49
    assert sum(len(golden_utils.load_golden(f)["cases"]) for f in FILES) == 756
    assert "756 cases in 49 files." in README


@pytest.mark.parametrize("name", FILES)
def test_readme_row_matches_the_file(name: str) -> None:
    data = golden_utils.load_golden(name)
    rows = [line for line in README.splitlines() if line.startswith(f"| `{name}` |")]
    assert len(rows) == 1, f"{name}: {len(rows)} rows in tests/golden/README.md"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1] == f"{data['reference']['repo'].split(' ')[0]} `{_commit(data['reference'])}`"
    assert cells[2] == str(len(data["cases"]))
    users = sorted(re.findall(r"`(test_golden_\w+\.py)`", cells[4]))
    assert users and users == sorted(m for m, src in GOLDEN_TESTS.items() if name in src)


def test_readme_lists_no_missing_file() -> None:
    listed = re.findall(r"^\| `([\w.]+\.json)` \|", README, flags=re.M)
    assert sorted(listed) == FILES


def _write(dir_: Path, name: str, cases: list) -> None:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / name).write_text(json.dumps({"reference": {}, "cases": cases}))


def test_extra_directory_adds_only_new_cases(tmp_path, monkeypatch) -> None:
    name = "verl_remax.json"
    bundled = golden_utils.load_golden(name)["cases"]
    changed = json.loads(json.dumps(bundled[0]))
    changed["params"]["note_for_test"] = 1
    extra = tmp_path / "held" / "golden"
    _write(extra, name, [bundled[1], changed])  # one case already bundled verbatim, one that is not
    monkeypatch.setenv("CREDITLENS_GOLDEN_EXTRA", str(extra))
    ids = [p.id for p in golden_utils.golden_cases(name)]
    assert ids == [c["name"] for c in bundled] + [f"held/golden:{changed['name']}"]
    assert golden_utils.golden_cases(name)[-1].values[0] == changed


def test_extra_directory_without_the_file_adds_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CREDITLENS_GOLDEN_EXTRA", str(tmp_path))
    assert len(golden_utils.golden_cases("verl_remax.json")) == len(
        golden_utils.load_golden("verl_remax.json")["cases"]
    )
