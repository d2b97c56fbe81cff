"""Diagnostics page: the lint findings of a run and scheme, their escaping, the position caps,
and the click-through that opens the token view with the flagged tokens outlined. Pure builders first, then
AppTest on every sample run (and on the two lint-case runs through a data directory)."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from synthetic_runs import synthetic_kgqa, synthetic_long
from test_app import APP, HOSTILE, charts, html_text, new_app, no_errors  # noqa: F401 (charts: hostile figures)

from dashboard import diagnostics, schemes, sources, tokens_html
from dashboard.state import K
from engine import CreditConfig
from engine.lint import Finding

LINT_DIR = sources.SAMPLES_DIR / "lint_cases"
DIAGNOSTICS = "dashboard/pages/diagnostics.py"
TOKENS = "dashboard/pages/tokens.py"
SAMPLES = list(sources.list_samples())


def open_button(check: str, ordinal: int = 0) -> str:
    return f"diagnostics.open.{check}" + (f"#{ordinal}" if ordinal else "")


def outlined(at: AppTest) -> int:
    """Tokens drawn with the highlight class in the token view's text (not the note's sample swatch)."""
    return sum(el.proto.body.count(" cl-hl'") for el in at.get("html") if "cl-turn" in el.proto.body)


# ------------------------------------------------------------------------------------------------ pure
def test_summarize_sorts_caps_and_numbers_repeated_checks() -> None:
    big = list(range(900_000))
    findings = [
        Finding("info", "length_bias", "longer, more credit", rows=[0, 1], count=2),
        Finding("warning", "truncated_in_loss", "first", rows=[3], count=1),
        Finding("error", "info_tokens_in_loss", "tools trained", rows=[0, 2], tokens={0: big, 2: [5, 7]}, count=9),
        Finding("warning", "truncated_in_loss", "second", rows=[4], count=1),
    ]
    views = diagnostics.summarize(findings)
    assert [v.severity for v in views] == ["error", "warning", "warning", "info"]
    assert [v.ident for v in views] == [
        "info_tokens_in_loss",
        "truncated_in_loss",
        "truncated_in_loss#1",
        "length_bias",
    ]
    err = views[0]
    assert len(err.tokens[0]) == diagnostics.MAX_HIGHLIGHT and err.tokens[0].dtype.itemsize == 4  # int32, capped
    assert err.row_tokens == {0: 900_000, 2: 2} and err.num_tokens == 900_002  # counts stay exact
    assert err.explanation  # the check's explanation when the finding carries none
    assert err.reference.startswith("docs/conventions/verl.md §") and err.picker_rows() == [0, 2]
    assert views[3].tokens == {} and views[3].picker_rows() == [0, 1]  # whole-trajectory finding
    many = Finding("info", "advantage_on_info_tokens", "x", rows=list(range(700)), tokens={r: [1] for r in range(700)})
    (v,) = diagnostics.summarize([many])
    assert len(v.tokens) == diagnostics.MAX_ROWS_KEPT and len(v.rows) == 700
    assert diagnostics.find(views, "truncated_in_loss#1").message == "second"
    assert diagnostics.find(views, "nope") is None
    table = diagnostics.findings_table(views, 10)
    assert list(table["trajectories"]) == ["2 / 10", "1 / 10", "1 / 10", "2 / 10"]
    assert table["tokens"].iloc[0] == 900_002 and pd.isna(table["tokens"].iloc[1])
    assert diagnostics.first_window(err.tokens[2], 1000) == 1
    assert diagnostics.first_window([2500], 1000) == 3 and diagnostics.first_window([], 1000) == 1


def test_cards_and_notes_escape_run_text() -> None:
    bad = "<script>window.x=1</script></div>"
    f = Finding("warning", "implicit_global_weights", f"component '{bad}' weighs 1", rows=[0], count=1)
    (v,) = diagnostics.summarize([f])
    ids = [f"id{bad}"]
    for html in (
        diagnostics.finding_html(v, ids),
        diagnostics.explanation_html(v),
        diagnostics.highlight_note_html(v, v.ident, 0, ids[0]),
        diagnostics.highlight_note_html(None, bad, 0, ids[0]),
    ):
        assert "<script>" not in html and "</div></div>x" not in html
        assert html.count("<div") == html.count("</div>")  # no markup from the run closes ours
    assert "&lt;script&gt;window.x=1&lt;/script&gt;" in diagnostics.finding_html(v, ids)


def test_highlight_note_says_why() -> None:
    f = Finding("error", "info_tokens_in_loss", "m", rows=[0, 1, 2], tokens={0: list(range(2500)), 1: [3]})
    (v,) = diagnostics.summarize([f])
    assert "first 2,000 of 2,500 flagged tokens" in diagnostics.highlight_note_html(v, v.ident, 0, "a", (0, 1000))
    note = diagnostics.highlight_note_html(v, v.ident, 0, "a", (1000, 2000))
    assert "This text window shows 1,000 of them; the others are in window 1." in note
    assert "1 flagged token of" in diagnostics.highlight_note_html(v, v.ident, 1, "b")
    assert "not among the 3" in diagnostics.highlight_note_html(v, v.ident, 7, "c")
    assert "does not fire" in diagnostics.highlight_note_html(None, "gone", 0, "a")
    whole = diagnostics.summarize([Finding("warning", "truncated_in_loss", "m", rows=[4])])[0]
    assert "whole trajectory" in diagnostics.highlight_note_html(whole, whole.ident, 4, "d")


def test_token_html_outlines_only_highlighted_positions_in_the_window() -> None:
    n = 12
    df = pd.DataFrame(
        {
            "position": range(n),
            "turn": [1] * n,
            "role": ["model"] * n,
            "token": [f"t{i}" for i in range(n)],
            "attention": [1] * n,
            "action": [1] * n,
            "info": [0] * n,
            "loss": [1] * n,
            "advantage_mask": [1] * n,
            "advantage": [0.1] * n,
        }
    )
    html = tokens_html.token_html(df, "advantage", 1.0, window=(0, 8), highlight=[1, 5, 9])
    assert html.count(" cl-hl'") == 2 and tokens_html.HIGHLIGHT_CSS in html  # 9 is outside the window
    assert " cl-hl" not in tokens_html.token_html(df, "advantage", 1.0) and "cl-hl {" not in tokens_html.token_html(
        df, "advantage", 1.0
    )


# ------------------------------------------------------------------------------------------------ AppTest
@pytest.mark.parametrize("sample", SAMPLES)
def test_diagnostics_on_every_sample(sample: str) -> None:
    at = new_app({"run": sample, "page": "diagnostics"})
    at.run()
    no_errors(at, f"{sample} diagnostics")
    body = html_text(at)
    assert "Diagnostics" in body
    assert "cl-finding" in body or any("No check fires" in s.value for s in at.success), sample


@pytest.mark.parametrize(
    ("path", "scheme", "expected"),
    [
        ("lint_cases.jsonl", None, "reward_on_masked_token"),
        ("kgr1/kgr1_bookkeeping.jsonl", None, "implicit_global_weights"),
        ("kgr1/kgr1_bookkeeping.jsonl", "grpo,p:kg-r1", "bookkeeping_reward_leak"),
    ],
)
def test_diagnostics_on_the_lint_case_files(monkeypatch: pytest.MonkeyPatch, path: str, scheme, expected) -> None:
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(LINT_DIR))
    params = {"run": f"data:{path}", "page": "diagnostics"} | ({"scheme": scheme} if scheme else {})
    at = new_app(params)
    at.run()
    no_errors(at, path)
    assert f"<span class='cl-check'>{expected}</span>" in html_text(at)


def test_lint_cases_findings_open_the_token_view_with_highlights() -> None:
    at = new_app({"run": "lint_cases", "page": "diagnostics"})
    at.run()
    no_errors(at, "lint_cases diagnostics")
    body = html_text(at)
    checks = [part.split("</span>", 1)[0] for part in body.split("<span class='cl-check'>")[1:]]
    assert checks[:2] == ["reward_on_masked_token", "retokenization_mismatch"]  # errors first
    severities = [part.split("</span>", 1)[0] for part in body.split("color:#ffffff'>")[1:]]
    assert severities == sorted(severities, key=diagnostics.SEVERITY_RANK.get) and "warning" in severities
    assert "Why it matters · reference" in [e.label for e in at.expander]

    # the picker offers the affected trajectories; choose the second and follow the link
    pick = at.selectbox(key=K.DIAG_PICK_PREFIX + "reward_on_masked_token")
    assert pick.options == [f"reward_on_masked_token/end_tool-{i} · 1 flagged token" for i in (0, 2)]
    pick.set_value(10).run()  # the options' values are batch rows: row 10 is end_tool-2
    at.button(key=open_button("reward_on_masked_token")).click().run()
    no_errors(at, "token view after the link")
    assert at.session_state[K.TRAJ] == "reward_on_masked_token/end_tool-2"
    assert at.session_state[K.HIGHLIGHT] == "reward_on_masked_token"
    assert at.query_params["page"] == "tokens" and at.query_params["traj"] == "reward_on_masked_token/end_tool-2"
    assert "Highlight from Diagnostics" in html_text(at)
    assert outlined(at) == 1

    # another trajectory: the note says it is not flagged and nothing is outlined
    at.sidebar.selectbox(key=K.TRAJ).set_value("info_tokens_in_loss/tool-0").run()
    no_errors(at, "other trajectory")
    assert "is not among the 2" in html_text(at) and outlined(at) == 0
    # a scheme change looks the finding up again: under GRPO the same rewards are still counted (warning)
    at.sidebar.selectbox(key=K.TRAJ).set_value("reward_on_masked_token/end_tool-0").run()
    at.sidebar.selectbox(key="cfg.estimator").set_value("grpo").run()
    no_errors(at, "grpo")
    assert outlined(at) == 1 and "grpo still counts" in html_text(at)
    at.button(key="tokens.clear_highlight").click().run()
    assert at.session_state[K.HIGHLIGHT] is None and outlined(at) == 0
    assert "Highlight from Diagnostics" not in html_text(at)


def test_whole_trajectory_finding_opens_without_outlines() -> None:
    at = new_app({"run": "lint_cases", "page": "diagnostics"})
    at.run()
    at.button(key=open_button("truncated_in_loss")).click().run()
    no_errors(at, "truncated")
    assert at.session_state[K.TRAJ] == "truncated_in_loss/q-2"
    assert "concerns this whole trajectory" in html_text(at) and outlined(at) == 0


def test_hostile_run_is_escaped_on_the_diagnostics_page() -> None:
    at = new_app(
        {"page": "diagnostics", "scheme": "grpo,p:kg-r1"}, load=synthetic_kgqa(groups=2, rollouts=3, hostile=True)
    )
    at.run()
    no_errors(at, "hostile diagnostics")
    body = html_text(at)
    for bad in (*HOSTILE, '<img src=x onerror="alert(3)">'):
        assert bad not in body, bad
    assert "&lt;img src=x onerror=&quot;alert(3)&quot;&gt;" in body  # the component name, shown as text
    assert "q0-r0&lt;script&gt;" in body  # an affected trajectory id
    at.button(key=open_button("advantage_on_info_tokens")).click().run()
    no_errors(at, "hostile token view")
    body = html_text(at)
    assert outlined(at) > 0 and not any(bad in body for bad in HOSTILE)


def test_long_run_highlights_are_capped_per_trajectory() -> None:
    """8,000 flagged tokens per trajectory: 2,000 kept and outlined, the link opens the first window, and the
    note says how many more there are."""
    at = new_app({"page": "diagnostics"}, load=synthetic_long(rows=2, tokens=8000, turns=4))
    at.run()
    no_errors(at, "long diagnostics")
    assert "16,000 flagged tokens" in html_text(at)
    at.button(key=open_button("retokenization_mismatch")).click().run()
    no_errors(at, "long token view")
    body = html_text(at)
    assert "the first 2,000 of 8,000 flagged tokens" in body and "the others are in window 2." in body
    assert outlined(at) == tokens_html.MAX_TEXT_TOKENS
    assert at.session_state[K.WINDOW] == 1


def test_scheme_the_lints_cannot_run_is_an_error_box() -> None:
    code = schemes.encode(CreditConfig(estimator="grpo_passk"))  # refused on kgqa: a singleton group
    at = new_app({"page": "diagnostics", "scheme": code})
    at.run()
    assert not at.exception and at.error
