"""A scheme field shows up in the sidebar from its declaration, without a sidebar edit.

Every ``CreditConfig`` field declared with a ``widget`` (``engine.config.fields.Widget``) is drawn by the sidebar
(``dashboard.controls``, ``sidebar._declared_controls``): keyed ``cfg.<field>``, with its declared kind, label and
the field's help, exactly when its declared conditions hold. These tests check that on sample runs that between them
show every declared widget but the length penalty (no sample carries trace lengths); that a widget declared for a
field that has none appears in the sidebar; and that sidebar.py names no scheme field but the few whose options or
words come from the run or a registry.
"""

from __future__ import annotations

import ast
import dataclasses
import types
from pathlib import Path

import pytest
from test_app import new_app, no_errors

from dashboard import controls, loading, schemes, services, state
from dashboard.sources import RunRef
from dashboard.state import K, cfg_key
from engine.config import FIELD_HELP, FIELDS
from engine.config.fields import Widget

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "select": "selectbox",
    "segmented": "button_group",
    "slider": "slider",
    "toggle": "toggle",
    "checkbox": "checkbox",
    "number": "number_input",
    "text": "text_input",
}
DRAWN_BY = {"length_penalty": ("toggle", K.LP_ON), "rollout_rs": ("multiselect", K.RS_OPTIONS)}  # the sidebar's own
NEVER_SHOWN = {"length_penalty"}  # its condition, a run with trace lengths, holds on no sample


def sidebar_widgets(at) -> dict[str, tuple[str, object]]:
    """key → (element type, element) of the sidebar's widgets."""
    out = {}
    for kind in {*KINDS.values(), "multiselect"}:
        for el in at.sidebar.get(kind):
            out[el.key] = (kind, el)
    return out


def check(at, sample: str) -> set[str]:
    """The declared widgets the sidebar shows now, each checked against its declaration (and the hidden ones
    absent); returns the fields shown."""
    no_errors(at, sample)
    info = services.run_info(loading.open_run(RunRef("sample", sample), {}))
    found = sidebar_widgets(at)
    shown = set()
    for name, w in controls.declared():
        kind, key = DRAWN_BY.get(w.kind, (KINDS.get(w.kind), cfg_key(name)))
        if not controls.shown(name, w, lambda f: at.session_state[cfg_key(f)], info):
            assert key not in found, f"{sample}: {name} drawn though its conditions {w.when} fail"
            continue
        shown.add(name)
        assert key in found, f"{sample}: {name} ({w.label!r}) missing from the sidebar"
        got_kind, el = found[key]
        assert got_kind == kind and el.label == w.label, (name, got_kind, el.label)
        assert FIELD_HELP[name] in el.help, name
    return shown


# (sample, sidebar changes): between them they show every declared widget but NEVER_SHOWN.
SCENARIOS = [
    ("kgqa_multiturn", {}),
    ("kgqa_multiturn", {"estimator": "grpo", "stepwise_mode": "per_step", "use_kl_in_reward": True}),
    ("kgqa_multiturn", {"policy_loss": "sapo"}),
    ("lint_cases/policy", {"stepwise_mode": "broadcast", "policy_loss": "kl_cov"}),
    ("python_tool_two_rollouts", {"policy_loss": "dppo_tv"}),
]


def scenario(sample: str, changes: dict):
    at = new_app({"run": sample}).run()
    for field, value in changes.items():
        w = FIELDS[field].metadata["widget"]
        getattr(at.sidebar, KINDS[w.kind])(key=cfg_key(field)).set_value(value).run()
    return check(at, sample)


def test_declared_widgets_are_drawn_as_declared() -> None:
    shown = set()
    for sample, changes in SCENARIOS:
        shown |= scenario(sample, changes)
    declared = {n for n, _ in controls.declared()}
    assert declared - shown == NEVER_SHOWN


def test_a_new_declaration_appears_in_the_sidebar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declare a widget for a field that has none (``epsilon``): the sidebar draws it, no sidebar edit."""
    field = FIELDS["epsilon"]
    assert field.metadata.get("widget") is None
    probe = Widget("number", "Probe ε", 95, min_value=0.0, step=1e-6, format="%g")
    monkeypatch.setattr(field, "metadata", types.MappingProxyType({**field.metadata, "widget": probe}))
    at = new_app().run()
    no_errors(at, "probe")
    el = at.sidebar.number_input(key=cfg_key("epsilon"))
    assert el.label == "Probe ε" and el.help == FIELD_HELP["epsilon"]
    # drawn in its declared place: after the loss aggregation (90), before the in-reward KL (110)
    keys = [e.key for e in at.sidebar.get("selectbox") + at.sidebar.get("number_input") + at.sidebar.get("toggle")]
    assert cfg_key("epsilon") in keys
    order = [n for n, _ in controls.declared()]
    assert order.index("loss_agg_mode") < order.index("epsilon") < order.index("use_kl_in_reward")


def test_every_widget_field_has_a_code_and_session_state() -> None:
    """A field with a widget reaches the scheme: it has a code (``schemes.SHORT``), so the session holds it."""
    for name, _ in controls.declared():
        assert name == "estimator" or name in schemes.SHORT, name
        assert name in state.CFG_FIELDS, name


def test_codes_are_the_declared_codes_in_use_order() -> None:
    declared = {n: f.metadata["code"] for n, f in FIELDS.items() if f.metadata.get("code")}
    assert schemes.SHORT == declared
    assert list(schemes.SHORT)[: len(schemes.CODE_ORDER)] == list(schemes.CODE_ORDER)
    assert len(set(schemes.SHORT.values())) == len(schemes.SHORT)  # one field per key


# The fields sidebar.py names: its options or words come from the run or a registry (OPTIONS, FORMAT, HELP,
# AFTER), it is drawn by a drawer of its own (length_penalty, rollout_rs with rollout_rs_threshold), or the
# effective scheme reads it (value_source); conditions read norm_adv_by_std_in_grpo and value_source for the
# estimator's words.
JUSTIFIED = {
    "estimator", "placement", "profile", "policy_loss", "use_kl_in_reward", "value_source",
    "norm_adv_by_std_in_grpo", "length_penalty", "rollout_rs", "rollout_rs_threshold",
}  # fmt: skip


def test_sidebar_names_only_a_justified_few_fields() -> None:
    tree = ast.parse((ROOT / "dashboard" / "sidebar.py").read_text(encoding="utf-8"))
    named = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in FIELDS
    }
    assert named == JUSTIFIED


def test_widget_declarations_are_complete() -> None:
    for name, w in controls.declared():
        assert w.kind in KINDS or w.kind in DRAWN_BY, name
        assert w.label and w.section in controls.SECTIONS, name
        assert dataclasses.is_dataclass(w)
