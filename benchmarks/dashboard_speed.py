"""How fast the dashboard answers, in a real browser: ``python -m benchmarks.dashboard_speed [--rounds 5] [--quick]``.

One run measures three things against targets (printed beside each), each against a baseline measured in the same run:

(a) Interactions on a 64 × 2,048-token run (``engine.io.synth.synth_run(64, 2048, seed=0)`` saved in a temporary
    ``CREDITLENS_DATA_DIR``): the sidebar trajectory, estimator and rLLM stepwise mode, the λ slider and a Reward
    designer weight, and a switch to each page through the navigation links. An interaction has settled when the
    script run it started has ended (Streamlit's ``script_finished`` message on the page's websocket, the status
    of a run cut short for a rerun not counted) and the page is idle (``IDLE_JS``: no running status, no stale
    element, every Plotly chart drawn). Target: < 1 s each, on a server that has warmed up (its background
    warm-up loads the tokenizer once nobody has clicked for a few seconds, within a minute of its start: the
    benchmark waits for the log line that says so). Measured before that, once, and printed under the table: a
    fresh server's first page, then the Diagnostics page at once, which builds the tokenizer itself.
(b) Concurrency: eight people on one server switch to a page at once; the median of their times against one
    person switching alone, target: within 2×. People's browsers run on their own computers, so by default
    (part ``concurrency``) one real browser session is timed while the other seven are ``WireSession``s
    (``benchmarks/wire_session.py``): they speak Streamlit's websocket protocol as the frontend does, so the server
    runs their scripts and builds and sends every delta, but nothing is drawn on this machine. The browser's
    switch alone, then with all eight at once, ``--own-rounds`` times per page. Part ``concurrency-here`` also
    puts all eight browsers on this machine (eight browser contexts) and prints the server's and the browsers'
    CPU seconds per page render, which bound what 2 shared cores can do: there the eight browsers' drawing,
    not the server, sets the ratio.
(c) Cold first paint (``benchmarks.first_paint``): a fresh ``streamlit run app.py`` until its first coloured token,
    against a bare Streamlit app drawing the same kinds of elements, started alternately in the same run.
    Target: CreditLens at most 1 s slower.

Debian's Chromium (``/usr/bin/chromium`` or ``BROWSER_PATH``) through Playwright; nothing is downloaded. The
browser shares the machine's cores with the server, as a developer's laptop or CI does. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # browser_support: the tests' Chromium helpers

LONG_RUN = "long64x2048.parquet"
TARGET_S = 1.0  # (a): every interaction settles within this
CONCURRENT_RATIO = 2.0  # (b): eight sessions' median within this many times one session's
FIRST_PAINT_EXTRA_S = 1.0  # (c): CreditLens's cold first paint at most this much after the bare app's
SESSIONS = 8
WAIT_S = 120
# Navigation title → text its page shows when drawn (as benchmarks/big_server.py and tests/test_multiuser.py).
PAGES = (
    ("Run overview", "overview"),
    ("Compare schemes", "compare"),
    ("Group view", "group"),
    ("Reward designer", "designer"),
    ("Run analytics", "analytics"),
    ("Diagnostics", "diagnostics"),
    ("Learn", "learn"),
    ("Token view", "tokens"),
)
CONCURRENT_PAGES = ("Token view", "Compare schemes")


# ------------------------------------------------------------------------------------------------ pure helpers
def summary(times: Sequence[float]) -> tuple[float, float]:
    """(median, max) of ``times`` (NaN, NaN when empty)."""
    if not times:
        return float("nan"), float("nan")
    return statistics.median(times), max(times)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def interaction_table(rows: dict[str, list[float]], server: dict[str, list[float]], target: float) -> str:
    """The table of (a): one line per interaction with its median and max settle time, the median server script
    time (from the websocket: run started → ended), the target and whether the max met it."""
    lines = [f"{'interaction':34s} {'n':>3s} {'median':>8s} {'max':>8s} {'server':>8s}  target"]
    for name, times in rows.items():
        med, top = summary(times)
        srv, _ = summary(server.get(name, []))
        lines.append(
            f"{name:34s} {len(times):3d} {med:7.2f}s {top:7.2f}s {srv:7.2f}s  < {target:g} s {verdict(top < target)}"
        )
    return "\n".join(lines)


def ratio_line(name: str, alone: Sequence[float], together: Sequence[float], target: float) -> str:
    """One line of (b): medians alone and with everyone at once, and their ratio against ``target``."""
    a, b = summary(alone)[0], summary(together)[0]
    r = b / a if a > 0 else float("nan")
    return (
        f"{name:18s} alone {a:6.2f} s (n={len(alone)})   {SESSIONS} at once: median {b:6.2f} s, "
        f"max {summary(together)[1]:6.2f} s (n={len(together)})   ratio {r:4.2f}x  target <= {target:g}x "
        f"{verdict(r <= target)}"
    )


def projection_line(
    alone: Sequence[float], alone_server: Sequence[float], server_cpu_alone: float, server_cpu_together: float
) -> str:
    """What eight people on eight machines would see, from this run's measurements: each browser's own part
    (``B`` = median settle time alone − median server run alone) no longer shares the server's cores, and the
    eight server runs are serialized (one Python process: ``N`` × the server CPU of a render made together).
    A projection, not a measurement; the target is judged on the measured ratios above."""
    b = max(summary(alone)[0] - summary(alone_server)[0], 0.0)
    one, all_ = b + server_cpu_alone, b + SESSIONS * server_cpu_together
    return (
        f"projected, each browser on its own machine: alone {one:.2f} s (browser {b:.2f} + server "
        f"{server_cpu_alone:.2f}), {SESSIONS} at once {all_:.2f} s (browser + {SESSIONS} × server "
        f"{server_cpu_together:.2f}): ratio {all_ / one:.2f}x (a projection; not the measured target)"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> list[int]:
    """Pids of ``root``'s descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def browser_cpu(server_pid: int) -> float:
    """CPU seconds of this process's descendants other than the server: the Playwright driver and Chromium."""
    return sum(cpu_seconds(p) for p in descendants(os.getpid()) if p != server_pid)


