"""The registered estimator spec is the one source of what the project knows about an estimator: its needs, its
group baseline, whether it divides by the group std, whether it reads structured rewards. The README's table, the
lints and the dashboard read it from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.batches import synthetic_batch
from engine import CreditConfig, list_estimators
from engine.lint.groups import singleton_convention, uses_group_std
from engine.registry import NEEDS, batch_provides, estimator_table, register_estimator

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_estimator_table_is_made_from_the_registry() -> None:
    table = estimator_table()
    assert table in README, "README's estimator table is stale: run scripts/readme_tables.py"
    assert table.count("\n") == len(list_estimators()) + 1


def test_readme_policy_loss_table_is_made_from_the_registry() -> None:
    from engine import list_policy_losses
    from engine.policy_losses import policy_loss_table

    table = policy_loss_table()
    assert table in README, "README's loss table is stale: run scripts/readme_tables.py"
    assert table.count("\n") == len(list_policy_losses()) + 1 == 13


def test_every_estimator_names_only_known_needs_and_kinds() -> None:
    for e in list_estimators():
        assert set(e.requires) <= set(NEEDS), e.name
        assert e.kind in ("token", "outcome") and e.short, e.name


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"requires": ("critic",)}, "unknown requirement"),
        ({"kind": "scalar"}, "kind"),
        ({"singleton": "mean"}, "singleton"),
    ],
)
def test_registration_refuses_what_it_does_not_know(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        register_estimator("never_registered", label="x", formula="x", reference="x", **kwargs)


def test_the_lints_read_group_conventions_from_the_registry() -> None:
    # hand-written expectations, docs/conventions/README.md §5.2 and docs/conventions/verl.md §1.3
    assert singleton_convention(CreditConfig(estimator="grpo")) == "raw"
    assert singleton_convention(CreditConfig(estimator="rloo_vectorized")) == "zero"
    assert singleton_convention(CreditConfig(estimator="rloo", rloo_singleton="zero")) == "zero"
    assert singleton_convention(CreditConfig(estimator="reinforce_plus_plus_baseline")) == "raw"
    assert singleton_convention(CreditConfig(profile="rllm", estimator="reinforce_plus_plus_baseline")) == "zero"
    assert singleton_convention(CreditConfig(estimator="gae")) is None
    assert uses_group_std(CreditConfig(estimator="grpo_passk"))  # pass@k divides by the group std too
    assert not uses_group_std(CreditConfig(estimator="grpo", norm_adv_by_std_in_grpo=False))
    assert not uses_group_std(CreditConfig(estimator="rloo"))
    structured = {e.name for e in list_estimators() if e.structured_rewards}
    assert structured == {"grpo_multiturn", "grpo_uniform"}


def test_batch_provides_each_need() -> None:
    b = synthetic_batch(4, 16, group_size=2)
    assert all(batch_provides(b, n) for n in NEEDS)
    bare = b.replace(
        values=None, turn_rewards=None, turn_mask=None, turn_reward_names=(), reward_baselines=None,
        logged_advantages=None, logged_advantage_mask=None,
    )  # fmt: skip
    assert not batch_provides(bare, "values") and not batch_provides(bare, "turn_rewards")
    assert not batch_provides(bare, "logged_advantages")
    assert batch_provides(bare, "global_rewards")  # the global components are still there
    with pytest.raises(ValueError, match="unknown requirement"):
        batch_provides(b, "critic")


def test_dashboard_run_info_has_a_rule_for_every_need() -> None:
    from dashboard.tables import RunInfo

    info = RunInfo.__new__(RunInfo)  # only the flags the rules read
    for flag in ("has_turn_rewards", "has_global_rewards", "has_baselines", "has_log_probs", "has_logged_advantages"):
        object.__setattr__(info, flag, False)
    assert [info.provides(n) for n in NEEDS] == [True, False, False, False, False, False]  # values: a stand-in exists
    with pytest.raises(KeyError):
        info.provides("critic")


def test_security_budget_table_is_made_from_the_registry() -> None:
    """Every structure budget a reader declares is in docs/SECURITY.md, with its default and variable."""
    from engine.io.reading.budgets import BUDGETS, budget_table

    security = (ROOT / "docs" / "SECURITY.md").read_text()
    assert budget_table() in security, "SECURITY.md's budget table is stale: run scripts/readme_tables.py"
    assert len(BUDGETS) >= 7 and all(b.env.startswith("CREDITLENS_MAX_") for b in BUDGETS.values())
