"""Compare schemes: the default comparison changes one thing at a time and says what,
the rLLM worked example's step table on its own sample, credit drawn only where the gradient flows, the
token-aligned grid and labels in words. Pure functions first, then the page through AppTest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from synthetic_runs import synthetic_kgqa

from dashboard import analysis, compare_model, schemes, tables
from dashboard.figures.compare import (
    difference_matrix,
    make_advantage_lines_figure,
    make_difference_figure,
    make_scheme_rows_figure,
)
from dashboard.figures.groups import make_group_heatmap_figure
from dashboard.figures.tokens import make_token_heatmap_figure
from dashboard.state import K
from engine import CreditConfig, compute_credit
from engine.io import load_run

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
RLLM = CreditConfig(profile="rllm", estimator="grpo")


@pytest.fixture(scope="module")
def kgqa():
    run = load_run(ROOT / "sample_runs" / "kgqa_multiturn").run
    batch = run.to_batch()
    return run, batch, list(batch.trajectory_ids).index("q0-r0")


@pytest.fixture(scope="module")
def python_tool():
    run = load_run(ROOT / "sample_runs" / "python_tool_two_rollouts").run
    return run, run.to_batch()


# ------------------------------------------------------------------------------------------------ which schemes
def test_default_varies_the_sidebar_scheme_one_thing_at_a_time() -> None:
    codes = compare_model.auto_codes(RLLM, has_values=False)
    assert codes == ["grpo,p:rllm", "grpo,p:rllm,sm:broadcast", "grpo,p:rllm,sm:per_step"]
    cfgs = [schemes.decode(c) for c in codes]
    assert {c.std_ddof for c in cfgs} == {0} and {c.turn_score_reduce for c in cfgs} == {"sum"}
    assert compare_model.differences_from(cfgs, 0) == [
        "reference",
        "rLLM mode: trajectory → broadcast",
        "rLLM mode: trajectory → per-step",
    ]
    assert schemes.differences(cfgs[1], cfgs[2]) == "rLLM mode: broadcast → per-step"
    # a run with a critic adds GAE under the same profile; the sidebar's GAE becomes GRPO in the mode columns
    with_gae = compare_model.auto_codes(CreditConfig(estimator="gae"), has_values=True)
    assert with_gae == ["grpo", "grpo,sm:broadcast", "grpo,sm:per_step", "gae"]
    assert schemes.differences(schemes.decode("grpo"), schemes.decode("gae")) == "estimator: GRPO → GAE (critic)"
    # the sidebar's std convention is kept
    assert compare_model.auto_codes(RLLM.replace(norm_adv_by_std_in_grpo=False), False)[2] == (
        "grpo,p:rllm,ns:0,sm:per_step"
    )


def test_differences_name_the_profile_conventions() -> None:
    text = schemes.differences(CreditConfig(), RLLM.replace(stepwise_mode="broadcast"))
    assert text.startswith("profile: verl → rLLM (std unbiased (ddof 1) → population (ddof 0); trajectory reward")
    assert text.endswith("rLLM mode: trajectory → broadcast")
    assert schemes.differences(RLLM, RLLM) == "same scheme"


def test_auto_travels_in_the_url_and_expands_to_at_most_six() -> None:
    assert schemes.decode_many("auto~rloo") == ["auto", "rloo"]
    codes, note = compare_model.expand(["auto", "rloo", "grpo"], CreditConfig(estimator="gae"), True)
    assert codes == ["grpo", "grpo,sm:broadcast", "grpo,sm:per_step", "gae", "rloo"]  # duplicate grpo dropped
    assert note == ""
    codes, note = compare_model.expand(["auto", "rloo", "opo", "gpg"], CreditConfig(estimator="gae"), True)
    assert len(codes) == 6 and note == "Showing the first 6 of 7 schemes."


def test_labels_are_words_and_say_what_ran() -> None:
    assert schemes.label("grpo,p:rllm,ns:0,sm:per_step,vs:zeros") == "GRPO · rLLM profile · no std · rLLM per-step"
    assert schemes.label("gae,kl:1,b:0.05,pl:turn_proportional") == (
        "GAE (critic) · placement turn_proportional · in-reward KL · β = 0.05"
    )
    assert compare_model.run_label("gae", CreditConfig(estimator="gae")) == "GAE (critic)"
    stand_in = CreditConfig(estimator="gae", value_source="zeros")
    assert compare_model.run_label("gae", stand_in) == "GAE (values = zeros, no critic)"
    assert compare_model.run_label("grpo,sm:per_step", schemes.decode("grpo,sm:per_step")) == "GRPO · rLLM per-step"


# ------------------------------------------------------------------------------------ rLLM worked example's table
def test_rllm_worked_example_step_table_from_the_engine(python_tool) -> None:
    run, batch = python_tool
    cfgs = compare_model.step_configs(RLLM)
    assert list(cfgs) == [
        "trajectory",
        "broadcast",
        "per-step",
        "trajectory (no std)",
        "broadcast (no std)",
        "per-step (no std)",
    ]
    results = {k: compute_credit(batch, c, device="cpu") for k, c in cfgs.items()}
    frame = compare_model.step_frame(analysis.step_table(batch, results, np.arange(2)), list(results))
    r0 = frame[frame["rollout"] == "rollout-0"]
    assert r0["MC return G_k"].tolist() == pytest.approx([0.9025, 0.95, 1.0])
    assert r0["step reward"].tolist() == [0.0, 0.0, 1.0]
    assert r0["A broadcast"].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)  # population std: ±1
    assert r0["A per-step"].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    assert r0["A broadcast (no std)"].tolist() == pytest.approx(
        [0.5, 0.5, 0.5]
    )  # the worked example's ±0.5 (docs/TUTORIAL.md §7.2)
    assert r0["A per-step (no std)"].tolist() == pytest.approx([0.45125, 0.475, 0.5])
    r1 = frame[frame["rollout"] == "rollout-1"]
    assert r1["A per-step (no std)"].tolist() == pytest.approx([-0.45125, -0.475, -0.5])
    sentence = compare_model.step_sentence(frame, "rollout-0", 0.95)
    assert "γ = 0.95" in sentence and "coincide" in sentence
    assert "broadcast +0.5 / +0.5 / +0.5, per-step +0.4512 / +0.475 / +0.5" in sentence


# ------------------------------------------------------------------------------------------------ loss tokens only
def test_charts_grey_tokens_outside_the_loss(kgqa) -> None:
    run, batch, i = kgqa
    results = [compute_credit(batch, CreditConfig(estimator=e), device="cpu") for e in ("grpo", "gae")]
    adv = analysis.scheme_advantages(batch, results, i)
    loss = analysis.scheme_loss_masks(batch, results, i)
    out = np.flatnonzero(~loss[1])
    assert out[0] == 27 and 60 in out and len(out) == 57  # q0-r0's tool/info tokens
    assert adv[1, 27:61].min() > 0.7  # GAE puts ≈ 0.74 there, which no gradient uses
    tokens = ["t"] * adv.shape[1]
    turns = np.ones(adv.shape[1], int)
    rows = make_scheme_rows_figure(["GRPO", "GAE"], adv, tokens, turns, loss=loss)
    grey, value = rows.data
    assert (
        np.isnan(np.asarray(value.z, float)[1, 27:61]).all() and np.isfinite(np.asarray(grey.z, float)[1, 27:61]).all()
    )
    assert np.isfinite(np.asarray(value.z, float)[1, :27]).all() and np.isnan(np.asarray(grey.z, float)[1, :27]).all()
    assert value.zmax == pytest.approx(np.quantile(np.abs(adv[loss]), 0.99))  # scale from loss tokens only
    lines = make_advantage_lines_figure(["GRPO", "GAE"], adv, turns, loss=loss)
    assert np.isnan(np.asarray(lines.data[1].y, float)[27:61]).all()
    assert [(s.x0, s.x1) for s in lines.layout.shapes if s.type == "rect"] == [(26.5, 60.5), (92.5, 115.5)]
    others, diff, valid = difference_matrix(adv, 0, loss)
    assert others == [1] and int(valid.sum()) == 78 and np.isnan(diff[0, 27:61]).all()
    fig = make_difference_figure(["GRPO", "GAE"], adv, 0, tokens, loss=loss, notes=["reference", "estimator: x"])
    assert np.isnan(np.asarray(fig.data[-1].z, float)[0, 27:61]).all()
    # without the mask, the info tokens carry the largest difference (the complaint)
    raw = difference_matrix(adv, 0)[1][0]
    assert np.abs(raw[27:61]).mean() > np.abs(raw[loss[1]]).mean() * 0.5


def test_token_and_group_heatmaps_grey_credit_outside_the_loss(kgqa) -> None:
    run, batch, i = kgqa
    res = compute_credit(batch, CreditConfig(estimator="gae"), device="cpu")
    table = tables.token_table(run, batch, res, i, run.token_texts(i))
    fig = make_token_heatmap_figure(table, ["token score", "value", "advantage"])
    strip, heat = fig.data
    assert list(strip.y) == ["role", "in loss"]
    z = np.asarray(heat.z, float)
    assert np.isnan(z[2, 27:61]).all() and np.isfinite(z[2, :27]).all()  # advantage row greyed off the loss
    assert np.isfinite(z[1, 27:61]).all()  # values stay: the critic does see those tokens
    assert np.asarray(heat.customdata, float)[2, 30] == pytest.approx(table["advantage"][30])  # hover keeps it
    rows = analysis.group_members(batch, i)
    g = make_group_heatmap_figure(
        [batch.trajectory_ids[j] for j in rows],
        analysis.group_advantage_matrix(batch, res, rows),
        0,
        loss=analysis.group_loss_matrix(batch, res, rows),
    )
    assert len(g.data) == 2 and np.isnan(np.asarray(g.data[1].z, float)[0, 27:61]).all()


# ------------------------------------------------------------------------------------------------ aligned grid
def test_aligned_grid_is_one_escaped_table() -> None:
    load = synthetic_kgqa(groups=1, rollouts=2, hostile=True)
    run, batch = load.run, load.run.to_batch()
    results = [compute_credit(batch, CreditConfig(estimator=e), device="cpu") for e in ("grpo", "rloo")]
    adv = analysis.scheme_advantages(batch, results, 0)
    loss = analysis.scheme_loss_masks(batch, results, 0)
    table = tables.token_table(run, batch, results[0], 0, run.token_texts(0))
    n = min(len(table), 40)
    html = compare_model.aligned_grid_html(["<b>A</b>", "B"], adv, loss, table, (0, n), 1.0)
    assert html.count("<table class='cl-grid'>") == 1 and html.count("cl-grid-wrap") == 2  # CSS rule + the div
    assert "<script>" not in html and "<b>A</b>" not in html and "&lt;b&gt;A&lt;/b&gt;" in html
    assert html.count("class='cl-v") == 2 * n
    assert html.count("cl-out") - compare_model.GRID_CSS.count("cl-out") == int((~loss[:, :n]).sum())


# ------------------------------------------------------------------------------------------------ the page
def _charts(at: AppTest) -> dict:
    return {el.proto.id.split("-", 2)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def _html(at: AppTest) -> str:
    return "\n".join(el.proto.body for el in at.get("html"))


def test_compare_page_on_rllm_worked_example_without_clicks() -> None:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"page": "compare", "run": "python_tool_two_rollouts", "scheme": "grpo,p:rllm"})
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert at.multiselect(key=K.SCHEMES).value == ["auto"]
    html = _html(at)
    for text in ("GRPO · rLLM profile · rLLM broadcast", "rLLM mode: trajectory → per-step", "class='cl-grid'"):
        assert text in html, text
    assert "<th>MC return G_k</th>" in html
    assert "<td>rollout-0</td><td class='cl-num'>1</td><td class='cl-num'>0</td>" in html
    assert "<td class='cl-num'>0.9025</td><td class='cl-num'>1</td><td class='cl-num'>0.5</td>" in html
    assert "per-step +0.4512 / +0.475 / +0.5" in html
    lines = _charts(at)["compare.lines"]["data"]
    assert [t["name"] for t in lines] == [
        "GRPO · rLLM profile (pop. std)",
        "GRPO · rLLM profile · rLLM broadcast",
        "GRPO · rLLM profile · rLLM per-step",
    ]
    captions = " ".join(c.value for c in at.caption)
    assert "Differences over loss tokens only (200 of 248 tokens" in captions
    at.toggle(key=K.CMP_LOSS_ONLY).set_value(False).run()
    assert "Differences over all 248 tokens" in " ".join(c.value for c in at.caption)


def test_six_schemes_keep_the_difference_view_readable() -> None:
    at = AppTest.from_file(APP, default_timeout=180)
    codes = "auto~rloo~opo~grpo,ns:0"
    at.query_params.update({"page": "compare", "run": "kgqa_multiturn", "schemes": codes})
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    diff = _charts(at)["compare.diff"]
    assert diff["layout"]["height"] >= 110 + 52 * 5
    assert any("Showing the first 6 of 7 schemes." in c.value for c in at.caption)
    assert "GAE (synthesized critic values)" in _html(at)  # the sample's critic is made up
    assert "Dr.GRPO (no std)" not in _html(at)  # the 7th is left out


def test_step_rewards_are_what_per_step_discounts(kgqa) -> None:
    """KG-R1-style run, final-token placement: the whole score sits on the last step, so G_k follows from the
    step reward column (0 / 0 / 0.825 → 0.7446 / 0.7838 / 0.825), not from the weighted turn rewards (0.25 each)."""
    run, batch, i = kgqa
    cfgs = compare_model.step_configs(CreditConfig(estimator="gae"))
    results = {k: compute_credit(batch, c, device="cpu") for k, c in cfgs.items()}
    table = analysis.step_table(batch, results, np.array([i]))
    assert table["step reward"].tolist() == pytest.approx([0.25, 0.25, 0.25])  # the turn rewards
    placed = results["per-step"].extras["step_rewards"].numpy()
    frame = compare_model.step_frame(table, list(results), batch.trajectory_ids, placed)
    assert frame["step reward"].tolist() == pytest.approx([0.0, 0.0, 0.825])
    assert frame["MC return G_k"].tolist() == pytest.approx([0.825 * 0.95**2, 0.825 * 0.95, 0.825])
    assert frame["A broadcast"].tolist() == pytest.approx([0.7548] * 3, abs=1e-4)
    assert frame["A per-step"].tolist() == pytest.approx([0.7341, 0.7341, 0.7455], abs=1e-4)


def test_a_synthesized_critic_is_not_called_a_critic() -> None:
    """NeMo Gym samples carry critic values the loader made up: GAE on them is labelled so, everywhere on Compare."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"page": "compare", "run": "nemo_gym/blackjack", "scheme": "grpo"})
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    body = _html(at)
    assert "GAE (synthesized critic values)" in body and "GAE (critic)" not in body


