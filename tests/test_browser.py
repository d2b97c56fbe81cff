"""A real browser on the real server: Debian's Chromium (never a downloaded one) driven by Playwright against
``streamlit run app.py``. Visits every page, moves sliders, reads what is on screen, and prints the token
view's time to first paint and the slider re-render times (no timing assertions: machines differ).

Locally the module skips when Chromium is missing; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from browser_support import CHROMIUM, DONE_JS, IDLE_JS, Server, chromium, start_server, stop_server

LONG_RUN = "long64x2048.parquet"


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def context(browser):
    """One browser profile for every page, as a person's browser: static files are cached after the first."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A data directory holding a 64 × 2,048-token run for the speed checks (the loader's own synthesizer)."""
    from engine.io import save_run
    from engine.io.synth import synth_run

    d = tmp_path_factory.mktemp("creditlens-data")
    save_run(synth_run(64, 2048, seed=0), d / LONG_RUN)
    return d


@pytest.fixture(scope="module")
def server(browser, data_dir):
    server = start_server(env={"CREDITLENS_DATA_DIR": str(data_dir), "BROWSER_PATH": CHROMIUM})
    yield server
    stop_server(server)


def wait_idle(page, timeout: float = 90_000) -> None:
    """Until the script run has ended (the sidebar's 'page run' line is written last) and the page is drawn."""
    page.wait_for_function(DONE_JS, timeout=timeout, polling=50)
    page.wait_for_function(IDLE_JS, timeout=timeout, polling=50)


def assert_on_screen(page, text: str, where: str, timeout: float = 30_000) -> None:
    """``text`` appears in the main area (element components load lazily, so give them a moment). Word joiners
    (U+2060), which the Markdown escape puts where a ':' or a URL would turn into an emoji or a link, are
    invisible and ignored."""
    js = (
        "() => document.querySelector('[data-testid=\"stMain\"]')?.innerText"
        f".replaceAll('\\u2060', '').includes({text!r})"
    )
    try:
        page.wait_for_function(js, timeout=timeout, polling=100)
    except Exception:  # noqa: BLE001 - turn a timeout into a readable assertion
        body = page.inner_text("[data-testid='stMain']")
        raise AssertionError(f"{where}: {text!r} not on screen; the page shows:\n{body[:1500]}") from None


def no_exception(page, where: str) -> None:
    errors = page.locator("[data-testid='stException']")
    assert errors.count() == 0, f"{where}: {errors.first.inner_text()[:500]}"


def server_ms(page) -> str:
    """The sidebar's 'page run N ms': how long the last script run took on the server."""
    text = page.inner_text("[data-testid='stSidebar']")
    return text.split("page run", 1)[-1].split("ms", 1)[0].strip() if "page run" in text else "?"


def rerender_seconds(page, act, changed_js: str, timeout: float = 30_000) -> tuple[float, str]:
    """(seconds from ``act()`` until ``changed_js`` holds and the app is idle again, server ms of that run)."""
    t0 = time.perf_counter()
    act()
    page.wait_for_function(changed_js, timeout=timeout, polling=20)
    page.wait_for_function(IDLE_JS, timeout=timeout, polling=20)
    return time.perf_counter() - t0, server_ms(page)


def test_token_view_first_paint(server: Server, context) -> None:
    """Runs first: the server is cold (nothing imported, nothing cached)."""
    page = context.new_page()
    t_nav = time.perf_counter()
    page.goto(server.url + "/", wait_until="commit")
    page.wait_for_selector(".cl-tokens .cl-tk", timeout=90_000)
    painted = time.perf_counter()
    wait_idle(page)
    no_exception(page, "token view")
    for text in ("Token view", "Turn 1", "kgqa_multiturn"):
        assert_on_screen(page, text, "token view")
    assert "Starting CreditLens" not in page.inner_text("[data-testid='stMain']")  # the warm-up's note is gone
    cold_ms = server_ms(page)
    # a second session (same browser profile, so the app's static files are cached) on the warm server
    page2 = context.new_page()
    t2 = time.perf_counter()
    page2.goto(server.url + "/?page=tokens", wait_until="commit")
    page2.wait_for_selector(".cl-tokens .cl-tk", timeout=60_000)
    warm = time.perf_counter() - t2
    wait_idle(page2)
    print(
        f"\ntoken view first paint: {painted - server.started:.2f} s after server start, "
        f"{painted - server.ready:.2f} s after it listened ({painted - t_nav:.2f} s after navigation; first script "
        f"run {cold_ms} ms on the server); "
        f"new session on the warm server: {warm:.2f} s (script run {server_ms(page2)} ms)"
    )
    page.close()
    page2.close()


EXPECTED = {
    "overview": ("Run overview", "Reward components", "Problems the loader reported"),
    "timeline": ("Timeline", "This run is one step", "Score and solve rate", "Lint findings per step"),
    "tokens": ("Token view", "Every token, every quantity", "Per turn"),
    "compare": (
        "Compare schemes",
        "Aligned token rows",
        "GAE (synthesized critic values)",
        "rLLM per-step",
        "Difference view",
    ),
    "group": ("Group view", "Group mean", "Rollouts"),
    "designer": ("Reward designer", "Turn components", "exact_match"),
    "analytics": ("Run analytics", "Credit landing on info", "Length bias", "aggregation mode"),
    "diagnostics": ("Diagnostics", "Checks run", "truncated_in_loss", "Open in token view"),
    "learn": ("Learn", "Step 1 · Generation", "Step 5 · Advantage"),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_page_shows_its_content(server: Server, context, name: str) -> None:
    page = context.new_page()
    page.goto(f"{server.url}/?page={name}&run=kgqa_multiturn", wait_until="commit")
    wait_idle(page)
    no_exception(page, name)
    for text in EXPECTED[name]:
        assert_on_screen(page, text, name)
    page.close()


def test_diagnostics_finding_opens_the_highlighted_token(server: Server, context) -> None:
    """A finding on the lint-case run, its link, and the outlined token on the token view."""
    page = context.new_page()
    page.goto(f"{server.url}/?page=diagnostics&run=lint_cases", wait_until="commit")
    wait_idle(page)
    no_exception(page, "diagnostics")
    assert_on_screen(page, "reward_on_masked_token", "diagnostics")
    assert_on_screen(page, "2 token rewards in 2 trajectories on masked positions", "diagnostics")
    block = page.locator(".st-key-diagnostics-finding-reward_on_masked_token-0")
    block.get_by_role("button", name="Open in token view").click()
    page.wait_for_selector(".cl-turn .cl-hl", timeout=60_000)
    wait_idle(page)
    no_exception(page, "token view from diagnostics")
    assert "page=tokens" in page.url and "traj=reward_on_masked_token%2Fend_tool-0" in page.url
    assert_on_screen(page, "Highlight from Diagnostics", "token view")
    marked = page.locator(".cl-turn .cl-hl")
    assert marked.count() == 1 and marked.first.is_visible()
    assert marked.first.inner_text() == " result"  # the tool token that carries the reward
    style = marked.first.evaluate("e => [getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]")
    assert style == ["solid", "2px"], style
    page.close()


def test_train_inference_mismatch_view(server: Server, context) -> None:
    """The policy stage's view on a run with both engines' log-probs, under IcePop: the mismatch table, the IS
    weight in the token colours' options, the sidebar's rollout correction and rejection (from the link)."""
    page = context.new_page()
    page.goto(
        f"{server.url}/?page=tokens&run=lint_cases%2Fpolicy&scheme=grpo,ris:token,rit:0.5_2.0,rrs:token_k1,rrt:0.3_3",
        wait_until="commit",
    )
    wait_idle(page)
    no_exception(page, "mismatch view")
    for text in ("Train/inference mismatch", "this trajectory's largest |Δ log π| is 1.2"):
        assert_on_screen(page, text, "mismatch view")
    for text in ("Policy loss", "PPO ratio against", "Rollout IS", "IS threshold", "Rollout rejection",
                 "Rejection thresholds"):  # fmt: skip
        page.get_by_test_id("stSidebar").get_by_text(text, exact=True).first.wait_for(timeout=60_000)
    # the run records the policy's entropy: Run analytics shows where the gradient lands by entropy
    page.goto(f"{server.url}/?page=analytics&run=lint_cases%2Fpolicy", wait_until="commit")
    wait_idle(page)
    no_exception(page, "entropy analytics")
    assert_on_screen(page, "Credit by token entropy", "entropy analytics")
    assert_on_screen(page, "The most uncertain fifth gets", "entropy analytics")
    page.close()


def test_sidebar_navigation_and_estimator(server: Server, context) -> None:
    page = context.new_page()
    page.goto(server.url + "/", wait_until="commit")
    wait_idle(page)
    page.get_by_role("link", name="Group view").click()
    page.wait_for_function("() => document.body.innerText.includes('Rollouts')", timeout=60_000)
    wait_idle(page)
    assert "page=group" in page.url
    sidebar = page.locator("[data-testid='stSidebar']")
    assert "Credit scheme" in sidebar.inner_text()
    page.close()


def test_slider_rerender(server: Server, context) -> None:
    """Designer weight slider and the sidebar λ slider on the 64 × 2,048-token run: seconds from the key press
    to the updated page (printed)."""
    page = context.new_page()
    page.goto(f"{server.url}/?page=designer&run=data:{LONG_RUN}", wait_until="commit")
    wait_idle(page)
    no_exception(page, "designer on the long run")
    kept = page.locator("[data-testid='stMetric']", has_text="Rows kept").locator("[data-testid='stMetricValue']")
    kept.wait_for(timeout=30_000)  # metrics can draw after the idle check on a loaded machine
    assert kept.inner_text().strip() == "64"
    slider = page.locator("[data-testid='stMain'] input[type='range'][aria-label='reward']")
    metric = page.locator("[data-testid='stMetric']", has_text="Mean score").locator("[data-testid='stMetricValue']")
    times = []
    for _ in range(3):
        before = metric.inner_text()
        changed = (
            f"() => {{ const m = [...document.querySelectorAll('[data-testid=\"stMetric\"]')].find(e => "
            f"e.innerText.includes('Mean score')); return m && !m.innerText.includes({before!r}); }}"
        )

        def press():
            slider.focus()
            page.keyboard.press("ArrowRight")

        times.append(rerender_seconds(page, press, changed))
    no_exception(page, "designer after slider")
    page.goto(f"{server.url}/?page=tokens&run=data:{LONG_RUN}&scheme=gae", wait_until="commit")
    wait_idle(page)
    lam = page.locator("[data-testid='stSidebar'] input[type='range'][aria-label='λ']")
    tok_times = []
    for _ in range(2):
        code = page.locator("[data-testid='stSidebar']").inner_text().split("Scheme code", 1)[-1][:40]
        changed = (
            f"() => !document.querySelector('[data-testid=\"stSidebar\"]').innerText.split('Scheme code')[1]"
            f".startsWith({code!r})"
        )

        def press_lam():
            lam.focus()
            page.keyboard.press("ArrowLeft")

        tok_times.append(rerender_seconds(page, press_lam, changed))
    no_exception(page, "token view after λ")

    def fmt(ts):
        return ", ".join(f"{t:.2f} s (server {ms} ms)" for t, ms in ts)

    print(
        f"\n64×2048 run, in the browser: designer slider re-render {fmt(times)}; token view λ re-render "
        f"{fmt(tok_times)}"
    )
    page.close()


NOT_FOUND = "Page not found"
SIDEBAR_CHOICES_JS = """() => Object.fromEntries(
    [...document.querySelectorAll('[data-testid="stSidebar"] [data-testid="stSelectbox"] input')]
        .map(e => [e.getAttribute('aria-label'), e.value]))"""


def sidebar_choices(page) -> dict[str, str]:
    """The sidebar's select boxes: label → value shown (widgets load lazily: wait for the trajectory picker)."""
    page.wait_for_function(f"() => ({SIDEBAR_CHOICES_JS})()['Trajectory'] !== undefined", timeout=30_000)
    return page.evaluate(SIDEBAR_CHOICES_JS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_url_the_app_writes_reloads_to_the_same_view(server: Server, context, name: str) -> None:
    """Open a page by a link, then reload the URL the app wrote (F5): the same page, run and trajectory, and no
    "Page not found" dialog."""
    page = context.new_page()
    page.goto(f"{server.url}/?page={name}&run=python_tool_two_rollouts&traj=rollout-1", wait_until="commit")
    wait_idle(page)
    written = page.url
    at_root = name == "tokens" and "/?page=tokens&" in written  # "/" shows the token view itself (no second run)
    assert (f"/{name}?" in written or at_root) and "traj=rollout-1" in written and "scheme=" in written, written
    page.reload(wait_until="commit")  # a new session on the written URL, as a pasted link
    wait_idle(page)
    no_exception(page, f"{name} reloaded")
    assert NOT_FOUND not in page.inner_text("body"), f"{name} reloaded: {NOT_FOUND}"
    assert_on_screen(page, EXPECTED[name][0], f"{name} reloaded")
    assert page.url == written, f"{name} reloaded: {page.url} != {written}"
    picked = sidebar_choices(page)
    assert picked.get("Sample run") == "python_tool_two_rollouts" and picked.get("Trajectory") == "rollout-1", picked
    page.close()


@pytest.mark.parametrize(("path", "text"), [("group", "Rollouts"), ("tokens", "Every token, every quantity")])
def test_a_bare_page_path_opens_that_page(server: Server, context, path: str, text: str) -> None:
    page = context.new_page()
    page.goto(f"{server.url}/{path}", wait_until="commit")
    wait_idle(page)
    assert NOT_FOUND not in page.inner_text("body")
    assert_on_screen(page, text, f"/{path}")
    assert f"/{path}?" in page.url
    page.close()


def test_a_link_to_a_missing_run_says_so(server: Server, context) -> None:
    """``?run=does_not_exist`` opens the default run with a warning naming the missing one; Dismiss hides it."""
    page = context.new_page()
    page.goto(f"{server.url}/?page=overview&run=does_not_exist&scheme=nope,zz:1", wait_until="commit")
    wait_idle(page)
    no_exception(page, "missing run")
    assert_on_screen(page, "there is no sample run 'does_not_exist'; kgqa_multiturn opened instead", "missing run")
    assert_on_screen(page, "unknown piece 'zz:1'", "missing run")
    assert "run=kgqa_multiturn" in page.url
    page.get_by_role("button", name="Dismiss").click()
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stMain\"]').innerText.includes('does_not_exist')",
        timeout=30_000,
    )
    page.close()
