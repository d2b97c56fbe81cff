"""The real dashboard on a big run: ``python -m benchmarks.big_server [--trajectories 50000] [--tokens 1000]``
(also ``python -m benchmarks.big_run --server``).

Writes the synthetic run (``benchmarks.big_run``; kept in ``--dir`` and reused), starts ``streamlit run app.py``
with ``CREDITLENS_DATA_DIR`` pointing at it, opens it in headless Chromium (Debian's ``/usr/bin/chromium`` driven
by Playwright, never a downloaded browser), picks the file under "Data directory", visits every page, then
switches the sidebar's estimator to GRPO (a second scheme on the whole run). After each step it prints the time
until the page is idle, the server's own time for that script run, and the server process's RSS and peak RSS
(``VmRSS``/``VmHWM`` from /proc). It also prints the progress-bar messages it saw while the run loaded. Nothing
is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import CHROMIUM, CHROMIUM_ARGS, DONE_JS, HOST, IDLE_JS, free_port  # noqa: E402

from benchmarks.big_run import write_run  # noqa: E402
from engine.io.synth.generic import synth_name  # noqa: E402

PAGES = (  # sidebar link text, what the page shows when it is done
    ("Run overview", "Scores and sizes"),
    ("Compare schemes", "Aligned token rows"),
    ("Group view", "Rollouts"),
    ("Reward designer", "Rank changes"),
    ("Run analytics", "Effective gradient weight"),
    ("Diagnostics", "Checks run"),
    ("Learn", "Step 1"),
    ("Token view", "Per turn"),
)
PROGRESS_JS = """() => [...document.querySelectorAll('[data-testid="stProgress"]')].map(e => e.innerText).join(' | ')"""


def proc_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_server(data_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port)]
    cmd += ["--server.address", HOST, "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    env = {**os.environ, "CREDITLENS_DATA_DIR": str(data_dir)}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://{HOST}:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"streamlit did not start:\n{log.read_text()[-3000:]}")


def wait_idle(page, timeout_ms: float) -> None:
    page.wait_for_function(DONE_JS, timeout=timeout_ms, polling=100)
    page.wait_for_function(IDLE_JS, timeout=timeout_ms, polling=100)


def server_ms(page) -> str:
    text = page.inner_text("[data-testid='stSidebar']")
    return text.split("page run", 1)[-1].split("ms", 1)[0].strip() if "page run" in text else "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trajectories", type=int, default=50_000)
    p.add_argument("--tokens", type=int, default=1_000)
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", default=None, help="where the run file is written and kept (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds one step may take")
    args, _ = p.parse_known_args(argv)  # also accepts benchmarks.big_run's own flags (--server, ...)
    with tempfile.TemporaryDirectory(prefix="creditlens-bench-") as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"synth_{args.trajectories}x{args.tokens}.{args.format}"
        path = folder / name
        if not path.exists():
            print(f"{name}: written in {write_run(path, args.trajectories, args.tokens, args.seed):.1f} s", flush=True)
        others = [f.name for f in folder.iterdir() if f.is_file() and f.name != name and f.suffix == path.suffix]
        if others:
            raise SystemExit(f"{folder} holds other run files ({', '.join(others)}); the benchmark wants only {name}")
        return run_browser(folder, name, synth_name(args.trajectories, args.tokens, args.seed), args.timeout * 1000)


def run_browser(folder: Path, name: str, run_name: str, timeout_ms: float) -> int:
    from playwright.sync_api import sync_playwright

    log = Path(tempfile.mkstemp(prefix="creditlens-server-", suffix=".log")[1])
    proc, url = start_server(folder, log)
    rows = []

    def step(label: str, act, done_text: str | None = None) -> None:
        t0 = time.perf_counter()
        act()
        if done_text:
            page.wait_for_function(
                f"() => document.querySelector('[data-testid=\"stMain\"]')?.innerText.includes({done_text!r})",
                timeout=timeout_ms,
                polling=100,
            )
        wait_idle(page, timeout_ms)
        seconds = time.perf_counter() - t0
        rows.append((label, seconds, server_ms(page), proc_mib(proc.pid, "VmRSS"), proc_mib(proc.pid, "VmHWM")))
        print(f"  {label:<30} {seconds:7.1f} s  server {rows[-1][2]:>8} ms  RSS {rows[-1][3]:6.0f} MiB  "
              f"peak {rows[-1][4]:6.0f} MiB", flush=True)  # fmt: skip

    seen: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
            page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
            print(f"server pid {proc.pid}, {url}; RSS {proc_mib(proc.pid, 'VmRSS'):.0f} MiB after start", flush=True)
            step("open (sample run)", lambda: page.goto(url + "/", wait_until="commit"))

            def pick_data_directory() -> None:
                page.get_by_text("Data directory", exact=True).click()
                shows_run = (
                    f"() => document.querySelector('[data-testid=\"stMain\"]')?.innerText.includes({run_name!r})"
                )
                deadline = time.time() + timeout_ms / 1000
                while time.time() < deadline:  # what the progress bar says while the run loads
                    text = page.evaluate(PROGRESS_JS)
                    if text and (not seen or seen[-1] != text):
                        seen.append(text)
                    if not text and page.evaluate(shows_run) and page.evaluate(IDLE_JS):
                        break
                    time.sleep(0.2)

            step(f"load {name}", pick_data_directory)
            shown = seen[:: max(1, len(seen) // 8)]
            print("    progress bar: " + (" → ".join(shown + [m for m in seen[-1:] if m not in shown]) or "(not seen)"))
            for link, done in PAGES:
                step(link, lambda link=link: page.get_by_role("link", name=link).click(), done)

            def second_scheme() -> None:
                box = page.locator("[data-testid='stSidebar']").get_by_role("combobox", name="Estimator")
                box.scroll_into_view_if_needed()
                box.click()
                box.fill("GRPO (Dr.GRPO")  # the list filters to it; Enter picks it
                page.keyboard.press("Enter")
                page.wait_for_function(
                    '() => [...document.querySelectorAll(\'[data-testid="stSidebar"] input[aria-label="Estimator"]\')]'
                    ".some(e => e.value.startsWith('GRPO (Dr'))",
                    timeout=timeout_ms,
                )
                time.sleep(0.5)  # the rerun starts

            step("sidebar estimator → GRPO", second_scheme)
            browser.close()
    except Exception:
        print(f"the benchmark stopped; the server's log is {log}:\n{log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        peak = proc_mib(proc.pid, "VmHWM")
        proc.terminate()
        proc.wait(timeout=30)
    print(f"server peak RSS (VmHWM): {peak:,.0f} MiB ({peak / 1024:.2f} GiB)")
    log.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
