"""How a ``CreditConfig`` field is declared, and the per-field rule read from each declaration.

``option(...)`` declares a field with its default; ``convention(...)`` one that the profile fills. Either names
the field's help, its allowed values (``choices``, or ``each`` for the items of a list), its closed numeric range
(``within``), a ``check`` for what those cannot say (a threshold's ``'L_U'`` form, a tuple's length) and a short
``label``. An option may also name its ``widget`` (how the dashboard's sidebar shows it, ``Widget``) and its
``code`` (its key in a scheme code, ``dashboard.schemes``). ``Rule`` is what validation applies to one field, built
once from the declaration and the field's type.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

UNIT = (0.0, 1.0)
NON_NEGATIVE = (0.0, math.inf)
POSITIVE = (math.ulp(0.0), math.inf)  # (0, ∞): the smallest positive float as its closed lower bound
FRACTION = (math.ulp(0.0), 1.0)  # (0, 1]


@dataclass(frozen=True)
class Widget:
    """How the dashboard's sidebar shows a field: plain data, the engine draws nothing. The sidebar draws every
    declared widget in ``order`` (``section`` "scheme", then "policy", the policy-loss stage), with the field's help.

    ``kind``: select, segmented, slider, toggle, checkbox, number, text, or the name of a drawer of the sidebar's own
    for a field that needs more than one widget (length_penalty, rollout_rs). ``row``: the shown widgets of one row
    sit side by side, two to a row. ``when``: conditions that must all hold for the widget to show; ``enabled``: for
    it to be enabled (it shows disabled otherwise). A condition is ``<name>``, ``not <name>``, ``<name> == <value>``
    or ``<name> != <value>``, where a name is a field of the scheme, ``run.<fact>`` (a fact of the run: has_values,
    has_log_probs, …), ``estimator.whitened``, ``policy_loss.reads`` (the chosen loss reads this field) or
    ``profile.<convention>``. ``options``: the values offered, when not the field's choices; ``none_label``: offer
    None first, shown as this; ``value_labels``: values shown in other words. ``bounded``: a number takes the
    declared range (``within``) as its bounds; ``min_value``, ``max_value``, ``step``, ``format`` as Streamlit's;
    ``width`` "stretch" fills the sidebar; ``compact``: smaller buttons (segmented), so that all fit one row."""

    kind: str
    label: str
    order: float
    section: str = "scheme"
    row: str = ""
    when: tuple[str, ...] = ()
    enabled: tuple[str, ...] = ()
    options: tuple | None = None
    none_label: str = ""
    value_labels: tuple[tuple[object, str], ...] = ()
    bounded: bool = False
    min_value: float | None = None
    max_value: float | None = None
    step: float | None = None
    format: str | None = None
    width: str = ""
    compact: bool = False


def option(
    default,
    help: str,
    *,
    choices: tuple | Callable[[], Mapping | tuple] | None = None,
    each: tuple | None = None,
    within: tuple[float, float] | None = None,
    check: Callable[[str, object], None] | None = None,
    label: str | None = None,
    widget: Widget | None = None,
    code: str | None = None,
):
    """Declare a ``CreditConfig`` field: its default, help text, allowed values (``choices``, or a function that
    returns them, for the estimator registry; ``each``: the values every item of a list field may take) or closed
    numeric range (``within``), a ``check(name, value)`` that raises a ValueError naming the field for what those
    cannot say, a short ``label`` (how the dashboard names the field in words), its sidebar ``widget`` and its
    ``code`` in a scheme code."""
    meta = dict(help=help, choices=choices, each=each, within=within, check=check, label=label)
    meta |= dict(widget=widget, code=code)
    return field(default=default, metadata=meta)


def convention(
    help: str, *, choices: tuple | None = None, each: tuple | None = None, within=None, label: str | None = None
):
    """Declare a convention: ``None`` here, filled from the profile (every ``Profile`` sets every convention)."""
    meta = dict(help=help, choices=choices, each=each, within=within, check=None, label=label, convention=True)
    return field(default=None, metadata=meta)


def range_text(within: tuple[float, float]) -> str:
    """A declared range as written in help and errors: "[0, 1]", "[0, ∞)", "(0, ∞)"."""
    if within == POSITIVE:
        return "(0, ∞)"
    if within == FRACTION:
        return "(0, 1]"
    lo, hi = within
    return f"[{lo:g}, ∞)" if hi == math.inf else f"[{lo:g}, {hi:g}]"


# ------------------------------------------------------------------------------------------------ types
def _items(v, name: str, what: str) -> list:
    if isinstance(v, str) or not hasattr(v, "__iter__"):
        raise ValueError(f"CreditConfig.{name}: expected a list of {what}, got {v!r}")
    return list(v)


def _weights(v, name: str) -> tuple[tuple[str, float], ...]:
    pairs = _items(v.items() if isinstance(v, Mapping) else v, name, "(name, weight) pairs")
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
        raise ValueError(f"CreditConfig.{name}: expected (name, weight) pairs or a name → weight mapping, got {v!r}")
    return tuple((str(k), _number(w, name)) for k, w in pairs)


def _number(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise ValueError(f"CreditConfig.{name}: expected a number, got {v!r}")
    out = float(v)
    if not math.isfinite(out):
        raise ValueError(f"CreditConfig.{name}: must be finite, got {out}")
    return out


def _flag(v, name: str) -> bool:
    if type(v).__name__ not in ("bool", "bool_"):  # Python's or numpy's
        raise ValueError(f"CreditConfig.{name}: expected true or false, got {v!r}")
    return bool(v)


def _whole(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"CreditConfig.{name}: expected an integer, got {v!r}")
    return v


def _text(v, name: str) -> str:
    if not isinstance(v, str):
        raise ValueError(f"CreditConfig.{name}: expected a name, got {v!r}")
    return v


def _texts(v, name: str) -> tuple[str, ...]:
    return tuple(_text(x, name) for x in _items(v, name, "names"))


# Annotation (without '| None') → the function that checks a value and gives it its canonical form.
COERCE: dict[str, Callable] = {
    "bool": _flag,
    "int": _whole,
    "float": _number,
    "str": _text,
    "tuple[str, ...]": _texts,
    "tuple[float, ...]": lambda v, name: tuple(_number(x, name) for x in _items(v, name, "numbers")),
    "tuple[tuple[str, float], ...]": _weights,
}


# ------------------------------------------------------------------------------------------------ rules
@dataclass(frozen=True)
class Rule:
    """What ``CreditConfig`` applies to field ``name``, read once from its declaration and type: ``coerce`` checks a
    value's type and gives its canonical form; ``choices`` (a collection or a function returning one), ``each``,
    ``within`` and ``check`` bound it."""

    name: str
    optional: bool
    convert: Callable
    choices: object
    each: tuple | None
    within: tuple[float, float] | None
    check: Callable[[str, object], None] | None

    def allowed(self):
        """The accepted values now (the estimator registry is read when asked: it fills after this module)."""
        return self.choices() if callable(self.choices) else self.choices

    def coerce(self, value):
        return None if value is None and self.optional else self.convert(value, self.name)

    def validate(self, value) -> None:
        """Raise a ValueError naming the field unless ``value`` (already coerced) is one the declaration allows."""
        if value is None:
            return  # an optional field left unset (a convention is never None here: every profile sets it)
        allowed = self.allowed()
        if allowed is not None and value not in allowed:
            raise ValueError(f"CreditConfig.{self.name}: {value!r} is not one of {list(allowed)}")
        for item in value if self.each is not None else ():
            if item not in self.each:
                raise ValueError(f"CreditConfig.{self.name}: {item!r} is not one of {list(self.each)}")
        if self.within is not None and not self.within[0] <= value <= self.within[1]:
            raise ValueError(f"CreditConfig.{self.name}: must be in {range_text(self.within)}, got {value}")
        if self.check is not None:
            self.check(self.name, value)


def rules_of(fields: Mapping[str, dataclasses.Field]) -> dict[str, Rule]:
    """Each field's ``Rule``; a TypeError for a field declared without ``option``/``convention`` or with a type
    ``COERCE`` does not know."""
    rules = {}
    for name, f in fields.items():
        hint = str(f.type)
        if not f.metadata.get("help") or hint.removesuffix(" | None") not in COERCE:
            raise TypeError(f"CreditConfig.{name}: declare it with option(...) or convention(...) and a known type")
        meta = f.metadata
        rules[name] = Rule(
            name,
            hint.endswith(" | None"),
            COERCE[hint.removesuffix(" | None")],
            meta["choices"],
            meta["each"],
            meta["within"],
            meta["check"],
        )
    return rules
