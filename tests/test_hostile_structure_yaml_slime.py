"""Hostile inputs, structure part: files small on disk but costly to walk are refused by their declared budgets
before they are built, with a problem or an error naming the file and the budget.

* ART YAML: a "billion laughs" alias bomb wherever it sits, one large text aliased thousands of times, a recursive
  alias, tags JSON has no form for. Aliases themselves load (ART's writer, ``yaml.dump``, writes them).
* slime ``.pt``: a pickle of many empty lists (torch's ``weights_only`` unpickler is pure Python), a ``loss_mask``
  that is an expanded view storing 8 bytes but dense at 1.6 GB.

Each load runs under a watchdog (SIGALRM): a regression hangs no test run.
"""

from __future__ import annotations

import pickle
import pickletools
import zipfile

import pytest
import torch
from test_io_support import time_limit
from writers import art, slime
from writers.slime import Spec

from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.reading.limits import PICKLE_ITEMS, pickle_items
from engine.io.reading.yaml_records import YAML_NODES, YAML_TEXT

WATCHDOG_S = 60


# ---------------------------------------------------------------------------------------------- ART YAML
CHOICE = "{finish_reason: stop, index: 0, message: {role: assistant, content: ok}}"


def laughs(levels: int = 10, n: int = 9) -> str:
    """A flow sequence whose anchor ``l<k>`` names ``n`` aliases of ``l<k-1>``: ``n ** (levels - 1)`` strings."""
    parts = ['&l0 "lol"'] + [f"&l{k} [" + ", ".join([f"*l{k - 1}"] * n) + "]" for k in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


def art_log(logs: str = "[]", content: str = "hi", group_meta: str = "{}") -> str:
    """One ART trajectory group as ``yaml.dump`` lays it out, with the given YAML for three of its values."""
    return (
        f"- metadata: {group_meta}\n"
        "  trajectories:\n"
        f"  - logs: {logs}\n"
        "    messages_and_choices:\n"
        f"    - {{role: user, content: {content}}}\n"
        f"    - {CHOICE}\n"
        "    metadata: {}\n"
        "    metrics: {}\n"
        "    reward: 1.0\n"
    )


@pytest.mark.parametrize("where", ["logs", "content", "group_meta"])
def test_billion_laughs_is_refused_by_the_node_budget_wherever_it_sits(tmp_path, where):
    """Ten levels of nine aliases: refused while composing, at the line where the count passes the budget. In
    the group's metadata it is inside what detection reads (the first items' outline), so detection refuses it."""
    path = tmp_path / "0001.yaml"
    path.write_text(art_log(**{where: laughs()}))
    tail = (
        f"nodes, over the {YAML_NODES.default:,} allowed per YAML document (yaml_nodes; raise it with "
        "CREDITLENS_MAX_YAML_NODES); refused before it is built; the rest of the file is not read"
    )
    if where == "group_meta":
        with time_limit(WATCHDOG_S), pytest.raises(ValueError) as err:
            load_run(path)
        message = str(err.value)
        assert message.startswith(f"cannot detect the format of {path}: {path}:1: the YAML document, aliases ")
        assert tail in message
        return
    with time_limit(WATCHDOG_S):
        res = load_run(path)
    assert len(res.run) == 0
    [problem] = res.problems
    assert (problem.file, problem.line) == (str(path), {"logs": 3, "content": 5}[where])
    assert problem.reason.startswith("the YAML document, aliases expanded, holds ") and problem.reason.endswith(tail)


def test_the_node_budget_counts_an_alias_as_the_node_it_names(tmp_path, monkeypatch):
    """Three levels of nine: 1 + 9 + 81 strings under the anchors, 9 + 81 more for the aliases' expansion."""
    path = tmp_path / "0001.yaml"
    path.write_text(art_log(logs=laughs(levels=3)))
    monkeypatch.setenv(YAML_NODES.env, "100")
    with time_limit(WATCHDOG_S):
        res = load_run(path, fmt="art_yaml")
    # the document's list (1), the group mapping (1), "metadata" {} (2), "trajectories" [ (2), the trajectory
    # mapping (1), "logs" (1): 8; the bomb's list (1), l0 (1), l1's list and its 9 aliases of l0 (10): 20; l2's
    # list (1): 21; each alias of l1 adds l1's 10 nodes: the 8th brings the count to 101.
    assert [(p.line, p.reason) for p in res.problems] == [
        (
            3,
            "the YAML document, aliases expanded, holds 101 nodes, over the 100 allowed per YAML document "
            "(yaml_nodes; raise it with CREDITLENS_MAX_YAML_NODES); refused before it is built; the rest of the "
            "file is not read",
        )
    ]
    monkeypatch.setenv(YAML_NODES.env, "1000")
    res = load_run(path, fmt="art_yaml")
    assert res.problems == [] and len(res.run.trajectories[0].metadata["art"]["logs"]) == 3


def test_one_large_text_aliased_thousands_of_times_is_refused_by_the_text_budget(tmp_path, monkeypatch):
    """The issue's file: 1 MB anchored once, aliased 20,000 times (20 GB rendered); here 10 KB x 200 under 1 MB."""
    big = "x" * 10_000
    aliases = "".join("    - {role: user, content: *big}\n" for _ in range(200))
    doc = art_log(content=f"&big {big}").replace(f"    - {CHOICE}\n", aliases + f"    - {CHOICE}\n")
    path = tmp_path / "0001.yaml"
    path.write_text(doc)
    monkeypatch.setenv(YAML_TEXT.env, "1000000")
    with time_limit(WATCHDOG_S):
        res = load_run(path, fmt="art_yaml")
    assert len(res.run) == 0
    assert [(p.line, p.reason) for p in res.problems] == [
        (
            104,  # the 99th alias: the anchored text and 99 repeats (1,000,000) and the keys and values around them
            "the YAML document, aliases expanded, holds 1,001,544 characters of text, over the 1,000,000 allowed "
            "per YAML document (yaml_text; raise it with CREDITLENS_MAX_YAML_TEXT); refused before it is built; "
            "the rest of the file is not read",
        )
    ]


def test_a_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "0001.yaml"
    path.write_text(art_log(logs="&r [*r]"))
    with time_limit(WATCHDOG_S):
        res = load_run(path, fmt="art_yaml")
    assert [p.reason for p in res.problems] == [
        "recursive YAML alias *r (a node that contains itself); the rest of the file is not read"
    ]


def test_tags_json_cannot_hold_are_converted_and_noted(tmp_path):
    """``!!binary`` and ``!!set`` build bytes and a set: kept, made JSON like other metadata, each noted."""
    path = tmp_path / "0001.yaml"
    good = art_log()
    with_set = good.replace("    metadata: {}\n", "    metadata: {s: !!set {a}}\n")
    path.write_text(art_log(group_meta="{blob: !!binary aGVsbG8=}") + good + with_set)
    with time_limit(WATCHDOG_S):
        res = load_run(path)
    assert len(res.run) == 3
    assert res.run.trajectories[0].metadata["art_group"] == {"blob": "aGVsbG8="}
    assert res.run.trajectories[2].metadata["art"]["metadata"] == {"s": ["a"]}
    assert [(p.field, p.reason.split(",")[0]) for p in res.problems][:2] == [
        ("[0].trajectories[0].metadata.art_group.blob", "binary data"),
        ("[2].trajectories[0].metadata.art.metadata.s", "a set"),
    ]


def test_a_python_tag_or_an_impossible_date_refuses_its_item_only(tmp_path):
    path = tmp_path / "0001.yaml"
    bad = art_log(group_meta="{t: !!python/tuple [1, 2]}") + art_log(group_meta="{d: 2024-13-45}")
    path.write_text(bad + art_log())
    res = load_run(path, fmt="art_yaml")
    assert len(res.run) == 1 and res.run.trajectories[0].id == "0001/group-2/traj-0"
    assert [(p.line, p.field, p.reason.split(" for the tag")[0]) for p in res.problems] == [
        (1, "[0]", "cannot read this item: could not determine a constructor"),
        (10, "[1]", "cannot read this item: month must be in 1..12; item skipped"),
    ]


def test_the_art_writer_writes_aliases_and_they_load(tmp_path):
    """``yaml.dump`` anchors an object it meets twice (the writer's shared system and user messages): aliases are
    counted, not refused."""
    path, truth = art.write_log(tmp_path)
    text = path.read_text()
    assert "&id001" in text and "*id001" in text
    res = load_run(path)
    assert res.problems == [] and len(res.run) == len(truth)
    assert res.run.trajectories[0].prompt == res.run.trajectories[1].prompt


def test_detection_reads_only_the_first_items_outline(tmp_path):
    """Detection sniffs the outline of the first items; what follows (here, broken YAML) is read once, by the
    adapter, which loads the items before it and names the line after."""
    path = tmp_path / "0001.yaml"
    path.write_text(art_log() * 6 + "- [unclosed\n")
    assert detect_format(path) == "art_yaml"
    res = load_run(path)
    assert len(res.run) == 6
    errors = [(p.line, p.reason.split(":")[0]) for p in res.problems if p.scope == "record"]
    assert errors == [(56, "invalid YAML")]  # libyaml finds the list unclosed at the end, line 56


# ---------------------------------------------------------------------------------------------- slime .pt
def test_pickle_items_count_every_opcode():
    obj = [{"a": [1, 2.5, "x" * 300, b"y" * 70_000, (1, 2, 3), {1, 2}, None, True, 2**100, -5, "é"]}]
    for protocol in range(6):
        data = pickle.dumps(obj, protocol=protocol)
        assert pickle_items(data, 10**9) == sum(1 for _ in pickletools.genops(data))


def test_many_empty_lists_are_refused_before_unpickling(tmp_path, monkeypatch):
    path = tmp_path / "3.pt"
    torch.save({"rollout_id": 3, "response_length": 1, "samples": [[] for _ in range(20_000)]}, path)
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("data.pkl"))
    monkeypatch.setenv(PICKLE_ITEMS.env, "10000")
    with time_limit(WATCHDOG_S), pytest.raises(ValueError) as err:
        load_run(path)
    assert str(err.value) == (
        f"{path}: member {name!r} holds more than 10,000 items (pickle opcodes), over the 10,000 allowed per "
        "torch.save pickle (pickle_items; raise it with CREDITLENS_MAX_PICKLE_ITEMS); refused before it is built"
    )


