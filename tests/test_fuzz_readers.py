"""Fuzzing of the trainer readers added last (TRL, prime-rl/verifiers traces and token exports, slime, SkyRL eval,
AReaL, ROLL, ART, KG-R1's evaluator, NeMo Gym): whatever a file holds, ``load_run`` accounts for every record.

Valid records come from the writer mimics in ``tests/writers/`` (each trainer's own writer, re-stated), written
once per session; each generated file mixes copies of them with copies that have one node replaced, deleted or
appended to (``NASTY_VALUES`` of ``test_fuzz_loaders``), and, per format, truncated or garbage lines (JSONL, and
the same records as one JSON array), cells of a column's own type or a column of another type (TRL's Parquet),
damaged bytes, tensors (slime's ``.pt``), corrupted trajectory groups and broken YAML (ART). The rules, per file:

* non-strict ``load_run`` never raises and never hangs (``time_limit`` watchdog, not a timing assertion);
* every record is loaded or named by exactly one problem at its own line, item (``[i].``), row (``row[i].``) or
  sample (``samples[b].``); a record-scope problem about a record that still loads is one of the format's
  ``KEPT`` notes;
* a valid record always loads (only an earlier record of the same id may take its place), with its token ids,
  action mask, log-probs and rewards equal to what the reader gives for the mimic's own file;
* the run batches; ``strict=True`` raises the first record problem (``file[:line]: field: reason``).

Where a trajectory loaded from is seen by wrapping ``engine.io.load._accept`` (the loader's own (line, prefix) of
each accepted trajectory), so no format's id rules are re-stated here.

Profiles as in ``test_fuzz_loaders`` (``ci``: derandomized).
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st
from test_fuzz_loaders import GARBAGE_BYTES, MISSING_FIELD, NASTY_VALUES, corrupted, damage, fuzz, parses
from test_io_support import time_limit

import engine.io.load as loader
from engine.io import load_run
from engine.io.detect import detect_format
from engine.io.load import COMPRESSED
from engine.io.reading.fields import as_step
from engine.io.reading.problems import RecordError
from engine.io.reading.records import BOM

LIMIT_S = 60  # watchdog per load: generous, it only turns a hang into a failure
UNITS = 12  # at most, per file


# ------------------------------------------------------------------------------------------------ templates
WORK: Path | None = None  # a session folder for the mimics' files


def _work(name: str) -> Path:
    global WORK
    if WORK is None:
        import tempfile

        WORK = Path(tempfile.mkdtemp(prefix="fuzz-readers-"))
    out = WORK / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


@cache
def _tok():
    from engine.io.text.tokenize import get_tokenizer

    return get_tokenizer(None)


@cache
def templates(fmt: str) -> tuple:
    """Valid records of ``fmt`` as its mimic writes them (rows / samples / trajectory groups for the non-JSONL
    formats)."""
    from writers import areal, art, kgr1, prime_rl, roll, skyrl, slime, trl

    tok = _tok()
    if fmt == "areal_rollout":
        folder, _ = areal.write_rollouts(tok, _work(fmt))
        return tuple(r for f in sorted(folder.glob("*.jsonl")) for r in _lines(f))
    if fmt == "skyrl_eval":
        folder = skyrl.write_eval_dump(tok, _work(fmt), skyrl.sample_rollouts(tok))
        return tuple(_lines(folder / "searchR1_nq.jsonl"))
    if fmt == "kgr1_eval":
        from test_io_writer_kgr1 import Q_A, Q_B

        a = kgr1.rollout(tok, Q_A, ["<kg-query>x</kg-query><|im_end|>", "<answer>Stoker</answer><|im_end|>"], ["B"])
        b = kgr1.rollout(tok, Q_B, ["<think>I need to look up the rivers of"], [])
        c = kgr1.rollout(tok, Q_B, ["<answer>Nile</answer><|im_end|>"], [])
        path = kgr1.write_eval_results(tok, _work(fmt), [[a, b, c]], reward_tensor=[[1.0, 0.0, 0.5]])
        plain = kgr1.write_eval_results(tok, _work(fmt + "-plain"), [[a, c]])  # the 0.0 fallback: no reward
        return tuple(_lines(path) + _lines(plain))
    if fmt == "verifiers_traces":
        from test_io_writer_prime_rl import GROUPS

        path, _ = prime_rl.write_step(str(_work(fmt)), 7, GROUPS)
        return tuple(r for r in _lines(path) if r.get("traces") and all(t.get("ok") for t in r["traces"]))
    if fmt == "nemo_gym":
        from writers import nemo_gym

        folder = _work(fmt)
        writes = ("write_hermes", "write_aviary", "write_image_tools", "write_anyswe", "write_conversation_sim")
        return tuple(r for name in writes for r in _lines(getattr(nemo_gym, name)(folder).path))
    if fmt == "prime_rl_tokens":
        from test_io_writer_prime_rl_tokens import samples
        from writers.prime_rl_tokens import write_run

        s = samples()
        root = write_run(
            _work(fmt), {3: {0: [[s["single"], s["untrained"], s["tool"]], [s["tied"]]], 1: [[s["nan_prompt"]]]}}
        )
        return tuple(r for f in sorted(Path(root).rglob("*.jsonl")) for r in _lines(f))
    if fmt == "roll_rollout":
        path, _, _ = roll.write_step(tok, _work(fmt))
        (cols,) = _lines(path)
        return tuple({k: v[j] for k, v in cols.items()} for j in range(len(cols["responses"])))
    if fmt == "trl_completions":
        from test_io_writer_trl import COMPLETIONS, PROMPTS, accuracy
        from test_io_writer_trl import fmt as format_reward

        funcs = {"accuracy": accuracy, "fmt": format_reward}
        w = trl.write_completions(str(_work(fmt)), 12, PROMPTS, COMPLETIONS, funcs)
        rows = pq.read_table(w.path).to_pylist()  # less the row TRL skips (every reward None)
        return tuple(r for r in rows if not all(r[k] is None or math.isnan(r[k]) for k in ("accuracy", "fmt")))
    if fmt == "slime_rollout":
        from test_io_writer_slime import GROUPS

        path, _ = slime.save_debug_rollout_data(str(_work(fmt) / "{rollout_id}.pt"), GROUPS, rollout_id=3)
        return tuple(torch.load(path, weights_only=True)["samples"])
    if fmt == "art_yaml":
        path, _ = art.write_log(_work(fmt))
        return tuple(yaml.safe_load(path.read_text()))
    raise KeyError(fmt)


def retag(fmt: str, rec: object, k: int) -> object:
    """A template record made the ``k``-th of a file: ids that the format reads from the record made unique."""
    rec = copy.deepcopy(rec)
    if fmt == "areal_rollout":
        rec["sample_idx"] = k
    elif fmt == "kgr1_eval":
        rec["uid"] = f"test_batch000_sample{k:03d}"
    elif fmt == "verifiers_traces":
        rec["id"] = f"ep-{k}"
        for t, trace in enumerate(rec["traces"]):
            trace["id"] = f"ep-{k}/trace-{t}"
    elif fmt == "slime_rollout":
        rec["index"] = k
    elif fmt == "nemo_gym" and "_ng_rollout_index" in rec:
        rec["_ng_rollout_index"] = k
    elif fmt == "prime_rl_tokens":
        rec["export_sequence_idx"] = k
    return rec


# ------------------------------------------------------------------------------------------------ units
FILE = "file"  # the key of a problem about the whole file: it accounts for every unit
NO_VALUE = object()  # a unit that is no JSON value (a truncated or garbage line)


@dataclass
class Unit:
    """One record of a generated file: where the loader names it, what was written, its template (if valid)."""

    key: object
    value: object = None
    template: int | None = None  # the template index it is an unchanged copy of (its values must load)
    group: object = None  # a record holding several units (a ROLL line, an ART group): its own key


@dataclass
class Fuzzed:
    path: Path
    units: list[Unit]
    group_keys: set = field(default_factory=set)


@st.composite
def records(draw, fmt: str, count: int | None = None) -> list[tuple[object, int | None]]:
    """(record, template index if valid) for one file."""
    pool, usable = templates(fmt), sorted(reference(fmt))
    out = []
    for k in range(count or draw(st.integers(1, UNITS))):
        t = draw(st.sampled_from(usable))
        rec = retag(fmt, pool[t], k)
        if draw(st.integers(0, 2)) == 0:
            out.append((rec, t))
            continue
        out.append((draw(corrupted(rec)), None))
    return out


GENERATED: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def report_generated():
    yield
    print("\nfuzzed records per reader: " + ", ".join(f"{k} {v:,}" for k, v in sorted(GENERATED.items())))
    if WORK is not None:
        shutil.rmtree(WORK, ignore_errors=True)


def _dump(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def jsonl(draw, fmt: str, tmp: Path) -> Fuzzed:
    """A JSONL file of template records, corrupted ones, truncated lines, garbage and blank lines."""
    lines, units = [], []
    recs = draw(records(fmt))
    if len(recs) == 1 and _dump(recs[0][0]).startswith(b"["):  # a file of one line `[...]` is a JSON array
        recs += draw(records(fmt, 1))
    for rec, t in recs:
        if draw(st.integers(0, 6)) == 0:
            lines.append(b"")
        kind = draw(st.sampled_from(("record",) * 8 + ("truncated", "garbage")))
        data = _dump(rec)
        if kind == "truncated" and t is None and len(data) > 1:
            data, rec = data[: draw(st.integers(1, len(data) - 1))], NO_VALUE
        elif kind == "garbage":
            raw = draw(GARBAGE_BYTES).replace(b"\n", b" ").replace(b"\r", b" ")
            # garbage, not a BOM alone or a compressed file's magic (a whole file refused on purpose)
            usable = raw.replace(BOM, b"").strip() and not parses(raw) and not raw.startswith(tuple(COMPRESSED))
            data, rec, t = (raw if usable else b"\xff" + raw), NO_VALUE, None
        lines.append(data)
        units.append(Unit(len(lines), rec, t))
    path = tmp / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return Fuzzed(path, units)


@st.composite
def roll_file(draw, tmp: Path) -> Fuzzed:
    """ROLL's dump: each line one step's columns; rows are the units, a line-wide problem names them all."""
    lines, units, groups = [], [], set()
    for n in range(1, draw(st.integers(1, 3)) + 1):
        rows = draw(records("roll_rollout", draw(st.integers(1, 6))))
        cols = {k: [r.get(k) if isinstance(r, dict) else r for r, _ in rows] for k in templates("roll_rollout")[0]}
        whole = draw(st.integers(0, 5)) == 0
        if whole:  # a column-level corruption: a length, a type, a missing column
            cols = draw(corrupted(cols))
        broken = [not isinstance(r, dict) for r, _ in rows]
        lines.append(_dump(cols))
        groups.add((n, None))
        units += [
            Unit((n, j), r, None if whole or bad else t, (n, None))
            for j, ((r, t), bad) in enumerate(zip(rows, broken, strict=True))
        ]
    assume(len(lines) > 1 or not lines[0].startswith(b"["))  # a file of one line `[...]` is a JSON array
    path = tmp / "rollout_dump_data.step_4.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return Fuzzed(path, units, groups)


TRL_REWARDS = ("accuracy", "fmt")
PARQUET_TEXT = NASTY_VALUES.filter(lambda v: isinstance(v, str) and not re.search("[\ud800-\udfff]", v))
TRL_CELLS = {
    "step": st.one_of(st.none(), st.sampled_from((-1, 0, 2**40, 12))),
    "prompt": st.one_of(st.none(), PARQUET_TEXT),
    "completion": st.one_of(st.none(), PARQUET_TEXT),
    "accuracy": st.one_of(st.none(), st.floats(), st.sampled_from((math.nan, math.inf, 1e39, -0.0))),
    "fmt": st.one_of(st.none(), st.floats(), st.sampled_from((math.nan, -math.inf, 5e-324))),
    "advantage": st.one_of(st.none(), st.floats(), st.sampled_from((math.nan, math.inf, 1e39))),
}
TRL_TYPES = {"step": pa.int64(), "prompt": pa.string(), "completion": pa.string(), "advantage": pa.float64()}


@st.composite
def trl_file(draw, tmp: Path) -> Fuzzed:
    """A TRL completions Parquet: template rows, rows with one cell of its column's type changed, damaged bytes."""
    units, rows = [], []
    for i in range(draw(st.integers(1, UNITS))):
        t = draw(st.integers(0, len(templates("trl_completions")) - 1))
        row = dict(templates("trl_completions")[t])
        if draw(st.integers(0, 2)):
            col = draw(st.sampled_from(sorted(TRL_CELLS)))
            value = draw(TRL_CELLS[col])
            if value != row[col] or (isinstance(value, float) and math.isnan(value)):
                row[col], t = value, None
        rows.append(row)
        units.append(Unit(i, row, t))
    types = {c: TRL_TYPES.get(c, pa.float64()) for c in rows[0]}
    if draw(st.integers(0, 5)) == 0:  # a column of another type: every row's value as text
        col = draw(st.sampled_from(sorted(types)))
        types[col] = pa.string()
        for u in units:
            u.value[col] = None if u.value[col] is None else str(u.value[col])
            u.template = u.template if col in ("prompt", "completion") else None
    schema = pa.schema(list(types.items()))
    path = tmp / "completions_00012.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=draw(st.integers(1, 4)))
    return Fuzzed(path, units)


