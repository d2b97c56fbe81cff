"""Several users on one server, in a real browser: Debian's Chromium driven by Playwright's
async API against one ``streamlit run app.py`` on 127.0.0.1.

* Eight browser contexts (separate cookies and storage, as eight people) run at once under ``asyncio.gather``:
  each uploads its own small native JSONL run (trajectory ids and run name unique to it) through the sidebar's
  file uploader, then does something else (a slider, the estimator, the profile, page switches, the designer,
  the trajectory, an upload over the size limit). Afterwards no session shows an exception, none sees another's
  run (ids, run name, trajectory picker) and none carries another's settings (the sidebar's scheme code).
* The server runs with ``--server.maxUploadSize 1`` so the size limit is testable: a 2 MB upload must be refused
  with Streamlit's message and the session keeps its run.
* A hostile run (``<script>``, ``<img onerror>``, ``</div>`` in token text, ids, group ids, metadata, reward
  component names and the run name) is uploaded and every page visited: nothing executes, no element is
  injected, and the literal text is on screen.

Locally the module skips when Chromium or Playwright is missing; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DONE_JS,
    EXCEPTION_SELECTOR,
    IDLE_JS,
    require_chromium,
    start_server,
    stop_server,
    unavailable,
)

SESSIONS = 8
WAIT_MS = 90_000  # any single wait; the whole scenario is bounded by SCENARIO_S
SCENARIO_S = 240
UPLOAD_LIMIT_MB = 1
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
CLOSE = "</div>"
PAGES = {  # navigation title → text its page always shows
    "Run overview": "Reward components",
    "Token view": "Every token, every quantity",
    "Compare schemes": "Aligned token rows",
    "Group view": "Rollouts",
    "Reward designer": "Turn components",
    "Run analytics": "Length bias",
    "Diagnostics": "Checks run",
    "Learn": "Step 1 · Generation",
}


def marker(i: int) -> str:
    """Text unique to session ``i``'s run (in every trajectory id); no marker contains another."""
    return f"zq{i}w"


def run_name(i: int) -> str:
    return f"multiuser-run-{marker(i)}"


# ------------------------------------------------------------------------------------------------ run files
def _trajectory(tid: str, group: str, model: str, tool: str, k: int, extra: dict | None = None) -> dict:
    return {
        "id": tid,
        "group_id": group,
        "prompt": "Which city is the capital of France?",
        "segments": [
            {"role": "model", "text": f"{model} <search> capital of France </search>"},
            {"role": "tool", "text": f"\n<information> {tool} Paris is the capital. </information>\n"},
            {"role": "model", "text": f"<answer> {'Paris' if k % 2 else 'Lyon'} </answer><|im_end|>"},
        ],
        "turn_rewards": [{"format_score": 1.0}, {"format_score": 1.0, "is_answer_score": float(k % 2)}],
        "global_rewards": {"exact_match": float(k % 2)},
        "metadata": {"truncated": False},
        **(extra or {}),
    }


def write_run(path: Path, name: str, trajectories: list[dict]) -> Path:
    header = {"creditlens": {"schema": "creditlens.trajectory.v1", "name": name, "source": "native"}}
    path.write_text("\n".join(json.dumps(r) for r in [header, *trajectories]) + "\n")
    return path


def session_run(d: Path, i: int) -> Path:
    """Four rollouts of two prompts whose ids, group ids and token text carry session ``i``'s marker."""
    m = marker(i)
    trajs = [_trajectory(f"{m}-traj{k}", f"{m}-prompt{k // 2}", f"Session {m} thinks.", m, k) for k in range(4)]
    return write_run(d / f"session_{i}.jsonl", run_name(i), trajs)


def hostile_run(d: Path) -> Path:
    """HTML and script in token text, ids, group ids, prompt, metadata, component names and the run name."""
    trajs = [
        _trajectory(
            f"h{k}{SCRIPT if k % 2 else IMG}",
            f"g{k // 2}{CLOSE}{SCRIPT}",
            f"{SCRIPT} {IMG} {CLOSE}",
            f"{CLOSE}{IMG}",
            k,
            {
                "prompt": f"{SCRIPT}{IMG}{CLOSE}",
                "turn_rewards": [{IMG: 1.0, "format_score": 1.0}, {"format_score": 1.0}],
                "global_rewards": {f"{CLOSE}{SCRIPT}": 0.5, "exact_match": float(k % 2)},
                "metadata": {"note": f"{CLOSE}{IMG}", SCRIPT: 1},
            },
        )
        for k in range(4)
    ]
    return write_run(d / "hostile.jsonl", f"hostile{SCRIPT}", trajs)


