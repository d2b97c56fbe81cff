"""The token view's first paint after a cold server start, against a baseline measured in the same run:
``python -m benchmarks.first_paint [--rounds 6]``.

Each round starts, in turn, ``streamlit run app.py`` and a baseline: a Streamlit app written to a temporary folder
that draws the kinds of elements the token view draws (sidebar widgets, metrics, a selectbox, pills, an HTML block
of tokens, a toggle, a dataframe, JSON in an expander, download buttons) with no engine behind it, i.e. what
Streamlit and the browser cost on this machine by themselves. A new browser context (nothing cached, a first
visit) opens each server as soon as its health check answers. The times are from the server process's start to
the first coloured token on screen, recorded in the page by a MutationObserver, and from the moment the server
listened. Prints every round, the medians, and CreditLens minus the baseline. Interleaving the two cancels most
of a shared machine's drift; the browser runs on the same cores as the server, as in CI.

Debian's Chromium (``/usr/bin/chromium`` or ``BROWSER_PATH``) through Playwright; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import CHROMIUM, CHROMIUM_ARGS, start_server, stop_server  # noqa: E402

TOKEN = ".cl-tokens .cl-tk"
# Epoch milliseconds at which the first token appeared, written by the page itself (no polling delay).
OBSERVE_JS = f"""
new MutationObserver((_, obs) => {{
  if (document.querySelector({TOKEN!r})) {{
    window.__painted = performance.timeOrigin + performance.now();
    obs.disconnect();
  }}
}}).observe(document, {{subtree: true, childList: true}});
"""
BASELINE_APP = """import pandas as pd
import streamlit as st

st.set_page_config(page_title="baseline", layout="wide")
with st.sidebar:
    st.selectbox("Run", ["kgqa_multiturn"])
    st.selectbox("Trajectory", ["q0-r0"])
    st.segmented_control("Mode", ["trajectory", "broadcast", "per step"], default="trajectory")
    st.slider("γ", 0.0, 1.0, 1.0)
    st.checkbox("State masking", value=True)
    st.download_button("Scheme JSON", "{}")
st.title("Token view")
for c, v in zip(st.columns(4), (1.0, 0.5, 0.3, 12)):
    c.metric("metric", v)
st.selectbox("Colour tokens by", ["advantage"])
st.pills("Overlays", ["info mask", "loss mask"], selection_mode="multi")
st.html("<div class='cl-tokens'>" + "".join(f"<span class='cl-tk'>tok{i} </span>" for i in range(400)) + "</div>")
st.toggle("Heatmap")
st.dataframe(pd.DataFrame({"turn": [1, 2, 3], "reward": [0.25, 0.15, 0.25]}))
with st.expander("Prompt and metadata"):
    st.json({"truncated": False})
st.download_button("CSV", "a,b")
"""


def first_paint(browser, app: Path) -> tuple[float, float]:
    """(seconds from process start to the first token, seconds from listening to it) for one cold server."""
    t_spawn = time.time()
    server = start_server(app=app)
    listened = server.ready - server.started
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        context.add_init_script(OBSERVE_JS)
        page = context.new_page()
        page.goto(server.url + "/", wait_until="commit")
        page.wait_for_selector(TOKEN, timeout=120_000)
        page.wait_for_function("() => window.__painted !== undefined", timeout=10_000)
        painted = page.evaluate("window.__painted") / 1000 - t_spawn
    finally:
        context.close()
        stop_server(server)
    return painted, painted - listened


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="creditlens-baseline-") as tmp, sync_playwright() as pw:
        baseline = Path(tmp) / "baseline_app.py"
        baseline.write_text(BASELINE_APP)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        times: dict[str, list[tuple[float, float]]] = {"CreditLens": [], "baseline": []}
        print("round  CreditLens: from start / from listening   baseline: from start / from listening")
        for r in range(args.rounds):
            for name, app in (("CreditLens", ROOT / "app.py"), ("baseline", baseline)):
                times[name].append(first_paint(browser, app))
            (a, a_l), (b, b_l) = times["CreditLens"][-1], times["baseline"][-1]
            print(f"{r + 1:5d}  {a:10.2f} s / {a_l:.2f} s {'':22s}{b:10.2f} s / {b_l:.2f} s", flush=True)
        browser.close()
    med = {k: (statistics.median(t for t, _ in v), statistics.median(t for _, t in v)) for k, v in times.items()}
    (a, a_l), (b, b_l) = med["CreditLens"], med["baseline"]
    print(f"median CreditLens {a:.2f} s after process start ({a_l:.2f} s after the server listened)")
    print(f"median baseline   {b:.2f} s after process start ({b_l:.2f} s after the server listened)")
    print(f"CreditLens - baseline: {a - b:+.2f} s; ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
