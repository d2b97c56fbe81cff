"""Compare schemes in a real browser: what a person sees on screen — the rLLM worked example's step table
without a click, tool tokens hatched and left out of the differences, one token-aligned grid that scrolls as one,
and a difference view that stays readable with six schemes. Debian's Chromium, one server, three page loads.

Locally the module skips when Chromium is missing; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import pytest
from browser_support import CHROMIUM, chromium, start_server, stop_server
from test_browser import assert_on_screen, no_exception, wait_idle


@pytest.fixture(scope="module")
def page():
    with chromium() as browser:
        server = start_server(env={"BROWSER_PATH": CHROMIUM})
        p = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
        p.base_url = server.url
        yield p
        stop_server(server)


def open_compare(page, query: str) -> None:
    page.goto(f"{page.base_url}/?page=compare&{query}", wait_until="commit")
    wait_idle(page)
    no_exception(page, query)
    page.wait_for_selector("table.cl-grid", timeout=60_000)


GRID_JS = """() => {
  const wraps = [...document.querySelectorAll('.cl-grid-wrap')];
  const w = wraps[0], rows = [...w.querySelectorAll('tr')];
  const tok = rows[1].querySelectorAll('td');
  const v = w.querySelector('td.cl-v');
  return {wraps: wraps.length, rows: rows.length, scrolls: w.scrollWidth > w.clientWidth + 10,
          tokRowHeight: rows[1].getBoundingClientRect().height, tokWhite: getComputedStyle(tok[0]).whiteSpace,
          valueFont: parseFloat(getComputedStyle(v).fontSize), tokFont: parseFloat(getComputedStyle(tok[0]).fontSize),
          out: rows.map(r => r.querySelectorAll('td.cl-out').length), cols: tok.length};
}"""


def test_rllm_worked_example_table_and_aligned_grid(page) -> None:
    open_compare(page, "run=python_tool_two_rollouts&scheme=grpo,p:rllm")
    for text in (
        "Steps × rollouts",
        "MC return G_k",
        "0.9025",
        "0.4512",
        "rLLM mode: trajectory → broadcast",
        "rLLM mode: trajectory → per-step",
        "per-step +0.4512 / +0.475 / +0.5",
    ):
        assert_on_screen(page, text, "python_tool compare")
    grid = page.evaluate(GRID_JS)
    assert grid["wraps"] == 1 and grid["rows"] == 2 + 3, grid  # position, token, then one row per scheme
    assert grid["scrolls"] and grid["cols"] == 160, grid  # one shared horizontal scroll, one window of tokens
    assert grid["tokWhite"] == "pre" and grid["tokRowHeight"] < 40, grid  # one line: no mid-word breaks
    assert grid["valueFont"] >= 14 and grid["tokFont"] >= 15, grid
    # the whole grid moves as one: scroll it, every row's first visible cell is the same column
    page.evaluate("() => { document.querySelector('.cl-grid-wrap').scrollLeft = 2000; }")
    xs = page.evaluate(
        """() => [...document.querySelectorAll('.cl-grid-wrap tr')].map(r => r.querySelectorAll('td')[40]
            .getBoundingClientRect().x)"""
    )
    assert max(xs) - min(xs) < 1, xs


def test_kgqa_tool_tokens_hatched_and_out_of_the_differences(page) -> None:
    open_compare(page, "run=kgqa_multiturn&traj=q0-r0")
    gae = "GAE (synthesized critic values)"  # the sample's critic values are made up, and the label says so
    for text in (gae, f"estimator: GRPO → {gae}", "78 of 135 tokens in the loss"):
        assert_on_screen(page, text, "kgqa compare")
    assert_on_screen(page, "Differences over loss tokens only (78 of 135 tokens", "kgqa compare")
    grid = page.evaluate(GRID_JS)
    assert grid["out"] == [0, 0, 57, 57, 57, 57], grid  # q0-r0's 57 tool/info tokens, hatched in every scheme row
    diff = page.locator("[data-testid='stPlotlyChart']").filter(has_text="Δ advantage against the reference")
    assert diff.bounding_box()["width"] > 1000  # full width, not half a row


def test_six_schemes_difference_view_readable(page) -> None:
    open_compare(page, "run=kgqa_multiturn&traj=q0-r0&schemes=auto~rloo~opo")
    assert_on_screen(page, "OPO (length-weighted baseline)", "six schemes")
    diff = page.locator("[data-testid='stPlotlyChart']").filter(has_text="Δ advantage against the reference")
    box = diff.bounding_box()
    assert box["width"] > 1000 and box["height"] >= 350, box
    ticks = diff.locator(".ytick text")
    assert ticks.count() == 5
    boxes = sorted((ticks.nth(k).bounding_box() for k in range(5)), key=lambda b: b["y"])
    for a, b in zip(boxes, boxes[1:], strict=False):
        assert a["y"] + a["height"] <= b["y"] + 0.5, (a, b)  # tick labels do not overlap
    plot = diff.locator(".nsewdrag").first.bounding_box()
    assert plot["height"] / 5 >= 40, plot  # ≥ 40 px a row
