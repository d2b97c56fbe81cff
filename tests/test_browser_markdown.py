"""Markdown in labels and messages in a real browser: Debian's Chromium driven by Playwright
against one ``streamlit run app.py`` whose data directory holds the hostile run of ``test_hostile_markdown`` (payloads
as reward component names, trajectory and group ids, metadata, the run name) and a bad file whose name is a payload.

Every page is visited (the Reward designer's sliders are labelled with the component names), then a bad file whose
name is a payload is uploaded, then the bad data-directory file opened. Throughout: no request to 127.0.0.1:9 or for
the payloads' relative images, no image or link from a payload, no KaTeX built from one, no colored text, icon, bold,
heading or code made by one, no exception; and the names are on screen as they are written.

Locally the module skips when Chromium or Playwright is missing; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from browser_support import CHROMIUM, require_chromium, start_server, stop_server
from test_hostile_markdown import BAD_FILE, PAYLOADS, RUN_NAME, write_hostile_run
from test_multiuser import PAGES, _has, exceptions, go, in_browser, until

from dashboard.state import WORD_JOINER

# What a payload would have made, had it rendered: any of these in the page is a failure.
MADE_JS = """() => {
  const all = (sel) => [...document.querySelectorAll(sel)];
  const bad = (u) => {
    const url = new URL(u, location.href);
    return url.port === '9' || /\\/x(\\.png)?$/.test(url.pathname);
  };
  return {
    imgs: all('img[src]').filter(e => bad(e.getAttribute('src'))).map(e => e.getAttribute('src')),
    links: all('a[href]').filter(e => bad(e.getAttribute('href'))).map(e => e.getAttribute('href')),
    katex: all('.katex annotation').map(e => e.textContent).filter(t => /frac\\{a\\}|x\\^2|^x$/.test(t)),
    colored: all('span').filter(e => e.textContent === 'RED').length,
    icons: all('span[role="img"]').filter(e => e.textContent === 'home').length,
    emoji: document.body.innerText.includes('\\u{1F604}') ? 1 : 0,
    bold: all('strong, b').filter(e => ['bold', 'b'].includes(e.textContent)).length,
    headings: all('h1, h2, h3, h4, h5, h6').filter(e => e.textContent.includes('heading')).length,
    code: all('code').filter(e => ['code', 'c'].includes(e.textContent)).length,
    pwned: window.__pwned === undefined ? 0 : 1,
  };
}"""
PICKED_JS = """() => document.querySelector('[data-testid="stSidebar"] input[aria-label="Trajectory"]')?.value"""
NOTHING = {
    "imgs": [],
    "links": [],
    "katex": [],
    "colored": 0,
    "icons": 0,
    "emoji": 0,
    "bold": 0,
    "headings": 0,
    "code": 0,
    "pwned": 0,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    data = tmp_path_factory.mktemp("markdown-runs")
    write_hostile_run(data / "hostile.jsonl")
    (data / BAD_FILE).write_text("not json\n")
    s = start_server(env={"BROWSER_PATH": CHROMIUM, "CREDITLENS_DATA_DIR": str(data)})
    yield s
    stop_server(s)


def fetched_payload(url: str) -> bool:
    parts = urlsplit(url)
    return parts.port == 9 or parts.path.endswith(("/x.png", "/x"))


async def text_of(page, area: str) -> str:
    return (await page.locator(f"[data-testid='{area}']").inner_text()).replace(WORD_JOINER, "")


async def tour(browser, url: str, shot: Path) -> dict:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await ctx.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if fetched_payload(r.url) else None)
    out: dict = {"pages": {}}
    try:
        await page.goto(f"{url}/?page=overview&run=data:hostile.jsonl", wait_until="commit")
        await until(page, _has("stMain", PAGES["Run overview"]), "hostile run overview")
        # the heading is an st.html element, drawn after the run's script ended; wait for it (a timeout fails)
        await until(page, _has("stMain", RUN_NAME), "the run name in the overview's heading")
        for title in PAGES:
            if title != "Run overview":
                await go(page, title)
            await page.wait_for_timeout(300)  # an image would have been requested by now
            main, picked = await text_of(page, "stMain"), await page.evaluate(PICKED_JS)
            out["pages"][title] = (await page.evaluate(MADE_JS), main, picked, await exceptions(page))
            if title == "Reward designer":
                await page.screenshot(path=str(shot), full_page=True)
                labels = page.locator("[data-testid='stMain'] [data-testid='stSlider'] [data-testid='stWidgetLabel']")
                out["slider labels"] = [t.replace(WORD_JOINER, "") for t in await labels.all_inner_texts()]
        # a bad upload whose file name is a payload: the error names it
        sidebar = page.locator("[data-testid='stSidebar']")
        await sidebar.get_by_role("radio", name="Upload", exact=True).click()
        await until(page, _has("stSidebar", "Upload a run file to look at it"), "upload source", done=False)
        name = " ".join(PAYLOADS) + ".jsonl"
        payload = {"name": name, "mimeType": "application/json", "buffer": b"not json\n"}
        await sidebar.locator("input[type='file']").set_input_files(payload)
        await until(page, _has("stSidebar", "Could not load"), "bad upload", done=False)
        await page.wait_for_timeout(300)
        error = sidebar.locator("[data-testid='stAlertContentError']")
        out["upload"] = (name, (await error.inner_text()).replace(WORD_JOINER, ""), await page.evaluate(MADE_JS))
        # the bad file in the data directory
        await page.goto(f"{url}/?page=diagnostics&run={quote('data:' + BAD_FILE)}", wait_until="commit")
        await until(page, _has("stSidebar", "Could not load"), "bad data-directory file", done=False)
        await page.wait_for_timeout(300)
        out["data file"] = ((await error.inner_text()).replace(WORD_JOINER, ""), await page.evaluate(MADE_JS))
        out["requests"] = requests
        return out
    finally:
        await ctx.close()


def test_markdown_payloads_render_as_text_on_every_page(server, tmp_path) -> None:
    shot = tmp_path / "designer_hostile.png"
    seen = in_browser(lambda browser: tour(browser, server.url, shot))
    assert seen["requests"] == [], seen["requests"]
    assert set(seen["pages"]) == set(PAGES)
    for title, (made, main, picked, errors) in seen["pages"].items():
        assert not errors, f"{title}: {errors[0][:500]}"
        assert made == NOTHING, f"{title}: {json.dumps(made)}"
        assert PAYLOADS[0] in main, f"{title}: the run name or trajectory id is not on screen as written"
        assert picked == f"{PAYLOADS[0]} #0", f"{title}: the trajectory picker shows {picked!r}"
    # the designer: one slider per component, labelled with its name as written (turn, then global "g …")
    labels = seen["slider labels"]
    for p in PAYLOADS:
        assert p in labels, (p, labels)
        assert f"g {p}" in labels, (p, labels)
    designer = seen["pages"]["Reward designer"][1]
    assert all(p in designer for p in PAYLOADS)
    overview = seen["pages"]["Run overview"][1]  # the run name; metadata's "synthesized" names in the caption
    assert RUN_NAME in overview, overview
    n = 2 * len(PAYLOADS)
    assert all(f"{p} in 2 of {n} trajectories" in overview for p in PAYLOADS), overview[:2000]
    assert shot.stat().st_size > 10_000
    # load errors name the file as it is written
    name, error, made = seen["upload"]
    assert error.startswith(f"Could not load {name}: ValueError: cannot detect the format of "), error
    assert made == NOTHING, made
    error, made = seen["data file"]
    assert error.startswith(f"Could not load data:{BAD_FILE}: ValueError: "), error
    assert made == NOTHING, made