SLIME_VALUES = st.one_of(
    NASTY_VALUES,
    st.sampled_from((torch.tensor([1, 2, 3]), torch.tensor([0.5], dtype=torch.float16), torch.tensor(7))),
    st.sampled_from((torch.tensor([-1]), torch.tensor([2**40]), torch.tensor([math.nan]), torch.zeros(0))),
)


@st.composite
def slime_file(draw, tmp: Path) -> Fuzzed:
    """A slime ``.pt`` dump: template samples, corrupted ones (plain values and tensors), a bad rollout id."""
    units, samples = [], []
    for b in range(draw(st.integers(1, UNITS))):
        t = draw(st.sampled_from(sorted(reference("slime_rollout"))))
        s = retag("slime_rollout", templates("slime_rollout")[t], b)
        if draw(st.integers(0, 2)):
            s, t = draw(corrupted(s, SLIME_VALUES)), None
        samples.append(s)
        units.append(Unit(b, s, t))
    rollout_id = draw(st.one_of(st.just(3), st.sampled_from((None, -1, "3", 2**70, 1.5))))
    path = tmp / "3.pt"
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)
    return Fuzzed(path, units)


ART_VALUES = st.one_of(NASTY_VALUES, st.sampled_from(("user", "assistant", "tool", "system", "length", "stop")))


