"""The repository is self-contained: what its code, docs and lint messages cite is in it. Every "§N.M" is a heading
of the conventions docs (docs/conventions/*.md, docs/TUTORIAL.md for §7); a citation that names a file
("docs/conventions/kg-r1.md §3.2", "kg-r1.md §3.2" inside docs/) names the file that holds the section; the index's
section → file table says where each section is; and nothing cites documents or trackers a user of a clone does not
have, the single conventions file that was split included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
INDEX = DOCS / "conventions" / "README.md"
TUTORIAL = DOCS / "TUTORIAL.md"
# Every file that holds numbered sections: the index, one file per trainer and the policy stage, the tutorial (§7).
SECTION_FILES = sorted((DOCS / "conventions").glob("*.md")) + [TUTORIAL]
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
    # the conventions were one file before they were split into docs/conventions/ and docs/TUTORIAL.md
    "the removed single conventions file": re.compile(r"\bCONVENTIONS(?:\.md\b| ?§)"),
}


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


SECTION_REF = re.compile(r"§\s?(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^(#{2,3}) (\d+(?:\.\d+)?)(\.?) (.*)$", re.M)
# "docs/conventions/kg-r1.md §3.2", "conventions/kg-r1.md §3.2", "kg-r1.md §3.2", "docs/TUTORIAL.md §7.1"
FILE_CITE = re.compile(r"(?<![\w/.-])((?:\.\./)*[\w/.-]*?[\w-]+\.md)[ \t]?(?=§\s?\d)")
SEC = re.compile(r"§\s?(\d+(?:\.\d+)?)")
# what may stand between the sections of one citation: "§1.3 (…), §3.5; §5.2 and §5.3", "§2, example §7.2"
TRAILER = re.compile(r"[ \t]+step \d+")
SEP = re.compile(r"(?:,|;|,? and|,? or|, example|, then)[ \t]+(?=§\s?\d)")
MD_LINK = re.compile(r"\]\(([\w/.-]+\.md)#([\w-]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces → '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(path: Path) -> dict[str, str]:
    """Section number → heading text ('1' → '1. verl', '1.3' → '1.3 Advantage estimators …')."""
    return {m.group(2): f"{m.group(2)}{m.group(3)} {m.group(4)}" for m in HEADING.finditer(path.read_text())}


SECTIONS = {num: path for path in SECTION_FILES for num in headings(path)}  # section → the file that holds it


def joined(text: str) -> str:
    """A citation wrapped over two lines of a docstring or comment, read as one line."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#[ \t]*|\*[ \t]*)?", " ", text)


