"""Property-based fuzzing of every loader: whatever a file holds, ``load_run`` accounts for every record.

Per input format hypothesis writes small files mixing valid records, valid records with one field corrupted
(wrong type, NaN/inf, a missing key, a huge number, empty / unicode / RTL / zero-width / control / HTML / very
long strings, lone surrogates), truncated lines, binary garbage and blank lines, and checks:

* non-strict ``load_run`` never raises and never hangs (a ``LIMIT_S`` watchdog, not a timing assertion);
* nothing is dropped silently: every record is loaded (its trajectory ids are in the run) or named by exactly
  one problem at its own line (JSONL), item (``[i].``) or row (``row[i].``); valid records always load;
* the loaded run batches (``run.to_batch()``);
* ``strict=True`` raises ``ValueError`` ``file:line: field: reason`` for the first bad record in file order;
* a clean native record survives JSONL -> Parquet -> JSONL unchanged.

Profiles: ``ci`` (the default: derandomized, a few thousand records per format) and ``long`` (20x the
examples): ``HYPOTHESIS_PROFILE=long python -m pytest tests/test_fuzz_loaders.py``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_io_support import time_limit, write_jsonl

from engine.io import load_run, save_run
from engine.io.adapters.rllm import DEFAULT_TRAJ_NAME
from engine.io.detect import detect_format
from engine.io.reading.fields import as_step
from engine.io.reading.problems import RecordError
from engine.io.reading.records import parse_json
from engine.io.store.native import is_header
from engine.io.store.native_parquet import _schema

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
settings.register_profile(
    "ci", max_examples=120, derandomize=True, database=None, deadline=None, suppress_health_check=HEALTH
)
settings.register_profile("long", settings.get_profile("ci"), max_examples=20 * 120, derandomize=False)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


GENERATED: Counter = Counter()  # records written per format in this session (printed at the end)


@pytest.fixture(scope="module", autouse=True)
def report_generated():
    yield
    print("\nfuzzed records per format: " + ", ".join(f"{k} {v:,}" for k, v in sorted(GENERATED.items())))


def fuzz(share: float = 1.0) -> settings:
    """The profile's settings with ``share`` of its examples (applied per test, not with ``load_profile``, so the
    other hypothesis tests keep their own settings)."""
    return settings(PROFILE, max_examples=max(1, round(PROFILE.max_examples * share)))


LIMIT_S = 60  # watchdog per load: generous, it only turns a hang into a failure
RECORDS_PER_FILE = 24  # at most; files hold 1..24 records (tensor dumps up to 3x as many rows)

VOCAB = 151_665  # Qwen2.5, the default tokenizer
ROLES = ("model", "tool", "user", "system", "assistant", "observation", "Environment", "developer")
MISSING_FIELD = "missing while other trajectories have it"
KEPT_NOTE = "this rollout has 0 action tokens"  # nemo_gym: a problem about a record that still loads


# ------------------------------------------------------------------------------------------------ values
NASTY_TEXT = (
    "",
    " ",
    "\t\n",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "</div>",
    "<|im_end|>",
    "<|im_start|>assistant\n",
    "<information>doc</information>",
    "<tool_response>x</tool_response>",
    "\u202eevil\u202c",
    "שלום עולם",
    "مرحبا بالعالم",
    "a\u200bb\u200c\u200d\ufeffc",
    "\x00\x01\x07\x1b[31mred\x7f",
    "e\u0301\u0301",
    "😀👍🏽👨‍👩‍👧",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "line\u2028sep\u2029\x85",
    "Robert'); DROP TABLE runs;--",
    "{{7*7}}${jndi:x}%s%n",
    "\\",
    '"',
    "null",
    "NaN",
)
GARBAGE = (b"\xff\xfe\x00", b"{{", b"]", b"\x00", b"[" * 3000 + b"]" * 3000, b"1" * 5000, b'{"a": 1e999999}')
LONE_SURROGATES = ("\ud800", "x\udfffy", "\udc00\ud800")
long_text = st.builds(
    lambda unit, n: unit * n, st.sampled_from(("ab ", "é", "<b>", "😀", "\u200b", "字")), st.integers(300, 3000)
)
text = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=16), long_text)
nonblank_text = text.filter(lambda s: s.strip())
finite = st.floats(-100, 100, allow_nan=False, width=32)
reward = st.one_of(st.floats(-10, 10, allow_nan=False), st.integers(-3, 3))  # a scalar reward: never a boolean
component = st.one_of(reward, st.booleans())  # a reward component: ``accuracy: true`` counts 1
seed = st.integers(0, 2**32 - 1)  # bulk numbers come from a seeded generator: drawing each one is slow


def token_ids(draw, n: int) -> list[int]:
    return np.random.default_rng(draw(seed)).integers(0, VOCAB, n).tolist()


def floats(draw, n: int, sign: float = 1.0) -> list[float]:
    """``n`` float32-exact values (what the loader keeps), of either sign or ``sign * |x|``."""
    x = np.random.default_rng(draw(seed)).normal(0, 3, n)
    return (x if sign == 1.0 else sign * np.abs(x)).astype(np.float32).tolist()


NASTY_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from((0, -1, 2**31, 2**63, 2**64 + 1, 10**30, 10**400, -(10**400))),
    st.sampled_from((math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 1e39)),
    st.integers(),
    st.floats(),
    text,
    st.sampled_from(LONE_SURROGATES),
    st.sampled_from([[], {}, [[1, 2], [3]], [None], ["a", 1], {"": None}]),
    st.lists(st.one_of(st.integers(-5, VOCAB + 5), st.floats(), st.text(max_size=3), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.floats(), st.text(max_size=3)), max_size=3),
)


def paths(value: object, prefix: tuple = ()):
    """Paths to every node of a JSON value; of a list only the first and last items (arrays get long)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i in sorted({0, len(value) - 1}) if value else ():
            yield from paths(value[i], (*prefix, i))


