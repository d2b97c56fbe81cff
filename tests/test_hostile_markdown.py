"""Markdown in labels and messages: user-controlled text — reward component names, trajectory and
group ids, metadata, file names, error messages that quote them — must reach every Streamlit label and message as
plain text. Streamlit renders labels, help tooltips, expander titles, metric labels, alerts, captions and toasts as
Markdown (with LaTeX, GitHub autolinks, emoji shortcodes and its own ``:red[…]`` / ``:material/…:`` directives), so
``![x](http://127.0.0.1:9/x.png)`` as a component name made the browser fetch that URL.

* ``markdown_escape`` on every payload renders, through a CommonMark parser, to exactly the payload as text (no tag,
  no visible backslash), and leaves nothing Streamlit's own extensions act on.
* A hostile native run (payloads as component names, ids, group ids, metadata keys and values, the run name, the
  prompt) is uploaded through the sidebar and every page visited with AppTest: every string Streamlit renders as
  Markdown is walked, no payload appears unescaped, and the designer's sliders and the load errors still read as
  the names they carry.
* Load errors name the file: an upload whose file name is a payload, and a bad file in the data directory.

The same run in a real browser: ``tests/test_browser_markdown.py``.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from test_app import PAGES, new_app, no_errors

from dashboard import sources
from dashboard.state import WORD_JOINER, K, cfg_key, markdown_escape, md

PAYLOADS = (
    "![x](http://127.0.0.1:9/x.png)",
    "[link](http://127.0.0.1:9/)",
    "<http://127.0.0.1:9/a>",
    "http://127.0.0.1:9/b",
    "$\\frac{a}{b}$",
    "$$x^2$$",
    "\\(x\\)",
    ":red[RED]",
    ":material/home:",
    ":smile:",
    "**bold**",
    "# heading",
    "<img src=x onerror=alert(1)>",
    "`code`",
)
# More that the escape must keep literal (not all are in the run: a component name is one JSON key each).
MORE = (
    "www.example.com",
    "mail a@b.com",
    "x:smile",
    "&lt;b&gt; &amp;",
    "1. list",
    "- item",
    "> quote",
    "~~strike~~",
    "_raw_x and _y_",
    "___ and ___",
    "C:\\path\\file",
    "[a]: http://127.0.0.1:9/ref",
    "exact_match",
)
BOOKKEEPING = PAYLOADS[:2]  # also as "_"-prefixed global components: Learn names them (left out, or leaked)
ALL_PAGES = {**PAGES, "diagnostics": "dashboard/pages/diagnostics.py"}
# A bad file whose name is a payload (no '/': it is a file name; a relative image is fetched from the server).
BAD_FILE = "bad ![x](x.png) [l](x) :red[RED] $x^2$ **b** `c` <img src=x onerror=alert(1)>.jsonl"
RUN_NAME = "hostile " + " ".join(PAYLOADS[:3])


# ------------------------------------------------------------------------------------------------ the hostile run
def _trajectory(k: int, payload: str) -> dict:
    return {
        "id": f"{payload} #{k}",
        "group_id": f"group {payload}",
        "prompt": f"Which city? {payload}",
        "segments": [
            {"role": "model", "text": f"{payload} <search> capital </search>"},
            {"role": "tool", "text": f"\n<information> {payload} Paris </information>\n"},
            {"role": "model", "text": f"<answer> {'Paris' if k % 2 else 'Lyon'} </answer><|im_end|>"},
        ],
        "turn_rewards": [{p: 1.0 for p in PAYLOADS}, {"format_score": 1.0, PAYLOADS[0]: float(k % 2)}],
        "global_rewards": {**{f"g {p}": float(k % 2) for p in PAYLOADS}, **{f"_{p}": 0.5 for p in BOOKKEEPING}},
        "metadata": {payload: payload, "note": payload, "synthesized": [payload]},
    }


def hostile_run_bytes() -> bytes:
    """A native JSONL run: two rollouts per payload (ids and group ids carry it), every payload a turn component
    and (prefixed "g ") a global one, metadata keys and values, the run name; and one bad record, a problem."""
    header = {"creditlens": {"schema": "creditlens.trajectory.v1", "name": RUN_NAME, "source": "native"}}
    trajs = [_trajectory(2 * i + r, p) for i, p in enumerate(PAYLOADS) for r in range(2)]
    bad = {"id": PAYLOADS[0] + " bad", "segments": PAYLOADS[1]}
    return ("\n".join(json.dumps(r) for r in [header, *trajs, bad]) + "\n").encode()


def write_hostile_run(path: Path) -> Path:
    path.write_bytes(hostile_run_bytes())
    return path


# ------------------------------------------------------------------------------------------------ helpers
def rendered_text(markdown: str) -> str:
    """What a CommonMark renderer (with GFM tables and strikethrough) shows of ``markdown``, as plain text."""
    out = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", out)).replace(WORD_JOINER, "").strip()


def markdown_strings(at) -> list[tuple[str, str]]:
    """(where, text) for every string on the page that Streamlit renders as Markdown: widget labels and help,
    markdown, captions, alerts, metric labels and values, expander and tab titles, radio and button-group options.
    (Select box and multiselect options, tables, JSON, code and st.html are not Markdown: left out.)"""
    out = []

    def visit(node, area):
        proto = getattr(node, "proto", None)
        kind = getattr(node, "type", type(node).__name__)
        if proto is not None and kind not in ("code", "json", "html", "exception", "latex", "arrow_data_frame"):
            fields = getattr(proto, "DESCRIPTOR", None)
            names = set(fields.fields_by_name) if fields else set()
            for field in ("label", "help", "body", "text", "caption"):
                if field in names and isinstance(getattr(proto, field), str) and getattr(proto, field):
                    out.append((f"{area} {kind}.{field}", getattr(proto, field)))
            for sub in ("expandable", "tab", "popover"):
                if sub in names and proto.HasField(sub) and proto_label(getattr(proto, sub)):
                    out.append((f"{area} {sub}.label", proto_label(getattr(proto, sub))))
            if kind == "radio":
                out.extend((f"{area} radio.option", o) for o in proto.options)
            if kind == "button_group":
                out.extend((f"{area} button_group.option", o.content) for o in proto.options)
        for child in getattr(node, "children", {}).values():
            visit(child, area)

    visit(at.sidebar, "sidebar")
    visit(at.main, "main")
    out += [("toast", t.proto.body) for t in at.toast]
    return out


def proto_label(p) -> str:
    return getattr(p, "label", "") or ""


def unescaped(text: str, payloads=PAYLOADS) -> list[str]:
    """The payloads that occur in ``text`` not behind a backslash (as Markdown, they would render); a heading only
    at the start of a line (elsewhere '#' is text)."""
    return [
        p for p in payloads if re.search((r"(?m)^[ \t]*" if p.startswith("#") else r"(?<!\\)") + re.escape(p), text)
    ]


# ------------------------------------------------------------------------------------------------ the escape
@pytest.mark.parametrize("payload", PAYLOADS + MORE)
def test_escape_renders_the_text_itself(payload: str) -> None:
    """CommonMark shows the escaped payload as exactly the payload (no tag, no backslash); alone, and inside the
    app's own template (where a ':' follows)."""
    escaped = markdown_escape(payload)
    assert rendered_text(escaped) == payload, escaped
    assert rendered_text(md("Could not load {}: ValueError: {}", payload, payload)) == (
        f"Could not load {payload}: ValueError: {payload}"
    )
    # what CommonMark does not know and Streamlit adds: directives and emoji after every ':', LaTeX between '$',
    # autolinks in the text after escapes are resolved, and ':material/' replaced in the raw text
    assert not re.search(r"(?<!\\):|(?<!\\)\$|:material/", escaped), escaped
    resolved = re.sub(r"\\(.)", r"\1", escaped)  # the text Streamlit's plugins see
    assert not re.search(r"(?<!\u2060)(https?://|www\.)", resolved, re.IGNORECASE), escaped
    assert not re.search(r"@[-\w]", resolved), escaped
    assert not re.search(r":[\w+-]", resolved), escaped  # an emoji shortcode's name never follows a ':'