# ------------------------------------------------------------------------------------------------ browser side
@dataclass
class Session:
    """A page and the script runs it saw end, read from its websocket (``script_finished`` ForwardMsgs)."""

    page: object
    started: list[float] = field(default_factory=list)  # perf_counter at each new_session (a script run began)
    finished: list[tuple[float, int]] = field(default_factory=list)  # (perf_counter, ScriptFinishedStatus)

    def __post_init__(self) -> None:
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, str) or len(payload) > 4096:  # the messages looked for are small
            return
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            msg = ForwardMsg.FromString(payload)
        except Exception:  # noqa: BLE001 - not a ForwardMsg: ignore
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.started.append(time.perf_counter())
        elif kind == "script_finished":
            self.finished.append((time.perf_counter(), msg.script_finished))

    async def settle(self, act: Callable[[], Awaitable[None]]) -> tuple[float, float]:
        """(seconds from ``act()`` until its script run ended and the page is idle, seconds the server's run took
        as the browser saw it: run started → ended)."""
        from browser_support import IDLE_JS
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        early = ForwardMsg.FINISHED_EARLY_FOR_RERUN
        n, m = len(self.finished), len(self.started)
        t0 = time.perf_counter()
        await act()
        while not any(status != early for _, status in self.finished[n:]):
            if time.perf_counter() - t0 > WAIT_S:
                await self.page.screenshot(path=str(Path(tempfile.gettempdir()) / "bench_dashboard_timeout.png"))
                raise TimeoutError(f"no script run ended ({len(self.finished)} seen before)")
            await asyncio.sleep(0.005)
        ended = next(t for t, status in self.finished[n:] if status != early)
        began = self.started[m] if len(self.started) > m else t0
        await self.page.wait_for_function(IDLE_JS, timeout=WAIT_S * 1000, polling=20)
        return time.perf_counter() - t0, ended - began

    async def ready(self) -> None:
        """Until the current script run has ended and the page is idle."""
        from browser_support import DONE_JS, IDLE_JS

        await self.page.wait_for_function(DONE_JS, timeout=WAIT_S * 1000, polling=50)
        await self.page.wait_for_function(IDLE_JS, timeout=WAIT_S * 1000, polling=50)