@st.composite
def art_file(draw, tmp: Path) -> Fuzzed:
    """An ART step log (a YAML list of trajectory groups): trajectories corrupted one field each, a group
    corrupted (a problem at ``[g].`` names all its trajectories), broken YAML (a problem for the whole file)."""
    units, groups, doc = [], set(), []
    for g in range(draw(st.integers(1, 3))):
        base = templates("art_yaml")[draw(st.integers(0, len(templates("art_yaml")) - 1))]
        group = copy.deepcopy(base)
        trajs = []
        for i in range(draw(st.integers(1, 4))):
            t = draw(st.integers(0, len(base["trajectories"]) - 1))
            rec = copy.deepcopy(base["trajectories"][t])
            valid = True
            if draw(st.integers(0, 2)):
                rec, valid = draw(corrupted(rec, ART_VALUES)), False
            trajs.append(rec)
            units.append(Unit((g, i), rec, (id(base), t) if valid else None, (g, None)))
        group["trajectories"] = trajs
        if draw(st.integers(0, 5)) == 0:
            group = draw(corrupted({k: v for k, v in group.items() if k != "trajectories"}))
            if isinstance(group, dict):
                group["trajectories"] = trajs
            for u in units:
                u.template = None if u.group == (g, None) else u.template
        doc.append(group)
        groups.add((g, None))
    raw = yaml.safe_dump(doc, allow_unicode=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 7)) == 0:
        at = draw(st.integers(0, len(raw) - 1))
        junk = draw(st.sampled_from((b"\t: [", b"&a *b", b"\xff", b"- !!python/object:os.system x")))
        raw = raw[:at] + junk + raw[at:]
        for u in units:
            u.template = None  # the whole file may now fail to parse, or parse differently
    path = tmp / "0003.yaml"
    path.write_bytes(raw)
    return Fuzzed(path, units, groups)


