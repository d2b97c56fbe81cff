"""Which scheme widgets the sidebar shows, read from the field declarations (``engine.config.fields.Widget``).

Every ``CreditConfig`` field declared with a ``widget`` is drawn by the sidebar, in its section and order, when its
``when`` conditions hold (``shown``) and enabled when its ``enabled`` ones hold. A new field declared with a widget
(and a ``code``, its key in scheme codes) appears in the sidebar without a sidebar edit. No widgets in here.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.config import FIELDS
from engine.config.fields import Widget
from engine.policy_losses import get_policy_loss
from engine.profiles import PROFILES
from engine.registry import get_estimator

SECTIONS = ("scheme", "policy")  # the credit scheme, then the policy-loss stage

Values = Callable[[str], object]  # field name → the value the sidebar holds for it


def declared() -> list[tuple[str, Widget]]:
    """(field, widget) of every field declared with a widget, by section, then order."""
    out = [(n, f.metadata["widget"]) for n, f in FIELDS.items() if f.metadata.get("widget")]
    return sorted(out, key=lambda nw: (SECTIONS.index(nw[1].section), nw[1].order))


def term(name: str, field: str, values: Values, info) -> object:
    """The value of a condition's ``name`` for widget ``field``: a fact of the run (``run.<fact>``), of the
    estimator, of the chosen policy loss, of the profile's conventions, or a field's value."""
    if name.startswith("run."):
        return getattr(info, name.removeprefix("run."))
    if name == "estimator.whitened":
        return get_estimator(values("estimator")).whitened
    if name == "policy_loss.reads":
        return field in get_policy_loss(values("policy_loss")).reads
    if name.startswith("profile."):
        return PROFILES[values("profile")].conventions[name.removeprefix("profile.")]
    return values(name)


def holds(condition: str, field: str, values: Values, info) -> bool:
    """Whether ``condition`` (``<name>``, ``not <name>``, ``<name> == <value>``, ``<name> != <value>``) holds."""
    for op in (" == ", " != "):
        if op in condition:
            name, expected = condition.split(op)
            same = str(term(name.strip(), field, values, info)) == expected.strip()
            return same if op == " == " else not same
    if condition.startswith("not "):
        return not term(condition.removeprefix("not ").strip(), field, values, info)
    return bool(term(condition.strip(), field, values, info))


def shown(field: str, widget: Widget, values: Values, info) -> bool:
    return all(holds(c, field, values, info) for c in widget.when)


def enabled(field: str, widget: Widget, values: Values, info) -> bool:
    return all(holds(c, field, values, info) for c in widget.enabled)


def rows(items: list[tuple[str, Widget]]) -> list[list[tuple[str, Widget]]]:
    """The shown widgets in rows: one per widget, but consecutive widgets of one ``row`` sit two to a row."""
    out: list[list[tuple[str, Widget]]] = []
    for name, w in items:
        last = out[-1] if out else None
        if w.row and last and last[0][1].row == w.row and len(last) < 2:
            last.append((name, w))
        else:
            out.append([(name, w)])
    return out
