"""docs/TUTORIAL.md states the Learn page's numbers, and its Python prints them.

Each row of the two "Numbers to check" tables is recomputed: tab (a)'s with ``dashboard.teach`` (what the page
runs), written as the page writes it (``f``: five significant digits, four where the page writes four); tab (b)'s
with ``compute_credit`` on the sample run, as the page computes them. The tutorial's Python blocks run, a print whose
comment is only numbers prints those numbers, and the rLLM block prints the output the text shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from dashboard import services, teach
from dashboard.learn.common import f  # the number as the Learn page writes it
from engine import CreditConfig, compute_credit
from engine.io import load_run

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = (REPO / "docs" / "TUTORIAL.md").read_text()


def table(first_header: str) -> dict[str, str]:
    """The two-column table whose header starts with ``first_header``: quantity → value."""
    block = TUTORIAL.split(f"| {first_header} |", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip("|").split("|") for line in block.splitlines()[2:]]
    return {q.strip(): v.strip() for q, v in rows}


def section(number: str) -> str:
    start = TUTORIAL.index(f"### {number} ")
    end = TUTORIAL.find("\n### ", start + 1)
    return TUTORIAL[start : end if end > 0 else None]


@pytest.fixture(scope="module")
def ex() -> teach.KgExample:
    return services.kgr1_example()


def test_tab_a_numbers_are_the_pages(ex) -> None:
    lit = teach.structured_total()
    tok = teach.token_steps_table(ex)
    grp = teach.group_table(ex)
    pt = teach.placement_turn_table(ex)
    wm, ws, wn = teach.whitening_stats(ex)
    pos, text, val = teach.last_action_token(ex)
    expected = {
        "tokens / info tokens / policy tokens": f"{len(tok)} / {sum(tok['role'] != 'model')} / {tok['in loss'].sum()}",
        "mean turn reward": f(lit.mean_turn),
        "G": f(lit.global_sum),
        "total": f(lit.total),
        "the write-up's total_score": f(teach.DOC_TOTAL_SCORE),
        f"final_token_only on `{text.strip()}`": f(val),
        "turn_proportional per token, turn 1": f(pt["each token gets"][0], 4),
        "turn_proportional per token, turn 2": f(pt["each token gets"][1], 4),
        "turn_proportional total": f(tok["turn_proportional"].sum()),
        "GAE return": f(tok["GAE return"][0]),
        "whitening mean / std / tokens": f"{f(wm, 4)} / {f(ws, 4)} / {wn}",
        "GAE A (whitened)": f(tok["GAE A (whitened)"][0], 4),
        "GRPO group mean / std": f"{f(ex.grpo.group_mean[0], 4)} / {f(ex.grpo.group_std[0], 4)}",
        "GRPO A": f(grp["GRPO A"][0], 4),
        "GAE score": f(grp["GAE score"][0]),
        "GRPO score": f(grp["GRPO score"][0], 4),
    }
    assert table("tab (a) quantity") == expected
    assert f"(token #{pos})" in section("7.1")
    # the steps' prose states the same numbers (bold, as the page prints them)
    for number in (*expected.values(), f(pt["G / n"][0], 4)):
        for part in number.split(" / "):
            assert part in section("7.1"), part


def test_tab_b_numbers_are_the_pages() -> None:
    batch = load_run(str(REPO / "sample_runs" / teach.RLLM_SAMPLE)).run.to_batch(device="cpu")
    base = CreditConfig(profile="rllm", estimator="grpo", stepwise_gamma=0.95)  # the page's scheme

    def per_step(mode: str, norm: bool) -> list[float]:
        res = compute_credit(batch, base.replace(stepwise_mode=mode, norm_adv_by_std_in_grpo=norm), "cpu")
        return (res.turn_advantage / res.turn_tokens.clamp(min=1)).flatten().tolist(), res

    rows = {k: [float(x) for x in v.split(",")] for k, v in table("tab (b) quantity").items()}
    traj, _ = per_step("trajectory", False)
    bcast, _ = per_step("broadcast", False)
    steps, res = per_step("per_step", False)
    steps_std, _ = per_step("per_step", True)
    assert rows["A · trajectory"] == pytest.approx(traj, abs=1e-6)
    assert rows["A · broadcast"] == pytest.approx(bcast, abs=1e-6)
    assert rows["MC return G_k"] == pytest.approx(res.extras["step_mc_returns"].flatten().tolist(), abs=1e-6)
    assert rows["A · per-step"] == pytest.approx(steps, abs=1e-6)
    assert rows["A · per-step, toggle on"] == pytest.approx(steps_std, abs=1e-6)
    # the write-up's numbers the page sets beside the engine's
    assert rows["MC return G_k"] == pytest.approx([g for r in teach.DOC_RLLM_MC for g in r])
    assert rows["A · trajectory"] == [a for a in teach.DOC_RLLM_TRAJ_ADV for _ in range(3)]


def _run_blocks(text: str) -> str:
    """Run the ```python blocks of ``text`` in order, in one namespace, from the repository root; their output."""
    out = io.StringIO()
    ns: dict = {}
    with contextlib.redirect_stdout(out), contextlib.chdir(REPO):
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            exec(compile(block, "docs/TUTORIAL.md", "exec"), ns)
    return out.getvalue()


def test_the_kg_r1_snippets_run_and_print_their_comments() -> None:
    text = section("7.1")
    printed = _run_blocks(text)
    commented = re.findall(r"^(print\(.*\))  # ([-\d. ]+)$", text, flags=re.M)
    for call, numbers in commented:
        assert numbers.split() in [line.split() for line in printed.splitlines()], call
    assert len(commented) >= 9  # every step's numbers


def test_the_rllm_snippet_prints_what_the_text_shows() -> None:
    text = section("7.2")
    shown = text.split("It prints:", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert _run_blocks(text) == shown