# ------------------------------------------------------------------------------------------------ locations
ITEM = re.compile(r"^(?:row|samples)?\[(\d+)\](?:$|\.(?:row\[(\d+)\]|trajectories\[(\d+)\](?:$|\.))?)")


def locate(fmt: str, line: int | None, field_: str | None) -> object:
    """The unit key of a loaded trajectory's (line, prefix) or a problem's (line, field); FILE for neither."""
    m = ITEM.match(field_ or "")
    if fmt == "roll_rollout":
        row = re.match(r"^row\[(\d+)\](?:$|\.)", field_ or "")
        return FILE if line is None else (line, int(row.group(1)) if row else None)
    if fmt in JSONL_READERS:  # a JSONL file's line, or a JSON array's item
        return line if line is not None else int(m.group(1)) if m else FILE
    if m is None:  # a YAML file that does not parse names its line, and no record
        return FILE
    if fmt == "art_yaml":
        return (int(m.group(1)), int(m.group(3)) if m.group(3) else None)
    return int(m.group(1))


# Record-scope problems about a record that still loads (with what it says about it).
KEPT = {
    "areal_rollout": ("re-tokenized to",),
    "slime_rollout": ("slime zeroes this sample's loss mask", "no group_index; grouped by prompt token ids"),
    "verifiers_traces": ("no group.id; grouped by task", "branches loaded as"),
    "skyrl_eval": ("is the outcome reward `score` (placement lost)",),
    "kgr1_eval": (),
    "roll_rollout": (),
    "trl_completions": (),
    "art_yaml": (),
    "nemo_gym": (
        "this rollout has 0 action tokens",
        "the model server returned no token ids",
        "(aviary collapse_old_env_states)",
        "rendered as the placeholder",
    ),
    "prime_rl_tokens": (),
}
# Problems that skip part of a record while the rest may load (a prime-rl episode's untrained trace).
PARTIAL = {"verifiers_traces": ("prime-rl neither trains this trace nor counts it in its group",)}
# Record-scope problems about the file that skip no record (a slime dump's rollout id, its reward dicts).
FILE_NOTES = {"slime_rollout": ("rollout_id",), "nemo_gym": ("mask_sample",)}
DUPLICATE = "duplicate trajectory id"
REST_NOT_READ = "the rest of the file is not read"  # a read stopped part-way: what came before it loaded