def oversized_run(d: Path, size: int = 2 * 1024 * 1024) -> Path:
    """A valid run padded past the server's 1 MB upload limit (2 MB)."""
    path = session_run(d, 99)
    pad = json.dumps({"id": "pad", "segments": [{"role": "model", "text": "x" * size}]})
    path.write_text(path.read_text() + pad + "\n")
    return path


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def server():
    require_chromium()
    s = start_server(["--server.maxUploadSize", str(UPLOAD_LIMIT_MB)], env={"BROWSER_PATH": CHROMIUM})
    yield s
    stop_server(s)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("multiuser-runs")
    for i in range(SESSIONS):
        session_run(d, i)
    hostile_run(d)
    oversized_run(d)
    return d


class _NoBrowser(Exception):
    pass


def in_browser(scenario):
    """Run ``await scenario(browser)`` in one async Playwright Chromium, bounded by SCENARIO_S seconds."""
    try:
        from playwright.async_api import async_playwright
    except ImportError as e:  # pragma: no cover - requirements-dev pins playwright
        unavailable(f"playwright is not installed ({e})")

    async def main():
        async with async_playwright() as pw:
            try:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
            except Exception as e:  # noqa: BLE001 - any launch failure means the same thing here
                raise _NoBrowser(str(e)) from e
            try:
                return await asyncio.wait_for(scenario(browser), SCENARIO_S)
            finally:
                await browser.close()

    try:
        return asyncio.run(main())
    except _NoBrowser as e:
        unavailable(f"Chromium did not start: {e}")


# ------------------------------------------------------------------------------------------------ page helpers
def _has(area: str, text: str) -> str:
    return f"() => (document.querySelector('[data-testid=\"{area}\"]')?.innerText || '').includes({json.dumps(text)})"


async def idle(page, done: bool = True) -> None:
    """Until the script run has ended. ``done``: also wait for the sidebar's "page run" line, which is missing
    when no run is open (the page ends with st.stop() and the line is not written)."""
    if done:
        await page.wait_for_function(DONE_JS, timeout=WAIT_MS, polling=100)
    await page.wait_for_function(IDLE_JS, timeout=WAIT_MS, polling=100)


async def until(page, js: str, where: str, done: bool = True) -> None:
    """Wait for ``js`` and then for the script run to end; a timeout names what was awaited."""
    try:
        await page.wait_for_function(js, timeout=WAIT_MS, polling=100)
    except Exception as e:  # noqa: BLE001 - turn a timeout into a readable assertion
        main = await page.locator("[data-testid='stMain']").inner_text()
        side = await page.locator("[data-testid='stSidebar']").inner_text()
        raise AssertionError(
            f"{where}: timed out waiting for {js}; main area shows:\n{main[:1200]}\nsidebar:\n{side[-1500:]}"
        ) from e
    await idle(page, done)


async def open_app(browser, url: str, title: str = "Token view"):
    """A new browser context (a new person) on page ``title``."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    path = {"Token view": "tokens", "Diagnostics": "diagnostics"}[title]
    await page.goto(f"{url}/?page={path}", wait_until="commit")
    await until(page, _has("stMain", PAGES[title]), "first paint")
    return ctx, page


async def upload(page, path: Path, expect: str) -> None:
    """Switch the sidebar's run source to Upload, give the uploader ``path``, wait for ``expect`` on screen."""
    sidebar = page.locator("[data-testid='stSidebar']")
    if not await sidebar.locator("input[type='file']").count():
        await sidebar.get_by_role("radio", name="Upload", exact=True).click()
        # the rerun that draws the uploader must have ended, or it may replace the input given the file
        await until(page, _has("stSidebar", "Upload a run file to look at it"), "upload source", done=False)
    await sidebar.locator("input[type='file']").set_input_files(str(path))
    await until(page, _has("stMain", expect), f"upload of {path.name}")


async def open_select(page, label: str):
    """Open the sidebar selectbox labelled exactly ``label``; returns its options (retries a click that a rerun
    swallowed, a bounded number of times)."""
    box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name=label, exact=True)
    options = page.get_by_role("option")
    for _ in range(4):
        await box.click()
        try:
            await options.first.wait_for(timeout=5_000)
            return options
        except Exception:  # noqa: BLE001 - a rerun redrew the box while it opened; try again
            await page.keyboard.press("Escape")
            await idle(page)
    raise AssertionError(f"the {label!r} selectbox does not open")


async def choose(page, label: str, option: str) -> None:
    """Pick ``option`` in the sidebar selectbox labelled exactly ``label``."""
    await open_select(page, label)
    await page.get_by_role("option", name=option, exact=True).click()