def test_group_charts_drop_the_prefix_rollout_ids_share() -> None:
    """NeMo Gym ids ("competitive_coding_challenges/task-0/rollout-1") left the group's bar charts a sliver."""
    from dashboard.figures.groups import make_group_advantage_figure, short_ids

    ids = ["competitive_coding_challenges/task-0/rollout-1", "competitive_coding_challenges/task-0/rollout-12"]
    assert short_ids(ids) == ["…rollout-1", "…rollout-12"]
    assert short_ids(["q0-r0", "q0-r1"]) == ["q0-r0", "q0-r1"] and short_ids(["a/x"]) == ["a/x"]
    fig = make_group_advantage_figure(ids, np.array([0.5, -0.5]), 1)
    assert list(fig.data[0].x) == ["…rollout-1", "▶ …rollout-12"]


def test_compare_says_why_a_scheme_runs_with_other_values() -> None:
    """GAE on a run without a critic, with in-reward KL on a run without log-probs: both run, and the page says
    what they run with instead (engine.runnable), word for word."""
    at = AppTest.from_file(APP, default_timeout=180)
    codes = "grpo~gae,kl:1"
    at.query_params.update({"page": "compare", "run": "python_tool_two_rollouts", "schemes": codes})
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    captions = [c.value for c in at.caption]
    assert any("gae needs critic values and this run has none\\: value_source = zeros stands in" in c for c in captions)
    assert any("in-reward KL needs the rollout's and the reference policy's log-probs" in c for c in captions)