def signature(traj) -> tuple:
    """What a valid record must load as: per segment its role and token ids, the log-probs, the rewards."""

    def floats(x):
        return None if x is None else np.asarray(x, dtype=np.float64).tolist()

    segs = tuple(
        (s.role, np.asarray(s.token_ids).tolist(), floats(getattr(s, "log_probs", None))) for s in traj.segments
    )
    prompt = None if traj.prompt_token_ids is None else np.asarray(traj.prompt_token_ids).tolist()
    return segs, prompt, dict(traj.global_rewards), repr(traj.turn_rewards), bool(traj.metadata.get("truncated"))


@contextmanager
def where_loaded():
    """{id(trajectory): (line, prefix)} of every trajectory the loader accepted, as it accepted them."""
    seen: dict[int, tuple] = {}
    accept = loader._accept

    def spy(chunk, tok_name, ctx, seen_ids, out, texts, lines):
        k = len(out)
        accept(chunk, tok_name, ctx, seen_ids, out, texts, lines)
        for traj, where in zip(out[k:], lines[k:], strict=True):
            seen[id(traj)] = (traj, where)

    with mock.patch.object(loader, "_accept", spy):
        yield seen


def load(path: Path, fmt: str, **kw):
    with time_limit(LIMIT_S), where_loaded() as seen:
        res = load_run(path, fmt=fmt, **kw)
    where = {}
    for traj in res.run.trajectories:
        assert id(traj) in seen, f"{traj.id}: loaded but never accepted"
        where[id(traj)] = seen[id(traj)][1]
    return res, where


@cache
def reference(fmt: str) -> dict[object, tuple]:
    """Template key -> the signature its trajectory loads with, from a file of the mimic's records."""
    tmp = _work(fmt + "-reference")
    pool = templates(fmt)
    if fmt == "art_yaml":
        path = tmp / "0003.yaml"
        path.write_text(yaml.safe_dump(list(pool)))
        keys = {(g, i): (id(pool[g]), i) for g, grp in enumerate(pool) for i in range(len(grp["trajectories"]))}
    elif fmt == "trl_completions":
        path = tmp / "completions_00012.parquet"
        pq.write_table(pa.Table.from_pylist(list(pool)), path)
        keys = {i: i for i in range(len(pool))}
    elif fmt == "slime_rollout":
        path = tmp / "3.pt"
        torch.save({"rollout_id": 3, "samples": [retag(fmt, s, b) for b, s in enumerate(pool)]}, path)
        keys = {i: i for i in range(len(pool))}
    elif fmt == "roll_rollout":
        path = tmp / "rollout_dump_data.step_4.jsonl"
        path.write_text(json.dumps({k: [r[k] for r in pool] for k in pool[0]}) + "\n")
        keys = {(1, j): j for j in range(len(pool))}
    else:
        path = tmp / "ref.jsonl"
        path.write_text("".join(json.dumps(retag(fmt, r, k)) + "\n" for k, r in enumerate(pool)))
        keys = {k + 1: k for k in range(len(pool))}
    res, where = load(path, fmt)
    out = {}
    for traj in res.run.trajectories:
        key = locate(fmt, *where[id(traj)])
        out.setdefault(keys[key], []).append(signature(traj))
    assert out, f"{fmt}: none of the mimic's records load: {res.problems}"
    return out  # the mimic's records that load (the others, e.g. a trace with ok false, are refused on purpose)