async def open_session(browser, url: str) -> tuple[object, Session]:
    ctx = await browser.new_context(viewport={"width": 1500, "height": 1000})
    ctx.set_default_timeout(WAIT_S * 1000)  # eight pages at once on two cores: clicks can wait long for the page
    s = Session(await ctx.new_page())
    await s.page.goto(url, wait_until="commit")
    await s.ready()
    return ctx, s


def sidebar(s: Session):
    return s.page.locator("[data-testid='stSidebar']")


async def pick_other(s: Session, label: str, r: int) -> Callable[[], Awaitable[None]]:
    """Open the sidebar selectbox ``label`` (not timed); the action that picks the ``r``-th option other than the
    one selected."""
    box = sidebar(s).get_by_role("combobox", name=label, exact=True)
    await box.scroll_into_view_if_needed()  # a click that has to scroll the sidebar first may not open the list
    await box.click()
    options = s.page.get_by_role("option")
    await options.first.wait_for(timeout=10_000)
    texts = await options.all_inner_texts()
    chosen = await options.evaluate_all("els => els.map(e => e.getAttribute('aria-selected') === 'true')")
    others = [t.strip() for t, c in zip(texts, chosen, strict=True) if t.strip() and not c]
    return s.page.get_by_role("option", name=others[r % len(others)], exact=True).click


async def key_on(s: Session, where: str, label: str, key: str) -> Callable[[], Awaitable[None]]:
    slider = s.page.locator(f"[data-testid='{where}'] input[type='range'][aria-label='{label}']")
    await slider.focus()

    async def press() -> None:
        await s.page.keyboard.press(key)

    return press


def nav(s: Session, title: str) -> Callable[[], Awaitable[None]]:
    link = s.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=title, exact=True)
    return link.click


WARMED_UP = "warm-up: default tokenizer loaded"  # the server log's line once its warm-up has ended


async def fresh_diagnostics(browser, url: str) -> tuple[float, float]:
    """A fresh server's worst first visit: its first page, then at once (no pause, so the warm-up has not loaded
    the tokenizer's backend yet) the Diagnostics page. (settle seconds, server seconds)."""
    ctx, s = await open_session(browser, f"{url}/?page=tokens&run=data:{LONG_RUN}")
    try:
        return await s.settle(nav(s, "Diagnostics"))
    finally:
        await ctx.close()


async def warmed_up(server, timeout: float = 120) -> float:
    """Until the server's log says its warm-up has ended (it loads the tokenizer once nobody clicks for a few
    seconds); returns the seconds waited."""
    t0 = time.perf_counter()
    while WARMED_UP not in server.output(tail=200_000):
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"the server's warm-up did not end within {timeout:g} s")
        await asyncio.sleep(0.2)
    return time.perf_counter() - t0