def test_escape_keeps_plain_names_plain() -> None:
    """Names without Markdown stay as they are (an aria-label is the raw label): underscores inside words, dots,
    hyphens, slashes and spaces are inert there."""
    for name in ("exact_match", "is_answer_score", "kg-query validity", "run v1.2/step 3", "Δ reward (turn 2)"):
        assert markdown_escape(name) == name
    assert md("{} of {:,} rows", "a*b", 12345) == "a\\*b of 12,345 rows"


# ------------------------------------------------------------------------------------------------ every page
@pytest.fixture(scope="module")
def tour() -> dict[str, list[tuple[str, str]]]:
    """The hostile run uploaded through the sidebar; every page's Markdown strings, and the designer's AppTest."""
    at = new_app()
    at.session_state[K.RUN_SOURCE] = "Upload"
    at.run()
    at.sidebar.file_uploader[0].set_value(("hostile.jsonl", hostile_run_bytes(), "application/json")).run()
    no_errors(at, "hostile upload")
    assert at.session_state[K.RUN].startswith("upload:")
    seen = {}
    for name, path in ALL_PAGES.items():
        at.switch_page(path).run()
        no_errors(at, f"hostile {name}")
        seen[name] = markdown_strings(at)
        if name == "designer":
            seen["designer sliders"] = [(s.key, s.label) for s in at.main.slider]
        if name == "overview":  # plain text positions keep the text as it is: no backslash would be hidden there
            seen["plain"] = {
                "picker": list(at.sidebar.selectbox(key=K.TRAJ).options),
                "problems": [df.value for df in at.main.dataframe if "reason" in df.value.columns][0],
            }
    at.switch_page(ALL_PAGES["learn"]).run()
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("kg-r1").run()  # "_" components leak into G
    no_errors(at, "hostile learn under kg-r1")
    seen["learn kg-r1"] = markdown_strings(at)
    return seen


