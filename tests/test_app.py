"""Dashboard tests: the pure pieces (HTML escaping, scheme codes, path confinement, tables, figures, exports)
and every page through Streamlit's AppTest, on every sample run and on hostile synthetic runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest
from synthetic_runs import synthetic_kgqa, synthetic_long, synthetic_python_tool

from dashboard import analysis, exports, schemes, sources, tables, tokens_html
from dashboard.figures.tokens import make_token_heatmap_figure
from dashboard.state import K, cfg_key
from engine import CreditConfig, compute_credit, list_estimators

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = {
    "overview": "dashboard/pages/overview.py",
    "timeline": "dashboard/pages/timeline.py",
    "tokens": "dashboard/pages/tokens.py",
    "compare": "dashboard/pages/compare.py",
    "group": "dashboard/pages/group.py",
    "designer": "dashboard/pages/designer.py",
    "analytics": "dashboard/pages/analytics.py",
    "learn": "dashboard/pages/learn.py",
}
HOSTILE = ("<script>", "<img src=x onerror", "</div><b>")
SAMPLES = list(sources.list_samples())


# ------------------------------------------------------------------------------------------------ helpers
def new_app(params: dict | None = None, load=None) -> AppTest:
    """An AppTest of app.py; ``load`` (a LoadResult) is injected as this session's upload."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    if load is not None:
        key = load.run.content_hash
        at.session_state[K.UPLOADS] = {key: load}
        at.session_state[K.RUN_SOURCE] = "Upload"
        at.session_state[K.RUN] = f"upload:{key}"
    return at