def test_a_slime_dump_takes_few_items_a_token(tmp_path):
    """What sizes ``PICKLE_ITEMS``: the writer's dump holds its tokens, mask and log-probs as lists, one item a
    prompt token and three a response token (a 16 M budget is over 5 M tokens), and loads under the default."""
    text = "The answer is 42, as the calculator said after a long derivation. " * 40
    groups = [[Spec("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", [(text, True)], 1.0)] * 4] * 4
    path, data = slime.save_debug_rollout_data(str(tmp_path / "{rollout_id}.pt"), groups, rollout_id=3)
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    tokens = sum(len(s.tokens) for s in data)
    items = pickle_items(pkl, 10**9)
    assert tokens > 10_000 and items < 3.2 * tokens
    res = load_run(path)
    assert res.problems == [] and len(res.run) == 16


def _slime_pt(path, **sample):
    s = {"tokens": [1, 2, 3, 4], "response_length": 2, "reward": 1.0, "index": 0, "group_index": 0, **sample}
    torch.save({"rollout_id": 7, "samples": [s]}, path)
    return path


def test_an_expanded_loss_mask_is_refused_by_its_dense_size(tmp_path, monkeypatch):
    """The issue's 4.6 KB file: ``torch.tensor([1]).expand(2e8)`` stores 8 bytes and is 1.6 GB dense."""
    path = _slime_pt(tmp_path / "7.pt", loss_mask=torch.tensor([1]).expand(int(2e8)))
    monkeypatch.setenv("CREDITLENS_MAX_LOAD_MB", "512")
    with time_limit(WATCHDOG_S):
        res = load_run(path)
    assert len(res.run) == 0
    assert [str(p) for p in res.problems] == [
        f"{path}: samples[0].loss_mask: a strided view (8 bytes stored) of shape (200000000,) is 1,525.9 MiB "
        "(1,600,000,000 bytes) dense, over the 256.0 MiB a load may still decode (CREDITLENS_MAX_LOAD_MB); refused "
        "before densifying"
    ]


def test_a_small_expanded_view_loads_as_its_values(tmp_path):
    path = _slime_pt(tmp_path / "7.pt", loss_mask=torch.tensor([1]).expand(2))
    res = load_run(path)
    assert res.problems == []
    assert [(s.role, len(s.token_ids)) for s in res.run.trajectories[0].segments] == [("model", 2)]
