"""The Learn page: the two worked examples (docs/TUTORIAL.md §7) (``dashboard.teach``) and the page on two samples."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dashboard import services, teach
from tests.test_app import PAGES, html_text, new_app, no_errors


@pytest.fixture(scope="module")
def ex() -> teach.KgExample:
    return services.kgr1_example()


# --------------------------------------------------------------------- KG-R1 reward walkthrough (docs/TUTORIAL.md §7.1)
def test_literal_total_follows_the_document_formula() -> None:
    t = teach.structured_total()
    assert t.mean_turn == pytest.approx(0.175)
    assert t.global_sum == pytest.approx(0.7)
    assert t.total == pytest.approx(0.875)  # not the 0.65 the document writes: its "..." hides more turns
    assert t.excluded == {"_raw_exact_match": 0.6}
    assert teach.DOC_TOTAL_SCORE == 0.65
    # verl's convention would drop every '_' key too; the literal dict has only the '_raw_' one
    assert teach.structured_total(exclude=("_",)).total == pytest.approx(0.875)


def test_engine_puts_the_total_on_the_last_policy_token(ex) -> None:
    tok = teach.token_steps_table(ex)
    pos, text, val = teach.last_action_token(ex)
    assert text == " </answer>" and pos == len(tok) - 1
    assert val == pytest.approx(0.875, abs=1e-6)
    assert tok["final_token_only"].sum() == pytest.approx(0.875, abs=1e-6)
    assert (tok["final_token_only"].iloc[:-1] == 0).all()
    # the made-up info block is out of the loss; 19 policy tokens
    assert tok["in loss"].sum() == 19 and (tok.loc[tok["role"] == "tool", "in loss"] == 0).all()


def test_turn_proportional_spreads_each_turn_and_the_global_reward(ex) -> None:
    pt = teach.placement_turn_table(ex)
    assert pt["loss tokens n_k"].tolist() == [10, 9]
    assert pt["each token gets"].tolist() == pytest.approx([0.15 / 10 + 0.7 / 19, 0.2 / 9 + 0.7 / 19], abs=1e-6)
    tok = teach.token_steps_table(ex)
    assert tok["turn_proportional"].sum() == pytest.approx(1.05, abs=1e-5)  # Σ (not mean) of the turn rewards + G


def test_gae_returns_are_the_reward_to_go_and_the_score_is_tokens_times_total(ex) -> None:
    tok = teach.token_steps_table(ex)
    assert tok["GAE return"].to_numpy() == pytest.approx(np.full(len(tok), 0.875), abs=1e-6)
    grp = teach.group_table(ex)
    assert grp["total (Σ token rewards)"].tolist() == pytest.approx([0.875, 0.575, 0.175], abs=1e-6)
    assert grp["GAE score"][0] == pytest.approx(19 * 0.875, abs=1e-4)
    mean, std, n = teach.whitening_stats(ex)
    assert n == 72 and mean == pytest.approx((0.875 + 0.575 + 0.175) / 3, abs=1e-6)
    assert tok["GAE A (whitened)"][0] == pytest.approx((0.875 - mean) / std, abs=1e-4)


def test_grpo_over_the_made_up_group(ex) -> None:
    grp = teach.group_table(ex)
    s = np.array([0.875, 0.575, 0.175])
    a = (s - s.mean()) / (s.std(ddof=1) + 1e-6)  # KG-R1 = verl's torch.std (unbiased)
    assert grp["GRPO A"].to_numpy() == pytest.approx(a, abs=1e-5)
    assert grp["GRPO score"].to_numpy() == pytest.approx(19 * a, abs=1e-3)  # GRPO's returns are its advantages


def test_value_tokens_html_escapes_and_shows_every_value() -> None:
    html = teach.value_tokens_html(["<b>", " </answer>"], ["tool", "model"], [0.0, 0.875], 1.0, 3)
    assert "<b>" not in html and "</answer>" not in html
    assert "&lt;b&gt;" in html and "&lt;/answer&gt;" in html and "+0.875" in html and "info" in html


# ---------------------------------------------------------------------------------------- rLLM (docs/TUTORIAL.md §7.2)
def test_mc_returns_of_the_document() -> None:
    assert teach.mc_returns([0.0, 0.0, 1.0]) == pytest.approx([0.9025, 0.95, 1.0])
    assert teach.mc_returns([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert [list(r) for r in teach.DOC_RLLM_MC] == [teach.mc_returns([0, 0, 1]), [0.0, 0.0, 0.0]]


# ------------------------------------------------------------------------------------------------ the page
def test_learn_page_on_kgqa_multiturn_leads_with_the_document() -> None:
    at = new_app({"run": "kgqa_multiturn", "page": "learn"})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn kgqa")
    text = "\n".join(m.value for m in at.markdown) + html_text(at)
    for s in ("Step 1 · Generation", "Step 5 · Advantage", "Step 6 · Score", "0.875", "0.65", "_raw_exact_match",
              "16.625", "Your run"):  # fmt: skip
        assert s in text, s
    assert text.index("0.875") < text.index("Your run")  # the document's example comes first
    assert "+0.875" in html_text(at)  # the final token's value is printed under it
    # the sidebar trajectory q0-r0: 3 turns with tokens, 6 reward turns (0.25 each on the first 3), G = 0.7
    assert "mean of the 6 turn rewards (turns 4–6 have no tokens" in text and "0.75 / 6 = **0.125**" in text
    assert not at.warning  # the default scheme (verl) leaves the bookkeeping keys out, and says so
    assert any("_kg_turns_used" in c.value and "under profile kg-r1" in c.value for c in at.caption)
    tabs = [t.label for t in at.tabs]
    assert tabs[0].startswith("(a) KG-R1 structured rewards") and "rLLM three advantage modes" in tabs[1]


def test_learn_page_your_run_under_kg_r1_shows_the_pitfall() -> None:
    at = new_app({"run": "kgqa_multiturn", "page": "learn", "scheme": "gae,p:kg-r1"})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn kgqa kg-r1")
    warn = "\n".join(w.value for w in at.warning)
    assert "Pitfall" in warn and "_otc_scaling_factor" in warn and "profile verl" in warn
    assert "3.825" in warn and "0.825" in warn  # q0-r0: both totals, kg-r1 and verl
    assert any("mean advantage is negative" in c.value for c in at.caption)  # the symptom, explained
    text = "\n".join(m.value for m in at.markdown)
    assert text.index("Step 1 · Generation") < text.index("Your run")  # the pitfall never leads


def test_learn_page_on_python_tool_shows_the_rllm_table() -> None:
    at = new_app({"run": "python_tool_two_rollouts", "page": "learn"})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn python_tool")
    doc = next(df.value for df in at.dataframe if "MC return (document)" in df.value.columns)
    assert doc["A · trajectory"].round(6).tolist() == [0.5] * 3 + [-0.5] * 3
    assert doc["A · broadcast"].round(6).tolist() == [0.5] * 3 + [-0.5] * 3
    assert doc["MC return G_k"].round(6).tolist() == [0.9025, 0.95, 1.0, 0.0, 0.0, 0.0]
    assert doc["MC return (document)"].tolist() == [0.9025, 0.95, 1.0, 0.0, 0.0, 0.0]
    assert doc["A · per-step"].round(6).tolist() == [0.45125, 0.475, 0.5, -0.45125, -0.475, -0.5]
    assert len(at.success) == 2  # both checks against the document pass
    at.toggle[0].set_value(True).run()  # rLLM's default: divide by the population std
    no_errors(at, "learn std")
    doc = next(df.value for df in at.dataframe if "MC return (document)" in df.value.columns)
    assert doc["A · trajectory"].round(4).tolist() == [1.0] * 3 + [-1.0] * 3
    assert doc["A · per-step"].round(4).tolist() == [1.0] * 3 + [-1.0] * 3
    assert "population std 0.5" in "\n".join(i.value for i in at.info)


@pytest.mark.parametrize(
    ("run", "scheme"),
    [
        ("search_agent", "grpo"),
        ("nemo_gym/math_with_code", "grpo,p:rllm,sm:per_step"),
        ("lint_cases", "rloo"),
        ("kgqa_multiturn", "grpo_multiturn,p:kg-r1"),
    ],
)
def test_learn_page_your_run_under_other_schemes(run: str, scheme: str) -> None:
    at = new_app({"run": run, "page": "learn", "scheme": scheme})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, f"learn {run} {scheme}")
    text = "\n".join(m.value for m in at.markdown)
    assert "Your run" in text and "score = Σ returns · mask over" in text
    if scheme == "grpo":  # GRPO's returns are its advantages: the score is tokens × A, and the page says so
        assert "returns are its advantages" in text
    assert not re.search(r"\bnan\b", text.lower())


def test_learn_page_shows_the_pipeline_code_from_the_engine() -> None:
    from dashboard import teach
    from engine import stages

    at = new_app({"run": "python_tool_two_rollouts", "page": "learn"})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn pipeline code")
    code = [c.value for c in at.code]
    for name in ("compute_credit", "place_scores", "subtract_kl", "estimate", "weigh_loss"):
        assert any(c.startswith(f"def {name}(") for c in code), name
    assert inspect_source(stages.weigh_loss).rstrip() in [c.rstrip() for c in code]  # the source the engine runs
    assert [p.title for p in teach.pipeline_code()][1:] == [
        "(1) place_scores: rewards onto tokens",
        "(2) subtract_kl: the in-reward KL",
        "(3) estimate: the advantage estimator",
        "(4) weigh_loss: what the loss does with the advantages",
    ]


def test_learn_page_lists_every_policy_loss_with_its_formula_and_code() -> None:
    """The registry's losses, each with its LaTeX, reference and source; the sidebar's choice is the one opened."""
    from engine import list_policy_losses
    from engine.policy_losses import sapo_loss

    at = new_app({"run": "python_tool_two_rollouts", "page": "learn", "scheme": "grpo,pol:sapo"})
    at.run()
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn policy losses")
    losses = [e for e in at.expander if e.label.startswith("`")]
    assert [e.label.split("`")[1] for e in losses] == [loss.name for loss in list_policy_losses()]
    assert [e.label for e in losses if e.proto.expanded] == ["`sapo` · SAPO (soft gate) · the sidebar's choice"]
    assert inspect_source(sapo_loss).rstrip() in [c.value.rstrip() for c in at.code]
    assert {f"$$\n{loss.formula}\n$$" for loss in list_policy_losses()} <= {x.value for x in at.latex}


def inspect_source(fn) -> str:
    import inspect

    return inspect.getsource(fn)