def no_errors(at: AppTest, where: str) -> None:
    assert not at.exception, f"{where}: {[e.value for e in at.exception]}"
    assert not at.error, f"{where}: {[e.value for e in at.error]}"


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by element key suffix (spec parsed from JSON)."""
    out = {}
    for el in at.get("plotly_chart"):
        key = el.proto.id.split("-", 2)[-1]
        out[key] = json.loads(el.proto.spec)
    return out


def html_text(at: AppTest) -> str:
    return "\n".join(el.proto.body for el in at.get("html"))


# ------------------------------------------------------------------------------------------------ escaping
def test_escape_helper() -> None:
    assert tokens_html.escape("<script>alert('x')</script>") == "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    assert tokens_html.escape('" onmouseover="x') == "&quot; onmouseover=&quot;x"
    assert tokens_html.escape(3) == "3"


def test_token_html_escapes_tokens_titles_and_labels() -> None:
    load = synthetic_kgqa(groups=1, rollouts=2, hostile=True)
    run, batch = load.run, load.run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="gae"))
    table = tables.token_table(run, batch, res, 0, run.token_texts(0))
    assert any("<script>" in t for t in table["token"])  # the fixture really is hostile
    html = tokens_html.token_html(table, "advantage", 1.0, ("info", "loss", "attention"), turn_labels={1: "</div>x"})
    for bad in ("<script>", "<img", "</div>x", "<b>"):
        assert bad not in html, bad
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # one token
    assert "&lt;img" in html and "onerror=alert(2)&gt;" in html  # split over tokens, each escaped
    # every title attribute is one quoted string: no raw quote inside can close it early
    for title in html.split("title='")[1:]:
        assert "<" not in title.split("'>", 1)[0]
    legend = tokens_html.legend_html("<b>q</b>", 1.0, ("info",))
    assert "<b>q</b>" not in legend and "&lt;b&gt;q&lt;/b&gt;" in legend


def test_token_html_newlines_stay_inside_boxes() -> None:
    df = pd.DataFrame(
        {
            "position": [0, 1],
            "turn": [1, 1],
            "role": ["model", "tool"],
            "token": ["a\n", ""],
            "attention": [1, 1],
            "action": [1, 0],
            "info": [0, 1],
            "loss": [1, 0],
            "advantage_mask": [1, 0],
            "advantage": [0.5, -0.5],
        }
    )
    html = tokens_html.token_html(df, "advantage", 1.0)
    assert "↵</span></span><br>" in html and "∅" in html
    assert "cl-r-tool" in html and "cl-noloss" in html


# ------------------------------------------------------------------------------------------------ schemes
@pytest.mark.parametrize("code", list(schemes.PRESETS))
def test_scheme_codes_round_trip(code: str) -> None:
    assert schemes.encode(schemes.decode(code)) == code


def test_scheme_code_carries_the_length_penalty() -> None:
    cfg = CreditConfig(profile="prime-rl", estimator="grpo", length_penalty=(0.25, 0.1, 0.05))
    assert schemes.encode(cfg) == "grpo,p:prime-rl,lp:0.25/0.1/0.05"
    assert schemes.decode(schemes.encode(cfg)) == cfg
    assert schemes.words(cfg) == "GRPO · prime-rl profile · length penalty 0.25/0.1/0.05"


def test_scheme_code_carries_every_sidebar_field() -> None:
    cfg = CreditConfig(
        profile="kg-r1",
        estimator="reinforce_plus_plus",
        gamma=0.9,
        lam=0.8,
        placement="uniform",
        use_kl_in_reward=True,
        kl_penalty="low_var_kl",
        kl_coef=0.02,
        stepwise_mode="per_step",
        stepwise_gamma=0.2,
        state_masking=False,
        loss_agg_mode="seq-mean-token-mean",
        value_source="zeros",
        norm_adv_by_std_in_grpo=False,
        rollout_is="token",
        rollout_rs=("token_k1", "seq_mean_k3"),
        rollout_rs_threshold=("0.5_2.0", "0.01"),
    )
    code = schemes.encode(cfg)
    assert "rrs:token_k1/seq_mean_k3,rrt:0.5_2.0/0.01" in code  # several values: '/'-joined, one piece
    back = schemes.decode(code)
    assert back == cfg
    assert schemes.decode_many(schemes.encode_many(["gae", "grpo,p:rllm"])) == ["gae", "grpo,p:rllm"]
    kl_cov = CreditConfig(
        profile="skyrl", policy_loss="kl_cov", kl_cov_ratio=0.2, ppo_kl_coef=1.0, loss_agg_mode="prompt-mean-token-mean"
    )
    assert schemes.encode(kl_cov) == "grpo,p:skyrl,pol:kl_cov,kcr:0.2,kkc:1,agg:prompt-mean-token-mean"
    assert schemes.decode(schemes.encode(kl_cov)) == kl_cov
    with pytest.raises(ValueError):
        schemes.decode("grpo,zz:1")
    with pytest.raises(ValueError):
        schemes.decode("not_an_estimator")


# ------------------------------------------------------------------------------------------------ sources
def test_paths_are_confined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "run.jsonl").write_text("{}\n")
    secret = tmp_path / "secret.jsonl"
    secret.write_text("{}\n")
    (data / "link.jsonl").symlink_to(secret)
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(data))
    assert sources.resolve_allowed("sub/run.jsonl") == (data / "sub" / "run.jsonl").resolve()
    for bad in ("../secret.jsonl", str(secret), "link.jsonl", "sub/../../secret.jsonl", "/etc/passwd", "nope.jsonl"):
        with pytest.raises(ValueError):
            sources.resolve_allowed(bad)
    assert sources.list_data_files() == ["sub/run.jsonl"]  # the symlink leading out is not listed
    monkeypatch.delenv(sources.DATA_DIR_ENV)
    with pytest.raises(ValueError):
        sources.resolve_allowed("sub/run.jsonl")
    assert sources.RunRef.parse("data:a/b.jsonl") == sources.RunRef("data", "a/b.jsonl")
    assert str(sources.RunRef.parse("kgqa_multiturn")) == "kgqa_multiturn"


def test_samples_are_listed() -> None:
    assert sources.DEFAULT_SAMPLE in SAMPLES
    assert "python_tool_two_rollouts" in SAMPLES


# ---------------------------------------------------------------------------------- tables, figures, exports
def test_tables_on_synthetic_run() -> None:
    load = synthetic_kgqa()
    run, batch = load.run, load.run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="grpo"))
    t = tables.token_table(run, batch, res, 1, run.token_texts(1))
    n = int(batch.attention_mask[1].sum())
    assert len(t) == n and t["turn"].min() == 1
    assert (t.loc[t["info"] == 1, "loss"] == 0).all()  # state masking: info tokens never in the loss
    assert (t.loc[t["loss"] == 0, "effective weight"] == 0).all()
    s = tables.trajectory_summary(batch, res)
    assert len(s) == batch.batch_size and set(s["verdict"]) <= {0, 1, 2}
    turns = tables.turn_table(run, batch, res, 1)
    assert turns["tokens"].sum() == n


def test_long_trajectory_heatmap_is_one_trace_of_arrays() -> None:
    load = synthetic_long(rows=2, tokens=8000, turns=4)
    run, batch = load.run, load.run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="grpo"))
    table = tables.token_table(run, batch, res, 0, run.token_texts(0))
    assert len(table) > 7000
    t0 = time.perf_counter()
    fig = make_token_heatmap_figure(table, list(tables.QUANTITY_HELP))
    html = tokens_html.token_html(table, "advantage", 1.0, window=(0, tokens_html.MAX_TEXT_TOKENS))
    print(f"\n8k-token trajectory: heatmap + first text window built in {time.perf_counter() - t0:.3f} s")
    heat = [tr for tr in fig.data if isinstance(tr, go.Heatmap)]
    assert len(heat) == 2 and heat[1].z.shape[1] == len(table)
    assert len(fig.layout.shapes) < 10  # turn lines only, never a shape per token
    assert html.count("class='cl-tk") == tokens_html.MAX_TEXT_TOKENS


def test_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.DataFrame({"token": ["<a>", "b"], "advantage": [0.5, -1.0]})
    assert exports.table_csv(df).decode().splitlines()[0] == "token,advantage"
    back = pd.read_parquet(__import__("io").BytesIO(exports.table_parquet(df)))
    pd.testing.assert_frame_equal(back, df)
    cfg = CreditConfig(profile="kg-r1", estimator="gae", use_kl_in_reward=True, kl_coef=0.01)
    assert CreditConfig.from_dict(json.loads(exports.scheme_json(cfg))) == cfg
    assert exports.safe_filename("a/../b<script>") == "a-..-b-script-"
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    monkeypatch.setattr(exports, "CHROMIUM_CANDIDATES", ())
    monkeypatch.setattr(exports.shutil, "which", lambda name: None)
    assert exports.chromium_path() is None
    with pytest.raises(RuntimeError, match="Chromium"):
        exports.figure_image(go.Figure(), "png")


@pytest.mark.slow  # starts Chromium (7 s)
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs the system Chromium")
def test_figure_image_uses_system_chromium(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    svg = exports.figure_image(go.Figure(go.Bar(y=[1, 2])), "svg", width=300, height=200)
    assert svg.lstrip().startswith(b"<svg")


# ------------------------------------------------------------------------------------------------ AppTest
@pytest.mark.parametrize("sample", SAMPLES)
def test_every_page_on_every_sample(sample: str) -> None:
    at = new_app({"run": sample})
    at.run()
    no_errors(at, f"{sample} landing")
    for name, path in PAGES.items():
        at.switch_page(path).run()
        no_errors(at, f"{sample} {name}")
        assert at.get("html"), f"{sample} {name}: nothing drawn"


def test_default_opens_kgqa_token_view_with_key_widgets() -> None:
    at = new_app()
    at.run()
    no_errors(at, "default")
    assert at.session_state[K.RUN] == "kgqa_multiturn"
    for field in (
        "profile",
        "estimator",
        "placement",
        "gamma",
        "lam",
        "state_masking",
        "loss_agg_mode",
        "use_kl_in_reward",
        "stepwise_mode",
        "norm_adv_by_std_in_grpo",
    ):
        assert at.sidebar.get_by_key(cfg_key(field)) is not None, field
    assert at.sidebar.selectbox(key=K.TRAJ).value == at.session_state[K.TRAJ]
    assert at.selectbox(key=K.QUANTITY).value == "advantage"
    assert "cl-tokens" in html_text(at)
    # short trajectories: the text shows every token, so the heatmap waits for its toggle (first paint)
    assert "tokens.heatmap" not in charts(at)
    at.toggle(key=K.HEAT_SHOW).set_value(True).run()
    assert "tokens.heatmap" in charts(at)
    assert at.session_state[K.HEAT_AUTO] is False
    assert any("Engine on" in c.value for c in at.sidebar.caption)
    assert at.query_params["page"] == "tokens" and at.query_params["scheme"] == "gae"


def test_estimator_change_changes_the_chart_data() -> None:
    at = new_app()
    at.run()
    at.toggle(key=K.HEAT_SHOW).set_value(True).run()
    before = charts(at)["tokens.heatmap"]["data"]
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("grpo").run()
    no_errors(at, "grpo")
    after = charts(at)["tokens.heatmap"]["data"]
    assert before[1]["customdata"] != after[1]["customdata"]  # the raw values behind the colours
    assert at.query_params["scheme"] == "grpo"
    at.switch_page(PAGES["group"]).run()
    adv_grpo = charts(at)["group.advantage"]["data"][0]["y"]
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("rloo").run()
    assert charts(at)["group.advantage"]["data"][0]["y"] != adv_grpo


def test_every_estimator_in_the_sidebar() -> None:
    """Each estimator the sidebar offers on the KG-QA run draws the token view; one the engine refuses on this
    run shows an error box, never a traceback."""
    at = new_app()
    at.run()
    by_label = {e.label: e.name for e in list_estimators()}
    names = [by_label[label] for label in at.sidebar.selectbox(key=cfg_key("estimator")).options]
    assert "gae" in names and "grpo_multiturn" in names and "remax" not in names  # no ReMax baselines in the run
    refused = []
    for name in names:
        at.sidebar.selectbox(key=cfg_key("estimator")).set_value(name).run()
        assert not at.exception, f"{name}: {[e.value for e in at.exception]}"
        if at.error:
            refused.append(name)
        else:
            assert "cl-tokens" in html_text(at), name
    assert refused == ["grpo_passk"], refused  # pass@k needs groups of ≥ 2; this run has a singleton group


def test_page_widgets_exist_and_act() -> None:
    at = new_app({"page": "compare"})
    at.run()
    no_errors(at, "compare")
    assert at.multiselect(key=K.SCHEMES).value == list(schemes.DEFAULT_COMPARE)
    lines = charts(at)["compare.lines"]["data"]
    assert len(lines) == 4
    at.multiselect(key=K.SCHEMES).set_value(["gae", "rloo"]).run()
    assert len(charts(at)["compare.lines"]["data"]) == 2
    assert at.query_params["schemes"] == "gae~rloo"

    at.switch_page(PAGES["designer"]).run()
    no_errors(at, "designer")
    slider = at.slider(key=f"{K.DS_WEIGHT_PREFIX}global.exact_match")
    assert slider.value == pytest.approx(0.3)
    before = charts(at)["designer.scatter"]["data"][1]["y"]
    slider.set_value(1.5).run()
    no_errors(at, "designer slider")
    assert charts(at)["designer.scatter"]["data"][1]["y"] != before

    at.switch_page(PAGES["analytics"]).run()
    no_errors(at, "analytics")
    assert at.multiselect(key=K.AN_ESTIMATORS).value
    at.switch_page(PAGES["learn"]).run()
    no_errors(at, "learn")
    assert len(at.get("tabs")) == 2 or at.tabs
    assert at.latex


def test_page_controls_survive_navigation() -> None:
    at = new_app({"page": "designer"})
    at.run()
    at.selectbox(key=K.DS_ESTIMATOR).set_value("rloo").run()
    at.switch_page(PAGES["compare"]).run()
    at.multiselect(key=K.SCHEMES).set_value(["gae", "rloo", "grpo"]).run()
    at.switch_page(PAGES["tokens"]).run()
    at.switch_page(PAGES["designer"]).run()
    assert at.selectbox(key=K.DS_ESTIMATOR).value == "rloo"
    at.switch_page(PAGES["compare"]).run()
    assert at.multiselect(key=K.SCHEMES).value == ["gae", "rloo", "grpo"]
    no_errors(at, "round trip")


def test_deep_link_restores_the_view() -> None:
    at = new_app(
        {
            "run": "python_tool_two_rollouts",
            "page": "compare",
            "scheme": "grpo,p:rllm,sm:per_step,sg:0.5",
            "schemes": "grpo~grpo,p:rllm,sm:broadcast",
        }
    )
    at.run()
    no_errors(at, "deep link")
    assert at.session_state[K.SAMPLE] == "python_tool_two_rollouts"
    assert at.session_state[cfg_key("stepwise_mode")] == "per_step"
    assert at.session_state[cfg_key("stepwise_gamma")] == 0.5
    assert at.multiselect(key=K.SCHEMES).value == ["grpo", "grpo,p:rllm,sm:broadcast"]
    ids = at.sidebar.selectbox(key=K.TRAJ).options
    at2 = new_app({"run": "python_tool_two_rollouts", "traj": ids[-1], "page": "group"})
    at2.run()
    no_errors(at2, "deep link traj")
    assert at2.sidebar.selectbox(key=K.TRAJ).value == ids[-1]
    assert at2.query_params["traj"] == ids[-1]


def test_bad_deep_links_do_not_crash() -> None:
    at = new_app({"run": "data:../../etc/passwd", "scheme": "nope,zz:1", "page": "nowhere"})
    at.run()
    assert not at.exception
    at = new_app({"run": "no_such_sample"})
    at.run()
    assert not at.exception


def test_data_directory_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = sources.list_samples()["python_tool_two_rollouts"]
    data = tmp_path / "runs"
    data.mkdir()
    files = [src] if src.is_file() else [f for f in src.iterdir() if f.is_file()]
    for f in files:
        (data / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(data))
    rel = sources.list_data_files()[0]
    at = new_app({"run": f"data:{rel}"})
    at.run()
    no_errors(at, "data dir")
    assert at.session_state[K.RUN_SOURCE] == "Data directory"
    assert "cl-tokens" in html_text(at)


def test_hostile_run_is_escaped_on_every_page() -> None:
    at = new_app(load=synthetic_kgqa(groups=2, rollouts=3, hostile=True))
    at.run()
    no_errors(at, "hostile landing")
    for name, path in PAGES.items():
        at.switch_page(path).run()
        no_errors(at, f"hostile {name}")
        body = html_text(at) + json.dumps(list(charts(at).values()))  # HTML and every figure's labels/hovers
        for bad in HOSTILE:
            assert bad not in body, f"{name}: raw {bad!r} in HTML or a chart"
    at.switch_page(PAGES["tokens"]).run()
    body = html_text(at)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body  # shown as text, not dropped
    assert "q0-r0&lt;script&gt;" in body  # the trajectory id in the heading
    for fig in charts(at).values():  # hover texts and tick labels are escaped too
        assert "<script>" not in json.dumps(fig)


def test_upload_session_state_and_python_tool_modes() -> None:
    at = new_app({"page": "learn"}, load=synthetic_python_tool())
    at.run()
    no_errors(at, "upload learn")
    assert at.session_state[K.RUN].startswith("upload:")
    assert "run" not in at.query_params  # an upload is never put in a link
    frames = [df.value for df in at.dataframe]
    steps = next(f for f in frames if "A · per-step" in f.columns)  # tab (b) reads python_tool_two_rollouts
    # the rLLM worked example's numbers (docs/TUTORIAL.md §7.2): trajectory and broadcast ±0.5 on every step;
    # MC returns 0.9025, 0.95, 1 (γ = 0.95)
    assert steps["A · trajectory"].round(6).tolist() == [0.5] * 3 + [-0.5] * 3
    assert steps["A · broadcast"].round(6).tolist() == [0.5] * 3 + [-0.5] * 3
    assert steps["MC return G_k"].round(6).tolist() == [0.9025, 0.95, 1.0, 0.0, 0.0, 0.0]
    assert steps["A · per-step"].round(6).tolist() == [0.45125, 0.475, 0.5, -0.45125, -0.475, -0.5]


def test_loader_reads_uploaded_bytes() -> None:
    from dashboard import loading

    src = sources.list_samples()["python_tool_two_rollouts"]
    f = src if src.is_file() else next(p for p in src.iterdir() if p.suffix == ".jsonl")
    loaded = loading.load_upload(f.name, f.read_bytes())
    assert len(loaded.run.trajectories) == 2
    with pytest.raises(ValueError, match="limit"):
        loading.load_upload("big.jsonl", b"x" * (loading.MAX_UPLOAD_BYTES + 1))


def test_slider_rerender_on_64x2048_run() -> None:
    """Speed check (printed, not asserted): a designer slider change on a 64 × 2,048-token run."""
    load = synthetic_long(rows=64, tokens=2048)
    at = new_app({"page": "designer"}, load=load)
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    no_errors(at, "long designer")
    times = []
    for v in (0.5, 0.7, 0.9):
        t0 = time.perf_counter()
        at.slider(key=f"{K.DS_WEIGHT_PREFIX}global.exact_match").set_value(v).run()
        times.append(time.perf_counter() - t0)
        no_errors(at, "long designer slider")
    at.switch_page(PAGES["tokens"]).run()
    t0 = time.perf_counter()
    at.sidebar.slider(key=cfg_key("lam")).set_value(0.9).run()
    tok = time.perf_counter() - t0
    print(
        f"\n64×2048 run: designer first render {first:.2f} s; slider re-render "
        f"{', '.join(f'{t:.2f}' for t in times)} s; token view λ change {tok:.2f} s (AppTest, server side)"
    )


def test_no_streamlit_in_figures_and_no_engine_outside_services() -> None:
    """Figures are pure; the engine's computations are reached through services only."""
    for p in (ROOT / "dashboard" / "figures").glob("*.py"):
        assert "streamlit" not in p.read_text(), p
    import ast

    for p in list((ROOT / "dashboard" / "pages").glob("*.py")) + [ROOT / "app.py"]:
        # names the code uses (calls, imports, attributes), not words in the text it shows
        used = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name.split(".")[-1])
        assert not used & {"compute_credit", "load_run"}, p


