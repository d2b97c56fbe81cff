"""Each CreditConfig field is declared once (type, default, allowed values or range, help): validation, help, the
command line's options and the sidebar's option lists all come from that declaration, and profiles are one
table of conventions."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.batches import synthetic_batch
from dashboard import exports
from dashboard.state import cfg_key
from engine import PROFILES, CreditConfig, compute_credit, config
from engine.cli_compute import add_scheme_options, option_help, scheme_from_args
from engine.profiles import CAPABILITIES, profile_table

ROOT = Path(__file__).resolve().parent.parent

APP = str(ROOT / "app.py")
WITH_CHOICES = [n for n in config.FIELDS if config.choices(n) is not None]
WITH_BOUNDS = [n for n in config.FIELDS if config.bounds(n) is not None]
# A value of the wrong type for each declared type (without '| None').
WRONG_TYPE = {
    "bool": 1,
    "int": 1.0,
    "float": "0.5",
    "str": 3,
    "tuple[str, ...]": "_raw_",
    "tuple[float, ...]": ("x",),
    "tuple[tuple[str, float], ...]": (("a", "heavy"),),
}


def option_strings() -> set[str]:
    parser = argparse.ArgumentParser()
    add_scheme_options(parser)
    return {s for a in parser._actions for s in a.option_strings}


def parse(*argv: str) -> CreditConfig:
    parser = argparse.ArgumentParser()
    add_scheme_options(parser)
    return scheme_from_args(parser.parse_args(list(argv)))


# ------------------------------------------------------------------------------------------------ declaration
def test_every_field_is_declared_with_help_and_the_help_table_is_derived() -> None:
    fields = dataclasses.fields(CreditConfig)
    assert [f.name for f in fields] == list(config.FIELDS) == list(config.FIELD_HELP)
    for f in fields:
        assert f.metadata["help"] and config.FIELD_HELP[f.name] == f.metadata["help"], f.name
    assert "device" not in config.FIELDS  # where to compute is not part of a scheme


def test_conventions_are_the_fields_every_profile_fills() -> None:
    assert len(config.CONVENTIONS) == 34
    for name in config.CONVENTIONS:
        assert config.FIELDS[name].default is None, name
    for p in PROFILES.values():
        assert set(p.conventions) == set(config.CONVENTIONS), p.name
        cfg = CreditConfig(profile=p.name)
        assert all(getattr(cfg, n) is not None for n in config.CONVENTIONS), p.name


@pytest.mark.parametrize("name", WITH_CHOICES)
def test_every_declared_choice_is_accepted_and_nothing_else(name: str) -> None:
    profile = "verl"  # the profile with every option (token-sum, '+' KL variants) but SkyRL's prompt mean
    for value in config.choices(name):
        if name == "profile":
            profile = value
        where = "skyrl" if value == "prompt-mean-token-mean" else profile
        assert getattr(CreditConfig(**{"profile": where, name: value}), name) == value
    outside = 2 if name == "std_ddof" else "no-such-value"  # a value of the field's type
    with pytest.raises(ValueError, match=rf"CreditConfig\.{name}: {outside!r} is not one of"):
        CreditConfig(**{name: outside})


@pytest.mark.parametrize("name", WITH_BOUNDS)
def test_numbers_inside_their_declared_range_pass_and_outside_fail(name: str) -> None:
    lo, hi = config.bounds(name)
    assert getattr(CreditConfig(**{name: lo}), name) == lo
    if math.isfinite(hi):
        assert getattr(CreditConfig(**{name: hi}), name) == hi
        written = re.escape(config.range_text((lo, hi)))  # "[0, 1]", or "(0, 1]" for a fraction
        with pytest.raises(ValueError, match=rf"CreditConfig\.{name}: must be in {written}, got 1.5"):
            CreditConfig(**{name: hi + 0.5})
    below = lo - 1.0 if lo > 0 else -1e-9
    with pytest.raises(ValueError, match=rf"CreditConfig\.{name}: must be in"):
        CreditConfig(**{name: below})
    with pytest.raises(ValueError, match=rf"CreditConfig\.{name}: must be finite, got nan"):
        CreditConfig(**{name: math.nan})


def test_open_ranges_read_as_written() -> None:
    assert config.range_text(config.bounds("kl_target")) == "(0, ∞)"
    assert config.range_text(config.bounds("kl_coef")) == "[0, ∞)"
    assert config.range_text(config.bounds("gamma")) == "[0, 1]"
    assert config.range_text(config.bounds("kl_cov_ratio")) == "(0, 1]"
    with pytest.raises(ValueError, match=r"CreditConfig\.kl_target: must be in \(0, ∞\), got 0.0"):
        CreditConfig(kl_target=0.0)


@pytest.mark.parametrize("name", list(config.FIELDS))
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(name: str) -> None:
    wrong = WRONG_TYPE[config.HINTS[name].removesuffix(" | None")]
    with pytest.raises(ValueError, match=rf"^CreditConfig\.{name}: "):
        CreditConfig(**{name: wrong})


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("gdpo_reward_keys", 3, "expected a list of names, got 3"),
        ("global_exclude_prefixes", "_raw_", "expected a list of names, got '_raw_'"),
        ("gdpo_reward_weights", 2.0, "expected a list of numbers, got 2.0"),
        ("turn_weights", 0.5, r"expected a list of \(name, weight\) pairs, got 0.5"),
        ("turn_weights", [("format_score", 0.1, 9)], r"expected \(name, weight\) pairs or a name → weight mapping"),
        ("global_weights", ["exact_match"], r"expected \(name, weight\) pairs or a name → weight mapping"),
    ],
)
def test_a_malformed_list_is_refused_naming_the_field(name: str, value, says: str) -> None:
    with pytest.raises(ValueError, match=rf"^CreditConfig\.{name}: {says}"):
        CreditConfig(**{name: value})


def test_values_take_their_declared_form() -> None:
    cfg = CreditConfig(gamma=1, turn_weights={"format_score": 1}, gdpo_reward_keys=["a"], gdpo_reward_weights=[2])
    assert type(cfg.gamma) is float and cfg.gamma == 1.0
    assert cfg.turn_weights == (("format_score", 1.0),) and type(cfg.turn_weights[0][1]) is float
    assert cfg.gdpo_reward_keys == ("a",) and cfg.gdpo_reward_weights == (2.0,)
    assert hash(cfg) == hash(CreditConfig.from_dict(cfg.to_dict()))


def test_kl_penalty_names_verl_refuses_pass_the_config_and_fail_when_computed() -> None:
    """'full' is a name verl's config accepts and its kl_penalty refuses: the config holds it, the pipeline
    raises (as verl); a name verl does not know at all is refused by the config."""
    assert CreditConfig(kl_penalty="full").kl_penalty == "full"
    assert CreditConfig(profile="verl-legacy", kl_penalty="k3+").kl_penalty == "k3+"
    with pytest.raises(ValueError, match=r"CreditConfig\.kl_penalty: 'k4' is not one of"):
        CreditConfig(kl_penalty="k4")


def test_the_refusals_are_listed_from_their_table() -> None:
    """docs/CONFIG.md lists every scheme CreditConfig refuses (engine.config.rules.REFUSALS), each with the field
    its error names and when it applies."""
    from engine.config import rules

    doc = (ROOT / "docs" / "CONFIG.md").read_text()
    assert config.refusal_table() in doc, "docs/CONFIG.md is stale: paste engine.config.refusal_table() there"
    assert len(config.refusal_table().splitlines()) == 2 + len(rules.REFUSALS) == 13
    assert all(r.when and r.field in config.FIELDS for r in rules.REFUSALS)


def test_the_field_reference_is_made_from_the_declarations() -> None:
    doc = (ROOT / "docs" / "CONFIG.md").read_text()
    assert config.field_table() in doc, "docs/CONFIG.md is stale: paste engine.config.field_table() there"
    table = config.field_table().splitlines()
    assert len(table) == 2 + len(config.FIELDS)
    assert "| `gamma` | `float` | `1.0` | [0, 1] | Discount γ" in config.field_table()
    assert "| `std_ddof` | `int \\| None` | profile's | `0`, `1` |" in config.field_table()


# ------------------------------------------------------------------------------------------------ profiles
def test_readme_profile_table_is_made_from_the_profiles() -> None:
    readme = (ROOT / "README.md").read_text()
    assert profile_table() in readme, "README's profile table is stale: run scripts/readme_tables.py"
    assert profile_table().count("\n") == 1 + len(PROFILES)


def test_a_profile_is_one_row_of_conventions_with_its_source() -> None:
    kgr1 = PROFILES["kg-r1"]
    assert kgr1.title == "KG-R1" and kgr1.source == "KG-R1 7538a53"
    assert kgr1.help.startswith("KG-R1 7538a53: old-verl GAE over the attention mask")
    assert kgr1.conventions["global_exclude_prefixes"] == ("_raw_",)
    assert dict(kgr1.conventions) == {n: getattr(CreditConfig(profile="kg-r1"), n) for n in config.CONVENTIONS}
    with pytest.raises(TypeError):
        kgr1.conventions["std_ddof"] = 0  # read-only: a profile is a declaration, not shared mutable state
    with pytest.raises(ValueError, match=r"\['gamma'\] are not conventions"):
        kgr1.derive("x", "x", "x", "x", gamma=0.5)


# ------------------------------------------------------------------------------------------------ what a trainer has
def test_what_a_trainer_has_is_the_profile_s_not_the_scheme_s() -> None:
    assert list(CAPABILITIES) == [
        "token_sum_supported",
        "seq_mean_supported",
        "prompt_mean_supported",
        "sequence_is_supported",
        "kl_plus_variants",
        "group_sizes",
    ]
    assert not set(CAPABILITIES) & set(config.FIELDS) and not set(CAPABILITIES) & set(config.CONVENTIONS)
    cfg = CreditConfig(profile="search-r1")
    assert cfg.trainer is PROFILES["search-r1"] and not hasattr(cfg, "seq_mean_supported")
    assert (cfg.trainer.seq_mean_supported, cfg.trainer.token_sum_supported) == (False, False)
    assert PROFILES["openrlhf"].group_sizes == "equal" and PROFILES["skyrl"].prompt_mean_supported
    assert PROFILES["verl-legacy"].lacks() == ("no token-sum", "no prompt-mean-token-mean", "no '+' KL estimators")
    assert PROFILES["openrlhf"].lacks()[-1] == "group sizes: equal only"
    assert "--seq-mean-supported" not in option_strings()
    with pytest.raises(ValueError, match=r"Profile 'x': group_sizes='some' is not one of \['any', 'equal'\]"):
        PROFILES["verl"].derive("x", "x", "x", "x", group_sizes="some")


@pytest.mark.parametrize(
    "fields, says",
    [
        (
            dict(profile="search-r1", loss_agg_mode="seq-mean-token-mean"),
            r"CreditConfig\.loss_agg_mode: 'seq-mean-token-mean' does not exist in profile 'search-r1' \(Search-R1 "
            r"a14dc3a: its policy loss is a token mean\)",
        ),
        (
            dict(profile="verl-legacy", loss_agg_mode="token-sum"),
            r"'token-sum' does not exist in profile 'verl-legacy' \(volcengine/verl b178a3c \(2026-01\): ",
        ),
        (
            dict(profile="trl", loss_agg_mode="prompt-mean-token-mean"),
            r"does not exist in profile 'trl' \(huggingface/trl 1\.16\.0 GRPOTrainer: .*profile 'skyrl' has it",
        ),
        (
            dict(profile="openrlhf", rollout_is="sequence"),
            r"CreditConfig\.rollout_is: 'sequence' .* does not exist in profile 'openrlhf' \(OpenRLHF/OpenRLHF",
        ),
    ],
)
def test_asking_a_trainer_for_what_it_lacks_names_the_profile_and_the_trainer(fields: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        CreditConfig(**fields)


def test_a_scheme_that_still_says_what_the_trainer_has_is_accepted_where_the_profile_agrees() -> None:
    """Older exports hold the six as fields: dropped where they say what the profile says, refused otherwise."""
    assert CreditConfig(profile="search-r1", seq_mean_supported=False, group_sizes="any") == CreditConfig(
        profile="search-r1"
    )
    old = {**CreditConfig(profile="openrlhf").to_dict(), **PROFILES["openrlhf"].capabilities}
    assert CreditConfig.from_dict(old) == CreditConfig(profile="openrlhf")
    assert set(CreditConfig.from_dict(old).to_dict()) == set(config.FIELDS)
    with pytest.raises(ValueError, match=r"CreditConfig\.seq_mean_supported: describes the trainer, not a choice: "):
        CreditConfig(profile="search-r1", seq_mean_supported=True, loss_agg_mode="seq-mean-token-mean")
    with pytest.raises(ValueError, match=r"profile 'openrlhf' \(OpenRLHF.*\) has group_sizes='equal', not 'any'"):
        CreditConfig.from_dict({**old, "group_sizes": "any"})
    with pytest.raises(ValueError, match=r"has token_sum_supported=False, not True"):
        CreditConfig(profile="verl", loss_agg_mode="token-sum").replace(profile="kg-r1", token_sum_supported=True)


def test_the_cross_field_refusals_are_one_table_naming_a_field() -> None:
    assert all(r.field in config.FIELDS for r in config.REFUSALS)
    cfg = CreditConfig(estimator="gae")
    assert not any(r.applies(cfg) for r in config.REFUSALS)
    with pytest.raises(ValueError, match=r"^CreditConfig\.length_penalty: only estimator 'grpo' applies it"):
        cfg.replace(length_penalty=(0.1, 0.1, 0.1))


# ------------------------------------------------------------------------------------------------ device
def test_the_device_is_an_argument_of_the_computation_not_of_the_scheme() -> None:
    cfg = CreditConfig(estimator="grpo")
    res = compute_credit(synthetic_batch(8, 16, group_size=4), cfg, device="cpu")
    assert res.device == "cpu" and res.config == cfg
    assert "device" not in cfg.to_dict() and "device" not in exports.scheme_json(cfg)
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['device'\] \('device' is where to compute"):
        CreditConfig.from_dict({**cfg.to_dict(), "device": "cpu"})


# ------------------------------------------------------------------------------------------------ command line
def test_every_field_has_a_command_line_option_with_its_declared_help() -> None:
    parser = argparse.ArgumentParser()
    add_scheme_options(parser)
    by_dest = {a.dest: a for a in parser._actions}
    for name in config.FIELDS:
        assert by_dest[name].help == option_help(name) and option_help(name).startswith(config.FIELD_HELP[name])
    assert "One of: trajectory, broadcast, per_step." in option_help("stepwise_mode")
    assert option_help("gamma").endswith("In [0, 1].")
    assert option_help("std_ddof").endswith("One of: 0, 1. Unset: the profile's.")


def test_command_line_values_are_read_by_their_declared_type() -> None:
    cfg = parse(
        "--profile=kg-r1",
        "--estimator=gae",
        "--gamma=0.9",
        "--std-ddof=0",
        "--state-masking=false",
        "--global-exclude-prefixes=_raw_,_x",
        "--turn-weights=format_score=0.2",
        "--gdpo-reward-weights=1,2",
        "--gdpo-reward-keys=a,b",
    )
    assert (cfg.profile, cfg.estimator, cfg.gamma, cfg.std_ddof, cfg.state_masking) == ("kg-r1", "gae", 0.9, 0, False)
    assert cfg.global_exclude_prefixes == ("_raw_", "_x") and cfg.turn_weights == (("format_score", 0.2),)
    assert cfg.gdpo_reward_keys == ("a", "b") and cfg.gdpo_reward_weights == (1.0, 2.0)
    assert cfg.gae_skip_holes is False  # unset: the profile's
    with pytest.raises(ValueError, match=r"CreditConfig\.lam: must be in \[0, 1\], got 2.0"):
        parse("--lam=2")


# ------------------------------------------------------------------------------------------------ sidebar
def test_the_sidebar_offers_the_declared_values_with_the_declared_help() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    profile = at.sidebar.selectbox(key=cfg_key("profile"))
    assert profile.options == list(PROFILES)
    assert profile.help.startswith(config.FIELD_HELP["profile"])
    assert all(f"**{p.name}**: {p.help}" in profile.help for p in PROFILES.values())
    agg = at.sidebar.selectbox(key=cfg_key("loss_agg_mode"))
    assert agg.options == list(config.choices("loss_agg_mode")) and agg.help == config.FIELD_HELP["loss_agg_mode"]
    gamma = at.sidebar.slider(key=cfg_key("gamma"))
    assert (gamma.min, gamma.max) == config.bounds("gamma") and gamma.help == config.FIELD_HELP["gamma"]


def test_the_sidebar_offers_kl_cov_options_where_kl_cov_is_chosen() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not any(w.key == cfg_key("kl_cov_ratio") for w in at.sidebar.number_input)  # vanilla: not shown
    at.sidebar.selectbox(key=cfg_key("policy_loss")).set_value("kl_cov").run()
    assert not at.exception, [e.value for e in at.exception]
    ratio, coef = (
        at.sidebar.number_input(key=cfg_key("kl_cov_ratio")),
        at.sidebar.number_input(key=cfg_key("ppo_kl_coef")),
    )
    assert (ratio.value, ratio.max, ratio.help) == (0.0002, 1.0, config.FIELD_HELP["kl_cov_ratio"])
    assert (coef.value, coef.help) == (0.1, config.FIELD_HELP["ppo_kl_coef"])
    assert ratio.label == config.label("kl_cov_ratio") and coef.label == config.label("ppo_kl_coef")