async def interactions(browser, url: str, rounds: int) -> tuple[dict, dict]:
    """(a): {interaction: [settle seconds]}, {interaction: [server seconds]}."""
    times: dict[str, list[float]] = {}
    server: dict[str, list[float]] = {}

    async def measure(name: str, s: Session, act) -> None:
        total, srv = await s.settle(act)
        times.setdefault(name, []).append(total)
        server.setdefault(name, []).append(srv)
        print(f"  {name:34s} {total:6.2f} s (server run {srv:5.2f} s)", flush=True)

    ctx, s = await open_session(browser, f"{url}/?page=tokens&run=data:{LONG_RUN}")
    modes = ("broadcast", "per step", "trajectory")
    try:
        for r in range(rounds):
            await measure("trajectory (sidebar)", s, await pick_other(s, "Trajectory", r))
            await measure("estimator (sidebar)", s, await pick_other(s, "Estimator", r))
            mode = sidebar(s).get_by_role("radio", name=modes[r % len(modes)], exact=True)
            await measure("rLLM mode (sidebar)", s, mode.click)
            await measure("λ slider (sidebar)", s, await key_on(s, "stSidebar", "λ", "ArrowLeft"))
            for title, _ in PAGES:
                await measure(f"page → {title}", s, nav(s, title))
                if title == "Reward designer":
                    act = await key_on(s, "stMain", "reward", "ArrowRight" if r % 2 == 0 else "ArrowLeft")
                    await measure("designer weight slider", s, act)
    finally:
        await ctx.close()
    return times, server


async def concurrency(browser, url: str, rounds: int, server_pid: int) -> list[str]:
    """(b), with every person's browser on this machine: eight browser contexts. The lines to print."""
    opened = await asyncio.gather(
        *(open_session(browser, f"{url}/?page=overview&run=data:{LONG_RUN}") for _ in range(SESSIONS))
    )
    sessions = [s for _, s in opened]
    alone: dict[str, list[float]] = {t: [] for t in CONCURRENT_PAGES}
    together: dict[str, list[float]] = {t: [] for t in CONCURRENT_PAGES}
    cpu: dict[str, list[tuple[float, float, int]]] = {"alone": [], "together": []}

    async def back(group: Sequence[Session]) -> None:
        await asyncio.gather(*(s.settle(nav(s, "Run overview")) for s in group))

    server_runs: dict[str, list[float]] = {"alone": [], "together": []}

    async def timed(kind: str, group: Sequence[Session], title: str) -> list[float]:
        c_srv, c_br = cpu_seconds(server_pid), browser_cpu(server_pid)
        out = await asyncio.gather(*(s.settle(nav(s, title)) for s in group))
        cpu[kind].append((cpu_seconds(server_pid) - c_srv, browser_cpu(server_pid) - c_br, len(group)))
        server_runs[kind] += [srv for _, srv in out]
        return [t for t, _ in out]

    try:
        for title in CONCURRENT_PAGES:  # every page once first, so no measurement computes a scheme first
            await asyncio.gather(*(s.settle(nav(s, title)) for s in sessions))
            await back(sessions)
        for r in range(rounds):
            for title in CONCURRENT_PAGES:
                t = await timed("alone", sessions[:1], title)
                alone[title] += t
                await back(sessions[:1])
                ts = await timed("together", sessions, title)
                together[title] += ts
                await back(sessions)
                print(
                    f"  round {r + 1} {title:16s} alone {t[0]:5.2f} s; {SESSIONS} at once "
                    + " ".join(f"{x:.2f}" for x in sorted(ts)),
                    flush=True,
                )
    finally:
        for ctx, _ in opened:
            await ctx.close()
    lines = [
        ratio_line(f"{t} ({SESSIONS} browsers here)", alone[t], together[t], CONCURRENT_RATIO) for t in CONCURRENT_PAGES
    ]
    # The server's part alone (script run start → end as each page saw it).
    lines.append(ratio_line("server runs only", server_runs["alone"], server_runs["together"], CONCURRENT_RATIO))
    per_render = {}
    for kind, rows in cpu.items():
        renders = sum(n for *_, n in rows)
        srv, br = sum(s for s, _, _ in rows), sum(b for _, b, _ in rows)
        per_render[kind] = srv / renders
        lines.append(
            f"CPU per page render ({kind}): server {srv / renders:.2f} s, browser {br / renders:.2f} s "
            f"({renders} renders)"
        )
    every_alone = [t for title in CONCURRENT_PAGES for t in alone[title]]
    lines.append(projection_line(every_alone, server_runs["alone"], per_render["alone"], per_render["together"]))
    return lines