# ------------------------------------------------------------------------------------------------ checks
def check_accounting(fmt: str, f: Fuzzed, res, where: dict) -> None:
    """Every unit loaded or named by exactly one problem at its own key; valid units load unchanged."""
    loaded: dict[object, list] = {}
    for traj in res.run.trajectories:
        loaded.setdefault(locate(fmt, *where[id(traj)]), []).append(traj)
    keys = {u.key for u in f.units}
    assert set(loaded) <= keys, f"loaded from no record: {set(loaded) - keys}"
    record = [p for p in res.problems if p.scope == "record" and MISSING_FIELD not in p.reason]
    unforeseen = [str(p) for p in record if p.reason.startswith("malformed record")]
    assert not unforeseen, f"a check is missing; only the readers' safety net caught: {unforeseen}"
    at: dict[object, list] = {}
    for p in record:
        key = locate(fmt, p.line, p.field)
        if key == FILE and (p.field or "") in FILE_NOTES.get(fmt, ()):
            continue
        at.setdefault(key, []).append(p)
    unknown = {k: [str(p) for p in v] for k, v in at.items() if k not in keys | f.group_keys | {FILE}}
    assert not unknown, f"problems at no record: {unknown}"
    kept, partial = KEPT[fmt], PARTIAL.get(fmt, ())
    for u in f.units:
        trajs = loaded.get(u.key, [])
        named = [p for p in at.get(u.key, []) if not any(k in p.reason for k in kept + partial)]
        parts = [p for p in at.get(u.key, []) if any(k in p.reason for k in partial)]
        # a problem with the whole group or file; one that stops the read (a YAML error: "the rest of the file is
        # not read") covers only the records after it, those with no problem of their own
        rest = [p for p in at.get(FILE, []) if REST_NOT_READ in p.reason]
        covering = at.get(u.group, []) + [p for p in at.get(FILE, []) if p not in rest]
        if not trajs and not named and not covering:
            covering = rest
        if trajs:
            assert not named and not covering, f"{u.key}: loaded and reported: {[str(p) for p in named + covering]}"
        else:
            assert len(named) + len(covering) == 1 or (parts and not named and not covering), (
                f"{u.key} ({str(u.value)[:120]}): {len(named) + len(covering)} problems for a record not loaded: "
                f"{[str(p) for p in named + covering]}"
            )
        if u.template is not None:
            if not trajs:  # only an earlier record of its id, or damage elsewhere in its group, may stop it
                damaged = u.group is not None and any(v.template is None for v in f.units if v.group == u.group)
                assert (named and DUPLICATE in named[0].reason) or (covering and damaged), (
                    f"valid record {u.key} was rejected: {[str(p) for p in named + covering]}"
                )
                continue
            want = reference(fmt)[u.template]
            assert [signature(t) for t in trajs] == want, f"valid record {u.key} loaded other values"
    for g in f.group_keys | {FILE}:  # a problem with a group or the file names it once
        assert len(at.get(g, [])) <= 1, [str(p) for p in at[g]]


FILE_END = ("mask_sample",)  # problems with the whole file reported once it is read (NeMo Gym's masked rollouts)


def order(fmt: str, p) -> tuple:
    """Where a problem comes in a strict load: its record's place; a problem with the whole file first, or last
    when it is said once the file is read (``FILE_END``, the run's missing-field problems) or stops the read part-way
    (``REST_NOT_READ``: after the records read before it)."""
    key = locate(fmt, p.line, p.field)
    end = p.field in FILE_END or MISSING_FIELD in p.reason or REST_NOT_READ in p.reason
    flat = key if isinstance(key, tuple) else ((math.inf,) if end else (-1,)) if key == FILE else (key,)
    return tuple(-1 if x is None else x for x in flat)


def strict_checks(fmt: str, path: Path, res) -> None:
    """``strict=True`` raises the first record problem in file order, naming file and location, or loads the same."""
    record = [p for p in res.problems if p.scope == "record"]
    if not record:
        strict, _ = load(path, fmt, strict=True)
        assert [t.id for t in strict.run.trajectories] == [t.id for t in res.run.trajectories]
        return
    orders = [order(fmt, p) for p in record]
    first = record[orders.index(min(orders))]
    with pytest.raises(ValueError) as err:
        load(path, fmt, strict=True)
    assert str(err.value) == str(first)
    where = f"{path}:{first.line}: " if first.line is not None else f"{path}: "
    assert str(err.value).startswith(where + (f"{first.field}: " if first.field else ""))


def check_file(fmt: str, f: Fuzzed, detect: bool = True) -> None:
    GENERATED[fmt] += len(f.units)
    res, where = load(f.path, fmt)
    check_accounting(fmt, f, res, where)
    if len(res.run):
        assert res.run.to_batch().batch_size == len(res.run)
    strict_checks(fmt, f.path, res)
    if detect:  # detection names the format or fails clearly; with a valid first record it names the format
        try:
            found = detect_format(f.path)
        except ValueError as e:
            assert str(f.path) in str(e)
            found = None
        head = f.units[0]  # the first record: the first unit, or every unit of its line (ROLL) or group (ART)
        first = [u for u in f.units if u is head or (head.group is not None and u.group == head.group)]
        if head.key in (1, (1, 0), 0, (0, 0)) and all(u.template is not None for u in first):
            assert found == fmt, f"{f.path} detected as {found}"


# ------------------------------------------------------------------------------------------------ tests
JSONL_READERS = ("areal_rollout", "skyrl_eval", "kgr1_eval", "verifiers_traces", "nemo_gym", "prime_rl_tokens")


