"""Hostile inputs that readers used to load changed without a word: a JSON ``true`` read as the number 1 (a token
id, a log-prob, a reward, an advantage), a number beyond float32 stored as ``inf`` or ``0``, a flag written as
``"false"`` or ``0`` read by its truth value, a TRL reward column that is not numbers, and an ART Choice that is
not the assistant's. Each file is made by a trainer's writer mimic (``tests/writers/``) and then damaged; each test
names the problem word for word (file, line / item / row, field, reason) and checks that the damaged value is
nowhere in what loaded, and that everything else loaded as from the undamaged file."""

from __future__ import annotations

import base64
import decimal
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from writers import art, nemo_gym, prime_rl, slime, trl
from writers.prime_rl import Rollout, Turn
from writers.prime_rl_tokens import Sample, write_run

from engine.io import load_run
from engine.io.reading.coerce import as_component, as_float, as_float_array, as_token_ids
from engine.io.reading.problems import RecordError

BEYOND = "is beyond float32 (±3.4028235e+38): it would be stored as inf"
NOT_A_NUMBER = "(not a number here)"


def problems(res) -> list[str]:
    return [str(p) for p in res.problems]


def rows(run) -> dict[str, tuple]:
    """Every trajectory by id: its prompt ids, its segments' roles, ids and log-probs, rewards, logged advantages."""
    out = {}
    for t in run.trajectories:
        segs = tuple(
            (s.role, s.token_ids.tolist(), None if s.log_probs is None else s.log_probs.tolist()) for s in t.segments
        )
        prompt = None if t.prompt_token_ids is None else t.prompt_token_ids.tolist()
        logged = t.metadata.get("logged_advantages", t.metadata.get("logged_advantage"))
        out[t.id] = (prompt, t.prompt, segs, dict(t.global_rewards), logged)
    return out


def assert_rest_unchanged(clean, damaged, left_out: set[str]) -> None:
    """The damaged load holds exactly the clean load's trajectories but ``left_out``, each unchanged."""
    want = {k: v for k, v in rows(clean.run).items() if k not in left_out}
    assert rows(damaged.run) == want
    assert left_out <= set(rows(clean.run))


# ------------------------------------------------------------------------------------------------ coerce
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([5, True, 7], f"expected numbers, found bool True at position 1 {NOT_A_NUMBER}"),
        ([0.5, False], f"expected numbers, found bool False at position 1 {NOT_A_NUMBER}"),
        ([1, np.bool_(True)], f"expected numbers, found bool True at position 1 {NOT_A_NUMBER}"),
    ],
)
def test_a_boolean_among_numbers_is_refused_by_coerce(value, reason):
    for read in (as_token_ids, as_float_array):  # np.asarray([5, True, 7]) is int64 [5, 1, 7]
        with pytest.raises(RecordError) as err:
            read(value, "x")
        assert str(err.value) == f"x: {reason}"


def test_float32_limits_in_coerce():
    with pytest.raises(RecordError, match=r"^x: 1e\+39 at token 1 is beyond float32"):
        as_float_array([0.0, 1e39], "x", allow_nonfinite=True)  # a written inf may pass there, an overflow not
    assert as_float_array([0.0, float("inf")], "x", allow_nonfinite=True).tolist() == [0.0, float("inf")]
    with pytest.raises(RecordError) as err:
        as_float(1e308, "reward")
    assert str(err.value) == f"reward: 1e+308 {BEYOND}"
    with pytest.raises(RecordError) as err:
        as_float(True, "reward")
    assert str(err.value) == "reward: expected a number, got bool True (a boolean is not a number here)"
    assert as_float(3.4028234e38, "reward") == 3.4028234e38  # float32's largest still loads
    assert as_component(True, "metrics.correct") == 1.0  # a boolean reward component, as ART's metrics write it