@st.composite
def corrupted(draw, rec: object, values=NASTY_VALUES) -> object:
    """``rec`` with one node replaced by a nasty value, deleted, or (lists) given an extra nasty item."""
    rec = copy.deepcopy(rec)
    path = draw(st.sampled_from(list(paths(rec))))
    if not path:
        return draw(values)
    parent = rec
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    op = draw(st.sampled_from(("replace", "replace", "delete", "append")))
    if op == "replace":
        parent[key] = draw(values)
    elif op == "delete":
        del parent[key]
    elif isinstance(parent[key], list):
        parent[key].append(draw(values))
    else:
        parent[key] = draw(values)
    return rec


# ------------------------------------------------------------------------------------------------ records
@st.composite
def native_segment(draw, with_ids: bool | None = None, roles=ROLES) -> dict:
    seg: dict = {"role": draw(st.sampled_from(roles))}
    if with_ids if with_ids is not None else draw(st.booleans()):
        n = draw(st.integers(1, 8))
        seg["token_ids"] = token_ids(draw, n)
        if draw(st.booleans()):
            seg["text"] = draw(text)
        for name in ("log_probs", "ref_log_probs", "values", "scores"):
            if draw(st.integers(0, 2)):
                seg[name] = floats(draw, n)
    else:
        seg["text"] = draw(nonblank_text)
    return seg


components = st.dictionaries(st.sampled_from(("a", "exact_match", "_otc", "é", "<b>")), component, max_size=3)
PROMPTS = st.one_of(text, st.just([{"role": "user", "content": "hi"}]))
TURN_REWARDS = st.one_of(
    st.lists(components, max_size=3),
    st.dictionaries(st.sampled_from(("1", "2", "5")), st.one_of(reward, components), max_size=3),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), finite, text)
metadata_key = st.one_of(st.sampled_from(("truncated", "note", "", "<b>k</b>", "ключ", "a.b")), st.text(max_size=4))
metadata = st.dictionaries(
    metadata_key,
    st.one_of(json_leaf, st.lists(json_leaf, max_size=2), st.dictionaries(metadata_key, json_leaf, max_size=2)),
    max_size=2,
).map(lambda md: md | ({"truncated": bool(md["truncated"])} if "truncated" in md else {}))  # a flag: true/false


@st.composite
def native_record(draw, k: int, canonical: bool = False) -> dict:
    """A valid native record; ``canonical``: exactly what ``save_run`` writes back (roles, ids + text, all keys)."""
    if canonical:
        segs = [draw(native_segment(with_ids=True, roles=ROLES[:4])) for _ in range(draw(st.integers(1, 4)))]
        for s in segs:
            s.setdefault("text", draw(text))
        return {
            "id": f"r{k}",
            "group_id": draw(st.sampled_from(("g0", "g1", "<b>g</b>", "ג"))),
            "prompt": draw(text),
            "segments": segs,
            "turn_rewards": draw(st.lists(components, max_size=3)),
            "global_rewards": draw(components),
            "metadata": draw(metadata),
        }
    segs = [draw(native_segment(with_ids=True))] + draw(st.lists(native_segment(), max_size=3))
    rec: dict = {"segments": draw(st.permutations(segs))}
    if draw(st.integers(0, 3)):
        rec["id"] = f"r{k}" if draw(st.integers(0, 3)) else k
    if draw(st.booleans()):
        rec["group_id"] = draw(st.sampled_from(("g0", "g1", 7)))
    if draw(st.booleans()):
        rec["prompt"] = draw(PROMPTS)
    if draw(st.booleans()):
        rec["turn_rewards"] = draw(TURN_REWARDS)
    if draw(st.booleans()):
        rec["global_rewards"] = draw(components)
    if draw(st.booleans()):
        rec["metadata"] = draw(metadata)
    return rec


@st.composite
def native_header(draw) -> dict:
    return {
        "creditlens": {
            "schema": "creditlens.trajectory.v1",
            "name": draw(text),
            "source": draw(st.sampled_from(("native", "verl_rollout", "rllm"))),
            "tokenizer": draw(st.sampled_from(("qwen2.5", "qwen3", "default", None))),
            "metadata": draw(metadata),
        }
    }


ACTION_PARTS = st.lists(st.one_of(text, st.sampled_from(("<search> q </search>", "<answer> x </answer>"))), max_size=3)
INFO_PARTS = st.lists(text.map(lambda t: f"\n\n<information>{t}</information>\n\n"), max_size=2)
OBSERVATIONS = st.one_of(text, st.just({"tool_outputs": {"x": "y"}}))
TASKS = st.one_of(text, st.just({"question": "q?"}))
NEMO_INPUTS = st.one_of(text, st.just([{"role": "user", "content": "hi", "type": "message"}]))
NON_STRING_VALUES = NASTY_VALUES.filter(lambda v: not isinstance(v, str))
GARBAGE_BYTES = st.one_of(st.binary(min_size=1, max_size=200), st.sampled_from(GARBAGE))


