"""Red-team inputs for the trainer readers (``scripts/redteam.py``), built from the writer mimics in
``tests/writers/``: one clean seed file per reader, then one invalid field (``field``), costly structures
(``structure``: alias bombs, trace graphs, runaway text, pickles and expanded tensors) and values that a reader
could take without a word (``quiet``: booleans as numbers, off types, overflowing floats, string flags, a symlink
out of a run folder). Each input of a reader is loaded twice, its format detected and forced.
"""

from __future__ import annotations

import copy
import io
import json
import random
import shutil
import sys
import zipfile
from pathlib import Path

from redteam_case import Case, twice

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the writer mimics (``writers``)

VOCAB = 151_665
HANG_S = 60.0  # the trainer readers' inputs count as a hang after a minute
MEM_GB = 4.0  # and load under a 4 GiB address-space limit
PROMPT = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
IM_END = 151_645

# ------------------------------------------------------------------------------------------------------ seeds


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _nemo_with_ids(tok, tmp: Path) -> Path:
    """The hermes mimic's rollouts as a vLLM model server returns them: one assistant message each, with its
    prompt and generation token ids and log-probs."""
    from writers import nemo_gym

    path = nemo_gym.write_hermes(tmp).path
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    question = records[0]["responses_create_params"]["input"][0]["content"]
    prompt_ids = tok.encode(nemo_gym._user_prompt(question), add_special_tokens=False)
    for k, rec in enumerate(records):
        text = ("The answer is 42.", "The answer is 41.")[k]
        gen = tok.encode(text, add_special_tokens=False) + [IM_END]
        ids = {"prompt_token_ids": prompt_ids, "generation_token_ids": gen, "generation_log_probs": [-0.5] * len(gen)}
        rec["response"]["output"] = [nemo_gym._text_message(text, **ids)]
    Path(path).write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return Path(path)


def trainer_seeds(work: Path) -> dict[str, Path]:
    """reader -> the clean file its writer mimic writes (small: two prompts, two or four rollouts)."""
    from writers import areal, art, kgr1, prime_rl, prime_rl_tokens, roll, skyrl, slime, trl

    from engine.io.text.tokenize import get_tokenizer

    tok = get_tokenizer(None)
    top = work / "trainer_seeds"
    top.mkdir(parents=True, exist_ok=True)
    acc = {"accuracy": lambda p, c: 1.0 if c.strip() in ("4", "hi") else 0.0}
    seeds = {
        "trl_completions": trl.write_completions(
            str(top / "trl"), 12, [_user("2+2?"), _user("Say hi.")], [["4", "5"], ["hi", "yo"]], acc
        ).path
    }
    R, T = prime_rl.Rollout, prime_rl.Turn
    groups = {
        "g": [
            R("sys", "2+2?", [T("<tool_call>add(2,2)</tool_call>", tool="4"), T("4.")], {"correct": (1.0, 1.0)}),
            R("sys", "2+2?", [T("5")], {"correct": (0.0, 1.0)}),
        ]
    }
    seeds["verifiers_traces"] = prime_rl.write_step(str(top / "prime"), 7, groups)[0]
    S = prime_rl_tokens.Sample
    samples = [
        S("math", [(PROMPT, False), ("4<|im_end|>", True)], 0.5, 1),
        S("math", [(PROMPT, False), ("5", True)], -0.5, 2),
    ]
    seeds["prime_rl_tokens"] = prime_rl_tokens.write_run(top / "ptok", {3: {0: [samples]}}) / "step_3" / "rank_0.jsonl"
    Sp = slime.Spec
    specs = [[Sp(PROMPT, [("4<|im_end|>", True)], 1.0), Sp(PROMPT, [("5<|im_end|>", True)], 0.0)]]
    seeds["slime_rollout"] = slime.save_debug_rollout_data(str(top / "slime" / "{rollout_id}.pt"), specs, 3)[0]
    seeds["skyrl_eval"] = skyrl.write_eval_dump(tok, top / "skyrl", skyrl.sample_rollouts(tok)) / "searchR1_nq.jsonl"
    folder, _ = areal.write_rollouts(tok, top / "areal")
    seeds["areal_rollout"] = top / "areal.jsonl"  # both tasks in one file: four records
    seeds["areal_rollout"].write_text("".join(f.read_text() for f in sorted(folder.glob("*.jsonl"))))
    seeds["roll_rollout"] = roll.write_step(tok, top / "roll")[0]
    seeds["art_yaml"] = art.write_log(top / "art")[0]
    (top / "kgr1").mkdir(exist_ok=True)
    a = kgr1.rollout(tok, "Who wrote Dracula?", ["<answer>Bram Stoker</answer><|im_end|>"], [])
    b = kgr1.rollout(tok, "Who wrote Dracula?", ["<answer>Shelley</answer><|im_end|>"], [])
    seeds["kgr1_eval"] = kgr1.write_eval_results(tok, top / "kgr1", [[a, b, a, b]])
    (top / "nemo").mkdir(exist_ok=True)
    seeds["nemo_gym"] = _nemo_with_ids(tok, top / "nemo")
    return {reader: Path(p) for reader, p in seeds.items()}