# ------------------------------------------------------------------------------------------------ verifiers
def _rollout(user: str, answer: str, correct: float, **kw) -> Rollout:
    return Rollout("You add.", user, [Turn(answer)], {"correct": (correct, 1.0)}, **kw)


@pytest.fixture(scope="module")
def verifiers_file(tmp_path_factory):
    """Two episodes of one group; the first trace's sampled node is nodes[2]."""
    root = tmp_path_factory.mktemp("verifiers")
    path, truths = prime_rl.write_step(str(root), 1, {"g": [_rollout("2+2?", "4", 1.0), _rollout("2+2?", "5", 0.0)]})
    clean = load_run(path)
    assert clean.problems == [] and [t.id for t in clean.run.trajectories] == [t.trace_id for t in truths]
    return Path(path), clean


def _damage_jsonl(path: Path, tmp: Path, line: int, damage) -> Path:
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    damage(recs[line - 1])
    out = tmp / path.name
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return out


def _node(k):
    return lambda ep: ep["traces"][0]["nodes"][k]


def _set(getter, key, value):
    def damage(ep):
        getter(ep)[key] = value

    return damage


def _set_item(getter, key, i, value):
    def damage(ep):
        getter(ep)[key][i] = value

    return damage


TRACE = lambda ep: ep["traces"][0]  # noqa: E731
AGENT = lambda ep: ep["traces"][0]["agent"]  # noqa: E731
SCORE = lambda ep: ep["traces"][0]["rewards"]["correct"]  # noqa: E731
SKIPPED = "trace skipped (whether prime-rl trains it is unknown)"

VERIFIERS_CASES = {
    "token id true": (
        _set_item(_node(2), "token_ids", 1, True),
        f"traces[0].nodes[2].token_ids: expected numbers, found bool True at position 1 {NOT_A_NUMBER}",
    ),
    "log-prob true": (
        _set_item(_node(2), "logprobs", 0, True),
        f"traces[0].nodes[2].logprobs: expected numbers, found bool True at position 0 {NOT_A_NUMBER}",
    ),
    "advantage false": (
        _set(_node(2), "advantages", [False]),
        f"traces[0].nodes[2].advantages: expected numbers, found bool False at position 0 {NOT_A_NUMBER}",
    ),
    "log-prob beyond float32": (
        _set_item(_node(2), "logprobs", 0, -1e39),
        f"traces[0].nodes[2].logprobs: -1e+39 at token 0 {BEYOND}",
    ),
    "score true": (
        _set(SCORE, "score", True),
        "traces[0].rewards.correct.score: expected a number, got bool True (a boolean is not a number here)",
    ),
    "score beyond float32": (_set(SCORE, "score", 1e308), f"traces[0].rewards.correct.score: 1e+308 {BEYOND}"),
    "ok 'false'": (_set(TRACE, "ok", "false"), f"traces[0].ok: expected true or false, got str 'false'; {SKIPPED}"),
    "trainable 'false'": (
        _set(AGENT, "trainable", "false"),
        f"traces[0].agent.trainable: expected true or false, got str 'false'; {SKIPPED}",
    ),
    "trainable 0": (
        _set(AGENT, "trainable", 0),
        f"traces[0].agent.trainable: expected true or false, got int 0; {SKIPPED}",
    ),
    "sampled 'false'": (
        _set(_node(1), "sampled", "false"),
        "traces[0].nodes[1].sampled: expected true or false, got str 'false'",
    ),
}


@pytest.mark.parametrize("case", list(VERIFIERS_CASES))
def test_verifiers_quiet_values_are_named(verifiers_file, tmp_path, case):
    path, clean = verifiers_file
    damage, reason = VERIFIERS_CASES[case]
    bad = _damage_jsonl(path, tmp_path, 1, damage)
    res = load_run(bad)
    assert problems(res) == [f"{bad}:1: {reason}"]
    assert_rest_unchanged(clean, res, {clean.run.trajectories[0].id})