async def concurrency_own_machines(browser, url: str, rounds: int) -> list[str]:
    """(b), with each person's browser on a computer of their own: one real browser session, measured, and
    ``SESSIONS`` − 1 sessions that speak the websocket protocol without drawing (``wire_session.WireSession``:
    the server builds and sends them every delta, nothing is drawn here). The browser's page switch is timed
    alone, then while all ``SESSIONS`` switch at once; the wire sessions' own times (request → run ended, before
    any drawing) are printed beside. The lines to print."""
    from benchmarks.wire_session import WireSession

    paths = dict(PAGES)
    query = f"page=overview&run=data:{LONG_RUN}"
    ctx, me = await open_session(browser, f"{url}/?{query}")
    others = [await WireSession.open(url, query) for _ in range(SESSIONS - 1)]
    alone: dict[str, list[float]] = {t: [] for t in CONCURRENT_PAGES}
    together: dict[str, list[float]] = {t: [] for t in CONCURRENT_PAGES}
    wire: dict[str, list[float]] = {t: [] for t in CONCURRENT_PAGES}

    async def everyone(title: str) -> tuple[float, list[float]]:
        mine, *theirs = await asyncio.gather(me.settle(nav(me, title)), *(w.nav(paths[title]) for w in others))
        return mine[0], list(theirs)

    try:
        for title in CONCURRENT_PAGES:  # every page once first, so no measurement computes a scheme first
            await everyone(title)
            await everyone("Run overview")
        for r in range(rounds):
            for title in CONCURRENT_PAGES:
                t, _ = await me.settle(nav(me, title))
                alone[title].append(t)
                await me.settle(nav(me, "Run overview"))
                mine, theirs = await everyone(title)
                together[title].append(mine)
                wire[title] += theirs
                await everyone("Run overview")
                print(
                    f"  round {r + 1} {title:16s} alone {t:5.2f} s; with {SESSIONS - 1} others {mine:5.2f} s "
                    f"(theirs, before drawing: {statistics.median(theirs):.2f} s median)",
                    flush=True,
                )
        failed = [e for w in others for e in w.exceptions]
        if failed:
            raise RuntimeError(f"a wire session's page drew an exception: {failed[0]}")
    finally:
        for w in others:
            await w.close()
        await ctx.close()
    lines = [ratio_line(f"{t} (own machines)", alone[t], together[t], CONCURRENT_RATIO) for t in CONCURRENT_PAGES]
    lines += [
        f"{t:18s} the other {SESSIONS - 1} sessions' server part: median {statistics.median(wire[t]):.2f} s, "
        f"max {max(wire[t]):.2f} s (n={len(wire[t])}; request → run ended, before their own drawing)"
        for t in CONCURRENT_PAGES
    ]
    return lines