# --------------------------------------------------------------------------------------------- reading, writing


def read_records(path: Path):
    """The seed's records as Python values: JSONL lines, the YAML document, the .pt dict, the Parquet frame."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix == ".yaml":
        import yaml

        return yaml.safe_load(path.read_text())
    if path.suffix == ".pt":
        import torch

        return torch.load(path, weights_only=False)
    import pandas as pd

    return pd.read_parquet(path)


def write_records(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    elif path.suffix == ".yaml":
        import yaml

        path.write_text(yaml.dump(records))
    elif path.suffix == ".pt":
        import torch

        torch.save(records, path)
    else:
        records.to_parquet(path)
    return path


def _case(family: str, reader: str, what: str, path: Path, seeds: dict, **kw) -> list[Case]:
    kw = {"timeout": HANG_S, "mem_gb": MEM_GB, **kw}
    return twice(Case(family, f"{reader}: {what}", str(path), reader=reader, seed=str(seeds[reader]), **kw))


# ------------------------------------------------------------------------------------------------------ field

BAD_IDS = (-1, VOCAB + 10, 2**63, 2**70, 1.5, "7", None, [1], {"a": 1})
BAD_NUMS = ("x", [1.0], {"a": 1}, 10**4000, float("inf"))
BAD_MASK = (7, -1, 0.5, "1", None)
FIELDS = {  # reader -> {key: kind}: the fields whose value the reader trains on or shows as a number
    "verifiers_traces": {
        "token_ids": "ids",
        "logprobs": "nums",
        "advantages": "nums",
        "mask": "mask",
        "reward": "nums",
    },
    "prime_rl_tokens": {"token_ids": "ids", "advantages": "nums", "inference_logprobs": "nums", "loss_mask": "mask"},
    "nemo_gym": {
        "generation_token_ids": "ids",
        "prompt_token_ids": "ids",
        "generation_log_probs": "nums",
        "reward": "nums",
    },
    "slime_rollout": {"tokens": "ids", "rollout_log_probs": "nums", "reward": "nums", "loss_mask": "mask"},
    "skyrl_eval": {"score": "nums"},
    "areal_rollout": {"reward": "nums"},
    "roll_rollout": {"scores": "nums"},
    "art_yaml": {"reward": "nums"},
    "kgr1_eval": {"score": "nums"},
}
BAD = {"ids": BAD_IDS, "nums": BAD_NUMS, "mask": BAD_MASK}


def _slots(obj, keys: dict) -> list[tuple[object, object, str]]:
    """(container, key or index, kind) of every value under one of ``keys`` (each element of a list value)."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, list):
                out += [(v, i, keys[k]) for i in range(len(v))]
            elif k in keys:
                out.append((obj, k, keys[k]))
            else:
                out += _slots(v, keys)
    elif isinstance(obj, list):
        for v in obj:
            out += _slots(v, keys)
    return out