async def picker_options(page, label: str = "Trajectory") -> list[str]:
    """The options a sidebar selectbox offers (opened, read, closed)."""
    texts = await (await open_select(page, label)).all_inner_texts()
    await page.keyboard.press("Escape")
    return texts


async def scheme_code(page) -> str:
    text = await page.locator("[data-testid='stSidebar']").inner_text()
    return text.split("Scheme code", 1)[-1].strip().split()[0] if "Scheme code" in text else ""


async def press_slider(page, label: str, key: str, times: int) -> None:
    """``times`` presses of ``key`` on a sidebar slider, each once the rerun of the one before has ended: a press
    landing while the sidebar is redrawn could be lost (seen under load: λ 0.98 after three presses, not 0.97)."""
    slider = page.locator(f"[data-testid='stSidebar'] input[type='range'][aria-label='{label}']")
    sidebar = page.locator("[data-testid='stSidebar']")
    for _ in range(times):
        await idle(page)
        before = await sidebar.inner_text()  # the scheme code and the "page run" line change with each run
        await slider.focus()
        await page.keyboard.press(key)
        await page.wait_for_function(
            "b => document.querySelector('[data-testid=\"stSidebar\"]').innerText !== b",
            arg=before,
            timeout=WAIT_MS,
            polling=100,
        )
    await idle(page)


async def go(page, title: str) -> None:
    await page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=title, exact=True).click()
    await until(page, _has("stMain", PAGES[title]), f"page {title}")


async def exceptions(page) -> list[str]:
    return await page.locator(EXCEPTION_SELECTOR).all_inner_texts()


# ------------------------------------------------------------------------------------------------ sessions
@dataclass
class Seen:
    """What one session shows at the end."""

    index: int
    text: str  # main area and sidebar
    options: list[str]  # the sidebar trajectory picker
    code: str  # the sidebar scheme code
    errors: list[str]  # exception boxes
    notes: list[str]  # what the session's own action checked on the way


async def act(page, i: int, runs: Path) -> list[str]:
    """Session ``i``'s own action after its upload; returns what it observed."""
    code = await scheme_code(page)
    if i == 0:  # λ slider on the token view: 1.0 → 0.97
        await press_slider(page, "λ", "ArrowLeft", 3)
        await until(page, "() => document.body.innerText.includes('l:0.97')", "λ slider")
    elif i == 1:  # estimator
        await choose(page, "Estimator", "RLOO (leave-one-out)")
        await until(page, "() => /Scheme code\\s*rloo/.test(document.body.innerText)", "estimator")
    elif i == 2:  # page switches
        for title in ("Run overview", "Group view", "Compare schemes", "Diagnostics"):
            await go(page, title)
    elif i == 3:  # profile
        await choose(page, "Profile", "kg-r1")
        await until(page, "() => document.body.innerText.includes('p:kg-r1')", "profile")
    elif i == 4:  # designer weight slider
        await go(page, "Reward designer")
        slider = page.locator("[data-testid='stMain'] input[type='range'][aria-label='exact_match']")
        await slider.focus()
        before = await page.locator("[data-testid='stMain']").inner_text()
        await page.keyboard.press("ArrowRight")
        await page.wait_for_function(
            "b => document.querySelector('[data-testid=\"stMain\"]').innerText !== b",
            arg=before,
            timeout=WAIT_MS,
            polling=100,
        )
        await idle(page)
    elif i == 5:  # another trajectory, then its token view
        await choose(page, "Trajectory", f"{marker(i)}-traj2")
        await go(page, "Token view")
        await until(page, _has("stMain", f"{marker(i)}-traj2"), "trajectory")
    elif i == 6:  # γ slider
        await press_slider(page, "γ", "ArrowLeft", 2)
        await until(page, "() => document.body.innerText.includes('g:0.98')", "γ slider")
    elif i == 7:  # an upload over the limit: refused in the browser, the session keeps its run
        sidebar = page.locator("[data-testid='stSidebar']")
        await sidebar.locator("input[type='file']").set_input_files(str(runs / "session_99.jsonl"))
        # what a person sees: the file's chip turns red, and hovering it says why (the same text is the chip's
        # screen-reader alert)
        chip = sidebar.locator("[data-testid='stFileChip'][aria-invalid='true']")
        await chip.wait_for(timeout=WAIT_MS)
        tip = page.locator("[role='tooltip'], [data-testid='stTooltipContent']").filter(has_text="or smaller")
        for _ in range(4):  # bounded: a rerun of the page may redraw the chip under the pointer
            await page.mouse.move(700, 10)
            await chip.hover()
            try:
                await tip.first.wait_for(timeout=5_000)
                break
            except Exception:  # noqa: BLE001 - hover again
                await idle(page)
        notes = [await chip.inner_text(), await tip.first.inner_text()]
        await page.mouse.move(700, 10)
        await idle(page)
        return notes
    return [code]


