"""Links for the README's generated tables: each row's code (its registered function, by name, linked to its
file) and its tests (the test modules that check it against the reference trainers' golden files).

Everything here is computed from the source tree, never written by hand. Links name files, not lines, so editing
a module does not make the README stale; ``scripts/readme_tables.py`` pastes the tables again when a row changes.
Links are relative to the repository root, which is where the README sits.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
# Golden files whose case names use their trainer's own estimator names: name → ours.
TRAINER_NAMES = {"openrlhf_advantages.json": "engine.profiles.openrlhf_estimator"}


def code_link(fn) -> str:
    """``[`compute_x`](engine/…/file.py)``: the function ``fn`` and the file that defines it."""
    path = Path(inspect.getsourcefile(fn)).resolve().relative_to(ROOT).as_posix()
    return f"[`{fn.__name__}`]({path})"


def tests_links(modules: list[str]) -> str:
    """``[verl_outcome](tests/test_golden_verl_outcome.py), …`` (the module's name without ``test_golden_``)."""
    if not modules:
        return "–"
    return ", ".join(f"[{m.removeprefix('test_golden_').removeprefix('test_')}](tests/{m}.py)" for m in modules)


@functools.cache
def _strings(module: str) -> frozenset[str]:
    """Every string constant of ``tests/<module>.py`` (f-string parts included)."""
    tree = ast.parse((TESTS / f"{module}.py").read_text())
    return frozenset(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


@functools.cache
def _modules() -> tuple[str, ...]:
    """The test modules that read golden files (``test_golden_files.py`` checks the files themselves)."""
    names = sorted(p.stem for p in TESTS.glob("test_golden_*.py"))
    return tuple(n for n in names if n != "test_golden_files")


def golden_modules(files) -> list[str]:
    """The test modules that name any of the golden ``files`` (by file name)."""
    wanted = set(files)
    return [m for m in _modules() if wanted & _strings(m)]


@functools.cache
def _golden() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(GOLDEN.glob("*.json"))}


def _ours(file: str, name: str) -> str:
    """A golden case's estimator name in CreditLens's terms."""
    if file in TRAINER_NAMES:
        from engine.profiles import OPENRLHF_ESTIMATORS, openrlhf_estimator

        return openrlhf_estimator(name)["estimator"] if name in OPENRLHF_ESTIMATORS else name
    return name


def estimator_golden_files(name: str) -> list[str]:
    """The golden advantage files with a case of estimator ``name``: a case named ``name/…`` (after the trainer's
    own names are mapped to ours) or a file whose reference function is registered as ``name``. Policy-loss files
    are left out: their cases are named after losses, some of which share an estimator's name."""
    out = []
    for file, golden in _golden().items():
        if "policy" in file:
            continue
        registered = f"(registered '{name}')" in str(golden["reference"].get("function"))
        named = any(_ours(file, str(c.get("name", "")).split("/")[0]) == name for c in golden["cases"])
        if registered or named:
            out.append(file)
    return out


def estimator_tests(name: str) -> list[str]:
    """The golden test modules that check estimator ``name`` (those reading its golden files); for an estimator
    no trainer has (``logged``), the test modules that name it."""
    if found := golden_modules(estimator_golden_files(name)):
        return found
    return [p.stem for p in sorted(TESTS.glob("test_*.py")) if name in _strings(p.stem)]


def profile_golden_files(source: str) -> list[str]:
    """The golden files made from the trainer a profile reproduces: its ``source`` names the commit (a prefix of
    at least 7 characters) or the released version, and a golden file's ``reference`` records the same."""
    tokens = {t.strip("()") for t in source.split()}
    out = []
    for file, golden in _golden().items():
        ref = golden["reference"]
        named = ref["commits"] if isinstance(ref.get("commits"), dict) else {"commit": ref.get("commit")}
        commits = [c for c in named.values() if isinstance(c, str)]
        version = str(ref.get("version") or "")
        by_commit = any(len(t) >= 7 and c.startswith(t) for t in tokens for c in commits)
        if by_commit or (version and version in tokens):
            out.append(file)
    return out