def tagged_response(draw) -> str:
    parts = draw(ACTION_PARTS)
    info = draw(INFO_PARTS)
    out = "".join(p for pair in zip(parts, info + [""] * len(parts), strict=False) for p in pair)
    return out if out.strip() else "<answer> 42 </answer>"


@st.composite
def tagged_record(draw, k: int) -> dict:
    rec: dict = {draw(st.sampled_from(("response", "responses_str", "completion", "output"))): tagged_response(draw)}
    if draw(st.integers(0, 3)):
        rec["id"] = f"r{k}"
    rec[draw(st.sampled_from(("prompt", "question", "input")))] = draw(text)
    if draw(st.booleans()):
        rec["structured_rewards"] = {
            "turn_rewards": draw(st.dictionaries(st.sampled_from(("1", "2", "3")), components, max_size=3)),
            "global_rewards": draw(components),
        }
    if draw(st.booleans()):
        rec[draw(st.sampled_from(("reward", "score", "total_score")))] = draw(reward)
    if draw(st.booleans()):
        rec[draw(st.sampled_from(("group_id", "uid", "index", "prompt_id")))] = draw(st.sampled_from(("q0", "q1", 3)))
    if draw(st.booleans()):
        rec["truncated"] = draw(st.booleans())
    if draw(st.booleans()):
        rec["metadata"] = draw(metadata)
    return rec


@st.composite
def verl_rollout_record(draw, k: int) -> dict:
    output = tagged_response(draw)
    if draw(st.booleans()):
        output = f"<think>a</think>\nuser\n<tool_response>\n{draw(text)}\n</tool_response>\nassistant\n{output}"
    rec = {"input": draw(text), "output": output, "score": draw(reward), "step": draw(st.integers(0, 100))}
    if draw(st.integers(0, 3)):
        rec["id"] = f"r{k}"
    for key in draw(st.lists(st.sampled_from(("acc", "format", "gts", "uid", "data_source")), max_size=3, unique=True)):
        rec[key] = draw(component) if key in ("acc", "format") else draw(text)
    return rec


@st.composite
def rllm_step(draw, ids: bool) -> dict:
    step: dict = {"reward": draw(st.one_of(st.just(0.0), reward))}
    if ids:
        n = draw(st.integers(1, 6))
        step["prompt_ids"] = token_ids(draw, draw(st.integers(1, 5)))
        step["response_ids"] = token_ids(draw, n)
        if draw(st.booleans()):
            step["logprobs"] = floats(draw, n, sign=-1.0)
    elif draw(st.booleans()):
        msgs = [{"role": "user", "content": draw(text)}, {"role": "assistant", "content": draw(text)}]
        step["chat_completions"] = msgs
    else:  # an empty model_response is rLLM's "no output" default: such a step is refused (docs/FORMAT.md)
        step["model_response"] = draw(text.filter(bool))
        step["observation"] = draw(OBSERVATIONS)
        if draw(st.booleans()):
            step["thought"] = draw(text)
    return step


@st.composite
def rllm_trajectory(draw) -> dict:
    ids = draw(st.booleans())
    traj: dict = {"steps": draw(st.lists(rllm_step(ids), min_size=1, max_size=3))}
    if draw(st.booleans()):
        traj["reward"] = draw(reward)
    if draw(st.booleans()):
        traj["name"] = draw(st.sampled_from(("solver", "judge", DEFAULT_TRAJ_NAME)))
    if draw(st.booleans()):
        traj["task"] = draw(TASKS)
    return traj


@st.composite
def rllm_record(draw, k: int) -> object:
    kind = draw(st.sampled_from(("episode", "trajectory", "token", "messages", "chat")))
    if kind == "episode":
        return {
            "id": f"task{k}:{draw(st.integers(0, 3))}",
            "trajectories": draw(st.lists(rllm_trajectory(), min_size=1, max_size=2)),
            "is_correct": draw(st.booleans()),
            "termination_reason": draw(st.sampled_from(("ENV_DONE", "MAX_RESPONSE_LENGTH_EXCEEDED", None))),
        }
    if kind == "trajectory":
        return draw(rllm_trajectory()) | {"uid": f"r{k}"}
    if kind == "token":
        n = draw(st.integers(1, 8))
        return {
            "id": f"r{k}",
            "prompt_tokens": token_ids(draw, draw(st.integers(1, 4))),
            "response_tokens": token_ids(draw, n),
            "response_masks": draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
            "trajectory_reward": draw(reward),
        }
    msgs = [{"role": "user", "content": draw(text)}] + [
        {"role": role, "content": draw(text)} for role in draw(st.permutations(["assistant", "tool", "assistant"]))
    ]
    return msgs if kind == "messages" else {"chat_completions": msgs, "reward": draw(reward)}


@st.composite
def nemo_item(draw) -> dict:
    kind = draw(st.sampled_from(("message", "function_call", "function_call_output", "reasoning", "user")))
    if kind == "message":
        item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": draw(text)}]}
        if draw(st.booleans()):
            n = draw(st.integers(1, 5))
            item["generation_token_ids"] = token_ids(draw, n)
            item["generation_log_probs"] = floats(draw, n, sign=-1.0)
            item["prompt_token_ids"] = token_ids(draw, draw(st.integers(1, 4)))
        return item
    if kind == "function_call":
        return {
            "type": "function_call",
            "name": draw(text),
            "arguments": draw(st.sampled_from(["{}", '{"q": 1}', "[", ""])),
        }
    if kind == "function_call_output":
        return {"type": "function_call_output", "output": draw(text)}
    if kind == "reasoning":
        return {"type": "reasoning", "summary": [{"type": "summary_text", "text": draw(text)}]}
    return {"type": "message", "role": "user", "content": draw(text)}