async def browser_part(args, server) -> tuple[str, list[str]]:
    from browser_support import CHROMIUM, CHROMIUM_ARGS
    from playwright.async_api import async_playwright

    url, server_pid = server.url, server.proc.pid
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            table = ""
            if "interactions" in args.parts:
                fresh, fresh_srv = await fresh_diagnostics(browser, url)
                waited = await warmed_up(server)
                print(
                    f"(a) interactions on the 64 × 2,048 run, {args.rounds} rounds, on the warmed-up server", flush=True
                )
                times, srv = await interactions(browser, url, args.rounds)
                table = interaction_table(times, srv, TARGET_S) + (
                    f"\nonce per server: its first page, then Diagnostics at once, before the warm-up has loaded the "
                    f"tokenizer: {fresh:.2f} s (server {fresh_srv:.2f} s); the warm-up ended {waited:.1f} s later"
                )
                print(table, flush=True)
            lines: list[str] = []
            if "concurrency" in args.parts:
                print(
                    f"(b) one session vs {SESSIONS} at once, each browser on its own machine "
                    f"(1 browser + {SESSIONS - 1} wire sessions), {args.own_rounds} rounds",
                    flush=True,
                )
                lines = await concurrency_own_machines(browser, url, args.own_rounds)
                print("\n".join(lines), flush=True)
            if "concurrency-here" in args.parts:
                print(
                    f"(b) one session vs {SESSIONS} at once, all {SESSIONS} browsers on this machine, "
                    f"{args.concurrent_rounds} rounds",
                    flush=True,
                )
                here = await concurrency(browser, url, args.concurrent_rounds, server_pid)
                print("\n".join(here), flush=True)
                lines += here
        finally:
            await browser.close()
    return table, lines


def first_paint_part(rounds: int) -> list[str]:
    """(c), by ``benchmarks.first_paint``'s measurement: CreditLens and the bare app alternately, cold."""
    from browser_support import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    from benchmarks.first_paint import BASELINE_APP, first_paint

    print(f"(c) cold first paint, {rounds} rounds (CreditLens / bare app, from process start)", flush=True)
    times: dict[str, list[float]] = {"CreditLens": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="creditlens-bare-") as tmp, sync_playwright() as pw:
        bare = Path(tmp) / "bare_app.py"
        bare.write_text(BASELINE_APP)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for r in range(rounds):
                for name, app in (("CreditLens", ROOT / "app.py"), ("bare", bare)):
                    times[name].append(first_paint(browser, app)[0])
                print(f"  round {r + 1}: {times['CreditLens'][-1]:.2f} s / {times['bare'][-1]:.2f} s", flush=True)
        finally:
            browser.close()
    a, b = summary(times["CreditLens"])[0], summary(times["bare"])[0]
    return [
        f"cold first paint: CreditLens median {a:.2f} s, bare Streamlit app {b:.2f} s (n={rounds}); "
        f"difference {a - b:+.2f} s  target <= +{FIRST_PAINT_EXTRA_S:g} s {verdict(a - b <= FIRST_PAINT_EXTRA_S)}"
    ]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds of (a), every interaction once per round")
    p.add_argument(
        "--own-rounds", type=int, default=8, help="rounds of (b) with each browser on its own machine, per page"
    )
    p.add_argument("--concurrent-rounds", type=int, default=3, help="rounds of (b) with all browsers here, per page")
    p.add_argument("--paint-rounds", type=int, default=4, help="cold starts of (c), per app")
    p.add_argument("--quick", action="store_true", help="one round of each (a smoke run)")
    p.add_argument(
        "--parts",
        nargs="+",
        default=["interactions", "concurrency", "concurrency-here", "first-paint"],
        choices=["interactions", "concurrency", "concurrency-here", "first-paint"],
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rounds = args.own_rounds = args.concurrent_rounds = args.paint_rounds = 1
    from browser_support import start_server, stop_server

    from engine.io import save_run
    from engine.io.synth import synth_run

    print(
        f"benchmarks.dashboard_speed {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    out: list[str] = []
    if {"interactions", "concurrency", "concurrency-here"} & set(args.parts):
        with tempfile.TemporaryDirectory(prefix="creditlens-bench-") as data:
            save_run(synth_run(64, 2048, seed=0), Path(data) / LONG_RUN)
            server = start_server(env={"CREDITLENS_DATA_DIR": data})
            try:
                table, lines = asyncio.run(browser_part(args, server))
            finally:
                stop_server(server)
            out += [table, *lines]
    if "first-paint" in args.parts:
        out += first_paint_part(args.paint_rounds)
    print("\n=== summary ===")
    print("\n".join(x for x in out if x))


if __name__ == "__main__":
    main()