def trainer_field_cases(work: Path, seeds: dict[str, Path], rng: random.Random, n: int) -> list[Case]:
    """``n`` inputs (each loaded twice): one invalid value in one trained-on field of a trainer seed, the readers in
    turn."""
    out: list[Case] = []
    for i in range(n):
        reader = sorted(seeds)[i % len(seeds)]  # every reader, in turn
        src = seeds[reader]
        dst = work / "tfield" / f"{i:05d}" / src.name
        if reader == "trl_completions":
            df = read_records(src)
            col = rng.choice(("advantage", "accuracy"))
            how = rng.choice(("inf", "-inf", "text column"))
            if how == "text column":
                df[col] = df[col].astype(str).where(df.index != 0, "x")
            else:
                df.loc[rng.randrange(len(df)), col] = float(how)
            out += _case("field", reader, f"{col} {how}", write_records(dst, df), seeds, must_flag=True)
            continue
        records = read_records(src)
        slots = _slots(records, FIELDS[reader])
        container, key, kind = rng.choice(slots)
        # a list where one number belongs can be a valid row (a token-level score): lists replace list elements only
        bad = rng.choice([v for v in BAD[kind] if isinstance(container, list) or not isinstance(v, list)])
        container[key] = bad
        what = f"{kind} value {bad!r:.20}"
        out += _case("field", reader, what, write_records(dst, records), seeds, must_flag=True)
    return out


# -------------------------------------------------------------------------------------------------- structure


def _laughs(levels: int = 10, fan: int = 9) -> list:
    """Billion laughs as shared Python lists: ``yaml.dump`` writes each level once, as an anchor, and ``fan``
    aliases of the level below (``fan ** levels`` leaves once expanded)."""
    level: list = ["lol"] * fan
    for _ in range(levels - 1):
        level = [level] * fan
    return level


def _art_structures(root: Path, seeds: dict, quick: bool) -> list[Case]:
    import yaml

    src = seeds["art_yaml"]
    out: list[Case] = []

    def log(name: str, change) -> Path:
        groups = read_records(src)
        change(groups)
        path = root / f"{name}.yaml"
        path.write_text(yaml.dump(groups))
        return path

    def in_logs(g):
        g[0]["trajectories"][0]["logs"] = _laughs()

    def in_content(g):
        g[0]["trajectories"][0]["messages_and_choices"][1]["content"] = _laughs()

    def in_metadata(g):
        g[0]["metadata"]["laughs"] = _laughs()

    def big_choice(g):
        traj = g[0]["trajectories"][1]
        choice = copy.deepcopy(traj["messages_and_choices"][-1])
        choice["message"]["content"] = "y" * (1 << 20)
        traj["messages_and_choices"] = traj["messages_and_choices"][:-1] + [choice] * 20_000

    bombs = [("alias bomb in a trajectory's logs", in_logs)]
    if not quick:
        bombs += [
            ("alias bomb in a message's content", in_content),
            ("alias bomb in group metadata", in_metadata),
            ("1 MB choice anchored once, referenced 20,000 times", big_choice),
        ]
    for what, change in bombs:
        out += _case("structure", "art_yaml", what, log(what.split(" in ")[-1].replace(" ", "_")[:20], change), seeds)
    if not quick:  # a million log lines: written as text (yaml.dump of them would take a minute here)
        path = log("million_logs", lambda g: g[0]["trajectories"][0].__setitem__("logs", ["PLACEHOLDER"]))
        text = path.read_text()
        at = text.index("- PLACEHOLDER\n")
        indent = text[text.rindex("\n", 0, at) + 1 : at]
        text = text[:at] + "- x\n" + (indent + "- x\n") * 999_999 + text[at + len("- PLACEHOLDER\n") :]
        path.write_text(text)
        out += _case("structure", "art_yaml", "a million logs entries", path, seeds)
    return out