def test_verifiers_real_flags_still_decide(verifiers_file, tmp_path):
    path, clean = verifiers_file
    bad = _damage_jsonl(path, tmp_path, 1, _set(AGENT, "trainable", False))
    res = load_run(bad)
    assert problems(res) == [
        f"{bad}:1: traces[0]: agent.trainable is false: prime-rl neither trains this trace nor counts it in its group; "
        "skipped"
    ]
    assert_rest_unchanged(clean, res, {clean.run.trajectories[0].id})


def test_verifiers_episode_ok_not_a_boolean_is_noted_and_the_traces_load(verifiers_file, tmp_path):
    """prime-rl trains by each trace's ``ok``; an episode's ``ok`` of the wrong type is named, its traces kept."""
    path, clean = verifiers_file
    bad = _damage_jsonl(path, tmp_path, 1, lambda ep: ep.__setitem__("ok", "false"))
    res = load_run(bad)
    assert problems(res) == [
        f"{bad}:1: ok: expected true or false, got str 'false'; not used (each trace's ok decides)"
    ]
    assert [t.id for t in res.run.trajectories] == [t.id for t in clean.run.trajectories]


# ------------------------------------------------------------------------------------------------ prime-rl tokens
@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory):
    prompt = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    s = Sample("math", [(prompt, False), ("It is 4.<|im_end|>", True)], 0.5, 1)
    t = Sample("math", [(prompt, False), ("Four.<|im_end|>", True)], -0.5, 2)
    root = write_run(tmp_path_factory.mktemp("tokens"), {3: {0: [[s], [t]]}})
    path = root / "step_3" / "rank_0.jsonl"
    clean = load_run(path)
    assert [t.id for t in clean.run.trajectories] == ["step_3/rank_0/0", "step_3/rank_0/1"]
    return path, clean


def _set_column(key, i, value):
    def damage(rec):
        rec[key][i] = value

    return damage


TOKENS_CASES = {
    "token id true": (
        _set_column("token_ids", 2, True),
        f"token_ids: expected numbers, found bool True at position 2 {NOT_A_NUMBER}",
    ),
    "position id false": (
        _set_column("position_ids", 0, False),
        f"position_ids: expected numbers, found bool False at position 0 {NOT_A_NUMBER}",
    ),
    "advantage true": (
        _set_column("advantages", -1, True),
        "advantages[{n}]: expected a number or null, got bool True",
    ),
    "log-prob beyond float32": (
        _set_column("trainer_logprobs", -1, -1e39),
        "trainer_logprobs[{n}]: -1e+39 is beyond float32: the writer converts every value to float32",
    ),
}


@pytest.mark.parametrize("case", list(TOKENS_CASES))
def test_prime_rl_tokens_quiet_values_are_named(tokens_file, tmp_path, case):
    path, clean = tokens_file
    damage, reason = TOKENS_CASES[case]
    n = len(json.loads(path.read_text().splitlines()[0])["token_ids"]) - 1
    bad = tmp_path / "step_3" / "rank_0.jsonl"
    bad.parent.mkdir()
    (bad.parent / "STABLE").touch()
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    damage(recs[0])
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = load_run(bad)
    notes = [p.replace(str(path), str(bad)) for p in problems(clean)]  # the export's run notes: no rewards, ...
    assert [p for p in problems(res) if p not in notes] == [f"{bad}:1: {reason.format(n=n)}"]
    assert_rest_unchanged(clean, res, {"step_3/rank_0/0"})