@pytest.mark.parametrize("fmt", JSONL_READERS)
@fuzz()
@given(data=st.data())
def test_jsonl_readers_account_for_every_record(tmp_path_factory, fmt, data):
    tmp = tmp_path_factory.mktemp(fmt)
    f = data.draw(jsonl(fmt, tmp), label="file")
    check_file(fmt, f)
    items = [u for u in f.units if u.value is not NO_VALUE]  # the same records as one JSON array
    if items:
        array = Fuzzed(tmp / "fuzz.json", [Unit(i, u.value, u.template) for i, u in enumerate(items)])
        array.path.write_text(json.dumps([u.value for u in items]))  # ASCII: a lone surrogate as its escape
        check_file(fmt, array, detect=False)


@fuzz()
@given(data=st.data())
def test_roll_rows_are_each_accounted_for(tmp_path_factory, data):
    check_file("roll_rollout", data.draw(roll_file(tmp_path_factory.mktemp("roll")), label="file"))


@fuzz()
@given(data=st.data())
def test_trl_rows_are_each_accounted_for(tmp_path_factory, data):
    f = data.draw(trl_file(tmp_path_factory.mktemp("trl")), label="file")
    if data.draw(st.integers(0, 5), label="damaged") == 0:
        damage(f.path, data)
        GENERATED["trl_completions"] += len(f.units)
        try:
            res, where = load(f.path, "trl_completions")
        except ValueError as e:  # a file that cannot be read at all is one clear error naming it
            assert str(f.path) in str(e)
            return
        rows = Counter(locate("trl_completions", *where[id(t)]) for t in res.run.trajectories)
        assert set(rows) <= set(range(len(f.units))) and set(rows.values()) <= {1}
        if len(res.run):
            assert res.run.to_batch().batch_size == len(res.run)
        return
    check_file("trl_completions", f)


@fuzz()
@given(data=st.data())
def test_slime_samples_are_each_accounted_for(tmp_path_factory, data):
    check_file("slime_rollout", data.draw(slime_file(tmp_path_factory.mktemp("slime")), label="file"))


@fuzz()
@given(data=st.data())
def test_art_trajectories_are_each_accounted_for(tmp_path_factory, data):
    check_file("art_yaml", data.draw(art_file(tmp_path_factory.mktemp("art")), label="file"))


# ------------------------------------------------------------------------------------------------ found by fuzzing
def test_kgr1_eval_record_missing_a_key_is_named(tmp_path):
    """A record lacking one of the evaluator's keys is a problem naming that key (was a KeyError caught only by the
    readers' safety net as a malformed record)."""
    first, second = (retag("kgr1_eval", r, k) for k, r in enumerate(templates("kgr1_eval")[:2]))
    del second["metrics"]
    path = tmp_path / "test_detailed_results.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    res = load_run(path, fmt="kgr1_eval")
    assert [t.id for t in res.run.trajectories] == [first["uid"]]
    record = [p for p in res.problems if p.scope == "record"]
    assert [(p.line, p.field) for p in record] == [(2, "metrics")]
    assert record[0].reason == (
        "missing: KG-R1's evaluator (_save_batch_details) writes it in every record; record skipped"
    )


def test_strict_raises_a_problem_reported_inside_a_conversion_as_it_is(tmp_path):
    """A reader that reports a problem while converting a record (a prime-rl trace with ok false is skipped, the
    episode's other traces load): strict=True raises that problem's own message, not a malformed-record wrapper."""
    episode = retag("verifiers_traces", templates("verifiers_traces")[0], 0)
    episode["traces"][0]["ok"] = False
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(episode) + "\n")
    (problem,) = [p for p in load_run(path, fmt="verifiers_traces").problems if p.scope == "record"]
    assert (problem.line, problem.field) == (1, "traces[0]")
    with pytest.raises(ValueError) as err:
        load_run(path, fmt="verifiers_traces", strict=True)
    assert str(err.value) == str(problem)
    assert str(err.value).startswith(f"{path}:1: traces[0]: ok is false: prime-rl neither trains this trace")


def test_art_group_with_a_lone_surrogate_is_a_problem(tmp_path):
    """YAML's ``\\u`` escapes can write a lone surrogate, which no tokenizer takes: the group holding one is a
    problem at ``[g]`` and the other groups load (was the whole file refused with a tokenizer's TypeError)."""
    good, bad = copy.deepcopy(templates("art_yaml")[0]), copy.deepcopy(templates("art_yaml")[1])
    bad["trajectories"][0]["messages_and_choices"][-1]["message"]["content"] = "x\udfff"
    path = tmp_path / "0003.yaml"
    path.write_text(yaml.safe_dump([good, bad]))
    res = load_run(path, fmt="art_yaml")
    assert len(res.run) == len(good["trajectories"])
    record = [p for p in res.problems if p.scope == "record"]
    assert [(p.field, p.reason) for p in record] == [
        ("[1]", "text with a lone UTF-16 surrogate (a \\udXXX escape without its pair)")
    ]