def test_config_toml_is_local_only() -> None:
    import tomllib

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["headless"] is True
    assert cfg["server"]["maxUploadSize"] <= 1024
    assert cfg["browser"]["gatherUsageStats"] is False


def test_windows_cover_the_trajectory() -> None:
    assert tokens_html.windows(0) == 1
    assert tokens_html.windows(tokens_html.MAX_TEXT_TOKENS) == 1
    assert tokens_html.windows(tokens_html.MAX_TEXT_TOKENS + 1) == 2
    assert np.isclose(
        analysis.slopes(pd.DataFrame({"e": ["a"] * 3, "x": [1, 2, 3], "y": [2, 4, 6]}), "x", "y", "e")[
            "slope per 100 tokens"
        ].iloc[0],
        200,
    )


def test_long_trajectory_opens_with_its_heatmap() -> None:
    """Past one text window the heatmap is the only view of every token: on without asking, until toggled."""
    at = new_app({"page": "tokens"}, load=synthetic_long(rows=2, tokens=1500, turns=3))
    at.run()
    no_errors(at, "long token view")
    assert at.toggle(key=K.HEAT_SHOW).value is True and "tokens.heatmap" in charts(at)
    at.toggle(key=K.HEAT_SHOW).set_value(False).run()
    assert "tokens.heatmap" not in charts(at) and at.session_state[K.HEAT_AUTO] is False


