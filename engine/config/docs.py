"""The documentation tables made from the declarations: docs/CONFIG.md's field reference and its refusals (a test
keeps both equal)."""

from __future__ import annotations

from engine.config import rules
from engine.config.fields import range_text
from engine.config.scheme import CONVENTIONS, FIELD_HELP, FIELDS, HINTS, bounds


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _accepts(name: str) -> str:
    meta = FIELDS[name].metadata
    declared, within = meta["choices"], bounds(name)
    if callable(declared):  # the estimators: README's estimator table lists them
        return "a registered name"
    if declared or HINTS[name].startswith("bool"):
        return ", ".join(f"`{v}`" for v in declared or (True, False))
    if meta["each"]:
        return "each of " + ", ".join(f"`{v}`" for v in meta["each"])
    return range_text(within) if within else "–"


def field_table() -> str:
    """docs/CONFIG.md's table: every field with its type, default, what it accepts and its help, in declaration
    order (by pipeline stage)."""
    rows = ["| field | type | default | accepts | help |", "|---|---|---|---|---|"]
    for name, f in FIELDS.items():
        default = "profile's" if name in CONVENTIONS else f"`{f.default!r}`"
        rows.append(
            f"| `{name}` | `{_cell(HINTS[name])}` | {_cell(default)} | {_cell(_accepts(name))} | "
            f"{_cell(FIELD_HELP[name])} |"
        )
    return "\n".join(rows)


def refusal_table() -> str:
    """docs/CONFIG.md's refusals: every scheme ``CreditConfig`` refuses though each field is valid on its own
    (``rules.REFUSALS``), the field its error names and when it applies, in the table's order."""
    rows = ["| field | refused when |", "|---|---|"]
    rows += [f"| `{r.field}` | {_cell(r.when)} |" for r in rules.REFUSALS]
    return "\n".join(rows)
