"""verl's rollout dumps, written the way verl writes them (tests/writers/verl.py), load back to the exact token ids,
action masks, groups, rewards and truncation flags, or say precisely what they cannot recover."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from test_io_support import write_jsonl
from writers import verl as writer
from writers.verl import Turn

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.text.tokenize import get_tokenizer

R = 96  # actor_rollout_ref.rollout.response_length of the fixtures

CALL = '<tool_call>\n{"name": "calc", "arguments": {"expr": "6*7"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer(None)


def multiturn_rows(tok, layout: str) -> list[writer.Row]:
    """Prompt A: three tool-calling rollouts (one with two results in one block, one cut at R) and a direct
    answer; prompt B: two single-turn rollouts."""
    long_answer = "Let me think about this very carefully, step by step, before I answer. " * 8
    rows = [
        writer.agent_loop_row(
            tok, "What is 6*7?", [Turn("I will compute." + CALL, tools=["42"]), Turn("It is 42.")], R, layout, 1.0
        ),
        writer.agent_loop_row(
            tok, "What is 6*7?", [Turn(CALL + CALL, tools=["42", "42"]), Turn("Both say 42.")], R, layout, 1.0
        ),
        writer.agent_loop_row(
            tok, "What is 6*7?", [Turn(CALL, tools=["42"]), Turn(long_answer, stopped=False)], R, layout, 0.0
        ),
        writer.agent_loop_row(tok, "What is 6*7?", [Turn("It is 41.")], R, layout, 0.0),
        writer.agent_loop_row(tok, "Name a prime.", [Turn("7")], R, layout, 1.0),
        writer.agent_loop_row(tok, "Name a prime.", [Turn("9")], R, layout, 0.0),
    ]
    assert [r.truncated for r in rows] == [False, False, True, False, False, False]
    return rows


def response_rows(run) -> list[tuple[list[int], list[int]]]:
    """(token ids, action mask) of each loaded trajectory without padding."""
    b = run.to_batch()
    out = []
    for i in range(len(run)):
        keep = b.attention_mask[i].bool()
        out.append((b.token_ids[i][keep].tolist(), b.action_mask[i][keep].long().tolist()))
    return out


@pytest.mark.parametrize("layout", ["head", "legacy"])
def test_ray_trainer_dump_multiturn_exact_tokens(tmp_path, tok, layout):
    rows = multiturn_rows(tok, layout)
    extras = {"acc": [r.score > 0 for r in rows], "pred": ["42", "42", "", "41", "7", "9"]}
    path = writer.write_ray_trainer_dump(tok, rows, tmp_path, step=7, gts=["42"] * 4 + ["7"] * 2, extras=extras)
    res = load_run(path, response_length=R)
    assert res.problems == []
    run = res.run
    assert run.source == "verl_rollout"
    for (ids, mask), row in zip(response_rows(run), rows, strict=True):
        assert ids == row.response_ids
        assert mask == row.response_mask
    assert [t.truncated for t in run.trajectories] == [r.truncated for r in rows]
    groups = [t.group_id for t in run.trajectories]
    assert groups[:4] == [groups[0]] * 4 and groups[4:] == [groups[4]] * 2 and groups[0] != groups[4]
    assert [t.global_rewards for t in run.trajectories] == [{"score": r.score} for r in rows]
    t0 = run.trajectories[0]
    assert t0.metadata["reward_components"] == {"acc": 1.0}  # shown, never summed into the reward
    assert t0.metadata["extra"] == {"pred": "42"} and t0.metadata["ground_truth"] == "42"
    assert [s.role for s in t0.segments] == ["model", "tool", "model"]
    # every generated <|im_end|> is an action token: 2 per two-turn row, none on the cut row's last turn
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    actions = [sum(m for t, m in zip(ids, mask, strict=True) if t == im_end) for ids, mask in response_rows(run)]
    assert actions == [2, 2, 1, 1, 1, 1]


def test_ray_trainer_dump_without_response_length_says_what_it_assumed(tmp_path, tok):
    rows = multiturn_rows(tok, "head")
    path = writer.write_ray_trainer_dump(tok, rows, tmp_path, step=1)
    res = load_run(path)
    assert [str(p) for p in res.problems] == [
        f"{path}: 6 rows: the final <|im_end|> was re-added on the assumption that each row ended with its stop "
        "token. verl's rollout dump drops special tokens, so a row cut at the response length limit looks the same; "
        "pass response_length=<data.max_response_length> (CLI --response-length; the dashboard's Response length "
        "limit) to flag those rows as truncated"
    ]
    loaded = response_rows(res.run)
    for k in (0, 1, 3, 4, 5):  # finished rows are exact either way
        assert loaded[k] == (rows[k].response_ids, rows[k].response_mask)
    assert loaded[2][0] == rows[2].response_ids + [tok.convert_tokens_to_ids("<|im_end|>")]  # the assumption
    assert res.run.trajectories[2].metadata["synthesized"] == ["end_of_turn_token"]


def test_legacy_interaction_turn_is_a_user_segment(tmp_path, tok):
    row = writer.agent_loop_row(
        tok, "Guess my number.", [Turn("Is it 3?", user="No, higher."), Turn("Is it 5?")], R, "legacy", 1.0
    )
    path = writer.write_ray_trainer_dump(tok, [row], tmp_path, step=2)
    res = load_run(path, response_length=R)
    (traj,) = res.run.trajectories
    assert [s.role for s in traj.segments] == ["model", "user", "model"]
    assert response_rows(res.run) == [(row.response_ids, row.response_mask)]
    assert sum(row.response_mask) == len(tok.encode("Is it 3?<|im_end|>Is it 5?<|im_end|>", add_special_tokens=False))


def v1_dump(tok, tmp_path, scores: dict[str, list[float]], extra_rows: dict | None = None):
    keyed = {}
    for uid, group_scores in scores.items():
        for session, score in enumerate(group_scores):
            answer = "42" if score else "41"
            keyed[f"{uid}_{session}_0"] = writer.agent_loop_row(
                tok, f"question {uid}", [Turn(answer)], R, "head", score
            )
    keyed.update(extra_rows or {})
    return writer.write_v1_trainer_dump(tok, keyed, tmp_path, step=3), keyed


def test_v1_dump_recovers_prompt_groups(tmp_path, tok):
    uid_a, uid_b = "9f1c2b7e-aa10-4e61-b8c4-0d6d9a7b1e55", "0b8e_x"  # a uid may itself contain '_'
    path, _ = v1_dump(tok, tmp_path, {uid_a: [1, 1, 1, 0], uid_b: [1, 0, 0, 0]})
    res = load_run(path, response_length=R)
    assert [str(p) for p in res.problems] == [
        f"{path}: uid: uid values have verl v1's '{{uid}}_{{session}}_{{index}}' form (unique per row): grouped by the "
        "prompt uid before the last two '_' fields, 2 groups of 4 sessions"
    ]
    run = res.run
    assert [t.group_id for t in run.trajectories] == [uid_b] * 4 + [uid_a] * 4  # the writer sorts by key
    assert [t.id for t in run.trajectories][:2] == [f"{uid_b}_0_0", f"{uid_b}_1_0"]
    out = compute_credit(run.to_batch(), CreditConfig(profile="verl", estimator="grpo"))
    scalar = [float(out.advantages[i][run.to_batch().action_mask[i].bool()][0]) for i in range(len(run))]
    expected = [1.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -1.5]  # not the raw scores [1, 0, 0, 0, 1, 1, 1, 0]
    assert scalar == pytest.approx(expected, abs=1e-5)


def test_v1_multi_row_session_is_one_trajectory(tmp_path, tok):
    """A session whose agent loop returned two outputs: the second prompt extends the first row's conversation."""
    first = writer.agent_loop_row(tok, "question u", [Turn(CALL, tools=["42"]), Turn("Checking.")], R, "head", 1.0)
    context = tok.decode(first.prompt_ids + first.response_ids) + "\n<|im_start|>user\nGo on.<|im_end|>\n"
    second = writer.agent_loop_row(tok, "unused", [Turn("It is 42.")], R, "head", 1.0)
    second.prompt_ids = tok.encode(context + "<|im_start|>assistant\n", add_special_tokens=False)
    path, keyed = v1_dump(tok, tmp_path, {"u": [0, 0]}, {"u_2_0": first, "u_2_1": second})
    res = load_run(path, response_length=R)
    assert "1 sessions with several rows were joined into one trajectory each" in str(res.problems[0])
    run = res.run
    assert [t.id for t in run.trajectories] == ["u_0_0", "u_1_0", "u_2"]
    joined = run.trajectories[2]
    assert joined.global_rewards == {"score": 1.0} and joined.metadata["v1_key"] == ["u_2_0", "u_2_1"]
    ids, mask = response_rows(run)[2]
    actions = [t for t, m in zip(ids, mask, strict=True) if m]
    expected = [
        t
        for t, m in zip(
            first.response_ids + second.response_ids, first.response_mask + second.response_mask, strict=True
        )
        if m
    ]
    assert actions == expected
    assert [s.role for s in joined.segments] == ["model", "tool", "model", "user", "model"]
    assert joined.segments[3].text == "\n<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n"


