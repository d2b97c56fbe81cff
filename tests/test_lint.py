"""Credit lints: each check fires on its case and stays silent on the clean scheme (or repaired data) of the same
run; hand-checked numbers for the cases whose arithmetic is short; the registry; invariants on random runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import CreditConfig, compute_credit
from engine.io.data.batching import build_batch
from engine.lint import CHECKS, FAMILIES, Finding, register_check, run_lints
from engine.lint.cases import group, lint_cases, rollout
from engine.lint.thresholds import NEAR_TIE_SPREAD, STD_BLOWUP_RATIO

CASES = lint_cases()


def findings_of(check: str, batch, cfg, run=None) -> list[Finding]:
    return run_lints(batch, cfg, run=run, checks=[check])


def only(check: str, batch, cfg, run=None) -> Finding:
    found = findings_of(check, batch, cfg, run)
    assert len(found) == 1, found
    return found[0]


# ---------------------------------------------------------------------------------------------- one test per check
@pytest.mark.parametrize("name", list(CASES))
def test_case_fires_on_its_scheme(name):
    case = CASES[name]
    f = only(case.check, case.batch, case.scheme, case.run)
    assert f.rows and f.count > 0 and f.message and f.explanation
    assert f.severity in ("error", "warning", "info")


@pytest.mark.parametrize("name", list(CASES))
def test_case_silent_on_clean_scheme(name):
    case = CASES[name]
    assert findings_of(case.check, case.clean_batch, case.clean, case.clean_run) == []


def test_every_check_has_a_case():
    assert {c.check for c in CASES.values()} == set(CHECKS)


def test_info_tokens_in_loss_points_at_the_tool_tokens():
    case = CASES["info_tokens_in_loss"]
    f = only("info_tokens_in_loss", case.batch, case.scheme)
    info = (case.batch.attention_mask - case.batch.action_mask).bool()
    assert f.severity == "error"
    assert f.tokens == {i: info[i].nonzero().flatten().tolist() for i in range(4)}
    assert f.count == int(info.sum()) == 3 + 1 + 4 + 2  # tool blocks of TOOL_LAYOUTS
    # verl's action mask leaves them at advantage 0: trained (token count, KL, entropy) but without w·A
    assert only("info_tokens_in_loss", case.batch, CreditConfig(state_masking=False)).severity == "warning"


def test_advantage_on_info_tokens_is_info_when_display_only():
    # GRPO only broadcasts onto the mask: the trained tokens do not move, so it is a display-level fact.
    case = CASES["advantage_on_info_tokens"]
    f = only("advantage_on_info_tokens", case.batch, CreditConfig(profile="search-r1"))
    assert f.severity == "info" and f.count == 10


def test_reward_on_masked_token_dropped_or_counted():
    case = CASES["reward_on_masked_token"]
    dropped = only("reward_on_masked_token", case.batch, case.scheme)
    assert dropped.severity == "error"
    assert dropped.tokens == {0: [3], 2: [4]}  # the last token ("t") of the two rewarded rollouts
    counted = only("reward_on_masked_token", case.batch, CreditConfig())  # GRPO sums every position
    assert counted.severity == "warning"
    # old-verl GAE runs its scan over every column, so the reward still reaches earlier tokens: counted
    gae = CreditConfig(profile="search-r1", estimator="gae", state_masking=True, advantage_mask="action")
    assert only("reward_on_masked_token", case.batch, gae).severity == "warning"


def test_reinforce_reset_zeroes_the_first_turns():
    case = CASES["reinforce_reset_at_holes"]
    f = only("reinforce_reset_at_holes", case.batch, case.scheme)
    # rewarded rows 0 ("mmmtttmm") and 2 ("mmmmttttmm"): every first-turn token loses the outcome (γ = 1)
    assert f.tokens == {0: [0, 1, 2], 2: [0, 1, 2, 3]}
    assert "7 of them 0" in f.message


def test_gae_through_holes_silent_without_effect():
    # γ = λ = 1 and zero values: the TD steps through holes change nothing on trained tokens
    case = CASES["gae_through_holes"]
    cfg = CreditConfig(profile="search-r1", estimator="gae", value_source="zeros", advantage_mask="action")
    assert findings_of("gae_through_holes", case.batch, cfg) == []


def test_singleton_gets_raw_score():
    case = CASES["singleton_raw_score"]
    f = only("singleton_raw_score", case.batch, case.scheme)
    res = compute_credit(case.batch, case.scheme)
    assert f.rows == [3]
    # μ = 0, σ = 1 (docs/conventions/verl.md §1.3)
    assert res.advantages[3, 0].item() == pytest.approx(1.0 / (1.0 + 1e-6))


def test_zero_variance_share_and_severity():
    case = CASES["zero_variance_groups"]
    f = only("zero_variance_groups", case.batch, case.scheme)
    assert f.severity == "warning" and f.rows == [0, 1, 2, 3, 4, 5] and "67% of trained" in f.message
    mostly_fine = case.batch.select(list(range(3)) + list(range(6, 9)))  # one flat group of two
    assert only("zero_variance_groups", mostly_fine, case.scheme).severity == "info"


def test_zero_variance_counts_zeroed_singletons():
    case = CASES["singleton_raw_score"]
    f = only("zero_variance_groups", case.batch, CreditConfig(estimator="rloo_vectorized"))
    assert f.rows == [3] and "1 singleton zeroed by rloo_vectorized" in f.message


def test_near_tie_matches_spec_golden():
    case = CASES["near_tie_amplified"]
    f = only("near_tie_amplified", case.batch, case.scheme)
    res = compute_credit(case.batch, case.scheme)
    spread = (res.scores[0] - res.scores[1]).abs().item()
    assert 0 < spread < NEAR_TIE_SPREAD
    # docs/conventions/verl.md §1.3 near_tie_float_noise: ~0.057 (the float32 mean rounds onto one of the two scores,
    # which gets 0)
    assert res.advantages[:2, 0].abs().max().item() == pytest.approx(0.057, abs=0.002)
    assert f.rows == [0, 1]
    assert findings_of("std_blowup", case.batch, case.scheme) == []  # near-ties are not reported twice


def test_exact_tie_of_eight_matches_verls_torch_mean_std():
    # verl's GRPO loop: torch.mean / torch.std of the group's scores; 8 × 0.35 does not average back to 0.35
    x = torch.tensor([0.35] * 8)
    verl_a = ((x - x.mean()) / (x.std() + 1e-6))[0].item()
    case = CASES["near_tie_amplified_exact_tie"]
    res = compute_credit(case.batch, case.scheme)
    assert res.advantages[0, 0].item() == pytest.approx(verl_a, rel=1e-4) and abs(verl_a) > 0.02
    f = only("near_tie_amplified", case.batch, case.scheme)
    assert f.rows == list(range(8)) and "1 group of bit-identical scores" in f.message
    # dyadic scores average back exactly: an all-1.0 group of eight stays at 0 and is silent
    dyadic = build_batch(group("q8", ["mmm"] * 8, [1.0] * 8) + group("q", ["mmm"] * 2, [1.0, 0.0]))
    assert findings_of("near_tie_amplified", dyadic, case.scheme) == []


def test_std_blowup_threshold():
    case = CASES["std_blowup"]
    f = only("std_blowup", case.batch, case.scheme)
    assert f.rows == [0, 1, 2, 3]
    # |A| = 0.75·√... ≈ 1.5 for the odd one out; a 0.01 difference gives |A|/spread ≈ 150 < STD_BLOWUP_RATIO
    ordinary = build_batch(group("q", ["mmm"] * 4, [0.5, 0.5, 0.5, 0.51]))
    assert 1.5 / 0.01 < STD_BLOWUP_RATIO
    assert findings_of("std_blowup", ordinary, case.scheme) == []


def test_broadcast_split_singleton():
    case = CASES["broadcast_group_split"]
    f = only("broadcast_group_split", case.batch, case.scheme)
    assert f.rows == [0, 1, 2] and "alone after the split (raw reward as advantage): 1 rollout" in f.message
    res = compute_credit(case.batch, case.scheme)
    assert res.advantages[0, 0].item() == pytest.approx(1.0, rel=1e-5)  # the 1-step rollout: raw reward


def test_zero_advantage_steps_per_step_gamma_zero():
    case = CASES["zero_advantage_steps"]
    f = only("zero_advantage_steps", case.batch, case.scheme)
    assert f.count == 4  # the first step of each of the four rollouts
    assert f.tokens == {i: [0, 1] for i in range(4)}  # "mm" of "mmtmm"


def test_small_step_groups():
    case = CASES["small_step_groups"]
    f = only("small_step_groups", case.batch, case.scheme)
    assert f.severity == "warning" and f.count == 3  # step 2 of the 3-step rollout alone; step 1 in a group of 2
    assert f.tokens == {1: [3, 4], 2: [3, 4, 6, 7]}


def test_length_bias_severity_by_mode():
    case = CASES["length_bias"]
    assert only("length_bias", case.batch, case.scheme).severity == "warning"
    assert only("length_bias", case.batch, CreditConfig()).severity == "info"  # token-mean: same profile


def test_truncated_rows():
    case = CASES["truncated_in_loss"]
    assert only("truncated_in_loss", case.batch, case.scheme).rows == [2, 3]


def test_turn_ids_backwards_token():
    case = CASES["turn_ids_backwards"]
    assert only("turn_ids_backwards", case.batch, case.scheme).tokens == {0: [7]}


def test_bookkeeping_leak_names_the_keys():
    case = CASES["bookkeeping_reward_leak"]
    f = only("bookkeeping_reward_leak", case.batch, case.scheme)
    assert "'_otc_scaling_factor'" in f.message and "'_kg_turns_used'" in f.message
    assert "_raw_exact_match" not in f.message  # excluded by KG-R1's own '_raw_' prefix
    assert "varies within 1 group" in f.message  # kg: 2 vs 3 KG turns


def test_implicit_global_weights_lists_the_unnamed_components():
    case = CASES["implicit_global_weights"]
    f = only("implicit_global_weights", case.batch, case.scheme)
    assert "'num_retrieved' (|x| up to 5)" in f.message and "exact_match" not in f.message  # named: 0.3
    res, clean = compute_credit(case.batch, case.scheme), compute_credit(case.batch, case.clean)
    assert torch.allclose(res.scores - clean.scores, torch.tensor([3.0, 5.0]))  # the count went into the reward


def test_retokenization_error_and_warning():
    case = CASES["retokenization_mismatch"]
    f = only("retokenization_mismatch", case.batch, case.scheme, case.run)
    assert f.severity == "error" and f.tokens == {0: [0, 1, 2], 1: [0, 1]}
    run = case.run
    run.trajectories[0].segments[0].token_ids = case.clean_run.trajectories[0].segments[0].token_ids
    try:
        warn = only("retokenization_mismatch", case.batch, case.scheme, run)
    finally:
        run.trajectories[0].segments[0].token_ids = case.trajectories[0].segments[0].token_ids
    assert warn.severity == "warning" and warn.tokens == {1: [0, 1]}


def test_case_tokens_are_single_qwen_tokens():
    from engine.io.text.tokenize import encode_many, get_tokenizer
    from engine.lint.cases import MODEL_ID, MODEL_PIECE, TOOL_ID, TOOL_PIECE

    tok = get_tokenizer()
    assert [x.tolist() for x in encode_many(tok, [MODEL_PIECE * 3, TOOL_PIECE * 2])] == [[MODEL_ID] * 3, [TOOL_ID] * 2]


# ---------------------------------------------------------------------------------------------- API and registry
def test_clean_run_has_no_findings():
    batch = build_batch(group("q", ["mmm"] * 4, [1.0, 0.0, 1.0, 0.0]) + group("p", ["mmm"] * 2, [1.0, 0.0]))
    assert run_lints(batch, CreditConfig()) == []


def test_registry_lists_what_the_dashboard_needs():
    assert list(CHECKS)[0] == "info_tokens_in_loss"  # family order
    for c in CHECKS.values():
        assert c.severity in ("error", "warning", "info")
        assert c.description and c.reference and len(c.explanation) > 80
        assert c.fn.__module__.rsplit(".", 1)[-1] in FAMILIES
    with pytest.raises(ValueError, match="already registered"):
        register_check("std_blowup", severity="warning", description="x", reference="x", explanation="x")(
            lambda ctx: None
        )


def test_run_lints_sorts_by_severity_and_rejects_unknown_checks():
    case = CASES["bookkeeping_reward_leak"]
    found = run_lints(case.batch, case.scheme)
    ranks = [("error", "warning", "info").index(f.severity) for f in found]
    assert ranks == sorted(ranks) and found[0].check == "bookkeeping_reward_leak"
    with pytest.raises(ValueError, match="unknown check"):
        run_lints(case.batch, case.scheme, checks=["nope"])


def test_result_is_reused_and_run_checks_skip_without_run():
    case = CASES["retokenization_mismatch"]
    res = compute_credit(case.batch, case.scheme)
    assert run_lints(case.batch, result=res, checks=["retokenization_mismatch"]) == []  # needs the Run


def test_finding_json_round_trip():
    case = CASES["reward_on_masked_token"]
    f = only("reward_on_masked_token", case.batch, case.scheme)
    back = Finding.from_dict(json.loads(json.dumps(f.to_dict())))
    assert back == f
    with pytest.raises(ValueError, match="severity"):
        Finding("fatal", "x", "y")


# ---------------------------------------------------------------------------------------------- invariants
SCHEMES = [
    CreditConfig(),
    CreditConfig(profile="search-r1", estimator="gae", gamma=0.99, lam=0.95),
    CreditConfig(profile="verl-legacy", estimator="reinforce_plus_plus"),
    CreditConfig(profile="kg-r1", state_masking=False),
    CreditConfig(profile="rllm-workflow", stepwise_mode="broadcast"),
    CreditConfig(stepwise_mode="per_step", loss_agg_mode="token-sum"),
    CreditConfig(estimator="rloo", loss_agg_mode="seq-mean-token-sum"),
    CreditConfig(rejection_sample=True, mask_truncated_samples=True, loss_agg_mode="seq-mean-token-mean"),
]

layouts = st.text(alphabet="mt", min_size=1, max_size=12).filter(lambda s: "m" in s)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(layouts, st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 2), st.booleans()), min_size=2, max_size=7
    ),
    scheme=st.sampled_from(SCHEMES),
)
def test_findings_are_well_formed(rows, scheme):
    trajs = [rollout(f"r{i}", lay, r, f"g{g}", truncated=tr) for i, (lay, r, g, tr) in enumerate(rows)]
    batch = build_batch(trajs)
    for f in run_lints(batch, scheme):
        assert f.rows == sorted(set(f.rows)) and all(0 <= i < batch.batch_size for i in f.rows)
        assert set(f.tokens) <= set(f.rows)
        assert all(0 <= t < batch.num_tokens for ts in f.tokens.values() for t in ts)
        assert f.count >= 1 and f.check in CHECKS


def test_lints_do_not_mutate_the_batch():
    case = CASES["gae_through_holes"]
    before = case.batch.attention_mask.clone(), case.batch.turn_ids.clone()
    run_lints(case.batch, case.scheme)
    assert torch.equal(before[0], case.batch.attention_mask) and torch.equal(before[1], case.batch.turn_ids)


def test_every_check_is_in_the_lint_doc_checks_table():
    """docs/LINT.md's table of checks lists every registered check with its severity and reference (a check added
    without regenerating the doc fails here, fast)."""
    from engine.lint.report import _cell

    text = (Path(__file__).resolve().parents[1] / "docs" / "LINT.md").read_text()
    for c in CHECKS.values():
        assert f"| `{c.name}` | {c.severity} | {_cell(c.description)} | {_cell(c.reference)} |" in text, c.name


@pytest.mark.slow
def test_the_lint_doc_is_what_the_report_writes():
    """docs/LINT.md is exactly ``python -m engine.lint.report docs/LINT.md`` (every sample run under every scheme:
    ~10-20 s, so in the full suite only)."""
    from engine.lint.report import report

    root = Path(__file__).resolve().parents[1]
    assert (root / "docs" / "LINT.md").read_text() == report(root / "sample_runs"), (
        "docs/LINT.md is stale: run python -m engine.lint.report docs/LINT.md"
    )
