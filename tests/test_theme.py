"""Colours are defined once, in dashboard/theme.py: no other dashboard file (nor app.py) writes a colour value.

The scan reads the string literals of each file (f-strings included; comments are not colours and are skipped) and
flags a hex colour (``#rgb``, ``#rgba``, ``#rrggbb``, ``#rrggbbaa``) or an ``rgb(``/``rgba(``/``hsl(``/``hsla(``
call. Not flagged: HTML character references (``&#10;``), Plotly hover templates (``#%{x}``), f-string fields
(``#{pos}``) and markdown anchors (``#some-heading``: a letter that is not hex, or the ``-`` that follows).
Known limits: a GitHub pull-request number written in a string as ``#`` and four digits reads as a colour (write
"PR 1234"), and CSS colour names (``white``) and Streamlit's colour names (``st.badge(color="orange")``) are not
looked for.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THEME = ROOT / "dashboard" / "theme.py"
HEX = re.compile(r"(?<![&\w])#(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})(?![\w-])")
FUNCTIONAL = re.compile(r"\b(?:rgba?|hsla?)\(", re.IGNORECASE)
# (path relative to the repository, literal) pairs allowed outside theme.py, each with its reason. None today.
ALLOWED: dict[tuple[str, str], str] = {}
STRING_TOKENS = {tokenize.STRING} | ({tokenize.FSTRING_MIDDLE} if hasattr(tokenize, "FSTRING_MIDDLE") else set())


def colour_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of each colour value written in ``source``'s string literals."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in STRING_TOKENS:
            continue
        for k, line in enumerate(tok.string.splitlines() or [""]):
            for m in (*HEX.finditer(line), *FUNCTIONAL.finditer(line)):
                found.append((tok.start[0] + k, m.group(0)))
    return found


def scanned_files() -> list[Path]:
    files = [ROOT / "app.py", *sorted((ROOT / "dashboard").rglob("*.py"))]
    return [f for f in files if f != THEME]


def test_no_colour_literal_outside_theme() -> None:
    found = [
        f"{f.relative_to(ROOT)}:{line}: {lit}"
        for f in scanned_files()
        for line, lit in colour_literals(f.read_text(encoding="utf-8"))
        if (str(f.relative_to(ROOT)), lit) not in ALLOWED
    ]
    assert not found, "colour literals outside dashboard/theme.py (name them there):\n" + "\n".join(found)


def test_the_scan_covers_the_dashboard() -> None:
    names = {str(f.relative_to(ROOT)) for f in scanned_files()}
    assert {
        "app.py",
        "dashboard/compare_model.py",
        "dashboard/pages/compare.py",
        "dashboard/figures/groups.py",
    } <= names
    assert "dashboard/theme.py" not in names


@pytest.mark.parametrize(
    "line, expected",
    [
        ('C = "#b71c1c"', ["#b71c1c"]),
        ('C = ("#fff", "#000000", "#abcd", "#0072B2aa")', ["#fff", "#000000", "#abcd", "#0072B2aa"]),
        ('CSS = "a { color: #5f6b73; border: 1px solid #eceff1 }"', ["#5f6b73", "#eceff1"]),
        ("H = f\"<span style='color:#fff'>{x}</span>\"", ["#fff"]),
        ("S = 'rgba(245,124,0,0.25)'", ["rgba("]),
        ("S = f'0 0 3px rgb({r},{g},{b})'", ["rgb("]),
        ('S = """\nline\n  background: #fafafa;\n"""', ["#fafafa"]),
        # not colours
        ('NL = "&#10;"', []),
        ('T = "#%{x} %{y}"', []),
        ("T = f\"title='#{pos[j]} advantage'\"", []),
        ('L = "[see](docs/conventions/README.md#add-a-scheme)"', []),
        ('L = "docs/GLOSSARY.md#bad-faces"', []),
        ('L = "#deadline"', []),
        ("x = 1  # verl >= #6058, #fff in a comment", []),
    ],
)
def test_the_scan_finds_colours_and_only_colours(line: str, expected: list[str]) -> None:
    assert [lit for _, lit in colour_literals(line + "\n")] == expected


def test_the_scan_names_the_line() -> None:
    source = 'A = 1\nB = (\n    "x"\n    "#123456"\n)\nC = """\n\n  color: #abc;"""\n'
    assert colour_literals(source) == [(4, "#123456"), (8, "#abc")]


def test_theme_imports_no_dashboard_module() -> None:
    """The dashboard imports one way: theme.py is a leaf every page and figure may import."""
    tree = ast.parse(THEME.read_text(encoding="utf-8"))
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] in ("dashboard", "engine", "app")], imported
