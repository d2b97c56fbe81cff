"""Data-fact badges (truncated, synthesized, excluded, singleton, zero-variance), the estimator labels that follow
the scheme, the "Run holds" line, and the glossary."""

from __future__ import annotations

import dataclasses
import re

import pytest
from streamlit.testing.v1 import AppTest
from synthetic_runs import synthetic_kgqa, synthetic_python_tool
from test_app import charts, html_text, new_app, no_errors

from dashboard import badges, tables
from dashboard.state import K, cfg_key
from engine import CreditConfig, compute_credit, get_estimator


def _summary(load, cfg: CreditConfig | None = None):
    batch = load.run.to_batch()
    res = compute_credit(batch, cfg or CreditConfig(estimator="grpo"))
    return batch, tables.trajectory_summary(batch, res)


def _facts_run():
    """synthetic_kgqa (4 prompts × 4 rollouts) made to carry every fact: q0-r0 truncated, q0-r1 synthesized
    (values, log_probs), q0-r2 excluded from the loss, prompt q3 one rollout only (singleton), and prompt q1's
    rollouts all given the same rewards (zero variance)."""
    load = synthetic_kgqa(groups=4, rollouts=4, seed=3)
    trajs = load.run.trajectories
    trajs[0].metadata["truncated"] = True
    trajs[1].metadata["synthesized"] = ["values", "log_probs"]
    trajs[2].metadata["exclude_from_loss"] = True
    for t in trajs[4:8]:  # prompt q1: identical rewards
        t.turn_rewards = [dict(trajs[4].turn_rewards[0])]
        t.global_rewards = dict(trajs[4].global_rewards)
    del trajs[13:16]  # prompt q3 keeps q3-r0 only
    load.run._texts = load.run._texts[:13]
    return load


def test_badge_functions_on_a_synthetic_run() -> None:
    load = _facts_run()
    run = load.run
    _, summary = _summary(load)
    ids = list(summary["id"])
    got = {ids[i]: badges.trajectory_badges(run, summary, i) for i in range(len(ids))}
    assert got["q0-r0"] == ["truncated"]
    assert got["q0-r1"] == ["synthesized"]
    assert got["q0-r2"] == ["excluded"]
    assert got["q0-r3"] == []
    assert got["q1-r0"] == got["q1-r3"] == ["zero-variance"]
    assert got["q3-r0"] == ["singleton"]
    assert all(got[f"q2-r{r}"] == [] for r in range(4))
    assert badges.group_badges(summary, [4, 5, 6, 7]) == ["zero-variance"]
    assert badges.group_badges(summary, [12]) == ["singleton"]
    assert badges.group_badges(summary, [0, 1, 2, 3]) == []
    info = tables.run_info(run, load.run.to_batch())
    assert info.flags[0] == ("truncated",) and info.flags[12] == ("singleton",) and info.flags[4] == ()
    assert badges.run_counts(info, summary) == {
        "truncated": 1,
        "synthesized": 1,
        "excluded": 1,
        "singleton": 1,
        "zero-variance": 4,
    }
    column = badges.summary_badge_column(info, summary)
    assert column[:4] == ["truncated", "synthesized", "excluded", ""]
    assert badges.badge_text(["synthesized"], ("log_probs", "values")) == "synthesized (log_probs, values)"
    assert column[12] == "singleton"


def test_pills_are_escaped_and_explained() -> None:
    html = badges.pills_html(["truncated", "synthesized"], ("<values>",), prefix="<b>x</b>")
    assert "<values>" not in html and "&lt;values&gt;" in html and "<b>x</b>" not in html
    assert html.count("class='cl-badge'") == 2
    assert "ran into the response length limit" in html  # the tooltip
    assert badges.pills_html([]) == ""
    counts = badges.counts_html({"truncated": 4, "singleton": 0}, 57)
    assert "truncated 4 / 57" in counts and "singleton 0 / 57" in counts


def test_group_statistics_text() -> None:
    load = _facts_run()
    _, summary = _summary(load)
    value, note, help_ = badges.group_stat_text(summary.iloc[12])
    assert (value, note) == ("none", "singleton (1 rollout)") and "raw score" in help_
    value, note, _ = badges.group_stat_text(summary.iloc[4])
    assert value.endswith("± 0") and note == "zero variance"
    row = summary.iloc[8]
    value, note, _ = badges.group_stat_text(row)
    assert (value, note) == (f"{row['group mean']:.3g} ± {row['group std']:.3g}", "")


def test_estimator_labels_follow_the_scheme() -> None:
    load = synthetic_python_tool()
    batch = load.run.to_batch()
    info = dataclasses.replace(tables.run_info(load.run, batch), has_values=False)  # a run without a critic
    assert info.synthesized == ()
    grpo = get_estimator("grpo").label
    assert badges.estimator_label("grpo", grpo, True, info) == grpo == "GRPO (÷ group std)"
    assert badges.estimator_label("grpo", grpo, False, info) == "Dr.GRPO (GRPO without ÷ std)"
    assert "without ÷ std" in badges.estimator_label("grpo_multiturn", "KG-R1 multi-turn GRPO", False, info)
    rloo = get_estimator("rloo").label
    assert badges.estimator_label("rloo", rloo, False, info) == rloo  # RLOO does not read the toggle
    gae = get_estimator("gae").label
    assert badges.estimator_label("gae", gae, True, info, "zeros") == "GAE (no critic: zero values)"
    assert badges.estimator_label("gae", gae, True, info, "group_mean") == "GAE (no critic: group-mean values)"
    assert "no critic" in badges.estimator_note("gae", info, "zeros")


