"""``CreditConfig``, the credit scheme, and what is derived from its field declarations.

* ``engine.config.fields``: how a field is declared (``option``, ``convention``) and the per-field ``Rule``;
* ``engine.config.scheme``: ``CreditConfig`` itself, its fields grouped by pipeline stage, and the tables derived
  from them (``FIELDS``, ``CONVENTIONS``, ``FIELD_HELP``, ``HINTS``, ``RULES``; ``choices``, ``bounds``, ``label``);
* ``engine.config.rules``: what a scheme must satisfy beyond one field's type and range: ``REFUSALS``, one table of
  (field, applies, message), for what the profile's trainer lacks and fields that rule each other out;
* ``engine.config.docs``: docs/CONFIG.md's tables (``field_table``, ``refusal_table``).
"""

from engine.config.docs import field_table, refusal_table
from engine.config.fields import COERCE, FRACTION, NON_NEGATIVE, POSITIVE, UNIT, Rule, convention, option, range_text
from engine.config.rules import REFUSALS, Refusal
from engine.config.scheme import (
    CONVENTIONS,
    FIELD_HELP,
    FIELDS,
    HINTS,
    KGR1_GLOBAL_WEIGHTS,
    KGR1_TURN_WEIGHTS,
    KL_PENALTY_NAMES,
    LOSS_AGG_MODES,
    PLACEMENTS,
    RULES,
    STEPWISE_MODES,
    VALUE_SOURCES,
    CreditConfig,
    bounds,
    choices,
    label,
)

__all__ = [
    "COERCE",
    "CONVENTIONS",
    "FIELDS",
    "FIELD_HELP",
    "FRACTION",
    "HINTS",
    "KGR1_GLOBAL_WEIGHTS",
    "KGR1_TURN_WEIGHTS",
    "KL_PENALTY_NAMES",
    "LOSS_AGG_MODES",
    "NON_NEGATIVE",
    "PLACEMENTS",
    "POSITIVE",
    "REFUSALS",
    "RULES",
    "STEPWISE_MODES",
    "UNIT",
    "VALUE_SOURCES",
    "CreditConfig",
    "Refusal",
    "Rule",
    "bounds",
    "choices",
    "convention",
    "field_table",
    "refusal_table",
    "label",
    "option",
    "range_text",
]