def test_unique_ids_of_another_form_are_reported_as_singletons(tmp_path):
    rows = [{"input": f"q{k}", "output": "a", "score": 1.0, "uid": f"row-{k}"} for k in range(3)]
    path = write_jsonl(tmp_path / "0.jsonl", rows)
    res = load_run(path, response_length=R)
    assert [p.field for p in res.problems] == ["group_id"]
    assert "every one of the 3 trajectories is alone in its group" in res.problems[0].reason


def test_cli_convert_takes_the_response_length(tmp_path, tok):
    from engine.__main__ import main

    rows = multiturn_rows(tok, "head")
    path = writer.write_ray_trainer_dump(tok, rows, tmp_path / "dump", step=1)
    assert main(["convert", str(path), "--out", str(tmp_path / "run.parquet"), "--response-length", str(R)]) == 0
    loaded = load_run(tmp_path / "run.parquet").run
    assert [t.truncated for t in loaded.trajectories] == [False, False, True, False, False, False]
    assert torch.equal(loaded.to_batch().action_mask, load_run(path, response_length=R).run.to_batch().action_mask)


# ------------------------------------------------------------------------------------------------ batch dumps
P = 32


def step_batch(tok):
    rows = multiturn_rows(tok, "head")
    uids = ["uid-a"] * 4 + ["uid-b"] * 2
    extras = {"acc": [r.score for r in rows], "score": [r.score for r in rows]}
    return rows, writer.agent_loop_batch(rows, uids, P, R, extras=extras)