@st.composite
def nemo_record(draw, k: int) -> dict:
    first = {"type": "message", "role": "assistant", "content": draw(text)}
    params: dict = {"input": draw(NEMO_INPUTS)}
    if draw(st.booleans()):
        params["instructions"] = draw(text)
    if draw(st.booleans()):
        params["tools"] = [{"type": "function", "name": "search", "parameters": {"type": "object"}}]
    rec = {
        "responses_create_params": params,
        "response": {"output": [first, *draw(st.lists(nemo_item(), max_size=4))], "status": "completed"},
        "reward": draw(reward),
    }
    if draw(st.integers(0, 3)):
        rec |= {"_ng_task_index": k // 2, "_ng_rollout_index": k}
    for key in draw(st.lists(st.sampled_from(("accuracy", "num_tests_run", "truncated", "note")), max_size=2)):
        rec[key] = draw(text) if key == "note" else draw(st.booleans()) if key == "truncated" else draw(component)
    return rec


@st.composite
def prime_tokens_record(draw, k: int) -> dict:
    """A prime-rl token export record (``tests/writers/prime_rl_tokens.py``): columns aligned, a loss token."""
    n = draw(st.integers(1, 12))
    start = draw(st.integers(0, n - 1))
    mask = [i == start or (i > start and draw(st.booleans())) for i in range(n)]
    rec = {"schema_version": 1, "step": draw(st.integers(0, 3)), "rank": draw(st.integers(0, 1)), "micro_step": 0}
    rec |= {"micro_sequence_idx": k, "export_sequence_idx": k, "env_name": draw(st.one_of(st.none(), text))}
    rec |= {"token_ids": token_ids(draw, n), "position_ids": list(range(n)), "loss_mask": mask}
    for key in ("advantages", "entropy", "mismatch_kl", "log_importance_ratio", "importance_ratio", "prob_delta"):
        rec[key] = floats(draw, n)
    for key in ("inference_logprobs", "trainer_logprobs"):
        rec[key] = floats(draw, n, -1.0)
    for key in ("is_masked", "is_masked_high", "is_masked_low"):
        rec[key] = [None] * n if draw(st.booleans()) else [bool(v > 0) for v in floats(draw, n)]
    for key in ("rl_weights", "ce_weights", "ref_kl_weights"):
        rec[key] = [None] * n if draw(st.booleans()) else [float(abs(v) > 1) for v in floats(draw, n)]
    return rec


RECORDS = {
    "native": native_record,
    "verl_rollout": verl_rollout_record,
    "tagged_text": tagged_record,
    "rllm": rllm_record,
    "nemo_gym": nemo_record,
    "prime_rl_tokens": prime_tokens_record,
}


def expected_ids(fmt: str, rec: object, default: str, stem: str) -> list[str] | None:
    """Trajectory ids a record loads as (the adapters' id rules, docs/FORMAT.md); None: it cannot load."""
    try:  # as the loader reads it (orjson reads integers beyond 64 bits as floats)
        rec = parse_json(json.dumps(rec).encode())
    except (RecordError, ValueError):
        pass
    if fmt == "rllm":
        if isinstance(rec, list):
            return [default]
        if not isinstance(rec, dict):
            return None
        if isinstance(rec.get("trajectories"), list):
            ep_key = "id" if rec.get("id") is not None else "episode_id" if rec.get("episode_id") is not None else None
            ep = str(rec[ep_key]) if ep_key else default
            trajs = rec["trajectories"]
            if len(trajs) == 1:
                return [ep]
            return [
                f"{ep}/{(t.get('name') if isinstance(t, dict) else None) or DEFAULT_TRAJ_NAME}-{j}"
                for j, t in enumerate(trajs)
            ]
        key = "uid" if isinstance(rec.get("steps"), list) and "response_tokens" not in rec else "id"
        return [str(rec[key]) if rec.get(key) is not None else default]
    if not isinstance(rec, dict):
        return None
    if fmt == "prime_rl_tokens":
        keys = ("step", "rank", "export_sequence_idx")
        if not all(isinstance(rec.get(x), int) and not isinstance(rec.get(x), bool) for x in keys):
            return None
        return [f"step_{rec['step']}/rank_{rec['rank']}/{rec['export_sequence_idx']}"]
    if fmt == "nemo_gym":
        task, rollout = rec.get("_ng_task_index"), rec.get("_ng_rollout_index")
        return [f"{stem}/task-{task}/rollout-{rollout}" if task is not None and rollout is not None else default]
    return [str(rec["id"]) if rec.get("id") is not None else default]


# ------------------------------------------------------------------------------------------------ files
NO_VALUE = object()  # the entry is not a JSON value we built (truncated, garbage, over the size limit)


@dataclass
class Entry:
    """One line (or array item) of a generated file: its bytes, the JSON value if any, and whether it is valid."""

    data: bytes
    value: object = NO_VALUE
    valid: bool = False
    header: bool = False


def parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def dumps(value: object, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def entry(draw, fmt: str, k: int) -> Entry:
    rec = draw(RECORDS[fmt](k))
    kind = draw(st.sampled_from(("valid", "valid", "corrupt", "corrupt", "corrupt", "truncated", "garbage")))
    ascii_only = draw(st.booleans())
    if kind == "valid":
        return Entry(dumps(rec, ascii_only), rec, valid=True)
    if kind == "garbage":
        raw = draw(GARBAGE_BYTES).replace(b"\n", b" ")
        return Entry(raw if raw.strip() and not parses(raw) else b"\xff" + raw)
    bad = draw(corrupted(rec))
    data = dumps(bad, ascii_only)
    if kind == "truncated" and len(data) > 1:
        return Entry(data[: draw(st.integers(1, len(data) - 1))])
    return Entry(data, bad)


@st.composite
def jsonl_file(draw, fmt: str) -> list[Entry | None]:
    """Entries of a JSONL file; ``None`` is a blank line. Native files may start with a (corrupted) header."""
    out: list[Entry | None] = []
    if fmt == "native" and draw(st.booleans()):
        head = draw(native_header())
        if draw(st.booleans()):
            head = draw(corrupted(head, NON_STRING_VALUES))
        out.append(Entry(dumps(head, True), head, header=is_header(head)))
    for k in range(draw(st.integers(1, RECORDS_PER_FILE))):
        if draw(st.integers(0, 7)) == 0:
            out.append(None)
        out.append(draw(entry(fmt, k)))
    records = [e for e in out if e is not None]
    if len(records) == 1 and records[0].data.lstrip().startswith(b"["):
        out.append(draw(entry(fmt, len(out))))  # a file of one line `[...]` is a JSON array, not JSONL
    return out


def write_entries(path: Path, entries: list[Entry | None], crlf: bool, bom: bool) -> dict[int, Entry]:
    """Write the entries one per line; returns {line number: entry} of the non-blank lines."""
    end = b"\r\n" if crlf else b"\n"
    lines = {}
    with open(path, "wb") as f:
        f.write(b"\xef\xbb\xbf" if bom else b"")
        for n, e in enumerate(entries, start=1):
            f.write((e.data if e is not None else b"") + end)
            if e is not None:
                lines[n] = e
    return lines


def load(path: Path, **kw):
    with time_limit(LIMIT_S):
        return load_run(path, **kw)


def check_batches(run) -> None:
    if len(run):
        batch = run.to_batch()
        assert batch.batch_size == len(run)


STEP_READERS = ("native", "verl_rollout", "prime_rl_tokens")  # formats whose records may state their step (``step``)


def expected_keys(fmt: str, rec: object, default: str, stem: str) -> list[tuple[int | None, str]] | None:
    """``expected_ids`` with the step each loads under: ids are unique within a step, and the same id in two
    steps is two trajectories (``load_run`` de-duplicates by (step, id)). No path here names a step."""
    ids = expected_ids(fmt, rec, default, stem)
    try:  # as the loader reads it
        rec = parse_json(json.dumps(rec).encode())
    except (RecordError, ValueError):
        pass
    step = None
    if fmt in STEP_READERS and isinstance(rec, dict) and rec.get("step") is not None:
        try:
            step = as_step(rec["step"], "step")
        except RecordError:  # the record is refused for it
            pass
    return None if ids is None else [(step, i) for i in ids]


def check_accounting(res, fmt: str, where: dict[object, Entry], locate, stem: str, default_id) -> None:
    """Every record is loaded or named by exactly one problem at its own location; valid ones load."""
    loaded_ids = [t.id for t in res.run.trajectories]
    loaded = [(t.step, t.id) for t in res.run.trajectories]
    assert len(loaded) == len(set(loaded))
    unforeseen = [str(p) for p in res.problems if p.reason.startswith("malformed record")]
    assert not unforeseen, f"a check is missing; only the readers' safety net caught: {unforeseen}"
    header = [p for p in res.problems if (p.field or "").startswith("creditlens") or p.scope == "run"]  # no record
    kept = [p for p in res.problems if KEPT_NOTE in p.reason]
    assert all(locate(p) in where for p in kept), "a note about a kept record names no record"
    record_problems = [p for p in res.problems if MISSING_FIELD not in p.reason and p not in header and p not in kept]
    assert all(p.field.rsplit(".", 1)[0] in loaded_ids for p in res.problems if MISSING_FIELD in p.reason)
    unknown = [str(p) for p in record_problems if locate(p) not in where]
    assert not unknown, f"problems at no record: {unknown}"
    claims = Counter(
        i
        for key, e in where.items()
        if e.value is not NO_VALUE
        for i in (expected_keys(fmt, e.value, default_id(key), stem) or [])
    )
    total = 0
    for key, e in where.items():
        if e.header:
            continue
        ids = expected_keys(fmt, e.value, default_id(key), stem) if e.value is not NO_VALUE else None
        named = [p for p in record_problems if locate(p) == key]
        if named:  # rejected whole, or (an episode) the trajectories named by trajectories[j] rejected
            parts = [re.search(r"(?:^|\.)trajectories\[(\d+)\]\.", p.field or "") for p in named]
            assert len(named) == 1 or all(parts), f"{key}: {len(named)} problems for one record"
            assert not e.valid or claims[ids[0]] > 1, f"valid record {key} was rejected"
            rejected = {int(m.group(1)) for m in parts if m} if all(parts) else set(range(len(ids or ())))
            unique = [i for i in ids or () if claims[i] == 1]
            assert not any(i in loaded for j, i in enumerate(ids or ()) if j in rejected and i in unique), key
            total += sum(1 for j, i in enumerate(ids or ()) if j not in rejected and i in loaded)
            continue
        assert ids, f"record {key} ({e.data[:80]!r}) is neither loaded nor reported"
        missing = [i for i in ids if i not in loaded]
        assert not missing, f"record {key}: trajectories {missing} were dropped silently"
        total += len(ids)
    assert total == len(loaded)


def jsonl_checks(path: Path, fmt: str, entries, crlf: bool, bom: bool, max_bytes: int | None) -> None:
    """Non-strict JSONL load: every record accounted for at its line; the run batches; detection fails cleanly."""
    lines = write_entries(path, entries, crlf, bom)
    for n, e in lines.items():  # a line over the size limit (BOM and line end included) must be reported
        if max_bytes and len(e.data) + (2 if crlf else 1) + (3 if bom and n == 1 else 0) > max_bytes + 1:
            lines[n] = Entry(e.data)
    res = load(path, fmt=fmt, max_bytes=max_bytes)
    check_accounting(res, fmt, lines, lambda p: p.line, path.stem, lambda n: f"{path.stem}:{n}")
    check_batches(res.run)
    try:  # detection never fails with anything but a clear ValueError
        detect_format(path)
    except ValueError as e:
        assert str(path) in str(e)
    strict_checks(path, fmt, res, max_bytes)


# Problems a reader can only say once every line is read, so a strict load raises them after the lines' own:
# verl_rollout's line without a step among lines with one (a line before the first stepped one is not known yet).
SAID_AT_END = ("this line's step is lost",)


def strict_checks(path: Path, fmt: str, res, max_bytes: int | None) -> None:
    """``strict=True`` raises exactly the first record problem of the file ("file:line: field: reason"), or loads
    the same (run-scope notes are listed, never raised)."""
    record = [p for p in res.problems if p.scope == "record"]
    if not record:
        strict = load(path, fmt=fmt, strict=True, max_bytes=max_bytes)
        assert [t.id for t in strict.run.trajectories] == [t.id for t in res.run.trajectories]
        assert strict.problems == res.problems
        return
    early = [p for p in record if not any(words in p.reason for words in SAID_AT_END)] or record
    lined = [p for p in early if p.line is not None]
    first = min(lined, key=lambda p: p.line) if lined else early[0]
    with pytest.raises(ValueError) as err:
        load(path, fmt=fmt, strict=True, max_bytes=max_bytes)
    assert str(err.value) == str(first)
    where = f"{path}:{first.line}: " if first.line is not None else f"{path}: "
    assert str(err.value).startswith(where + (f"{first.field}: " if first.field else ""))


def array_checks(path: Path, fmt: str, entries, indent: int | None) -> None:
    """The same records as one JSON array: every item accounted for by its ``[i].`` prefix."""
    items = [e for e in entries if e is not None and e.value is not NO_VALUE and not e.header]
    path.write_text(json.dumps([e.value for e in items], indent=indent))
    res = load(path, fmt=fmt)
    item = lambda p: int(m.group(1)) if p.field and (m := re.match(r"\[(\d+)\]", p.field)) else None  # noqa: E731
    check_accounting(res, fmt, dict(enumerate(items)), item, path.stem, lambda i: f"{path.stem}[{i}]")
    check_batches(res.run)


# ------------------------------------------------------------------------------------------------ JSON tests
@pytest.mark.parametrize("fmt", list(RECORDS))
@fuzz()
@given(data=st.data())
def test_json_loaders_account_for_every_record(tmp_path_factory, fmt, data):
    """One generated file, three checks: JSONL (non-strict), JSONL strict, and its records as a JSON array."""
    entries = data.draw(jsonl_file(fmt), label="entries")
    crlf, bom = data.draw(st.booleans(), label="crlf"), data.draw(st.booleans(), label="bom")
    max_bytes = data.draw(st.sampled_from((None, None, None, 2048)), label="max_bytes")
    tmp = tmp_path_factory.mktemp(fmt)
    GENERATED[fmt] += 2 * sum(e is not None for e in entries)  # written as JSONL and as one JSON array
    jsonl_checks(tmp / f"{fmt}.jsonl", fmt, entries, crlf, bom, max_bytes)
    array_checks(tmp / f"{fmt}.json", fmt, entries, data.draw(st.sampled_from((None, 1)), label="indent"))


@pytest.mark.parametrize("fmt", ["rllm"])
def test_rllm_chat_dump_lines(tmp_path, fmt):
    """A JSONL chat-completions dump (one message list per line) is JSONL, not a JSON array."""
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = write_jsonl(tmp_path / "chat.jsonl", [chat, chat, '[{"role": "user"'])
    res = load_run(path)
    assert res.run.source == fmt and [t.id for t in res.run.trajectories] == ["chat:1", "chat:2"]
    assert [(p.line, p.reason[:12]) for p in res.problems] == [(3, "invalid JSON")]


# ------------------------------------------------------------------------------------------------ round trip
@fuzz(0.4)
@given(data=st.data())
def test_clean_records_survive_jsonl_parquet_jsonl(tmp_path_factory, data):
    recs = [data.draw(native_record(k, canonical=True)) for k in range(data.draw(st.integers(1, 6)))]
    tmp = tmp_path_factory.mktemp("roundtrip")
    first = write_jsonl(tmp / "clean.jsonl", recs)
    res = load(first)
    expected = (MISSING_FIELD, "is alone in its group", "token ids decode to")  # random text beside random ids
    assert all(any(e in p.reason for e in expected) for p in res.problems)
    save_run(res.run, tmp / "clean.parquet")
    again = load(tmp / "clean.parquet")
    save_run(again.run, tmp / "back.jsonl")
    back = load(tmp / "back.jsonl")
    assert back.run.trajectories == res.run.trajectories
    assert back.run.content_hash == res.run.content_hash
    lines = (tmp / "back.jsonl").read_bytes().splitlines()[1:]
    for rec, line in zip(recs, lines, strict=True):
        assert as_written(json.loads(line)) == as_written(rec)


def as_written(rec: dict) -> dict:
    """A native record as the writer keeps it: per-token values as float32, rewards as floats."""
    segs = []
    for s in rec["segments"]:
        out = {"role": s["role"], "text": s["text"], "token_ids": s["token_ids"]}
        for name in ("log_probs", "ref_log_probs", "values", "scores"):
            if name in s:
                out[name] = [float(np.float32(x)) for x in s[name]]
        segs.append(out)
    turn = [{k: float(v) for k, v in d.items()} for d in rec["turn_rewards"]]
    glob = {k: float(v) for k, v in rec["global_rewards"].items()}
    return rec | {"segments": segs, "turn_rewards": turn, "global_rewards": glob}


# ------------------------------------------------------------------------------------------------ native Parquet
PER_TOKEN = ("log_probs", "ref_log_probs", "values", "scores")
parquet_text = st.one_of(text, st.none())
parquet_json = st.one_of(text, NON_STRING_VALUES.map(json.dumps), st.none())
parquet_ids = st.one_of(st.none(), st.lists(st.sampled_from((0, -1, VOCAB - 1, VOCAB, 2**31 - 1)), max_size=3))
parquet_floats = st.one_of(
    st.none(), st.lists(st.sampled_from((0.5, math.nan, math.inf, -math.inf, 1e39, -1e-40)), max_size=3)
)
ROW_VALUES = {
    "id": parquet_text,
    "group_id": parquet_text,
    "prompt": parquet_text,
    "segments": st.sampled_from([None, []]),
    "turn_rewards": parquet_json,
    "global_rewards": parquet_json,
    "metadata": parquet_json,
    "role": parquet_text,
    "text": parquet_text,
    "token_ids": parquet_ids,
    **dict.fromkeys(PER_TOKEN, parquet_floats),
}


def parquet_row(rec: dict) -> dict:
    """A canonical native record as a row of the native Parquet schema (JSON text for the free columns)."""
    segs = [{"role": s["role"], "text": s["text"], "token_ids": s["token_ids"]} | s for s in rec["segments"]]
    row = {k: rec[k] for k in ("id", "group_id", "prompt")} | {"segments": segs, "prompt_token_ids": None}
    return row | {k: json.dumps(rec[k]) for k in ("turn_rewards", "global_rewards", "metadata")}


@st.composite
def corrupted_row(draw, row: dict) -> dict:
    """``row`` with one field (a column, or a field of one segment) set to a value its column type can hold."""
    row = copy.deepcopy(row)
    targets = [(row, k) for k in ("id", "group_id", "prompt", "segments", "turn_rewards", "global_rewards", "metadata")]
    targets += [(seg, k) for seg in row["segments"] for k in ("role", "text", "token_ids", *PER_TOKEN)]
    parent, key = draw(st.sampled_from(targets))
    parent[key] = draw(ROW_VALUES[key])
    return row


@st.composite
def parquet_rows(draw) -> list[Entry]:
    out = []
    for k in range(draw(st.integers(1, RECORDS_PER_FILE))):
        row = parquet_row(draw(native_record(k, canonical=True)))
        if draw(st.booleans()):
            out.append(Entry(b"", row, valid=True))
        else:
            out.append(Entry(b"", draw(corrupted_row(row))))
    return out


def damage(path: Path, data) -> None:
    """Truncate the file or overwrite a span of it with garbage (a disk or a copy gone wrong)."""
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(4, len(raw) - 1), label="damage at")
    if data.draw(st.booleans(), label="truncate"):
        del raw[at:]
    else:
        junk = data.draw(st.binary(min_size=1, max_size=64), label="junk")
        raw[at : at + len(junk)] = junk
    path.write_bytes(bytes(raw))


def row_index(p) -> int | None:
    m = re.match(r"row\[(\d+)\]", p.field or "")
    return int(m.group(1)) if m else None


@fuzz()
@given(data=st.data())
def test_native_parquet_accounts_for_every_row(tmp_path_factory, data):
    rows = data.draw(parquet_rows(), label="rows")
    GENERATED["native parquet"] += len(rows)
    header = data.draw(st.one_of(st.none(), parquet_json, native_header().map(lambda h: json.dumps(h["creditlens"]))))
    table = pa.Table.from_pylist([e.value for e in rows], schema=_schema())
    if header is not None:
        table = table.replace_schema_metadata({"creditlens": header})
    path = tmp_path_factory.mktemp("parquet") / "run.parquet"
    pq.write_table(table, path, row_group_size=data.draw(st.integers(1, 4), label="row group"))
    damaged = data.draw(st.integers(0, 4), label="damaged") == 0
    if damaged:
        damage(path, data)
    try:
        res = load(path)
    except ValueError as e:  # a file that cannot be read at all is one clear error naming it
        assert damaged and str(path) in str(e)
        return
    if not damaged:
        check_accounting(res, "native", dict(enumerate(rows)), row_index, path.stem, lambda i: f"{path.stem}:{i}")
    else:  # rows past a row group that cannot be decoded are skipped with one problem naming them
        located = {row_index(p) for p in res.problems if p.scope == "record"} - {None}  # notes skip no row
        skipped = [p for p in res.problems if "cannot be decoded" in p.reason]
        assert len(res.run) + len(located) == len(rows) or skipped
    check_batches(res.run)


# ------------------------------------------------------------------------------------------------ verl tensor dumps
FLOAT_FIELDS = ("old_log_probs", "ref_log_prob", "values", "token_level_scores")


@st.composite
def verl_dump(draw) -> tuple[dict, set[int], list[str]]:
    """(arrays, rows that must load, fields whose shape was broken) of a small verl batch dump."""
    B, P, T = draw(st.integers(1, 3 * RECORDS_PER_FILE)), draw(st.integers(0, 3)), draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    lengths = rng.integers(1, T + 1, size=B)
    resp_attn = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
    prompt_attn = (np.arange(P)[None, :] >= rng.integers(0, P + 1, size=B)[:, None]).astype(np.int64)
    d = {
        "responses": rng.integers(0, VOCAB, size=(B, T)),
        "prompts": rng.integers(0, VOCAB, size=(B, P)),
        "attention_mask": np.concatenate([prompt_attn, resp_attn], axis=1),
        "response_mask": rng.integers(0, 2, size=(B, T)) * resp_attn,
        **{k: rng.normal(size=(B, T)).astype(np.float32) for k in FLOAT_FIELDS if draw(st.booleans())},
        "uid": np.array([f"q{b // 2}" for b in range(B)]),
        "reward_baselines": rng.normal(size=B),
        "acc": rng.integers(0, 2, size=B).astype(np.float64),
    }
    must_load, in_padding = set(range(B)), set()
    for _ in range(draw(st.integers(0, 3))):
        b, t = draw(st.integers(0, B - 1)), draw(st.integers(0, T - 1))
        kind = draw(st.sampled_from(("nan", "nan_pad", "bad_id", "bad_id_pad", "empty", "baseline", "prompt_id")))
        padding = t >= lengths[b]
        in_padding |= {b} if padding else set()
        if kind in ("nan", "nan_pad") and any(k in d for k in FLOAT_FIELDS):
            key = draw(st.sampled_from(tuple(k for k in FLOAT_FIELDS if k in d)))
            d[key] = d[key].astype(np.float64)
            d[key][b, t] = draw(st.sampled_from((math.nan, math.inf, -math.inf, 1e39)))
            must_load.discard(b) if not padding else None
        elif kind in ("bad_id", "bad_id_pad"):
            d["responses"][b, t] = draw(st.sampled_from((-1, VOCAB, 2**31, 2**32 + 5, 2**40)))
            must_load.discard(b) if not padding else None
        elif kind == "empty":
            d["attention_mask"][b, P:] = 0
            must_load.discard(b)
        elif kind == "baseline":
            d["reward_baselines"][b] = draw(st.sampled_from((math.nan, math.inf, 1e39)))
            must_load.discard(b)
        elif P and prompt_attn[b].any():
            d["prompts"][b, -1] = draw(st.sampled_from((-1, VOCAB, 2**40)))
            must_load.discard(b)
    broken = []
    for key in draw(st.lists(st.sampled_from((*FLOAT_FIELDS, "response_mask", "attention_mask", "reward_baselines")))):
        if key in d:
            d[key] = draw(st.sampled_from([d[key][:-1], d[key][..., :-1], d[key].astype(str)]))
            broken.append(key)
    if "attention_mask" in broken:  # ignored: padding then counts as real tokens
        must_load -= in_padding
    return d, must_load, broken


def write_dump(path: Path, d: dict, data) -> None:
    if path.suffix == ".npz":
        np.savez(path, **d)
    elif path.suffix == ".pt":
        tensors = {
            k: v.tolist() if v.dtype.kind == "U" else torch.from_numpy(np.ascontiguousarray(v)) for k, v in d.items()
        }
        torch.save(tensors, path)
    else:  # Parquet: one row per trajectory, list columns, some rows null
        B = len(d["responses"])  # a Parquet table cannot hold a column of another length
        cols = {k: [r.tolist() for r in v] if v.ndim == 2 else v.tolist() for k, v in d.items() if len(v) == B}
        for key in data.draw(st.lists(st.sampled_from(sorted(cols)), max_size=2), label="null rows"):
            cols[key][data.draw(st.integers(0, len(cols[key]) - 1))] = None
        pq.write_table(pa.table({k: pa.array(v) for k, v in cols.items()}), path)


@pytest.mark.parametrize("suffix", [".npz", ".pt", ".parquet"])
@fuzz(0.5)
@given(data=st.data())
def test_verl_tensor_dumps_account_for_every_row(tmp_path_factory, suffix, data):
    d, must_load, broken = data.draw(verl_dump(), label="dump")
    path = tmp_path_factory.mktemp("verl") / f"dump{suffix}"
    write_dump(path, d, data)
    res = load(path, fmt="verl_tensors")  # detection needs a mask column, which a broken dump may lack
    B = len(d["responses"])
    GENERATED[f"verl_tensors {suffix}"] += B
    loaded = {t.id for t in res.run.trajectories}
    rows = Counter(row_index(p) for p in res.problems)
    assert all(p.line is None for p in res.problems)
    for b in range(B):
        ok = f"{path.stem}/row-{b}" in loaded
        assert ok != bool(rows[b]), f"row {b}: loaded={ok}, problems={rows[b]}"
        if suffix != ".parquet":
            assert ok or b not in must_load, f"row {b} should load: {[str(p) for p in res.problems]}"
    assert len(loaded) + sum(1 for b in range(B) if rows[b]) == B
    assert not [p for p in res.problems if p.reason.startswith("malformed record")]
    check_batches(res.run)
