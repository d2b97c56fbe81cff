"""Save a screenshot of every CreditLens page on a sample run (default: kgqa_multiturn).

    python scripts/screenshots.py OUT_DIR [--run kgqa_multiturn] [--port 8599] [--width 1600] [--scheme CODE]
    python scripts/screenshots.py /tmp/shots --run lint_cases --pages diagnostics
    python scripts/screenshots.py --readme       # the README's pictures, into docs/images/

``--readme`` writes the README's pictures from the bundled samples: one viewport (1400 × 900) per page, no
full-page captures, each an optimized RGB PNG that stays small enough for git (under 300 KB; a test checks).

On the Diagnostics page it also follows the first finding's "Open in token view" link (the first that flags
single tokens) and saves the highlighted token view as ``tokens_highlight.png``; on the token view it also turns
the heatmap on (``tokens_heatmap.png``) when the trajectory is short enough to open without it.

Starts ``streamlit run app.py`` on a free local port, drives Debian's Chromium (``/usr/bin/chromium``, or
``BROWSER_PATH``) through Playwright, and writes ``OUT_DIR/<page>.png``. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("overview", "tokens", "compare", "group", "designer", "analytics", "diagnostics", "learn")
IMAGES = ROOT / "docs" / "images"
# The README's pictures: (file name, page, sample run). One viewport each, so the files stay small.
README_SHOTS = (
    ("tokens.png", "tokens", "kgqa_multiturn"),
    ("compare.png", "compare", "python_tool_two_rollouts"),
    ("timeline.png", "timeline", "search_steps"),
    ("diagnostics.png", "diagnostics", "lint_cases"),
    ("learn.png", "learn", "kgqa_multiturn"),
)
README_VIEWPORT = {"width": 1400, "height": 900}
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-extensions",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, env: dict | None = None) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wait_healthy(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"streamlit did not answer on port {port} within {timeout} s")


def wait_idle(page, timeout: float = 90_000) -> None:
    """Wait until the page's script has run to the end (the sidebar's "page run" line is written last), no
    'running' status shows, and every Plotly chart has rendered."""
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=\"stSidebar\"]')?.innerText || '').includes('page run')",
        timeout=timeout,
        polling=100,
    )
    page.wait_for_function(
        """() => {
            const running = document.querySelector('[data-testid="stStatusWidget"]');
            const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
            const drawn = document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg');
            return !running && drawn.length >= charts.length;
        }""",
        timeout=timeout,
        polling=200,
    )
    page.wait_for_timeout(800)


def fit_to_content(page, width: int, limit: int = 16000) -> None:
    """Grow the viewport until the whole page fits (Streamlit scrolls inside its main block, so a plain
    full-page screenshot would stop at the window)."""
    js = (
        '() => Math.max(...[...document.querySelectorAll(\'[data-testid="stMain"], '
        '[data-testid="stSidebarContent"]\')].map(e => e.scrollHeight))'
    )
    height = 0
    for _ in range(6):
        full = min(int(page.evaluate(js)) + 40, limit)
        if full <= height:
            break
        height = full
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)
        wait_idle(page)


def follow_first_finding(page, args, url: str) -> None:
    """Click "Open in token view" of the first finding that flags tokens (else the first) and save the result."""
    page.set_viewport_size({"width": args.width, "height": args.height})
    page.goto(url, wait_until="domcontentloaded")
    wait_idle(page)
    blocks = page.locator("[class*='st-key-diagnostics-finding-']")
    if blocks.count() == 0:
        return
    with_tokens = blocks.filter(has=page.locator(".cl-finding", has_text="flagged token"))
    block = with_tokens.first if with_tokens.count() else blocks.first
    block.get_by_role("button", name="Open in token view").click()
    page.wait_for_selector(".cl-hl-note", timeout=60_000)
    wait_idle(page)
    path = args.out / "tokens_highlight.png"
    page.screenshot(path=str(path))  # the viewport: the note and the outlined tokens as a person first sees them
    print(path)
    fit_to_content(page, args.width)
    path = args.out / "tokens_highlight_full.png"
    page.screenshot(path=str(path), full_page=True)
    print(path)


def shrink_png(path: Path) -> int:
    """Save a screenshot as an optimized RGB PNG, in place (no alpha); returns its size in bytes. Not quantized: a
    256-colour palette turned the advantage legend's orange-red half magenta and tinted the sidebar, and the
    colours are what these pictures show."""
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB")
    rgb.save(path, optimize=True)
    return path.stat().st_size


@contextlib.contextmanager
def dashboard_page(port: int, viewport: dict):
    """A Chromium page beside a ``streamlit run app.py`` on ``port`` (a free one when 0): yields (page, port); the
    browser and the server are stopped on the way out."""
    from playwright.sync_api import sync_playwright

    port = port or free_port()
    server = start_server(port)
    try:
        wait_healthy(port)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=os.environ.get("BROWSER_PATH", "/usr/bin/chromium"), args=CHROMIUM_ARGS
            )
            try:
                yield browser.new_page(viewport=viewport), port
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def readme_shots(out: Path = IMAGES, port: int = 0) -> list[Path]:
    """The README's pictures (``README_SHOTS``) from the bundled samples, one viewport each, shrunk."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with dashboard_page(port, README_VIEWPORT) as (page, port):
        for file_name, name, run in README_SHOTS:
            page.goto(f"http://127.0.0.1:{port}/?page={name}&run={run}", wait_until="domcontentloaded")
            wait_idle(page, timeout=300_000)  # the timeline computes its steps on a first visit
            path = out / file_name
            page.screenshot(path=str(path))
            print(path, f"{shrink_png(path) / 1024:.0f} KiB")
            written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?", help="the folder for every page's full screenshot")
    ap.add_argument("--readme", action="store_true", help="write the README's pictures into docs/images/")
    ap.add_argument("--run", default="kgqa_multiturn")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--pages", nargs="*", default=list(PAGES))
    ap.add_argument("--scheme", default=None, help="a scheme code for the sidebar (dashboard.schemes)")
    args = ap.parse_args()
    if args.readme:
        readme_shots(args.out or IMAGES, args.port)
        return
    if args.out is None:
        ap.error("give OUT_DIR, or --readme")
    args.out.mkdir(parents=True, exist_ok=True)
    with dashboard_page(args.port, {"width": args.width, "height": args.height}) as (page, port):
        scheme = f"&scheme={args.scheme}" if args.scheme else ""
        for name in args.pages:
            url = f"http://127.0.0.1:{port}/?page={name}&run={args.run}{scheme}"
            page.goto(url, wait_until="domcontentloaded")
            wait_idle(page)
            fit_to_content(page, args.width)
            path = args.out / f"{name}.png"
            page.screenshot(path=str(path), full_page=True)
            print(path)
            if name == "learn":  # the second tab: rLLM's three modes on python_tool_two_rollouts
                page.get_by_role("tab").nth(1).click()
                wait_idle(page)
                fit_to_content(page, args.width)
                path = args.out / "learn_rllm_modes.png"
                page.screenshot(path=str(path), full_page=True)
                print(path)
            if name == "tokens" and not page.locator("[data-testid='stPlotlyChart']").count():
                page.get_by_text("Heatmap of every quantity at every position").click()  # off for short ones
                page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=60_000)
                wait_idle(page)
                fit_to_content(page, args.width)
                path = args.out / "tokens_heatmap.png"
                page.screenshot(path=str(path), full_page=True)
                print(path)
            if name == "diagnostics":
                follow_first_finding(page, args, url)
            page.set_viewport_size({"width": args.width, "height": args.height})


if __name__ == "__main__":
    main()