def test_verl_own_pickled_writers_are_refused_with_the_export_named(tmp_path, tok):
    _, proto = step_batch(tok)
    cases = {
        writer.save_to_disk(proto, tmp_path / "step.pkl"): "a Python pickle (verl's DataProto.save_to_disk",
        writer.torch_save_tensordict(proto, tmp_path / "td.pt"): "Python objects (tensordict._td.TensorDict)",
        writer.savez_batch(proto, tmp_path / "np.npz"): "field 'uid' is a numpy object array",
    }
    for path, what in cases.items():
        with pytest.raises(ValueError) as err:
            load_run(path)
        assert what in str(err.value) and "engine.io.export_verl_batch(batch, 'step.pt')" in str(err.value)
    res = load_run(tmp_path)  # in a folder each is reported and skipped, none is read
    assert len(res.run) == 0 and [p.reason.endswith("; file skipped") for p in res.problems] == [True] * 3


def test_export_verl_batch_round_trip(tmp_path, tok):
    from engine.io import export_verl_batch

    rows, proto = step_batch(tok)
    proto.non_tensor_batch["multi_modal_inputs"] = np.array([{"pixel_values": None}] * len(rows), dtype=object)
    skipped = export_verl_batch(proto, tmp_path / "step.pt")
    assert skipped == ["multi_modal_inputs"]
    res = load_run(tmp_path / "step.pt")
    assert res.problems == []
    run = res.run
    assert response_rows(run) == [(r.response_ids, r.response_mask) for r in rows]
    assert [t.group_id for t in run.trajectories] == ["uid-a"] * 4 + ["uid-b"] * 2
    assert [t.global_rewards for t in run.trajectories] == [{}] * 6  # the reward is token-level
    b = run.to_batch()
    assert b.token_scores.sum(-1).tolist() == [r.score for r in rows]
    t0 = run.trajectories[0]
    assert t0.metadata["reward_components"] == {"acc": 1.0, "score": 1.0}  # not added to the reward
    assert t0.metadata["num_turns"] == 3.0
    # the actor's bf16 log-probs are read (as float32), not the rollout engine's
    assert b.old_log_probs[0][b.action_mask[0].bool()].tolist() == pytest.approx(
        [-0.26] * int(b.action_mask[0].sum()), abs=2e-3
    )
    # verl's own GRPO advantages are kept, and CreditLens's verl profile reproduces them
    out = compute_credit(b, CreditConfig(profile="verl", estimator="grpo"))
    for i, traj in enumerate(run.trajectories):
        keep = b.attention_mask[i].bool()
        assert out.advantages[i][keep].tolist() == pytest.approx(traj.metadata["logged_advantages"], abs=1e-5)
    assert run.trajectories[2].metadata["logged_advantages"][0] == pytest.approx(
        -0.5 / (1 / 3) ** 0.5, abs=1e-5
    )  # [1, 1, 0, 0]