def _parens(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    return i


def file_citations(text: str) -> list[tuple[str, list[str]]]:
    """(file as written, [sections]) for every citation that names a file: the sections that follow the name up to
    the next file name or the end of the list."""
    out = []
    for m in FILE_CITE.finditer(text):
        secs, i = [], m.end()
        while s := SEC.match(text, i):
            secs.append(s.group(1))
            j = s.end()
            j = t.end() if (t := TRAILER.match(text, j)) else j
            if k := re.match(r"[ \t]*\(", text[j:]):
                j = _parens(text, j + k.end() - 1)
            if not (sep := SEP.match(text, j)):
                break
            i = sep.end()
        out.append((m.group(1), secs))
    return out


def where(section: str) -> str:
    return SECTIONS[section].relative_to(REPO).as_posix() if section in SECTIONS else "no file"


def resolve(name: str, citing: Path) -> Path:
    """A cited file: from the repository root when it starts with docs/, else next to the citing file."""
    return (REPO / name if name.startswith("docs/") else citing.parent / name).resolve()


def test_the_conventions_docs_have_their_sections() -> None:
    assert {str(k) for k in range(15)} <= set(SECTIONS)
    assert {f"1.{k}" for k in range(1, 8)} | {f"5.{k}" for k in range(1, 7)} | {"7.1", "7.2"} <= set(SECTIONS)
    assert SECTIONS["7.1"] == SECTIONS["7.2"] == TUTORIAL and SECTIONS["3.5"].name == "kg-r1.md"
    numbers = [num for path in SECTION_FILES for num in headings(path)]
    assert len(numbers) == len(set(numbers)), "a section number is a heading in two files"


def test_the_index_table_says_where_each_section_is() -> None:
    """The index's "section → file" table: one row per top-level section, naming the file whose heading it is, the
    heading's title and its anchor."""
    rows = re.findall(r"^\| §(\d+) \| (.+?) \| \[[^\]]+\]\(([\w/.-]+\.md)#([\w-]+)\) \|$", INDEX.read_text(), re.M)
    assert [num for num, *_ in rows] == sorted((n for n in SECTIONS if "." not in n), key=int)
    for num, title, href, anchor in rows:
        path = (INDEX.parent / href).resolve()
        assert path == SECTIONS[num].resolve(), (num, href)
        assert headings(path)[num] == f"{num}. {title}" and anchor == slug(f"{num}. {title}"), (num, title, anchor)


def test_every_citation_that_names_a_file_finds_its_section_there() -> None:
    checked, wrong = 0, []
    me = Path(__file__).resolve()
    for p in FILES:
        if p.resolve() == me:  # its examples are not citations
            continue
        for name, secs in file_citations(joined(p.read_text(errors="replace"))):
            target = resolve(name, p)
            holds = headings(target) if target in {f.resolve() for f in SECTION_FILES} else {}
            checked += len(secs)
            wrong += [f"{p.relative_to(REPO)}: {name} §{s} (§{s} is in {where(s)})" for s in secs
                      if s not in holds]  # fmt: skip
    assert not wrong, "citations whose file does not hold the section:\n" + "\n".join(wrong)
    assert checked > 150  # the code, the lints and the docs cite a few hundred sections this way


def test_the_citation_reader_follows_lists_and_wrapped_lines() -> None:
    text = joined(
        "# see docs/conventions/verl.md §1.3 (GRPO, (nested)), §1.6, docs/conventions/README.md\n# §5.2 and §5.3; x"
    )
    assert file_citations(text) == [
        ("docs/conventions/verl.md", ["1.3", "1.6"]),
        ("docs/conventions/README.md", ["5.2", "5.3"]),
    ]
    assert file_citations("(docs/TUTORIAL.md §7.1 step 6), §3.5") == [("docs/TUTORIAL.md", ["7.1"])]


def test_every_section_reference_exists() -> None:
    """A bare "§N.M" (the file left to the index) names a section of some conventions file."""
    missing = [
        f"{p.relative_to(REPO)}:{n}: §{ref}"
        for p in FILES
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        for ref in SECTION_REF.findall(line)
        if ref not in SECTIONS
    ]
    assert not missing, "sections missing from docs/conventions/ and docs/TUTORIAL.md:\n" + "\n".join(missing)


def test_every_link_into_the_conventions_docs_lands_on_a_heading() -> None:
    """Markdown links with an anchor ("[§5.6](README.md#56-advantages-at-masked-tokens)") point at a heading of the
    linked file: every such link in docs/, and every link into the conventions docs from any Markdown file."""
    section_files = {f.resolve() for f in SECTION_FILES}
    bad, checked = [], 0
    for p in (f for f in FILES if f.suffix == ".md"):
        for href, anchor in MD_LINK.findall(p.read_text()):
            target = (p.parent / href).resolve()
            if DOCS not in p.parents and target not in section_files:
                continue
            text = target.read_text() if target.is_file() else ""
            anchors = {slug(h) for h in re.findall(r"^#{1,6} (.*)$", text, re.M)}
            checked += 1
            if anchor not in anchors:
                bad.append(f"{p.relative_to(REPO)}: {href}#{anchor}")
    assert not bad, "links to a missing heading:\n" + "\n".join(bad)
    assert checked > 30


def test_every_lint_reference_points_into_the_conventions() -> None:
    """A lint's reference (shown on the Diagnostics page) names the file of every section it cites."""
    from engine.lint import CHECKS

    for name, check in CHECKS.items():
        refs = SECTION_REF.findall(check.reference)
        # a section of the conventions, another document of docs/, an engine module or a paper
        assert refs or any(k in check.reference for k in ("docs/", "engine.", "et al")), name
        cited = file_citations(check.reference)
        assert sorted(s for _, secs in cited for s in secs) == sorted(refs), (name, check.reference)
        for file, secs in cited:
            assert file.startswith("docs/") and all(s in headings(REPO / file) for s in secs), (name, check.reference)


def _section(number: str) -> str:
    text = INDEX.read_text()
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
