"""One engine function decides what makes a scheme runnable on a run, and says why (engine.runnable)."""

from __future__ import annotations

from benchmarks.batches import synthetic_batch
from engine import CreditConfig
from engine.runnable import RunHas, placements, runnable, scheme_fixes

NOTHING = RunHas(values=False, log_probs=False, token_scores=False)
EVERYTHING = RunHas(values=True, log_probs=True, token_scores=True)


def test_a_scheme_the_run_can_run_is_returned_as_it_is() -> None:
    cfg = CreditConfig(estimator="gae", use_kl_in_reward=True, placement="as_given")
    same, fixes = runnable(cfg, EVERYTHING)
    assert same is cfg and fixes == []


def test_each_missing_input_is_fixed_and_explained() -> None:
    cfg = CreditConfig(estimator="gae", use_kl_in_reward=True, placement="as_given")
    fixed, fixes = runnable(cfg, NOTHING, value_source="group_mean")
    assert (fixed.value_source, fixed.use_kl_in_reward, fixed.placement) == ("group_mean", False, "auto")
    assert [(f.field, f.asked, f.used) for f in fixes] == [
        ("value_source", None, "group_mean"),
        ("use_kl_in_reward", True, False),
        ("placement", "as_given", "auto"),
    ]
    assert "critic values" in fixes[0].why and "log-probs" in fixes[1].why and "token scores" in fixes[2].why


def test_a_chosen_stand_in_is_kept_and_an_estimator_without_values_needs_none() -> None:
    assert scheme_fixes({"estimator": "gae", "value_source": "zeros"}, NOTHING) == []
    assert scheme_fixes({"estimator": "grpo", "value_source": None}, NOTHING) == []
    # an unusable stand-in name falls back to zeros
    assert scheme_fixes({"estimator": "gae", "value_source": "critic"}, NOTHING, value_source=None)[0].used == "zeros"


def test_what_a_batch_has_and_the_placements_it_allows() -> None:
    b = synthetic_batch(4, 16, group_size=2)
    has = RunHas.of(b)
    assert has == RunHas(values=True, log_probs=True, token_scores=False)
    assert "as_given" not in placements(has) and "as_given" in placements(EVERYTHING)
    assert RunHas.of(b.replace(ref_log_probs=None)).log_probs is False  # both policies' log-probs are needed