def test_hand_flattened_dict_trains_on_token_scores_not_extra_columns(tmp_path, tok):
    rows, proto = step_batch(tok)
    flat = {**proto.batch, "uid": list(proto.non_tensor_batch["uid"]), "score": torch.tensor([r.score for r in rows])}
    flat["acc"] = flat["score"].clone()
    torch.save(flat, tmp_path / "flat.pt")
    run = load_run(tmp_path / "flat.pt").run
    scores = run.to_batch().token_scores.sum(-1)
    assert scores.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # not 2.0 for a solved row


def test_agent_loop_output_reads_rm_scores_and_rollout_log_probs(tmp_path, tok):
    rows, proto = step_batch(tok)
    keep = ("prompts", "responses", "response_mask", "attention_mask", "rm_scores", "rollout_log_probs")
    torch.save({k: proto.batch[k] for k in keep} | {"uid": ["uid-a"] * 4 + ["uid-b"] * 2}, tmp_path / "out.pt")
    res = load_run(tmp_path / "out.pt")
    assert res.problems == []
    b = res.run.to_batch()
    assert b.token_scores.sum(-1).tolist() == [r.score for r in rows]
    assert b.old_log_probs[0][b.action_mask[0].bool()].unique().tolist() == [-0.25]
    assert res.run.metadata["log_probs_source"].startswith("rollout_log_probs")


def test_bf16_and_sparse_tensors_load(tmp_path, tok):
    rows, proto = step_batch(tok)
    dump = {k: proto.batch[k] for k in ("prompts", "responses", "response_mask", "attention_mask")}
    dump["token_level_scores"] = proto.batch["token_level_scores"].to_sparse()
    dump["values"] = torch.full((len(rows), R), 0.5, dtype=torch.bfloat16)
    dump["uid"] = ["a"] * 4 + ["b"] * 2
    torch.save(dump, tmp_path / "mixed.pt")
    res = load_run(tmp_path / "mixed.pt")
    assert res.problems == []
    b = res.run.to_batch()
    assert b.token_scores.sum(-1).tolist() == [r.score for r in rows] and b.values[0, 0].item() == 0.5


