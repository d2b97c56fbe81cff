"""Links and the scheme a run opens with: a link's run, page or scheme that is not here is named on the page (never
silently replaced), and a sample opens with its source's scheme unless the link sets one."""

from __future__ import annotations

from test_app import new_app, no_errors

from dashboard.sources import SAMPLE_SCHEMES
from dashboard.state import K, cfg_key, markdown_escape


def warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


def test_a_missing_sample_is_named_and_the_default_opens() -> None:
    at = new_app({"run": "no_such_sample", "page": "overview"})
    at.run()
    no_errors(at, "missing sample")
    assert markdown_escape("there is no sample run 'no_such_sample'; kgqa_multiturn opened instead") in warnings(at)
    assert at.session_state[K.RUN] == "kgqa_multiturn" and at.query_params["run"] == "kgqa_multiturn"
    at.button(key="link-problems-dismiss").click().run()
    assert "no_such_sample" not in warnings(at)


def test_bad_run_page_and_scheme_are_each_reported() -> None:
    at = new_app({"run": "data:../../etc/passwd", "scheme": "nope,zz:1", "schemes": "gae~x,y", "page": "nowhere"})
    at.run()
    no_errors(at, "bad link")
    text = warnings(at)
    assert "this server has none" in text  # no data directory here
    assert markdown_escape("unknown piece 'zz:1'") in text
    assert "compare schemes" in text
    assert "there is no page 'nowhere'; the token view opened" in text.replace("\\", "")
    assert at.query_params["page"] == "tokens"


def test_an_upload_cannot_be_linked() -> None:
    at = new_app({"run": "upload:0123abcd"})
    at.run()
    assert "an uploaded run cannot be opened from a link" in warnings(at)


def test_a_sample_opens_with_its_source_scheme() -> None:
    """The rLLM worked example trains on the sum of its step rewards: rollout-0 scores 1.0, not the mean 0.333."""
    at = new_app({"run": "python_tool_two_rollouts", "page": "tokens"})
    at.run()
    no_errors(at, "python tool")
    code = SAMPLE_SCHEMES["python_tool_two_rollouts"][0]
    assert code == "grpo,p:rllm"
    assert at.session_state[cfg_key("profile")] == "rllm" and at.session_state[cfg_key("estimator")] == "grpo"
    assert at.query_params["scheme"].startswith(code)
    assert any(
        "python\\_tool\\_two\\_rollouts opens with" in c.value or "opens with `grpo,p:rllm`" in c.value
        for c in at.sidebar.caption
    )
    score = next(m for m in at.metric if m.label.startswith("Score"))
    assert float(score.value) == 1.0 and score.label == "Score = Σ of turn rewards"  # the reduction, beside it
    # switching runs in the sidebar: each sample gets its own default, the user is told in the sidebar
    at.sidebar.selectbox(key=K.SAMPLE).set_value("kgqa_multiturn").run()
    assert at.session_state[cfg_key("estimator")] == "gae" and at.session_state[cfg_key("profile")] == "verl"
    score = next(m for m in at.metric if m.label.startswith("Score"))
    assert score.label == "Score = mean of turn rewards + global reward"  # KG-R1's mean, verl's `_` keys out
    at.sidebar.selectbox(key=K.SAMPLE).set_value("search_agent").run()
    assert at.session_state[cfg_key("profile")] == "search-r1"


def test_a_link_scheme_wins_over_the_sample_default() -> None:
    at = new_app({"run": "python_tool_two_rollouts", "scheme": "grpo,sm:per_step"})
    at.run()
    assert at.session_state[cfg_key("profile")] == "verl"
    assert at.session_state[cfg_key("stepwise_mode")] == "per_step"


def test_exported_figures_carry_run_trajectory_and_scheme() -> None:
    import json

    import plotly.graph_objects as go
    import pytest

    from dashboard import exports

    fig = go.Figure(go.Bar(y=[1, 2]))
    titled = exports.titled(fig, "CreditLens · run <b>x</b> · trajectory q0-r0 · scheme gae")
    assert titled.layout.title.text == "CreditLens · run &lt;b&gt;x&lt;/b&gt; · trajectory q0-r0 · scheme gae"
    assert fig.layout.title.text is None  # the figure on screen is unchanged
    if exports.chromium_path() is None:
        pytest.skip("no Chromium to render the export")
    svg = exports.figure_image(titled, "svg", width=500, height=300).decode()
    assert "run &#60;b&#62;x&#60;/b&#62; · trajectory q0-r0 · scheme gae</text>" in svg  # text, not bold
    # on a page: the chart's own camera button (untitled PNG) is removed when the titled export is offered
    at = new_app({"run": "python_tool_two_rollouts", "page": "group"})
    at.run()
    configs = [json.loads(el.proto.config) for el in at.get("plotly_chart")]
    assert configs and all("toImage" in c["modeBarButtonsToRemove"] for c in configs)


def test_every_sample_has_a_stated_scheme() -> None:
    """No sample falls back to a guess: each names its scheme and why (NeMo Gym's synthesized critic is no
    reason to open with GAE)."""
    from dashboard import schemes, sources

    for name in sources.list_samples():
        code, why = sources.sample_scheme(name, has_values=True)
        schemes.decode(code)
        assert why and (name in sources.SAMPLE_SCHEMES or name.split("/")[0] in sources.SAMPLE_FAMILY_SCHEMES), name
    assert sources.sample_scheme("nemo_gym/blackjack", has_values=True)[0] == "grpo"