# ------------------------------------------------------------------------------------------------ NeMo Gym
@pytest.fixture(scope="module")
def hermes(tmp_path_factory):
    """The hermes writer's file with real ids on line 2's generation (what a vLLM model server writes)."""
    tmp = tmp_path_factory.mktemp("nemo")
    truth = nemo_gym.write_hermes(tmp)
    recs = [json.loads(x) for x in Path(truth.path).read_text().splitlines()]
    item = recs[1]["response"]["output"][0]
    item["generation_token_ids"] = truth.token_ids(1)
    item["generation_log_probs"] = [-0.5] * len(truth.token_ids(1))
    path = tmp / "ids" / "hermes_rollouts.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    clean = load_run(path)
    assert len(problems(clean)) == 2 and problems(clean)[0].startswith(f"{path}:1: ")  # line 1's empty ids
    assert problems(clean)[1].endswith(
        "log_probs: missing while other trajectories have it; old_log_probs is left out of the batch"
    )
    assert rows(clean.run)[clean.run.trajectories[1].id][2][0][1] == truth.token_ids(1)
    return path, clean


OUT0 = lambda rec: rec["response"]["output"][0]  # noqa: E731
NEMO_CASES = {
    "generation id true": (
        _set_item(OUT0, "generation_token_ids", 1, True),
        f"response.output[0].generation_token_ids: expected numbers, found bool True at position 1 {NOT_A_NUMBER}",
    ),
    "prompt id true": (
        _set(OUT0, "prompt_token_ids", [151644, True, 872]),
        f"response.output[0].prompt_token_ids: expected numbers, found bool True at position 1 {NOT_A_NUMBER}",
    ),
    "log-prob false": (
        _set_item(OUT0, "generation_log_probs", 0, False),
        f"response.output[0].generation_log_probs: expected numbers, found bool False at position 0 {NOT_A_NUMBER}",
    ),
    "log-prob beyond float32": (
        _set_item(OUT0, "generation_log_probs", 0, -1e39),
        f"response.output[0].generation_log_probs: -1e+39 at token 0 {BEYOND}",
    ),
    "reward true": (
        lambda rec: rec.update(reward=True),
        "reward: expected a number, got bool True (a boolean is not a number here)",
    ),
    "reward beyond float32": (lambda rec: rec.update(reward=3.5e38), f"reward: 3.5e+38 {BEYOND}"),
}


@pytest.mark.parametrize("case", list(NEMO_CASES))
def test_nemo_gym_quiet_values_are_named(hermes, tmp_path, case):
    path, clean = hermes
    damage, reason = NEMO_CASES[case]
    bad = _damage_jsonl(path, tmp_path, 2, damage)
    res = load_run(bad)
    assert problems(res) == [problems(clean)[0].replace(str(path), str(bad)), f"{bad}:2: {reason}"]
    assert_rest_unchanged(clean, res, {clean.run.trajectories[1].id})


def test_nemo_gym_boolean_components_stay_components(hermes, tmp_path):
    path, clean = hermes
    bad = _damage_jsonl(path, tmp_path, 2, lambda rec: rec.update(resolved=True))  # a resources server's verdict
    res = load_run(bad)
    assert problems(res) == [p.replace(str(path), str(bad)) for p in problems(clean)]
    assert res.run.trajectories[1].metadata["reward_components"] == {"resolved": 1.0}
    assert rows(res.run) == rows(clean.run)


# ------------------------------------------------------------------------------------------------ slime
PROMPT = "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def slime_dump(tmp_path_factory):
    specs = [[slime.Spec(PROMPT, [("hi<|im_end|>", True)], 1.0), slime.Spec(PROMPT, [("bye<|im_end|>", True)], 0.0)]]
    path, _ = slime.save_debug_rollout_data(str(tmp_path_factory.mktemp("slime") / "{rollout_id}.pt"), specs, 2)
    clean = load_run(path)
    assert clean.problems == [] and [t.id for t in clean.run.trajectories] == ["2/sample-0", "2/sample-1"]
    return Path(path), clean


