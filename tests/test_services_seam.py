"""Every engine computation the dashboard runs goes through ``dashboard/services.py``.

The rule, as this test checks it (by reading the source, not by running it): a dashboard module (``app.py`` and
every file under ``dashboard/``) may take from the engine only

* types and values: configs, results, batches, the run's data classes, errors;
* declarations: registries and their look-ups, field declarations (``engine.config``), profiles, constants;
* checks of what a person typed (a threshold, a scheme's fixes, a path's confinement);
* process upkeep (the allocator, handing freed memory back to the OS).

Everything else the engine offers computes (``compute_credit`` and its stages, the policy losses, the lints, the
loaders, the tokenizers, the timeline) and is imported only by ``services.py`` and by the modules in ``EXEMPT``,
each for the reason given there. A name counts wherever it is imported (top or inside a function); for an engine
module imported whole (``from engine import config``), every attribute used is checked. Methods of engine objects
(``run.to_batch()``) are not followed: the rule is about the engine's functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Names any dashboard module may import from the engine (by their last dotted part).
ALLOWED = {
    # types and values
    "CreditConfig", "CreditResult", "TrajectoryBatch", "PolicyLoss", "RunHas", "Run", "Segment", "Trajectory",
    "StepIndex", "StepSource", "TokenizerError", "Widget",
    # declarations: registries, fields, profiles, constants
    "get_estimator", "list_estimators", "ESTIMATORS", "get_policy_loss", "list_policy_losses", "PROFILES",
    "CAPABILITIES", "FIELD_HELP", "STEPWISE_MODES", "PLACEMENTS", "LOSS_AGG_MODES", "KL_NAMES", "RS_OPTIONS",
    "CHECKS", "SEVERITIES", "SEVERITY_RANK", "LOGGED_ADVANTAGE_TOL", "FIELDS", "label", "choices", "bounds",
    "placements", "VALUE_STAND_INS",
    # checks of a person's input
    "check_threshold", "scheme_fixes", "confine",
    # process upkeep
    "release_free_memory", "tune_allocator",
}  # fmt: skip
# Engine modules a dashboard module may import whole: their attributes used are checked against ALLOWED.
MODULES = {"config", "runnable", "credit", "stages", "policy", "policy_losses", "kl", "lint", "shaping", "registry"}

# Module → (engine names it may import besides ALLOWED, why).
EXEMPT: dict[str, tuple[set[str], str]] = {
    "dashboard/services.py": ({"*"}, "the seam itself: it decides what to compute and caches it"),
    "dashboard/loading.py": (
        {"load_run"},
        "reads a run with the sidebar's progress bar; Streamlit cannot cache a function that draws on an element made "
        "outside it, so the run store in cache.py keeps what it reads and services takes the handle",
    ),
    "dashboard/steps.py": (
        {"detect_format", "index_steps", "looks_like_step_run"},
        "lists the step files of a folder for the step picker, before any run is read (cached per file stamp)",
    ),
    "dashboard/sources.py": ({"looks_like_step_run"}, "whether a path is a folder of steps (a directory listing)"),
    "dashboard/warmup.py": (
        {"engine", "engine.io", "get_backend", "get_tokenizer"},
        "imports the engine and loads the default tokenizer once at server start, on its own thread, through the "
        "services' tokenizer lock (loading.tokenizer_safe), before any session needs it",
    ),
    "dashboard/tables.py": (
        {"logged_advantage_tokens", "by_row_blocks", "describe_score"},
        "builds the tables services caches (token_table, trajectory_summary): it reads a result services computed "
        "and the trainer's logged advantages, and names a score in words",
    ),
    "dashboard/teach.py": (
        {"compute_credit", "place_scores", "subtract_kl", "estimate", "weigh_loss"},
        "shows the pipeline's own source on the Learn page (inspect.getsource); it calls none of them",
    ),
}


def dashboard_modules() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "dashboard").rglob("*.py"))]


def engine_names(tree: ast.AST) -> list[tuple[str, int]]:
    """(name, line) of everything a module takes from the engine: imported names, and the attributes it uses of
    engine modules it imports whole."""
    out, whole = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine":
            for a in node.names:
                out.append((a.name, node.lineno))
                if a.name in MODULES:
                    whole[a.asname or a.name] = a.name
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "engine"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in whole:
            out.append((node.attr, node.lineno))
    return out


def violations(rel: str, source: str) -> list[str]:
    """What module ``rel`` (its path from the repository root) takes from the engine against the rule."""
    extra = EXEMPT.get(rel, (set(), ""))[0]
    if "*" in extra:
        return []
    names = engine_names(ast.parse(source))
    return [
        f"{rel}:{line} takes {name!r} from the engine" for name, line in names if name not in ALLOWED | MODULES | extra
    ]


def test_only_services_calls_the_engine_to_compute() -> None:
    found = [v for p in dashboard_modules() for v in violations(p.relative_to(ROOT).as_posix(), p.read_text("utf-8"))]
    assert not found, "engine computations outside dashboard/services.py:\n" + "\n".join(found)


def test_every_exemption_is_used_and_explained() -> None:
    """An exemption that no longer matches an import is stale: remove it rather than let it cover a new call."""
    for rel, (names, why) in EXEMPT.items():
        assert len(why) > 20, rel
        if "*" in names:
            continue
        used = {n for n, _ in engine_names(ast.parse((ROOT / rel).read_text(encoding="utf-8")))}
        assert names <= used, f"{rel}: exempt but not imported: {sorted(names - used)}"


def test_the_rule_catches_a_computing_import() -> None:
    """The check itself: a page that imports compute_credit, or uses an engine module's computing attribute, fails."""
    src = "from engine import compute_credit, config\nfrom engine.lint import run_lints\nx = config.validate(1)\n"
    found = violations("dashboard/pages/probe.py", src)
    assert [v.split(" takes ")[1] for v in found] == [
        "'compute_credit' from the engine",
        "'run_lints' from the engine",
        "'validate' from the engine",
    ]