def test_no_payload_renders_on_any_page(tour) -> None:
    checked = 0
    for page, strings in tour.items():
        for where, text in strings if page != "plain" else ():
            assert not unescaped(text), f"{page}, {where}: {text!r}"
            checked += 1
    assert checked > 300, checked  # the walk really saw the pages' labels and messages


def test_designer_sliders_name_every_component(tour) -> None:
    labels = dict(tour["designer sliders"])
    for p in PAYLOADS:
        turn, glob = labels[f"{K.DS_WEIGHT_PREFIX}turn.{p}"], labels[f"{K.DS_WEIGHT_PREFIX}global.g {p}"]
        assert turn == markdown_escape(p) and glob.startswith(markdown_escape(f"g {p}")), (turn, glob)
        assert rendered_text(turn) == p and rendered_text(glob).startswith(f"g {p}")
    assert labels[f"{K.DS_WEIGHT_PREFIX}turn.format_score"] == "format_score"


def test_synthesized_field_names_in_the_overview(tour) -> None:
    """Metadata's "synthesized" list names fields: the overview's caption quotes them."""
    caption = next(t for _, t in tour["overview"] if t.startswith("Synthesized by the loader"))
    for p in PAYLOADS:
        assert f"{markdown_escape(p)} in 2 of {2 * len(PAYLOADS)} trajectories" in caption


def test_learn_names_bookkeeping_components(tour) -> None:
    """Learn's "your run" names the "_" components the profile leaves out (verl) or lets leak into G (kg-r1)."""
    names = [markdown_escape(f"_{p}") for p in BOOKKEEPING]
    left_out = next(t for _, t in tour["learn"] if t.startswith("Left out here: "))
    assert left_out.startswith("Left out here: " + ", ".join(names) + " (bookkeeping)"), left_out
    pitfall = next(t for _, t in tour["learn kg-r1"] if t.startswith("**Pitfall"))
    assert pitfall.startswith("**Pitfall, not the intended reward**: " + ", ".join(names) + " start with `_`")
    assert rendered_text(left_out).startswith("Left out here: " + ", ".join(f"_{p}" for p in BOOKKEEPING))


def test_plain_text_positions_keep_the_text(tour) -> None:
    """Select box options and tables are not Markdown: the ids and the loader's problem show unescaped."""
    assert tour["plain"]["picker"][:2] == [f"{PAYLOADS[0]} #0", f"{PAYLOADS[0]} #1"]
    problems = tour["plain"]["problems"]
    assert len(problems) == 1 and problems["line"].tolist() == [2 + 2 * len(PAYLOADS)], problems.to_dict("records")


def test_upload_error_names_the_file_literally() -> None:
    """A bad upload whose file name is a payload: the error quotes the name (the loader's message names the file
    too) and renders as that text."""
    at = new_app()
    at.session_state[K.RUN_SOURCE] = "Upload"
    at.run()
    name = " ".join(PAYLOADS) + ".jsonl"
    at.sidebar.file_uploader[0].set_value((name, b"not json\n", "application/json")).run()
    assert not at.exception
    [error] = at.sidebar.error
    assert error.value.startswith(md("Could not load {}: ValueError: cannot detect the format of ", name))
    assert not unescaped(error.value), error.value
    shown = rendered_text(error.value)
    # the loader's message names the file as uploaded (after its last '/'), not the server's temporary folder
    copy = name.rsplit("/", 1)[-1]
    assert shown.startswith(f"Could not load {name}: ValueError: cannot detect the format of {copy}: "), shown
    assert "creditlens-upload" not in shown and tempfile.gettempdir() not in shown


def test_data_directory_error_names_the_file_literally(tmp_path, monkeypatch) -> None:
    data = tmp_path / "runs"
    data.mkdir()
    (data / BAD_FILE).write_text("not json\n")
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(data))
    rel = sources.list_data_files()[0]
    at = new_app({"run": f"data:{rel}"})
    at.run()
    assert not at.exception
    [error] = at.sidebar.error
    assert error.value.startswith(md("Could not load {}: ValueError: ", f"data:{rel}")), error.value
    for bad in ("![x](", "[l](", ":red[", "$x^2$", "**b**", "`c`", "<img"):
        assert not re.search(r"(?<!\\)" + re.escape(bad), error.value), (bad, error.value)
    assert rendered_text(error.value).startswith(f"Could not load data:{rel}: ValueError: ")
    assert rendered_text(error.value).count(BAD_FILE) >= 2  # the loader's message names the file too


def test_many_reward_components_draw() -> None:
    """26 components (9 rows of histograms): Plotly refused the fixed row spacing from 8 rows on, and the Run
    overview of such a run raised ValueError."""
    import pandas as pd

    from dashboard.figures.overview import make_component_histograms_figure

    names = [f"c{i}" for i in range(26)]
    df = pd.DataFrame({"kind": "turn", "component": names * 2, "value": [0.0, 1.0] * 26})
    fig = make_component_histograms_figure(df)
    assert len(fig.data) == 26 and [a.text for a in fig.layout.annotations] == [f"turn: {n}" for n in names]
    assert fig.layout.height == 60 + 210 * 9