SLIME_CASES = {
    "token true": (
        lambda s: s["tokens"].__setitem__(2, True),
        f"tokens: expected numbers, found bool True at position 2 {NOT_A_NUMBER}",
    ),
    "log-prob true": (
        lambda s: s["rollout_log_probs"].__setitem__(0, True),
        f"rollout_log_probs: expected numbers, found bool True at position 0 {NOT_A_NUMBER}",
    ),
    "log-prob beyond float32": (
        lambda s: s["rollout_log_probs"].__setitem__(0, -1e39),
        f"rollout_log_probs: -1e+39 at token 0 {BEYOND}",
    ),
    "reward true": (
        lambda s: s.update(reward=True),
        "reward: expected a number, got bool True (a boolean is not a number here)",
    ),
    "remove_sample 'no'": (
        lambda s: s.update(remove_sample="no"),
        "remove_sample: expected true or false, got str 'no'",
    ),
}


@pytest.mark.parametrize("case", list(SLIME_CASES))
def test_slime_quiet_values_are_named(slime_dump, tmp_path, case):
    path, clean = slime_dump
    damage, reason = SLIME_CASES[case]
    obj = torch.load(path, weights_only=True)
    damage(obj["samples"][0])
    bad = tmp_path / path.name
    torch.save(obj, bad)
    res = load_run(bad)
    assert problems(res) == [f"{bad}: samples[0].{reason}"]
    assert_rest_unchanged(clean, res, {"2/sample-0"})


# ------------------------------------------------------------------------------------------------ TRL
def _accuracy(prompt: str, completion: str) -> float:
    return 1.0 if completion.endswith("4") else 0.0


def _length(prompt: str, completion: str) -> float:
    return len(completion) / 10


@pytest.fixture(scope="module")
def trl_file(tmp_path_factory):
    w = trl.write_completions(
        str(tmp_path_factory.mktemp("trl")),
        5,
        [[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "3+1?"}]],
        [["4", "5"], ["It is 4", "3"]],
        {"accuracy": _accuracy, "length": _length},
    )
    clean = load_run(w.path)
    weights = (
        f"{w.path}: reward_weights: TRL trains on the weighted sum of the reward columns ['accuracy', 'length']; the "
        "file does not hold GRPOConfig.reward_weights, so each column weighs 1.0 (TRL's default) unless "
        "CreditConfig.global_weights names it (numeric log_extra columns would be counted here too)"
    )
    assert problems(clean) == [weights]
    assert [t.global_rewards for t in clean.run.trajectories] == [
        {"accuracy": a, "length": n} for a, n in zip(w.rewards["accuracy"], w.rewards["length"], strict=True)
    ]
    return Path(w.path), clean, w


def _rewrite(path: Path, tmp: Path, name: str, array: pa.Array) -> Path:
    table = pq.read_table(path)
    table = table.set_column(table.column_names.index(name), name, array)
    out = tmp / path.name
    pq.write_table(table, out)
    return out


def _with_cell(values: list, i: int, value: float) -> pa.Array:
    values = list(values)
    values[i] = value
    return pa.array(values, pa.float64())


TRL_COLUMN_CASES = {
    "list": lambda v: pa.array([[x] for x in v]),
    "struct": lambda v: pa.array([{"score": x} for x in v]),
    "binary": lambda v: pa.array([str(x).encode() for x in v], pa.binary()),
    "decimal": lambda v: pa.array([decimal.Decimal(f"{x:.2f}") for x in v], pa.decimal128(6, 2)),
}


def test_trl_reward_column_of_numbers_written_as_text_is_named(trl_file, tmp_path):
    """A text column whose every value reads as a number is a reward column stored as text: named, kept as a logged
    column; a text column of words (a ``log_extra`` column) stays silent."""
    path, clean, w = trl_file
    bad = _rewrite(path, tmp_path, "length", pa.array([str(x) for x in w.rewards["length"]]))
    res = load_run(bad)
    assert problems(res)[0] == (
        f"{bad}: length: every value is a number written as text, where TRL writes its reward columns as floats: a "
        "reward column stored as text? Not read as a reward; kept in metadata.logged_columns"
    )
    assert [t.global_rewards for t in res.run.trajectories] == [{"accuracy": a} for a in w.rewards["accuracy"]]
    (tmp_path / "words").mkdir()
    words = _rewrite(path, tmp_path / "words", "length", pa.array([f"about {x}" for x in w.rewards["length"]]))
    assert not any("length" in p for p in problems(load_run(words)))