def test_no_reward_field_is_reported(tmp_path, tok):
    _, proto = step_batch(tok)
    dump = {k: proto.batch[k] for k in ("prompts", "responses", "response_mask", "attention_mask")}
    torch.save(dump | {"uid": ["a"] * 4 + ["b"] * 2, "acc": torch.ones(6)}, tmp_path / "bare.pt")
    res = load_run(tmp_path / "bare.pt")
    assert [p.reason for p in res.problems] == [
        "no reward field: none of token_level_scores, rm_scores, token_level_rewards or a 1-D 'score', so every "
        "reward is 0 (1-D columns ['acc'] are shown as reward components, not trained on)"
    ]
    torch.save(dump | {"uid": ["a"] * 6, "score": torch.arange(6.0)}, tmp_path / "score.pt")
    res = load_run(tmp_path / "score.pt")
    assert [p.field for p in res.problems] == ["score"]
    assert [t.global_rewards for t in res.run.trajectories] == [{"score": float(k)} for k in range(6)]


def test_the_pasted_export_in_format_md_writes_a_readable_batch(tmp_path, tok):
    """The few lines docs/FORMAT.md tells a verl user to paste, run on a DataProto-like step batch."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "FORMAT.md").read_text()
    section = text[text.index("### verl batches") :]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:3]]
    assert "def export_verl_batch" in blocks[1]
    namespace: dict = {}
    exec(blocks[1], namespace)  # noqa: S102 - the repository's own documentation
    rows, proto = step_batch(tok)
    namespace["export_verl_batch"](proto, tmp_path / "pasted.pt")
    res = load_run(tmp_path / "pasted.pt")
    assert res.problems == []
    assert response_rows(res.run) == [(r.response_ids, r.response_mask) for r in rows]
    assert [t.group_id for t in res.run.trajectories] == ["uid-a"] * 4 + ["uid-b"] * 2


def test_strict_load_lists_notes_and_stops_only_at_a_bad_record(tmp_path, tok):
    rows = multiturn_rows(tok, "head")
    path = writer.write_ray_trainer_dump(tok, rows, tmp_path, step=1)
    res = load_run(path, strict=True)  # the end-of-turn assumption skips nothing: listed, not raised
    assert [p.scope for p in res.problems] == ["run"] and len(res.run) == 6
    with open(path, "a") as f:
        f.write('{"input": "q", "output": "a", "score": "high"}\n')
    with pytest.raises(ValueError, match=r"1\.jsonl:7: score"):
        load_run(path, strict=True)


def test_trainer_and_rollout_log_probs_and_entropy_are_kept_apart(tmp_path, tok):
    """A dump with the trainer's old_log_probs, the agent loop's rollout_log_probs and the actor's entropys (kept
    before verl pops them): the batch has all three, the mismatch is their difference
    (docs/conventions/policy-stage.md §14)."""
    rows, proto = step_batch(tok)
    mask = proto.batch["response_mask"].float()
    data = {k: proto.batch[k] for k in ("prompts", "responses", "response_mask", "attention_mask", "rm_scores")}
    data["rollout_log_probs"] = proto.batch["rollout_log_probs"]
    data["old_log_probs"] = proto.batch["rollout_log_probs"] + 0.5 * mask  # the trainer scores them 0.5 higher
    data["entropys"] = torch.full_like(mask, 0.7)
    torch.save(data | {"uid": ["uid-a"] * 4 + ["uid-b"] * 2}, tmp_path / "both.pt")
    res = load_run(tmp_path / "both.pt")
    assert res.problems == [] and "log_probs_source" not in res.run.metadata
    b = res.run.to_batch()
    act = b.action_mask.bool()
    assert (b.old_log_probs - b.rollout_log_probs)[act].unique().tolist() == [0.5]
    assert b.entropy[b.attention_mask.bool()].unique().tolist() == [0.699999988079071]


# ------------------------------------------------------------------------------------------------ training steps
# verl names a step's rollout dump after the step and writes the step on every line (``_write_generations``,
# verl/trainer/ppo/ray_trainer.py at 1dda039: f"{global_steps}.jsonl", "step": [global_steps] * n); a batch
# dump holds no step and is named by docs/FORMAT.md's export, f"{self.global_steps}.pt".


def next_epoch_rows(tok) -> list[writer.Row]:
    """The same two prompts a step later (the next epoch), other answers and scores."""
    rows = [
        writer.agent_loop_row(tok, "What is 6*7?", [Turn(f"It is {a}.")], R, "head", s)
        for a, s in (("42", 1.0), ("41", 0.0), ("43", 0.0), ("40", 0.0))
    ]
    rows += [writer.agent_loop_row(tok, "Name a prime.", [Turn(a)], R, "head", s) for a, s in (("7", 1.0), ("4", 0.0))]
    return rows


def row_advantages(out, batch, rows: list[int]) -> list[torch.Tensor]:
    """Each row's advantages over its own tokens (the batch's padding width is the widest row's)."""
    return [out.advantages[i][batch.attention_mask[i].bool()] for i in rows]


