"""The repository is self-contained: what its code, docs and lint messages cite is in it. Every "§N.M" points at a
heading of docs/conventions/, and nothing cites documents or trackers a user of a clone does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONVENTIONS = REPO / "docs" / "CONVENTIONS.md"
# .venv-references-NAME (SKIP_PREFIX): the separate environments references/setup_env.sh makes (each trainer
# package and its pinned dependencies).
SKIP_PREFIX = ".venv-references-"
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "golden",
    "data",
}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".yaml", ".yml"}
# Documents that only existed beside the repository, and the project's own tracker: a clone has neither.
# (Upstream issues and PRs, named with their repository, are public references and stay.)
FORBIDDEN = {
    "the reference-semantics notes by their old name": re.compile(r"\bSPEC\b"),
    "a worked example by its file number": re.compile(r"\bseed[ _]?00\d", re.I),
    "the project's own tracker": re.compile(r"project issue|(?<!verl )\bissues? #?\d+\b", re.I),
    "a path outside the clone": re.compile(r"\.\./shared|/work/shared|<shared>"),
}
SECTION_REF = re.compile(r"§\s?(\d+(?:\.\d+)?)")


def _text_files() -> list[Path]:
    out = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        skipped = any(part in SKIP_DIRS or part.startswith(SKIP_PREFIX) for part in rel.parts[:-1])
        if skipped or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or rel.as_posix() == ".ci/run":
            out.append(path)
    return sorted(out)


FILES = _text_files()


def conventions_sections() -> set[str]:
    """ "1", "1.3", … for every '## 1. Title' and '### 1.3 Title' heading."""
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", CONVENTIONS.read_text(), flags=re.M))


def test_the_conventions_document_has_its_sections() -> None:
    sections = conventions_sections()
    assert {"0", "1", "2", "3", "4", "5", "6", "7"} <= sections
    assert {f"1.{k}" for k in range(1, 8)} | {f"5.{k}" for k in range(1, 7)} | {"7.1", "7.2"} <= sections


def test_scan_sees_the_code_and_the_docs() -> None:
    names = {p.relative_to(REPO).as_posix() for p in FILES}
    assert {"README.md", "engine/credit.py", "engine/lint/groups.py", "docs/LINT.md", ".ci/run"} <= names
    assert not any(n.startswith("tests/golden/") and n.endswith(".json") for n in names)


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_nothing_cites_what_a_clone_lacks(what: str) -> None:
    pattern = FORBIDDEN[what]
    me = Path(__file__).resolve()
    hits = []
    for p in FILES:
        if p.resolve() == me:
            continue
        text = p.read_text(errors="replace")
        found = [f"{n}: {line.strip()[:100]}" for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        # a citation wrapped over two lines of a docstring or comment
        joined = re.sub(r"[ \t]*\n[ \t]*(?:#[ \t]*)?", " ", text)
        found += [f"wrapped: …{m.group(0)}…" for m in pattern.finditer(joined)][len(found) :]
        hits += [f"{p.relative_to(REPO)}:{h}" for h in found]
    assert not hits, f"{what}:\n" + "\n".join(hits)


def test_every_section_reference_exists() -> None:
    sections = conventions_sections()
    missing = [
        f"{p.relative_to(REPO)}:{n}: §{ref}"
        for p in FILES
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        for ref in SECTION_REF.findall(line)
        if ref not in sections
    ]
    assert not missing, "sections missing from docs/conventions/:\n" + "\n".join(missing)


def test_every_lint_reference_points_into_the_conventions() -> None:
    from engine.lint import CHECKS

    sections = conventions_sections()
    for name, check in CHECKS.items():
        refs = SECTION_REF.findall(check.reference)
        # a section of the conventions, another document of docs/, an engine module or a paper
        assert refs or any(k in check.reference for k in ("docs/", "engine.", "et al")), name
        assert set(refs) <= sections, (name, check.reference)


def _section(number: str) -> str:
    text = CONVENTIONS.read_text()
    start = re.search(rf"^## {number}\. ", text, flags=re.M).start()
    end = re.search(r"^## \d+\. ", text[start + 3 :], flags=re.M)
    return text[start : start + 3 + end.start()] if end else text[start:]


def test_profile_table_is_what_the_profiles_set() -> None:
    """§8's tables of profile conventions and of what each trainer has say what ``CreditConfig(profile=p)``
    resolves and what ``PROFILES[p]`` has, cell by cell."""
    from engine.config import CreditConfig
    from engine.profiles import CAPABILITIES, PROFILES

    lines = _section("8").splitlines()
    header = next(line for line in lines if line.startswith("| field | meaning |"))
    profiles = [c.strip() for c in header.strip("|").split("|")][3:]
    assert profiles == list(PROFILES)
    rows = {
        cells[0].strip("`"): cells[3:]
        for line in lines
        if line.startswith("| `") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 3 + len(profiles)
    }
    set_by_profiles = set().union(*(p.conventions for p in PROFILES.values()))
    assert set(rows) == set_by_profiles | set(CAPABILITIES)

    def shown(v) -> str:
        return repr(v).replace("'", '"') if isinstance(v, tuple) else str(v)

    for field_name, cells in rows.items():
        for profile, cell in zip(profiles, cells, strict=True):
            has = field_name in CAPABILITIES
            value = getattr(PROFILES[profile] if has else CreditConfig(profile=profile), field_name)
            assert cell.strip("`") == shown(value), (field_name, profile, cell, value)
