"""Page modules are thin: they read controls, call services and helpers, and draw.

The rule, as this test checks it: in ``dashboard/pages/*.py`` and the Learn page's tab modules
(``dashboard/learn/*.py``) no string literal holds an HTML tag (``<div``, ``<style>``, ``</b>`` …; markup is built in
``widgets``, ``tokens_html``, ``badges``, ``compare_model``, ``diagnostics``), and no module imports numpy, pandas
or torch (analysis lives in ``analysis``, ``tables``, ``teach`` and ``services``). A tag is an HTML element's name
after ``<`` or ``</``, so a file pattern such as ``<step>.jsonl`` in help text is not one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"numpy", "pandas", "torch"}
ELEMENTS = (
    "a|b|br|code|div|em|hr|i|img|li|ol|p|pre|span|strong|style|sub|sup|table|tbody|td|th|thead|tr|u|ul|script|svg"
)
TAG = re.compile(rf"</?(?:{ELEMENTS})\b[^<>]*>?", re.IGNORECASE)


def page_modules() -> list[Path]:
    return sorted((ROOT / "dashboard" / "pages").glob("*.py")) + sorted((ROOT / "dashboard" / "learn").glob("*.py"))


def html_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of the string literals (f-string parts included) that hold an HTML tag."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TAG.search(node.value):
            out.append((node.lineno, node.value))
    return out


def heavy_imports(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in HEAVY]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in HEAVY:
            out.append((node.lineno, node.module))
    return out


def test_there_are_pages_to_check() -> None:
    names = {p.name for p in page_modules()}
    assert {"tokens.py", "compare.py", "learn.py", "kgr1.py", "rllm.py", "pipeline.py"} <= names


def test_page_modules_build_no_html() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}: {text[:60]!r}"
        for p in page_modules()
        for line, text in html_strings(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not found, "HTML built in a page module (move it to a helper):\n" + "\n".join(found)


def test_page_modules_import_no_array_libraries() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}: {name}"
        for p in page_modules()
        for line, name in heavy_imports(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not found, "numpy/pandas/torch in a page module (move the analysis to a helper):\n" + "\n".join(found)


def test_the_checks_catch_what_they_forbid() -> None:
    src = 'import numpy as np\nfrom pandas import DataFrame\nx = f"<div style=\'a\'>{1}</div>"\ny = "`<step>.jsonl`"\n'
    tree = ast.parse(src)
    assert [name for _, name in heavy_imports(tree)] == ["numpy", "pandas"]
    assert [text for _, text in html_strings(tree)] == ["<div style='a'>", "</div>"]