def test_run_holds_names_synthesized_fields() -> None:
    load = _facts_run()
    info = tables.run_info(load.run, load.run.to_batch())
    assert info.synthesized == (("log_probs", 1), ("values", 1)) and info.truncated == 1 and info.excluded == 1
    holds, lacks = badges.holds_text(info)
    assert "critic values (synthesized in 1 of 13 trajectories)" in holds
    assert "old & ref log-probs" in holds and "token scores" in lacks
    assert "synthesized by the loader in 1 of 13" in badges.estimator_note("gae", info)


def test_css_key_class_matches_streamlit() -> None:
    assert badges.css_key_class(cfg_key("stepwise_mode")) == "st-key-cfg-stepwise_mode"


def test_every_badge_has_a_glossary_entry() -> None:
    terms = badges.glossary()
    for name in badges.BADGES:
        assert name in terms, name
    for term in ("action token", "loss mask", "state masking", "grpo", "dr.grpo", "rloo", "reinforce++", "gae"):
        assert term in terms, term
    assert "## " in badges.glossary_markdown() and not badges.glossary_markdown().startswith("# Glossary")


# ------------------------------------------------------------------------------------------------ AppTest
def _all_text(at: AppTest) -> str:
    parts = [html_text(at)]
    parts += [str(e.value) for e in at.caption] + [str(e.value) for e in at.markdown]
    parts += [f"{m.label} {m.value} {m.proto.help}" for m in at.metric]
    return "\n".join(parts)


def test_nemo_gym_sample_says_synthesized() -> None:
    at = new_app({"page": "overview", "run": "nemo_gym/blackjack"})
    at.run()
    no_errors(at, "overview nemo_gym")
    text = _all_text(at)
    holds = next(c.value for c in at.caption if c.value.startswith("Run holds"))
    assert "critic values (synthesized: all 5 trajectories)" in holds
    assert not re.search(r"critic values(?! \(synthesized)", holds)  # no plain claim of critic values
    assert "synthesized 5 / 5" in text  # the badge count
    assert "Glossary" in [e.label.split(":")[0] for e in at.expander]
    at.switch_page("dashboard/pages/tokens.py").run()
    no_errors(at, "tokens nemo_gym")
    html = html_text(at)
    assert "cl-badge" in html and "synthesized: log_probs, ref_log_probs, values" in html
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("gae").run()
    assert any("synthesized by the loader in 5 of 5" in c.value for c in at.sidebar.caption)


def test_singleton_group_does_not_show_zero_plus_minus_one() -> None:
    at = new_app({"page": "tokens", "traj": "q7-r0", "scheme": "grpo"})
    at.run()
    no_errors(at, "tokens singleton")
    assert at.session_state[K.TRAJ] == "q7-r0"
    group = next(m for m in at.metric if m.label == "Group mean ± std")
    assert (group.value, group.delta) == ("none", "singleton (1 rollout)") and "0 ± 1" not in _all_text(at)
    assert "singleton" in html_text(at)
    sidebar_badges = [m.value for m in at.sidebar.markdown if "-badge[" in m.value]
    assert sidebar_badges == [":violet-badge[synthesized]", ":blue-badge[singleton]"], sidebar_badges
    at.switch_page("dashboard/pages/group.py").run()
    no_errors(at, "group singleton")
    assert charts(at)["group.scores"]["layout"]["title"]["text"] == "singleton: GRPO's baseline 0 (dashed)"
    values = {m.label: m.value for m in at.metric}
    assert values["Group mean"] == "none" and values["Group std"] == "none"
    table = at.dataframe[0].value
    assert list(table["badges"]) == ["synthesized · singleton"]
    assert "Rollouts: synthesized 1 of 1 (log_probs, ref_log_probs, values)" in html_text(at)


@pytest.mark.parametrize("page", ["group"])
def test_estimator_label_follows_the_std_toggle(page: str) -> None:
    at = new_app({"page": page, "scheme": "grpo"})
    at.run()
    box = at.sidebar.selectbox(key=cfg_key("estimator"))
    assert box.value == "grpo"
    assert "GRPO (÷ group std)" in box.options
    assert any(e.label == "Estimator: GRPO (÷ group std)" for e in at.expander)
    at.sidebar.toggle(key=cfg_key("norm_adv_by_std_in_grpo")).set_value(False).run()
    no_errors(at, "std off")
    box = at.sidebar.selectbox(key=cfg_key("estimator"))
    assert "Dr.GRPO (GRPO without ÷ std)" in box.options and "GRPO (÷ group std)" not in box.options
    assert any(e.label == "Estimator: Dr.GRPO (GRPO without ÷ std)" for e in at.expander)