def test_warmup_computes_exactly_the_first_page_runs_view() -> None:
    """The server's warm-up fills the caches under the keys a new session's first page run reads: same run,
    same scheme (as the sidebar fits it to the run), same trajectory."""
    from dashboard import warmup

    handle, cfg, i = warmup.landing_view()
    at = new_app()
    at.run()
    no_errors(at, "default")
    ctx = at.session_state[K.CONTEXT]
    assert (ctx.handle.key, ctx.config, ctx.traj) == (handle.key, cfg, i)
    assert ctx.handle.session_only is False  # the shared cache, the one the warm-up filled


def test_warmup_pauses_the_collector_only_for_the_landing_view_and_draws_plotly_after_the_first_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the first paint waits for runs without the garbage collector; Plotly's first figure (the landing view
    has none) waits until the first page run has ended; the collector is on again afterwards."""
    import gc
    import threading

    from dashboard import services, warmup
    from dashboard.figures import tokens as token_figures

    seen = []

    class FirstPage(threading.Event):
        def wait(self, timeout=None):
            seen.append(("first page waited for", gc.isenabled()))
            return True

    real_table = services.token_table

    def token_table(*args):
        seen.append(("token table", gc.isenabled()))
        return real_table(*args)

    monkeypatch.setattr(warmup, "_first_page_done", FirstPage())
    monkeypatch.setattr(services, "token_table", token_table)
    monkeypatch.setattr(token_figures, "make_token_heatmap_figure", lambda *a: seen.append(("plotly", gc.isenabled())))
    assert gc.isenabled()
    warmup.warm()
    assert seen == [("token table", False), ("first page waited for", True), ("plotly", True)]
    assert gc.isenabled()


def test_first_page_run_during_the_warmup_shows_a_note_then_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that arrives while the server still imports the engine sees "Starting CreditLens…" until the
    imports are done; then the note is gone and the token view is drawn."""
    from dashboard import warmup

    waited = []
    monkeypatch.setattr(warmup, "importing", lambda: not waited)  # importing until the first run has waited
    monkeypatch.setattr(warmup, "wait_for_imports", lambda: waited.append(True))
    at = new_app()
    at.run()
    no_errors(at, "first run during the warm-up")
    assert waited == [True]
    main_text = " ".join(str(getattr(e, "value", "")) for e in at.main)
    assert "Starting CreditLens" not in main_text
    assert at.session_state[K.CONTEXT].traj == 0


def test_streamlit_run_serves_app_py_as_an_asgi_app_with_the_warmup() -> None:
    """`streamlit run app.py` finds ``app = st.App(...)`` (so its lifespan starts the warm-up); AppTest and
    every page run execute the same file as ``__main__``, where that branch is skipped."""
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(Path(APP))
    assert found.is_asgi_app and found.import_string == "app:app"