def test_rollout_dump_lines_carry_their_step(tmp_path, tok):
    rows = multiturn_rows(tok, "head")
    path = writer.write_ray_trainer_dump(tok, rows, tmp_path, step=5)
    assert path.name == "5.jsonl"
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [5] * 6
    run = load_run(path, response_length=R).run
    assert [t.step for t in run.trajectories] == [5] * 6
    assert all("step" not in t.metadata for t in run.trajectories)  # the step is Trajectory.step, not metadata
    assert run.to_batch().steps.tolist() == [5] * 6
    # the validation dump before training is step 0, a step like any other
    zero = writer.write_ray_trainer_dump(tok, rows[4:], tmp_path / "val", step=0)
    assert [t.step for t in load_run(zero, response_length=R).run.trajectories] == [0, 0]
    # the v1 trainer writes the same name and field
    v1, _ = v1_dump(tok, tmp_path / "v1", {"u": [1, 0]})
    assert v1.name == "3.jsonl" and [t.step for t in load_run(v1, response_length=R).run.trajectories] == [3, 3]


def test_rollout_dir_of_two_steps_keeps_each_step_apart(tmp_path, tok):
    dump = tmp_path / "rollout_data"
    five = writer.write_ray_trainer_dump(tok, multiturn_rows(tok, "head"), dump, step=5)
    writer.write_ray_trainer_dump(tok, next_epoch_rows(tok), dump, step=6)
    res = load_run(dump, response_length=R)
    assert res.problems == []
    run = res.run
    assert [t.step for t in run.trajectories] == [5] * 6 + [6] * 6
    assert len({t.id for t in run.trajectories}) == 12
    # the same two prompts in both steps: four groups, not two, each the size of its step's group
    assert len({t.group_id for t in run.trajectories}) == 2
    assert len({(t.step, t.group_id) for t in run.trajectories}) == 4
    sizes = Counter((t.step, t.group_id) for t in run.trajectories)
    assert sorted(sizes.values()) == [2, 2, 4, 4]
    batch = run.to_batch()
    assert batch.group_ids.tolist() == [0] * 4 + [1] * 2 + [2] * 4 + [3] * 2
    cfg = CreditConfig(profile="verl", estimator="grpo")
    both = compute_credit(batch, cfg)
    alone_batch = load_run(five, response_length=R).run.to_batch()
    alone = compute_credit(alone_batch, cfg)
    got, want = row_advantages(both, batch, range(6)), row_advantages(alone, alone_batch, range(6))
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    # the same rows without their steps: each prompt's two groups merge, and every step-5 advantage changes
    for t in run.trajectories:
        t.step = None
    unstepped = run.to_batch()
    assert unstepped.group_ids.tolist() == [0] * 4 + [1] * 2 + [0] * 4 + [1] * 2
    merged = row_advantages(compute_credit(unstepped, cfg), unstepped, range(6))
    assert not any(torch.equal(m, w) for m, w in zip(merged, want, strict=True))


def test_a_record_whose_step_disagrees_with_its_file_name_keeps_its_own(tmp_path, tok):
    written = writer.write_ray_trainer_dump(tok, multiturn_rows(tok, "head")[4:], tmp_path / "a", step=6)
    copied = tmp_path / "rollout_data" / "7.jsonl"  # step 6's dump copied under another step's name
    copied.parent.mkdir()
    copied.write_text(written.read_text())
    res = load_run(copied, response_length=R)
    assert [t.step for t in res.run.trajectories] == [6, 6]
    notes = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(p.file, p.line, p.scope) for p in notes] == [(str(copied), 1, "run")]
    assert "records say step 6 but the file name '7.jsonl' says step 7" in notes[0].reason
    # a line without a step takes its file's
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    del lines[0]["step"]
    bare = write_jsonl(tmp_path / "rollout_data" / "9.jsonl", lines)
    assert [t.step for t in load_run(bare, response_length=R).run.trajectories] == [9, 6]


