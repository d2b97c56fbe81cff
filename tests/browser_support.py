"""What the real-browser tests share: Debian's Chromium (never a downloaded one), a ``streamlit run app.py`` server
on 127.0.0.1, and the JavaScript that tells when a script run has ended.

Locally a browser test skips when Chromium or Playwright is missing; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("BROWSER_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--no-first-run",
]
IN_CI = bool(os.environ.get("CI"))
HOST = "127.0.0.1"
# The sidebar's "page run N ms" line is written last in a script run; then no status widget, no stale element,
# and every Plotly chart drawn.
DONE_JS = """() => (document.querySelector('[data-testid="stSidebar"]')?.innerText || '').includes('page run')"""
IDLE_JS = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'))"""
EXCEPTION_SELECTOR = "[data-testid='stException']"


def unavailable(reason: str):
    """Skip (locally) or fail (in CI) because the browser cannot run."""
    if IN_CI:
        pytest.fail(f"CI: the browser test must run, but {reason}")
    pytest.skip(reason)


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")


@contextmanager
def chromium():
    """Debian's Chromium through Playwright's sync API, for a module fixture: skips (locally) or fails (in CI) when
    it cannot run; closed on exit."""
    require_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # pragma: no cover - requirements-dev pins playwright
        unavailable(f"playwright is not installed ({e})")
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
    except Exception as e:  # noqa: BLE001 - any launch failure means the same thing here
        pw.stop()
        unavailable(f"Chromium did not start: {e}")
    try:
        yield browser
    finally:
        browser.close()
        pw.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    started: float  # time.perf_counter() when the process was started
    proc: subprocess.Popen
    log: Path  # the server's stdout and stderr (a file, so a chatty server never blocks on a full pipe)
    ready: float = float("nan")  # time.perf_counter() when /_stcore/health first answered (the server listens)

    def output(self, tail: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-tail:] if self.log.exists() else ""


def start_server(
    extra_args: Sequence[str] = (), env: dict | None = None, timeout: float = 60, app: Path = ROOT / "app.py"
) -> Server:
    """``streamlit run app.py`` (or another ``app``) on a free port of 127.0.0.1, headless; returns once
    /_stcore/health answers."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.port",
        str(port),
        "--server.address",
        HOST,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        *extra_args,
    ]
    log = Path(tempfile.mkstemp(prefix="creditlens-server-", suffix=".log")[1])
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    server = Server(f"http://{HOST}:{port}", started, proc, log)
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    server.ready = time.perf_counter()
                    return server
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                out = server.output()
                stop_server(server)
                pytest.fail(f"streamlit did not start:\n{out}")
            time.sleep(0.05)


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:  # pragma: no cover
        server.proc.kill()
        server.proc.wait(timeout=20)
    server.log.unlink(missing_ok=True)
