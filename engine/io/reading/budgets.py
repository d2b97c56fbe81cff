"""Structure limits of a load, declared before any file is read: how many of a thing a file may hold.

The byte ceilings (``limits``: what a file declares it decodes to) stop a file that is large once decoded; these stop
a file that is small but costly to walk: a YAML document whose aliases expand a billion-fold, a trace graph of
100,000 branches, a pickle of millions of empty lists. Each is one ``Budget`` (a name, a default, the environment
variable that overrides it, what it counts), registered here so that the security documentation lists them all
(``budget_table``) and every reader refuses the same way: a ``RecordError`` or ``ValueError`` that names the file,
the field, the count found, the budget and its override, raised before the structure is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

BUDGETS: dict[str, Budget] = {}


@dataclass(frozen=True)
class Budget:
    """At most ``default`` ``unit`` per ``scope`` (``$env`` overrides it with a positive integer)."""

    name: str
    env: str
    default: int
    unit: str
    scope: str
    why: str

    def value(self) -> int:
        """The budget in force: ``$env`` if set (a positive integer), else ``default``."""
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            n = int(raw.replace(",", "").replace("_", ""))
        except ValueError:
            n = 0
        if n <= 0:
            raise ValueError(f"{self.env}={raw!r}: expected a positive integer ({self.unit} per {self.scope})")
        return n

    def over(self, count: int, what: str) -> str:
        """The reason a ``count`` over the budget is refused, for a problem or an error message."""
        return (
            f"{what} holds {count:,} {self.unit}, over the {self.value():,} allowed per {self.scope} "
            f"({self.name}; raise it with {self.env}); refused before it is built"
        )


def declare(name: str, env: str, default: int, unit: str, scope: str, why: str) -> Budget:
    """Register and return a budget; a name may be declared once."""
    if name in BUDGETS:
        raise ValueError(f"budget {name!r} declared twice")
    budget = Budget(name, env, default, unit, scope, why)
    BUDGETS[name] = budget
    return budget


def budget_table() -> str:
    """Markdown table of every declared budget (the security documentation keeps a copy; a test keeps them equal).
    The readers declare theirs when imported: all of them are imported first."""
    import engine.io.adapters  # noqa: F401
    import engine.io.detect  # noqa: F401

    rows = ["| budget | default | override | why |", "|---|---|---|---|"]
    for b in sorted(BUDGETS.values(), key=lambda b: b.name):
        rows.append(f"| {b.name} | {b.default:,} {b.unit} per {b.scope} | `{b.env}` | {b.why} |")
    return "\n".join(rows)
