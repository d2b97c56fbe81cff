"""Credit lints: what in a (run, credit scheme) pair puts credit where it should not be.

    from engine.lint import run_lints
    for f in run_lints(batch, CreditConfig(profile="kg-r1", estimator="gae")):
        print(f.severity, f.check, f.message)        # f.rows, f.tokens (row → positions) for highlighting

``CHECKS`` lists every check (name → function, severity, description, reference, explanation) in family order;
each family is one module (``FAMILIES``); thresholds are named in ``engine.lint.thresholds``;
``engine.lint.cases`` builds a small batch that triggers each check and a clean scheme that does not.
"""

import importlib

from engine.lint.context import LintContext
from engine.lint.model import CHECKS, SEVERITIES, Check, Finding, register_check
from engine.lint.runner import run_lints

# Check families, in the order the CLI and the dashboard list them.
FAMILIES = ("masks", "holes", "groups", "stepwise", "length", "data", "tokens", "logged", "policy")
for _family in FAMILIES:
    importlib.import_module(f"engine.lint.{_family}")

__all__ = ["CHECKS", "FAMILIES", "SEVERITIES", "Check", "Finding", "LintContext", "register_check", "run_lints"]