def _verifiers_structures(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """Trace graphs: a chain of 10,000 context nodes, a root with 100,000 one-token leaves, a cycle."""
    first = read_records(seeds["verifiers_traces"])[0]
    nodes = first["traces"][0]["nodes"]
    context = dict(nodes[1], token_ids=[17], mask=[False], is_content=[], logprobs=[])
    sampled = next(n for n in nodes if n.get("sampled"))
    leaf = {"message": sampled["message"], "sampled": True, "token_ids": [19], "mask": [True], "logprobs": [-0.5]}
    graphs = {
        "a cycle": [dict(nodes[0], parent=len(nodes) - 1), *nodes[1:]],
        "a chain of 10,000 context nodes": [
            nodes[0],
            *(dict(context, parent=i) for i in range(10_000)),
            dict(sampled, parent=10_000),
        ],
        "a root with 100,000 one-token leaves": [nodes[0], *(dict(leaf, parent=0) for _ in range(100_000))],
    }
    out: list[Case] = []
    for k, (what, graph) in enumerate(graphs.items()):
        if quick and k:
            break
        rec = copy.deepcopy({**first, "traces": []})
        rec["traces"] = [dict(first["traces"][0], nodes=graph)]
        path = root / f"graph{k}.jsonl"
        path.write_text(json.dumps(rec, separators=(",", ":")) + "\n")  # compact: under the 16 MiB record cap
        out += _case("structure", "verifiers_traces", what, path, seeds)
    return out


def _text_structures(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """SkyRL eval and KG-R1 evaluator rows whose response is 200,000 spaces and one character, or 20,000
    unclosed ``<|im_start|>`` headers."""
    texts = {"200,000 spaces and one character": " " * 200_000 + "a"}
    if not quick:
        texts["20,000 unclosed <|im_start|> headers"] = "<|im_start|>assistant" * 20_000
    out: list[Case] = []
    for reader, key in (("skyrl_eval", "output_response"), ("kgr1_eval", "response")):
        for k, (what, text) in enumerate(texts.items()):
            rows = read_records(seeds[reader])
            rows[0][key] = text
            if reader == "skyrl_eval":
                rows[0]["score"] = 1.0
            path = write_records(root / f"{reader}{k}.jsonl", rows)
            out += _case("structure", reader, f"response of {what}", path, seeds)
    return out


def _slime_structures(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """A .pt whose pickle appends millions of empty lists to ``samples``; a 4.6 KB file whose loss_mask is one
    element expanded to 2e8 (loaded under a 512 MB load ceiling)."""
    import torch

    out: list[Case] = []
    data = torch.load(seeds["slime_rollout"], weights_only=False)
    data["samples"][0]["loss_mask"] = torch.tensor([1]).expand(int(2e8))
    expanded = root / "expanded.pt"
    torch.save(data, expanded)
    what = f"loss_mask expanded to 2e8 ({expanded.stat().st_size / 1e3:.1f} KB)"
    out += _case("structure", "slime_rollout", what, expanded, seeds, env={"CREDITLENS_MAX_LOAD_MB": "512"})
    if not quick:
        lists = root / "empty_lists.pt"
        _empty_lists_pt(lists, chunks=17_000)
        what = f"pickle appending 17,000,000 empty lists ({lists.stat().st_size >> 20} MiB)"
        out += _case("structure", "slime_rollout", what, lists, seeds)
    return out


def _empty_lists_pt(path: Path, chunks: int) -> None:
    """A torch.save archive of ``{"rollout_id": 3, "samples": [[], [], ...]}``: ``chunks`` × 1,000 empty lists
    appended in pickle opcodes (one byte each), one small file that unpickles to a billion bytes."""
    import torch

    small = io.BytesIO()
    torch.save({"rollout_id": 3, "samples": []}, small)
    pkl = bytearray(b"\x80\x02}(X\x0a\x00\x00\x00rollout_idK\x03X\x07\x00\x00\x00samples]")
    chunk = b"(" + b"]" * 1000 + b"e"  # MARK, 1,000 EMPTY_LIST, APPENDS
    for _ in range(chunks):
        pkl += chunk
    pkl += b"u."  # SETITEMS, STOP
    with zipfile.ZipFile(io.BytesIO(small.getvalue())) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, bytes(pkl) if info.filename.endswith("data.pkl") else zin.read(info))


# Structures that are valid data, only large: they must load within the time and memory limits, and loading them
# clean is right (a chain of 10,000 nodes is within the path budget; text is text, however many spaces it holds).
VALID_STRUCTURES = ("a chain of 10,000 context nodes", "response of ", "a million logs entries")


def structure_cases(work: Path, seeds: dict[str, Path], quick: bool) -> list[Case]:
    """Small files costly to walk: each must load or be refused within the time and memory limits; those over a
    budget (bombs, a graph of 100,000 branches, a cycle, a pickle of millions of lists, an expanded tensor) must be
    refused or reported."""
    root = work / "structure"
    root.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []
    for family in (_art_structures, _verifiers_structures, _text_structures, _slime_structures):
        out += family(root, seeds, quick)
    for c in out:
        c.must_flag = not any(valid in c.name for valid in VALID_STRUCTURES)
    return out


# ------------------------------------------------------------------------------------------------------ quiet


def _set_first(records, keys: tuple[str, ...], value) -> None:
    """Replace the first element (or value) under the first of ``keys`` found in ``records``."""
    for key in keys:
        slots = _slots(records, {key: ""})
        if slots:
            container, k, _ = slots[-1]  # the last: a generated token, past the prompt
            container[k] = value
            return
    raise KeyError(keys)


BOOL_FIELDS = {  # reader -> (what, keys to try in order) for JSON true/false where a number belongs
    "verifiers_traces": [
        ("a token id", ("token_ids",)),
        ("a log-prob", ("logprobs",)),
        ("an advantage", ("advantages",)),
    ],
    "prime_rl_tokens": [
        ("a token id", ("token_ids",)),
        ("a log-prob", ("inference_logprobs",)),
        ("an advantage", ("advantages",)),
    ],
    "nemo_gym": [
        ("a generation token id", ("generation_token_ids",)),
        ("a prompt token id", ("prompt_token_ids",)),
        ("a log-prob", ("generation_log_probs",)),
    ],
    "slime_rollout": [("a token id", ("tokens",)), ("a log-prob", ("rollout_log_probs",))],
}


def _bool_cases(root: Path, seeds: dict, quick: bool) -> list[Case]:
    out: list[Case] = []
    for reader, fields in BOOL_FIELDS.items():
        for k, (what, keys) in enumerate(fields[:1] if quick else fields):
            for value in (True,) if quick else (True, False):
                records = read_records(seeds[reader])
                _set_first(records, keys, value)
                path = write_records(root / f"bool_{reader}_{k}_{value}{seeds[reader].suffix}", records)
                out += _case("quiet", reader, f"{str(value).lower()} as {what}", path, seeds, must_flag=True)
    return out


def _trl_cases(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """TRL's reward column of a type no reward has; advantages past float32; ±inf rewards; non-JSON extra columns
    (binary, decimal), which must save and load back."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    src = seeds["trl_completions"]
    table = pq.read_table(src)
    n = table.num_rows
    odd = {
        "list": pa.array([[1.0]] * n),
        "struct": pa.array([{"v": 1.0}] * n),
        "binary": pa.array([b"\x01"] * n),
        "decimal": pa.array([Decimal("1.0")] * n, type=pa.decimal128(5, 2)),
    }
    out: list[Case] = []

    def write(name: str, t) -> Path:
        pq.write_table(t, root / f"trl_{name}.parquet")
        return root / f"trl_{name}.parquet"

    col = table.column_names.index("accuracy")
    for k, (kind, arr) in enumerate(odd.items()):
        if quick and k:
            break
        path = write(f"reward_{kind}", table.set_column(col, "accuracy", arr))
        out += _case("quiet", "trl_completions", f"reward column of {kind} type", path, seeds, must_flag=True)
    if quick:
        return out
    adv = table.column_names.index("advantage")
    for big in (3.5e38, 1e308):
        values = table.column("advantage").to_pylist()
        values[0] = big
        path = write(f"adv_{big:g}", table.set_column(adv, "advantage", pa.array(values, pa.float64())))
        out += _case("quiet", "trl_completions", f"advantage {big:g}", path, seeds, must_flag=True)
    for inf in (float("inf"), float("-inf")):
        values = table.column("accuracy").to_pylist()
        values[1] = inf
        path = write(f"reward_{inf}", table.set_column(col, "accuracy", pa.array(values, pa.float64())))
        out += _case("quiet", "trl_completions", f"reward cell {inf}", path, seeds, must_flag=True)
    for kind in ("binary", "decimal"):  # an extra column: metadata that must survive a save and a reload
        path = write(f"extra_{kind}", table.append_column("judge_note", odd[kind]))
        out += _case("quiet", "trl_completions", f"extra column of {kind} type (resaved)", path, seeds)
    return out


def _flag_cases(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """String or integer flags where a boolean belongs, and an ART choice whose message is the user's."""
    out: list[Case] = []
    flags = [
        ("trace", "ok", "false"),
        ("episode", "ok", "false"),
        ("agent", "trainable", "false"),
        ("agent", "trainable", 0),
    ]
    for k, (where, key, value) in enumerate(flags[:1] if quick else flags):
        records = read_records(seeds["verifiers_traces"])
        trace = records[0]["traces"][0]
        holder = {"episode": records[0], "trace": trace, "agent": trace["agent"]}[where]
        holder[key] = value
        path = write_records(root / f"flag_verifiers_{k}.jsonl", records)
        out += _case("quiet", "verifiers_traces", f"{where} {key}: {value!r}", path, seeds, must_flag=True)
    if quick:
        return out
    data = read_records(seeds["slime_rollout"])
    data["samples"][0]["remove_sample"] = "no"
    path = write_records(root / "slime_remove_no.pt", data)
    out += _case("quiet", "slime_rollout", "remove_sample: 'no'", path, seeds, must_flag=True)
    groups = read_records(seeds["art_yaml"])
    choice = next(m for m in groups[0]["trajectories"][0]["messages_and_choices"] if "finish_reason" in m)
    choice["message"]["role"] = "user"
    path = write_records(root / "art_user_choice.yaml", groups)
    out += _case("quiet", "art_yaml", "a choice with role 'user'", path, seeds, must_flag=True)
    return out


def _first_record_cases(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """The first record of a four-record file lacks a required field: the load reports it (the other three load, or
    the file is refused naming it); loading it clean, the record filled in or dropped, is a quiet change."""
    missing = {
        "kgr1_eval": ("prompt", "dataset", "uid", "score"),
        "areal_rollout": ("prompt", "completion", "reward", "task_id"),
    }
    out: list[Case] = []
    for reader, keys in missing.items():
        for key in keys[:1] if quick else keys:
            records = read_records(seeds[reader])
            del records[0][key]
            path = write_records(root / f"first_{reader}_{key}.jsonl", records)
            out += _case("quiet", reader, f"first record without {key}", path, seeds, must_flag=True)
    return out


def _non_json_cases(root: Path, seeds: dict, quick: bool) -> list[Case]:
    """Metadata JSON cannot hold (a tensor status, YAML binary and set): loaded, it must save and load back."""
    import torch

    if quick:
        return []
    data = read_records(seeds["slime_rollout"])
    data["samples"][0]["status"] = torch.tensor(1)
    out = _case("quiet", "slime_rollout", "status as a tensor", write_records(root / "slime_status.pt", data), seeds)
    text = (
        seeds["art_yaml"]
        .read_text()
        .replace(
            "- metadata:\n    step: 3\n",
            '- metadata:\n    step: 3\n    blob: !!binary "aGVsbG8="\n    tags: !!set {a: null}\n',
            1,
        )
    )
    (root / "art_binary_set.yaml").write_text(text)
    out += _case("quiet", "art_yaml", "metadata !!binary and !!set", root / "art_binary_set.yaml", seeds)
    return out


def _symlink_cases(root: Path, top: Path, good: Path, other: Path) -> list[Case]:
    """A run folder with a symlink to a file outside it (a copy of /etc/passwd, a valid run elsewhere), loaded the
    command line's way (no roots): the link must not be followed without a word."""
    outside = top / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    passwd = outside / "passwd"
    passwd.write_text(
        Path("/etc/passwd").read_text() if Path("/etc/passwd").exists() else "root:x:0:0::/root:/bin/sh\n"
    )
    shutil.copy(other, outside / "elsewhere.jsonl")
    from engine.io import load_run

    n = len(load_run(good).run.trajectories)
    out = []
    for name, target in (("passwd.jsonl", passwd), ("elsewhere.jsonl", outside / "elsewhere.jsonl")):
        folder = root / f"symlink_{name.split('.')[0]}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(good, folder / "a_good.jsonl")
        (folder / name).symlink_to(target)
        out.append(
            Case(
                "quiet",
                f"run folder with a symlink to {target.name} outside",
                str(folder),
                must_flag=True,
                expect_n=n,
                cli=True,
                timeout=HANG_S,
                mem_gb=MEM_GB,
            )
        )
    return out


def quiet_cases(work: Path, seeds: dict[str, Path], quick: bool, good: Path, other: Path) -> list[Case]:
    """Values a reader could take without a word: each must be refused or reported (or, for metadata JSON cannot
    hold, saved and loaded back unchanged)."""
    root = work / "quiet"
    root.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []
    for family in (_bool_cases, _trl_cases, _flag_cases, _first_record_cases, _non_json_cases):
        out += family(root, seeds, quick)
    return out + _symlink_cases(root, work.parent, good, other)
