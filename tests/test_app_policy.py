"""The policy-loss stage in the dashboard (docs/conventions/policy-stage.md §14): on a run with the trainer's and the
rollout engine's log-probs, the token view shows the gradient weight, the IS weight and the train/inference mismatch,
lists the run's most mismatched tokens, and the sidebar's rollout correction changes them; on a run without the
rollout's log-probs the correction controls are not offered."""

from __future__ import annotations

import math

from test_app import PAGES, html_text, new_app, no_errors

from dashboard.state import K, cfg_key

SAMPLE = "lint_cases/policy"


def _tokens(scheme: str | None = None):
    params = {"run": SAMPLE, "page": "tokens"} | ({"scheme": scheme} if scheme else {})
    at = new_app(params)
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    no_errors(at, f"tokens {scheme}")
    return at


def test_the_token_view_shows_the_mismatch_and_its_worst_tokens() -> None:
    at = _tokens()
    options = at.selectbox(key=K.QUANTITY).options
    assert "gradient weight" in options and "train/inference mismatch" in options
    assert "IS weight" not in options  # no rollout correction in the scheme: every weight is 1
    assert [s.value for s in at.subheader].count("Train/inference mismatch") == 1
    table = at.dataframe[0].value
    assert list(table["position"][:3]) == [5, 1, 0] and list(table["trajectory"][:3]) == [
        "train_inference_mismatch/mm-0",
        "train_inference_mismatch/mm-0",
        "train_inference_mismatch/mm-2",
    ]
    assert math.isclose(float(table["π_trainer / π_rollout"][0]), math.exp(-1.2), rel_tol=1e-5)
    assert at.sidebar.selectbox(key=cfg_key("rollout_is")).options == ["off", "token", "sequence"]


def test_icepop_zeroes_the_weight_of_the_mismatched_tokens() -> None:
    at = _tokens("grpo,ris:token,rit:0.5_2.0")
    assert "IS weight" in at.selectbox(key=K.QUANTITY).options
    table = at.dataframe[0].value
    assert list(table["IS weight"][:3]) == [0.0, 0.0, 0.0]  # e^±1.1..1.2 is outside [0.5, 2]
    assert list(table["gradient weight"][:3]) == [0.0, 0.0, 0.0]


def test_the_sidebar_sets_rollout_rejection_once_it_has_its_thresholds() -> None:
    at = _tokens()
    at.sidebar.multiselect(key=K.RS_OPTIONS).select("token_k1").run()
    no_errors(at, "rejection without a threshold")
    # verl needs a threshold per option (or one for all): nothing applied yet, and the sidebar says why
    assert at.session_state[cfg_key("rollout_rs")] == ()
    assert [w.value for w in at.sidebar.warning] == [
        "Rollout rejection not applied: rollout_rs_threshold: one threshold, or one per rollout_rs option"
    ]
    at.sidebar.text_input(key=K.RS_THRESHOLDS).input("0.5_2.0").run()
    no_errors(at, "rejection token_k1 0.5_2.0")
    assert not at.sidebar.warning
    assert at.session_state[cfg_key("rollout_rs")] == ("token_k1",)
    assert "rrs:token_k1,rrt:0.5_2.0" in at.query_params["scheme"]
    table = at.dataframe[0].value
    # the three worst tokens' ratios e^±1.1..1.2 lie outside [0.5, 2]: rejected, no gradient
    assert list(table["rejected"][:3]) == [True, True, True]
    assert list(table["gradient weight"][:3]) == [0.0, 0.0, 0.0]
    # a link carries it back into both widgets
    back = _tokens(at.query_params["scheme"])
    assert back.sidebar.multiselect(key=K.RS_OPTIONS).value == ["token_k1"]
    assert back.sidebar.text_input(key=K.RS_THRESHOLDS).value == "0.5_2.0"
    assert back.dataframe[0].value["rejected"][:3].tolist() == [True, True, True]


def test_a_run_without_rollout_log_probs_offers_no_correction() -> None:
    at = new_app({"run": "python_tool_two_rollouts", "scheme": "grpo,ris:token"})
    at.run()
    no_errors(at, "no rollout log-probs")
    assert at.session_state[cfg_key("rollout_is")] is None  # fitted away: the run cannot give it
    assert not [s for s in at.sidebar.multiselect if s.key == K.RS_OPTIONS]
    assert not [s for s in at.sidebar.selectbox if s.key == cfg_key("rollout_is")]
    assert "no rollout-engine log-probs" in " ".join(c.value for c in at.sidebar.caption)