def test_trl_text_column_before_a_reward_column_is_named(trl_file, tmp_path):
    """GRPOTrainer.log writes the reward columns, then the log_extra ones: a text column before a reward column is
    a reward column stored as text, even with a value that is no number."""
    path, clean, w = trl_file
    text = ["x", *(str(x) for x in w.rewards["accuracy"][1:])]
    bad = _rewrite(path, tmp_path, "accuracy", pa.array(text))
    res = load_run(bad)
    assert problems(res)[0] == (
        f"{bad}: accuracy: a column of string values before the reward column 'length', where TRL writes only "
        "reward columns (floats; its log_extra columns come after them): a reward column stored as another type? "
        "Not read as a reward; kept in metadata.logged_columns"
    )
    assert [t.metadata["logged_columns"]["accuracy"] for t in res.run.trajectories] == text


def test_trl_file_without_a_numeric_reward_column_is_named(tmp_path):
    """A file whose only reward column was written as text has no reward TRL could have trained on: said once."""
    w = trl.write_completions(
        str(tmp_path / "w"), 12, [[{"role": "user", "content": "2+2?"}]], [["4", "5"]], {"accuracy": _accuracy}
    )
    text = ["x", *(str(x) for x in w.rewards["accuracy"][1:])]
    bad = _rewrite(Path(w.path), tmp_path, "accuracy", pa.array(text))
    res = load_run(bad)
    assert problems(res)[:1] == [
        f"{bad}: accuracy: no column of numbers between completion and advantage, where TRL writes one float column "
        "per reward function (columns there: 'accuracy' (string); kept in metadata.logged_columns): the "
        "trajectories load without rewards"
    ]
    assert [t.metadata["logged_columns"]["accuracy"] for t in res.run.trajectories] == text


@pytest.mark.parametrize("kind", list(TRL_COLUMN_CASES))
def test_trl_reward_column_that_is_not_numbers_is_named(trl_file, tmp_path, kind):
    path, clean, w = trl_file
    array = TRL_COLUMN_CASES[kind](w.rewards["length"])
    bad = _rewrite(path, tmp_path, "length", array)
    res = load_run(bad)
    written = pq.read_schema(bad).field("length").type
    notes = problems(res)
    assert notes[0] == (
        f"{bad}: length: a column of {written} values where TRL writes its reward columns (a float per row): not read "
        "as a reward; kept in metadata.logged_columns"
    )
    assert [t.global_rewards for t in res.run.trajectories] == [{"accuracy": a} for a in w.rewards["accuracy"]]
    kept = [t.metadata["logged_columns"]["length"] for t in res.run.trajectories]
    if kind in ("list", "struct"):
        assert len(notes) == 1 and kept == array.to_pylist()
        return
    # bytes and decimals are made JSON for a saved run, with one note for the column (engine.io.reading.jsonable)
    assert len(notes) == 2 and notes[1].startswith(f"{bad}: row[0].metadata.logged_columns.length: ")
    exact = (
        [float(d) if decimal.Decimal(float(d)) == d else str(d) for d in array.to_pylist()]
        if kind == "decimal"
        else None
    )
    assert kept == (exact or [base64.b64encode(b).decode() for b in array.to_pylist()])
    assert [t.metadata["logged_advantage"] for t in res.run.trajectories] == w.advantages