async def user(browser, url: str, i: int, runs: Path) -> Seen:
    ctx, page = await open_app(browser, url, "Diagnostics")  # no Plotly to draw: eight start quicker
    try:
        await upload(page, runs / f"session_{i}.jsonl", run_name(i))
        notes = await act(page, i, runs)
        await asyncio.sleep(0.5)  # let the other sessions' reruns interleave with the final reads
        await idle(page)
        text = await page.locator("[data-testid='stMain']").inner_text()
        text += "\n" + await page.locator("[data-testid='stSidebar']").inner_text()
        return Seen(i, text, await picker_options(page), await scheme_code(page), await exceptions(page), notes)
    finally:
        await ctx.close()


def test_eight_sessions_stay_apart(server, runs: Path) -> None:
    async def scenario(browser):
        return await asyncio.gather(*(user(browser, server.url, i, runs) for i in range(SESSIONS)))

    seen: list[Seen] = in_browser(scenario)
    for s in seen:
        assert not s.errors, f"session {s.index}: {s.errors[0][:500]}"
        own = marker(s.index)
        assert s.options and all(o.startswith(own) for o in s.options), (s.index, s.options)
        assert own in s.text
        for other in range(SESSIONS):
            if other != s.index:
                assert marker(other) not in s.text + "".join(s.options), f"session {s.index} sees session {other}"
                assert run_name(other) not in s.text, f"session {s.index} sees session {other}'s run name"
                assert f"session_{other}.jsonl" not in s.text, f"session {s.index} sees session {other}'s file"
    codes = {s.index: s.code for s in seen}
    assert codes[1].startswith("rloo") and "l:0.97" in codes[0] and "p:kg-r1" in codes[3] and "g:0.98" in codes[6]
    for s in seen:  # each setting stays in the session that made it
        assert codes[s.index].startswith("rloo") == (s.index == 1), codes
        assert ("l:0.97" in codes[s.index]) == (s.index == 0), codes
        assert ("p:kg-r1" in codes[s.index]) == (s.index == 3), codes
        assert ("g:0.98" in codes[s.index]) == (s.index == 6), codes
    assert "Checks run" in seen[2].text  # the page switches ended on Diagnostics
    assert "Turn components" in seen[4].text
    assert f"{marker(5)}-traj2" in seen[5].text
    # the refused upload: a red chip for the 2 MB file, whose tooltip names the limit; the run stays loaded
    chip, tip = seen[7].notes
    assert "session_99.jsonl" in chip and "MB" in chip, chip
    assert tip == f"File must be {UPLOAD_LIMIT_MB}.0MB or smaller.", tip
    assert run_name(7) in seen[7].text


# ------------------------------------------------------------------------------------------------ hostile run
INJECTED_JS = """() => ({
    pwned: window.__pwned,
    imgs: document.querySelectorAll('img[src="x"]').length,
    scripts: [...document.scripts].filter(s => s.text.includes('__pwned')).length,
})"""


async def hostile_tour(browser, url: str, path: Path) -> dict[str, tuple[dict, str, list[str]]]:
    ctx, page = await open_app(browser, url)
    try:
        await upload(page, path, f"h0{IMG}")
        out = {}
        for title in PAGES:
            await go(page, title)
            await page.wait_for_timeout(300)  # give an onerror handler a chance to fire
            main = await page.locator("[data-testid='stMain']").inner_text()
            out[title] = (await page.evaluate(INJECTED_JS), main, await exceptions(page))
        return out
    finally:
        await ctx.close()


def test_hostile_run_is_inert_on_every_page(server, runs: Path) -> None:
    tour = in_browser(lambda browser: hostile_tour(browser, server.url, runs / "hostile.jsonl"))
    assert set(tour) == set(PAGES)
    for title, (injected, _, errors) in tour.items():
        assert not errors, f"{title}: {errors[0][:500]}"
        assert injected == {"pwned": None, "imgs": 0, "scripts": 0}, f"{title}: {injected}"
    # the literal text is on screen: the run name or an id in every heading, token text, component names
    for title, (_, main, _) in tour.items():
        assert SCRIPT in main, f"{title}: the literal {SCRIPT!r} is not on screen"
    tokens = tour["Token view"][1]
    assert f"{SCRIPT} {IMG} {CLOSE}" in tokens and f"h0{IMG}" in tokens  # token text, trajectory id
    assert f"h0{IMG}" in tour["Group view"][1]
    for title in ("Reward designer", "Diagnostics"):  # reward component names
        assert IMG in tour[title][1] and f"{CLOSE}{SCRIPT}" in tour[title][1], title