SHAPES = [  # (reader, path into the template record, value, the field the problem names)
    ("verifiers_traces", ("traces",), 5, "traces"),
    ("verifiers_traces", ("traces", 0, "agent"), "x", "traces[0].agent"),
    ("verifiers_traces", ("traces", 0, "nodes"), 5, "traces[0].nodes"),
    ("verifiers_traces", ("traces", 0, "calls"), 1.5, "traces[0].calls"),
    ("verifiers_traces", ("traces", 0, "metrics"), [[1, 2], [3]], "traces[0].metrics"),
    ("verifiers_traces", ("traces", 0, "nodes", 0, "message", "role"), {}, "nodes[0].message.role"),
    ("verifiers_traces", ("traces", 0, "nodes", 2, "parent"), [1], "nodes[2].parent"),
    ("nemo_gym", ("response", "output", 0, 0, "type"), [[1, 2], [3]], "response.output[0][0].type"),
    ("nemo_gym", ("responses_create_params", "input", 1, "content", 1, "type"), {}, "content[1].type"),
]


@pytest.mark.parametrize(("fmt", "where", "value", "field_"), SHAPES)
def test_a_value_of_the_wrong_shape_is_named_where_it_is(tmp_path, fmt, where, value, field_):
    """Found by fuzzing: values of the wrong shape (a list as a role, an item type or a parent index, a number as
    the traces list) are a problem naming their field, not a malformed record caught by the safety net."""
    rec = next(retag(fmt, r, 0) for r in templates(fmt) if _has(r, where))
    parent = rec
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    path = tmp_path / "rollouts.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    res = load_run(path, fmt=fmt)
    (problem,) = [p for p in res.problems if p.scope == "record"]
    assert problem.line == 1 and problem.field.endswith(field_) and not problem.reason.startswith("malformed")
    assert len(res.run) == 0


def _has(rec: object, where: tuple) -> bool:
    for key in where:
        try:
            rec = rec[key]
        except (KeyError, IndexError, TypeError):
            return False
    return True


def test_prime_rl_episodes_in_a_json_array_are_named_by_item(tmp_path):
    """Problems reported while converting an episode of a JSON array name its item (were ``traces[0]`` with no item,
    which names no record), and episodes without an id get the array default ``<stem>[i]`` (was ``<stem>:None``)."""
    skipped, kept = (retag("verifiers_traces", templates("verifiers_traces")[0], k) for k in range(2))
    skipped["traces"][0]["ok"] = False
    del kept["id"], kept["traces"][0]["id"]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps([skipped, kept]))
    res = load_run(path, fmt="verifiers_traces")
    assert [(p.line, p.field) for p in res.problems if p.scope == "record"] == [(None, "[0].traces[0]")]
    assert [t.id for t in res.run.trajectories] == ["traces[1]/traces[0]"]


@pytest.mark.parametrize("text", ["²", "١٢", "1" * 5000, " 7x"])
def test_a_step_of_digits_int_cannot_read_is_a_problem(text):
    """Found by fuzzing (a ROLL row's ``global_step`` "²"): a string ``str.isdigit`` accepts but ``int`` refuses or
    should not read (superscripts, other scripts' digits, more than 4,300 digits) is a step problem, not a
    malformed record."""
    with pytest.raises(RecordError) as err:
        as_step(text, "global_step")
    assert err.value.field == "global_step" and err.value.reason.startswith("expected a training step")
    assert as_step(" 12 ", "global_step") == 12


def test_slime_dict_rewards_are_a_note_strict_loads(tmp_path):
    """Found by fuzzing: the note that a dump's rewards are dicts skips nothing, so it is run-scope: strict=True
    loads the file (it raised it, mid-file, as if a record were bad)."""
    samples = [retag("slime_rollout", s, b) for b, s in enumerate(templates("slime_rollout")[:2])]
    samples[1]["reward"] = {"acc": 1.0, "fmt": 0.5}
    path = tmp_path / "3.pt"
    torch.save({"rollout_id": 3, "samples": samples}, path)
    res = load_run(path, fmt="slime_rollout")
    assert [(p.field, p.scope) for p in res.problems] == [("reward", "run")]
    strict = load_run(path, fmt="slime_rollout", strict=True)
    assert [t.global_rewards for t in strict.run.trajectories][1] == {"acc": 1.0, "fmt": 0.5}
