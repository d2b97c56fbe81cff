"""The README and the documents beside it: short, their pictures present, their links leading to files, the
engine's ten lines running as written, and the test command the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
# [text](target) and ![alt](target), the target up to a space, ')' or '#'; code spans are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s#]*)(#[^)\s]*)?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _links(path: Path) -> list[tuple[str, Path]]:
    """Every relative link of a Markdown file: (as written, the file it names)."""
    text = CODE.sub("", path.read_text())
    out = []
    for target, _anchor in LINK.findall(text):
        if not target or re.match(r"[a-z]+:", target):  # an anchor in the same page, or a URL
            continue
        out.append((target, (path.parent / target).resolve()))
    return out


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_every_picture_the_readme_names_is_a_png_in_docs_images() -> None:
    images = IMAGE.findall(CODE.sub("", README.read_text()))
    assert len(images) >= 5
    for target in images:
        path = ROOT / target
        assert path.parent == ROOT / "docs" / "images", target
        assert path.is_file(), f"README names {target}: run python scripts/screenshots.py --readme"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", target
        assert path.stat().st_size <= 300_000, f"{target}: {path.stat().st_size} bytes, too big for git"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file(doc: Path) -> None:
    broken = [target for target, path in _links(doc) if not path.exists()]
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"


def test_the_link_scan_sees_the_readmes_links() -> None:
    targets = {t for t, _ in _links(README)}
    assert {"docs/SECURITY.md", "docs/PERFORMANCE.md", "docs/images/tokens.png", "docs/LINT.md"} <= targets
    assert any(t.startswith("engine/estimators/") for t in targets)  # the generated tables' code links
    assert any(t.startswith("tests/test_golden_") for t in targets)


def test_the_engine_in_ten_lines_runs(capsys) -> None:
    """The README's Python block, run as it is written."""
    text = README.read_text()
    section = text[text.index("## The engine in ten lines") :]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) <= 10
    exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the repository's own documentation
    shapes = capsys.readouterr().out
    assert shapes.count("torch.Size([57, ") == 5, shapes  # kgqa_multiturn: 57 trajectories


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs the README's second command, verbatim."""
    command = re.findall(r"```bash\n(.*?)\n```", README.read_text(), re.S)[1]
    assert command.endswith(".venv/bin/python -m pytest -q")
    assert command in (ROOT / ".ci" / "run").read_text()