TRL_CELL_CASES = {
    "reward +inf": ("accuracy", 2, float("inf"), "row[2].accuracy: non-finite value inf"),
    "reward -inf": ("length", 1, float("-inf"), "row[1].length: non-finite value -inf"),
    "reward beyond float32": ("accuracy", 1, 3.5e38, f"row[1].accuracy: 3.5e+38 {BEYOND}"),
    "advantage beyond float32": ("advantage", 3, 1e308, f"row[3].advantage: 1e+308 {BEYOND}"),
    "advantage 3.5e38": ("advantage", 0, -3.5e38, f"row[0].advantage: -3.5e+38 {BEYOND}"),
}


@pytest.mark.parametrize("case", list(TRL_CELL_CASES))
def test_trl_values_a_float32_cannot_hold_are_named(trl_file, tmp_path, case):
    path, clean, w = trl_file
    name, i, value, reason = TRL_CELL_CASES[case]
    before = w.advantages if name == "advantage" else w.rewards[name]
    bad = _rewrite(path, tmp_path, name, _with_cell(before, i, value))
    res = load_run(bad)
    assert problems(res) == [problems(clean)[0].replace(str(path), str(bad)), f"{bad}: {reason}"]
    assert_rest_unchanged(clean, res, {f"{path.stem}/row-{i}"})


# ------------------------------------------------------------------------------------------------ ART
@pytest.fixture(scope="module")
def art_log(tmp_path_factory):
    path, _ = art.write_log(tmp_path_factory.mktemp("art"))
    clean = load_run(path)
    assert clean.problems == [] and len(clean.run.trajectories) == 4
    assert clean.run.trajectories[0].metadata["reward_components"] == {"duration": 1.5, "correct": 1.0}
    return path, clean


def _art_damage(path: Path, tmp: Path, damage) -> Path:
    groups = yaml.safe_load(path.read_text())
    damage(groups[1]["trajectories"][1])  # "Thinking about it at great": one Choice, cut by the length limit
    out = tmp / path.name
    out.write_text(yaml.dump(groups))
    return out


def test_art_choice_that_is_not_the_assistants_is_named(art_log, tmp_path):
    path, clean = art_log
    bad = _art_damage(path, tmp_path, lambda t: t["messages_and_choices"][1]["message"].update(role="user"))
    res = load_run(bad)
    assert problems(res) == [
        f"{bad}: [1].trajectories[1].messages_and_choices[1].message.role: a Choice whose message role is 'user': a "
        "Choice is the policy's own output (role assistant), which ART trains on; loaded as another role it would "
        "train nothing"
    ]
    assert_rest_unchanged(clean, res, {f"{path.stem}/group-1/traj-1"})


def test_art_boolean_reward_is_named_and_boolean_metric_kept(art_log, tmp_path):
    path, clean = art_log
    res = load_run(_art_damage(path, tmp_path, lambda t: t.update(reward=False)))
    assert problems(res) == [
        f"{tmp_path / path.name}: [1].trajectories[1].reward: expected a number, got bool False (a boolean is not a "
        "number here)"
    ]
    assert_rest_unchanged(clean, res, {f"{path.stem}/group-1/traj-1"})
    assert [t.metadata["reward_components"]["correct"] for t in res.run.trajectories] == [1.0, 0.0, 1.0]


def test_clean_mimic_output_loads_clean(verifiers_file, tokens_file, hermes, slime_dump, trl_file, art_log):
    """The undamaged files: every trajectory loads, with no problem beyond the writer's own notes (NeMo Gym's line 1
    has no ids, TRL's file no reward weights); the fixtures check the values."""
    loads = [verifiers_file[1], tokens_file[1], hermes[1], slime_dump[1], trl_file[1], art_log[1]]
    assert [len(res.run.trajectories) for res in loads] == [2, 2, 2, 2, 4, 4]
    assert not any(":2:" in p for res in loads for p in problems(res))
    assert [len(res.problems) for res in (verifiers_file[1], slime_dump[1], art_log[1])] == [0, 0, 0]