def test_a_bad_step_is_a_problem_naming_the_field(tmp_path, tok):
    written = writer.write_ray_trainer_dump(tok, multiturn_rows(tok, "head")[4:], tmp_path, step=2)
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    lines[1]["step"] = "two"
    path = write_jsonl(tmp_path / "2.jsonl", lines)
    res = load_run(path, response_length=R)
    assert [t.step for t in res.run.trajectories] == [2]
    assert [(p.line, p.field) for p in res.problems] == [(2, "step")]
    assert "expected a training step" in res.problems[0].reason


def test_batch_exports_take_their_step_from_the_file_name(tmp_path, tok):
    rows, proto = step_batch(tok)
    assert "global_steps" not in proto.meta_info  # verl's training batch holds no step
    five = writer.export_step(proto, tmp_path / "creditlens", 5)
    assert five.name == "5.pt"
    assert [t.step for t in load_run(five).run.trajectories] == [5] * 6
    # the next step: the same prompts, verl's fresh uuid4 uids, other scores
    later = next_epoch_rows(tok)
    proto6 = writer.agent_loop_batch(later, ["uid-c"] * 4 + ["uid-d"] * 2, P, R)
    writer.export_step(proto6, tmp_path / "creditlens", 6)
    res = load_run(tmp_path / "creditlens")
    assert res.problems == []
    run = res.run
    assert [t.step for t in run.trajectories] == [5] * 6 + [6] * 6
    assert [t.id for t in run.trajectories][:1] + [t.id for t in run.trajectories][6:7] == ["5/row-0", "6/row-0"]
    sizes = Counter((t.step, t.group_id) for t in run.trajectories)
    assert sorted(sizes.values()) == [2, 2, 4, 4]
    cfg = CreditConfig(profile="verl", estimator="grpo")
    batch = run.to_batch()
    both = compute_credit(batch, cfg)
    alone_batch = load_run(five).run.to_batch()
    alone = compute_credit(alone_batch, cfg)
    got, want = row_advantages(both, batch, range(6)), row_advantages(alone, alone_batch, range(6))
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    for i, traj in enumerate(run.trajectories):  # and each step's equals verl's own, logged in its file
        keep = batch.attention_mask[i].bool()
        assert both.advantages[i][keep].tolist() == pytest.approx(traj.metadata["logged_advantages"], abs=1e-5)
    # a batch file named otherwise states no step: alone it is one unnumbered step, beside step files it is skipped
    other = writer.export_step(proto, tmp_path / "misc", 0).rename(tmp_path / "misc" / "batch.pt")
    assert [t.step for t in load_run(other).run.trajectories] == [None] * 6
    (tmp_path / "creditlens" / "batch.pt").write_bytes(other.read_bytes())
    res = load_run(tmp_path / "creditlens")
    assert [t.step for t in res.run.trajectories] == [5] * 6 + [6] * 6
    assert [(Path(p.file).name, p.field) for p in res.problems] == [("batch.pt", "step")]


def test_a_line_that_lost_its_step_in_a_file_not_named_by_step_is_named(tmp_path, tok):
    written = writer.write_ray_trainer_dump(tok, multiturn_rows(tok, "head")[4:], tmp_path / "dump", step=4)
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    del lines[1]["step"]
    path = write_jsonl(tmp_path / "renamed.jsonl", lines)
    res = load_run(path, response_length=R)
    assert [(t.id, t.step) for t in res.run.trajectories] == [("renamed:1", 4)]
    assert [(p.line, p.field, p.scope) for p in res.problems] == [(2, "step", "record")]
    assert res.problems[0].reason.startswith("no step, while other lines of this file have one")