def test_entropy_is_a_token_quantity_an_analytics_view_and_a_lint() -> None:
    at = _tokens()
    assert "entropy" in at.selectbox(key=K.QUANTITY).options
    an = new_app({"run": SAMPLE, "page": "analytics"})
    an.run()
    an.switch_page(PAGES["analytics"]).run()
    no_errors(an, "analytics")
    assert "Credit by token entropy" in [s.value for s in an.subheader]
    ent = an.dataframe[-1].value
    assert len(ent) == 5 and math.isclose(float(ent["share of |gradient|"].sum()), 1.0, rel_tol=1e-9)
    assert float(ent["entropy from"].iloc[0]) == 0.019999999552965164  # the collapsed prompt's 0.02 (float32)
    diag = new_app({"run": SAMPLE, "page": "diagnostics"})
    diag.run()
    no_errors(diag, "diagnostics")
    body = html_text(diag)
    assert (
        "<span class='cl-check'>entropy_collapse</span>" not in body
    )  # 16 of 28 trained tokens at 0.8 nats: mean 0.47
    assert "<span class='cl-check'>train_inference_mismatch</span>" in body


def test_entropy_collapse_fires_on_the_collapsed_prompt_alone() -> None:
    from engine import CreditConfig
    from engine.io import load_run
    from engine.lint import run_lints

    run = load_run("sample_runs/lint_cases/policy").run
    rows = [i for i, t in enumerate(run.trajectories) if t.id.startswith("entropy_collapse/")]
    batch = run.to_batch().select(rows)
    (f,) = run_lints(batch, CreditConfig(), checks=["entropy_collapse"])
    assert f.severity == "warning" and f.message.startswith("the trained tokens' mean entropy is 0.02 nats")


def test_a_profile_that_refuses_a_chosen_value_resets_it_and_says_so() -> None:
    # a sequence-level IS weight, then profile openrlhf, which has none: rollout IS back to off, with the reason
    at = _tokens("grpo,ris:sequence")
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("openrlhf").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[cfg_key("rollout_is")] is None
    notes = [w.value for w in at.sidebar.warning]
    assert len(notes) == 1 and notes[0].startswith("Rollout IS reset to its default\\: 'sequence' (one IS weight per")
    # token-sum, then legacy verl, which lacks it: back to token-mean
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("verl").run()
    at.sidebar.selectbox(key=cfg_key("loss_agg_mode")).set_value("token-sum").run()
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("verl-legacy").run()
    no_errors(at, "verl-legacy after token-sum")
    assert at.session_state[cfg_key("loss_agg_mode")] == "token-mean"
    assert [w.value for w in at.sidebar.warning] == [
        "Loss aggregation reset to its default\\: 'token-sum' does not exist in profile 'verl-legacy' "
        "(volcengine/verl b178a3c (2026-01)\\: token-sum came to verl in 2026-08)"
    ]
    at.run()  # said once
    assert not at.sidebar.warning


def test_the_sidebar_shows_the_chosen_loss_with_its_own_help_and_fields() -> None:
    """The loss selector's help is the chosen loss's (its label, what it computes, what it reproduces and reads),
    and the sidebar shows the number fields that loss reads (its registration's ``reads``), not the others'."""
    at = _tokens("grpo,pol:sapo")
    loss = at.sidebar.selectbox(key=cfg_key("policy_loss"))
    assert loss.value == "sapo" and "**SAPO (soft gate)**" in loss.help and "`tau_pos`" in loss.help
    shown = {w.key: w.value for w in at.sidebar.number_input}
    assert (shown[cfg_key("tau_pos")], shown[cfg_key("tau_neg")]) == (1.0, 1.05)  # the scheme's own values
    assert not {cfg_key("clip_ratio_low"), cfg_key("clip_ratio_c")} & set(shown)
    at.sidebar.number_input(key=cfg_key("tau_neg")).set_value(2.0).run()
    no_errors(at, "tau_neg")
    assert at.session_state[cfg_key("tau_neg")] == 2.0 and "tn:2" in at.query_params["scheme"]
    loss.set_value("vanilla").run()
    no_errors(at, "vanilla")
    shown = {w.key for w in at.sidebar.number_input}
    assert {cfg_key("clip_ratio_low"), cfg_key("clip_ratio_high"), cfg_key("clip_ratio_c")} <= shown
    assert cfg_key("tau_pos") not in shown
    assert "PPO clip" in at.sidebar.selectbox(key=cfg_key("policy_loss")).help


def test_every_field_a_loss_widget_sets_is_part_of_the_scheme_code() -> None:
    """A loss field the sidebar draws (declared with a widget in the policy section) has a short code, so its session
    key exists (the widget shows the scheme's value, not its minimum) and a link carries it."""
    from dashboard import controls, schemes

    loss_fields = {n for n, w in controls.declared() if w.section == "policy"}
    assert {"clip_ratio_low", "tau_pos", "kl_cov_ratio"} <= loss_fields <= set(schemes.SHORT)


def test_a_profile_without_a_dual_clip_offers_none() -> None:
    """Search-R1's PPO loss has no dual clip (dual_clip_form='none'): the sidebar does not offer a c it would not
    read; verl's does."""
    at = _tokens("grpo,p:search-r1")
    assert cfg_key("clip_ratio_c") not in {w.key for w in at.sidebar.number_input}
    at = _tokens("grpo")
    assert cfg_key("clip_ratio_c") in {w.key for w in at.sidebar.number_input}
