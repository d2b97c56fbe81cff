"""prime-rl trainer token exports (``token_exports/step_N/rank_R.jsonl``) written the way prime-rl's
``TokenExporter`` writes them (``tests/writers/prime_rl_tokens.py``), loaded by the ``prime_rl_tokens`` adapter:
exact ids, masks, log-probs, entropy and logged advantages; the rows the writer skips; folder layouts; malformed
records named by file, line and field; and prime-rl's exported importance ratio and DPPO mask against CreditLens's
policy stage under the ``prime-rl`` profile."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from step_support import advantages_of_step
from writers.prime_rl_tokens import Sample, materialize, write_run

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.data.logged import logged_advantage_tokens
from engine.io.detect import detect_format
from engine.io.text.tokenize import get_tokenizer
from engine.lint import run_lints
from engine.policy import policy_gradient

PROMPT = "<|im_start|>system\nYou are a calculator.<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
TOOL = "\n<|im_start|>user\n<tool_response>4</tool_response><|im_end|>\n<|im_start|>assistant\n"


def samples() -> dict[str, Sample]:
    p = PROMPT.format(q="2+2?")
    long_answer = "The answer is 4, since two and two make four.<|im_end|>"
    return {
        "single": Sample("math", [(p, False), (long_answer, True)], 0.5, 1),
        "untrained": Sample("math", [(p, False), ("nothing trained", False)], 0.0, 2),  # the writer skips it
        "tool": Sample(
            "math",
            [(p, False), ("<tool_call>add(2,2)</tool_call><|im_end|>", True), (TOOL, False), ("4<|im_end|>", True)],
            -0.75,
            3,
        ),
        "tied": Sample("code", [(PROMPT.format(q="3*3?"), False), ("9, or maybe 6, or 8.<|im_end|>", True)], 0.0, 4),
        "nan_prompt": Sample(
            "code", [(PROMPT.format(q="1+1?"), False), ("2<|im_end|>", True)], 1.0, 5, nan_entropy_at=3
        ),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """step 3: rank 0 packs [single, untrained, tool] in micro-step 0 and [tied] in micro-step 1, rank 1 packs
    [nan_prompt]; step 4 (no STABLE marker yet): rank 0 packs [single]."""
    s = samples()
    out = tmp_path_factory.mktemp("prime_tokens")
    root = write_run(out, {3: {0: [[s["single"], s["untrained"], s["tool"]], [s["tied"]]], 1: [[s["nan_prompt"]]]}})
    late = Sample("math", list(s["single"].parts), 0.25, 6)
    write_run(out, {4: {0: [[late]]}}, stable=False)
    return root, s, late


def records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_writer_layout_and_skips(run):
    """What the writer wrote: one record per sample with a loss token, padding trimmed; the untrained sample
    is skipped but keeps its micro_sequence_idx."""
    root, s, _ = run
    assert sorted(p.name for p in (root / "step_3").iterdir()) == ["STABLE", "rank_0.jsonl", "rank_1.jsonl"]
    assert sorted(p.name for p in (root / "step_4").iterdir()) == ["rank_0.jsonl"]
    recs = records(root / "step_3" / "rank_0.jsonl")
    assert [(r["micro_step"], r["micro_sequence_idx"], r["export_sequence_idx"]) for r in recs] == [
        (0, 0, 0),
        (0, 2, 1),
        (1, 0, 2),
    ]
    assert [r["token_ids"] for r in recs] == [s["single"].token_ids, s["tool"].token_ids, s["tied"].token_ids]
    assert all(r["position_ids"] == list(range(len(r["token_ids"]))) for r in recs)  # padding trimmed
    assert recs[0]["trainer_logprobs"][0] == pytest.approx(math.log(1 / 151_936), rel=1e-6)  # the pack's pad value
    assert recs[0]["rl_weights"] == [None] * len(recs[0]["token_ids"])
    nan_rec = records(root / "step_3" / "rank_1.jsonl")[0]
    assert nan_rec["entropy"][3] is None  # _json_float: non-finite -> null


def expected_response(smp: Sample):
    start = smp.mask.index(True)
    return start, np.asarray(smp.token_ids[start:]), np.asarray(smp.mask[start:])


def test_loader_values(run):
    root, s, late = run
    res = load_run(root)
    assert res.run.source == "prime_rl_tokens"
    by_id = {t.id: t for t in res.run.trajectories}
    expect = {
        "step_3/rank_0/0": s["single"],
        "step_3/rank_0/1": s["tool"],
        "step_3/rank_0/2": s["tied"],
        "step_3/rank_1/0": s["nan_prompt"],
        "step_4/rank_0/0": late,
    }
    assert sorted(by_id) == sorted(expect)
    for tid, smp in expect.items():
        t = by_id[tid]
        start, ids, mask = expected_response(smp)
        assert t.group_id == tid and t.global_rewards == {} and t.turn_rewards == []
        assert t.prompt_token_ids.tolist() == smp.token_ids[:start]
        assert np.concatenate([seg.token_ids for seg in t.segments]).tolist() == ids.tolist()
        roles = np.concatenate([[seg.role] * seg.num_tokens for seg in t.segments])
        assert ((roles == "model") == mask).all()
        model = [seg for seg in t.segments if seg.role == "model"]
        on = np.flatnonzero(mask) + start
        for name, truth in (("log_probs", smp.trainer), ("rollout_log_probs", smp.inference), ("entropy", smp.entropy)):
            got = np.concatenate([getattr(g, name) for g in model])
            assert got.tolist() == np.asarray(truth, dtype=np.float32)[on].tolist(), (tid, name)
        assert all(g.log_probs is None and g.entropy is None for g in t.segments if g.role != "model")
        adv = np.float32(smp.advantage).item()
        assert t.metadata["logged_advantages"] == [adv if m else 0.0 for m in mask]
    tool = by_id["step_3/rank_0/1"]
    assert [seg.role for seg in tool.segments] == ["model", "tool", "model"]
    assert tool.segments[1].text == TOOL and tool.segments[2].text == "4<|im_end|>"
    assert tool.metadata | {"logged_advantages": None} == {
        "logged_advantages": None,
        "env_name": "math",
        "step": 3,
        "rank": 0,
        "micro_step": 0,
        "micro_sequence_idx": 2,
        "export_sequence_idx": 1,
    }


def test_load_report(run):
    """No rewards and no groups is said once; the step without STABLE is named; STABLE itself is not reported."""
    root, _, _ = run
    res = load_run(root)
    reasons = [p.reason for p in res.problems]
    assert all(p.scope == "run" for p in res.problems)
    assert sum("no reward and no group id" in r for r in reasons) == 1
    stable = [p for p in res.problems if p.field == "STABLE"]
    assert [p.file for p in stable] == [str(root / "step_4" / "rank_0.jsonl")]
    assert not any("STABLE" in p.file.rsplit("/", 1)[-1] or "subfolder" in p.reason for p in res.problems)


def test_detection_and_layouts(run):
    """A rank file is detected by content; a step folder and the token_exports folder load the same rows."""
    root, _, _ = run
    rank = root / "step_3" / "rank_0.jsonl"
    assert detect_format(rank) == "prime_rl_tokens"
    one = [t.id for t in load_run(rank).run.trajectories]
    step = [t.id for t in load_run(root / "step_3").run.trajectories]
    everything = [t.id for t in load_run(root).run.trajectories]
    assert one == ["step_3/rank_0/0", "step_3/rank_0/1", "step_3/rank_0/2"]
    assert step == [*one, "step_3/rank_1/0"]
    assert everything == [*step, "step_4/rank_0/0"]
    assert not [p for p in load_run(root / "step_3").problems if p.field == "STABLE"]


def bad_variants(rec: dict) -> dict[str, tuple[str, str, str]]:
    """name -> (the line, the field the problem must name, a word of its reason)."""
    n = len(rec["token_ids"])
    first_loss = rec["loss_mask"].index(True)

    def edit(**kw) -> str:
        return json.dumps({**rec, **kw})

    short = dict(rec)
    del short["entropy"]
    nan_line = json.dumps({**rec, "trainer_logprobs": [*rec["trainer_logprobs"][:-1], float("nan")]})
    null_lp = list(rec["trainer_logprobs"])
    null_lp[first_loss] = None
    restart = list(range(n))
    restart[5] = 0
    return {
        "missing": (json.dumps(short), "entropy", "missing"),
        "short column": (edit(entropy=rec["entropy"][:-1]), "entropy", f"{n - 1} values for {n} token_ids"),
        "long column": (edit(is_masked=[*rec["is_masked"], False]), "is_masked", "must align"),
        "nan": (nan_line, f"trainer_logprobs[{n - 1}]", "non-finite"),
        "null on a loss token": (edit(trainer_logprobs=null_lp), f"trainer_logprobs[{first_loss}]", "null"),
        "text": (edit(advantages=["0.5"] * n), "advantages[0]", "expected a number"),
        "bool": (edit(importance_ratio=[True] * n), "importance_ratio[0]", "expected a number"),
        "restart": (edit(position_ids=restart), "position_ids[5]", "restart"),
        "no loss": (edit(loss_mask=[False] * n), "loss_mask", "no loss token"),
        "schema": (edit(schema_version=2), "schema_version", "version"),
        "step": (edit(step=-1), "step", "non-negative"),
    }


CASES = ("missing", "short column", "long column", "nan", "null on a loss token", "text", "bool", "restart")
CASES += ("no loss", "schema", "step")


@pytest.mark.parametrize("case", CASES)
def test_malformed_records_are_named(run, tmp_path, case):
    """A bad record between two good ones: reported at its line and field, the good ones load; strict raises
    ``file:line: field: reason``."""
    root, _, _ = run
    good = (root / "step_3" / "rank_0.jsonl").read_text().splitlines()
    bad, field, word = bad_variants(json.loads(good[1]))[case]
    path = tmp_path / "rank_0.jsonl"
    path.write_text("\n".join([good[0], bad, good[2]]) + "\n")
    res = load_run(path)
    assert [t.id for t in res.run.trajectories] == ["step_3/rank_0/0", "step_3/rank_0/2"]
    record = [p for p in res.problems if p.scope == "record"]
    assert [(p.file, p.line, p.field) for p in record] == [(str(path), 2, field)]
    assert word in record[0].reason
    with pytest.raises(ValueError) as err:
        load_run(path, strict=True)
    assert str(err.value).startswith(f"{path}:2: {field}: ")


def exported(root, field: str, rows: list[dict], T: int) -> torch.Tensor:
    """An exported column over each record's response tokens, padded to [B, T] (null -> NaN)."""
    out = torch.full((len(rows), T), math.nan, dtype=torch.float64)
    for b, r in enumerate(rows):
        start = r["loss_mask"].index(True)
        vals = [math.nan if v is None else float(v) for v in r[field][start:]]
        out[b, : len(vals)] = torch.tensor(vals, dtype=torch.float64)
    return out


def test_ratio_and_mask_match_creditlens_policy_stage(run):
    """prime-rl's exported ``importance_ratio`` is CreditLens's ratio under profile prime-rl with the PPO ratio
    against the rollout (bypass); its ``is_masked`` is CreditLens's dppo_tv ``pg_clipped`` with ε_low = ε_high =
    0.2 (``DefaultLossConfig``), given prime-rl's own advantages, on every loss token whose advantage is not 0.
    Where the advantage is exactly 0, prime-rl's mask takes the low branch (``torch.where(A > 0, high, low)``) and
    marks tokens whose probability fell by more than ε_low; CreditLens marks none (such a token has no policy
    gradient either way)."""
    root, _, _ = run
    res = load_run(root / "step_3")
    rows = [r for f in ("rank_0.jsonl", "rank_1.jsonl") for r in records(root / "step_3" / f)]
    batch = res.run.to_batch()
    B, T = batch.action_mask.shape
    mask = batch.action_mask.bool()
    cfg = CreditConfig(
        profile="prime-rl",
        policy_loss="dppo_tv",
        policy_ratio_base="rollout",
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
    )
    ratio = compute_credit(batch, cfg, device="cpu").ratio  # the dashboard's view: no advantages needed
    want = exported(root, "importance_ratio", rows, T)
    torch.testing.assert_close(ratio[mask].double(), want[mask], rtol=1e-6, atol=0)

    adv = torch.zeros(B, T)
    for b, traj in enumerate(res.run.trajectories):
        logged = torch.tensor(logged_advantage_tokens(traj), dtype=torch.float32)
        adv[b, : len(logged)] = logged
    pg = policy_gradient(batch.old_log_probs, batch.rollout_log_probs, adv, mask.float(), cfg)
    is_masked = exported(root, "is_masked", rows, T) == 1
    assert ((is_masked & mask & (adv != 0)) == (pg.clipped & mask)).all()
    assert (pg.clipped & mask).sum() >= 3  # the fixture's drifts cross both bounds
    zero = is_masked & mask & (adv == 0)
    assert zero.any() and not (pg.clipped & zero).any()
    dp = batch.old_log_probs.exp() - batch.rollout_log_probs.exp()
    assert (dp[zero] < -0.2).all()


def test_dashboard_scheme_and_lint(run):
    """The run opens under prime-rl's default loss on prime-rl's own advantages (``FORMAT_SCHEMES``: estimator
    ``logged``); with no rewards, a recomputed advantage is 0 whatever the scheme, so the logged-advantage lint does
    not compare (it would flag every row), and under ``logged`` there is nothing recomputed to compare."""
    from dashboard.sources import format_scheme

    root, _, _ = run
    run_ = load_run(root / "step_3").run
    fields, why = format_scheme(run_.source)
    assert fields["policy_loss"] == "dppo_tv" and fields["policy_ratio_base"] == "rollout" and "no rewards" in why
    assert fields["estimator"] == "logged"
    batch = run_.to_batch()
    res = compute_credit(batch, CreditConfig(**fields), device="cpu")
    assert torch.equal(res.advantages, batch.logged_advantages * batch.action_mask) and res.advantages.any()
    assert run_lints(batch, CreditConfig(**fields), run=run_, checks=["logged_advantage_mismatch"]) == []
    cfg = CreditConfig(**fields | {"estimator": "grpo"})
    res = compute_credit(batch, cfg, device="cpu")
    assert not res.advantages.any()
    assert run_.metadata["no_rewards"]
    assert run_lints(batch, cfg, run=run_, checks=["logged_advantage_mismatch"]) == []
    run_.metadata.pop("no_rewards")  # the lint's guard is what keeps it quiet: without it, every row differs
    (finding,) = run_lints(batch, cfg, run=run_, checks=["logged_advantage_mismatch"])
    assert finding.count == 3  # the rows whose logged advantage is not 0 (tied's is 0)


def test_ce_weights_are_noted_not_trained(tmp_path):
    """A sample whose tool output carries a ce weight (ECHO-style observation prediction): prime-rl trains those
    tokens with its ce loss although they are not in the loss mask; the load says so once and shows them as
    context."""
    p = PROMPT.format(q="2+2?")
    parts = [(p, False), ("<tool_call>add(2,2)</tool_call>", True), (TOOL, False), ("4", True)]
    smp = Sample("math", parts, 1.0, 7)
    root = write_run(tmp_path, {0: {0: [[smp]]}})
    n_prompt = len(records(root / "step_0" / "rank_0.jsonl")[0]["token_ids"])  # all tokens, to size the stream
    smp2 = Sample("math", parts, 1.0, 7)
    materialize(smp2, get_tokenizer())
    smp2.ce_weights = [0.0 if m or i < smp2.mask.index(True) else 1.0 for i, m in enumerate(smp2.mask)]
    assert len(smp2.ce_weights) == n_prompt and 0 < sum(smp2.ce_weights) < n_prompt
    root2 = write_run(tmp_path / "ce", {0: {0: [[smp2]]}})
    rec = records(root2 / "step_0" / "rank_0.jsonl")[0]
    assert rec["ce_weights"] == smp2.ce_weights and rec["rl_weights"] == [None] * n_prompt
    plain, ce = load_run(root / "step_0"), load_run(root2 / "step_0")
    assert [p.field for p in plain.problems if p.field == "rl_weights"] == []
    assert [p.field for p in ce.problems if p.field == "rl_weights"] == ["rl_weights"]
    assert ce.run.trajectories == plain.run.trajectories


# ------------------------------------------------------------------------------------------------------- steps
def test_each_record_keeps_the_step_the_trainer_wrote(run):
    """``export(progress.step, ...)`` writes the step into every record and names the folder after it."""
    root, _, _ = run
    res = load_run(root)
    assert [(t.id, t.step) for t in res.run.trajectories] == [
        ("step_3/rank_0/0", 3),
        ("step_3/rank_0/1", 3),
        ("step_3/rank_0/2", 3),
        ("step_3/rank_1/0", 3),
        ("step_4/rank_0/0", 4),
    ]
    assert res.run.to_batch().steps.tolist() == [3, 3, 3, 3, 4]
    assert [t.step for t in load_run(root / "step_3" / "rank_1.jsonl").run.trajectories] == [3]
    assert not [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]


def test_two_steps_of_the_same_prompts(tmp_path):
    """Steps 5 and 6 train the same prompts (new samples, other advantages), on two ranks: the rank files of a
    step share it, the ids stay apart, every sample is its own group within its step, and each step's advantages
    are those of its folder alone (prime-rl's logged ones, and GRPO's zeros for singleton groups)."""
    s5, s6 = samples(), samples()
    for smp in s6.values():
        smp.advantage, smp.seed = smp.advantage + 0.25, smp.seed + 100
    root = write_run(tmp_path, {5: {0: [[s5["single"], s5["tool"]]], 1: [[s5["tied"]]]}})
    write_run(tmp_path, {6: {0: [[s6["single"]], [s6["tool"]]], 1: [[s6["tied"], s6["nan_prompt"]]]}})
    both = load_run(root)
    assert not [p for p in both.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert [(t.id, t.step) for t in both.run.trajectories] == [
        ("step_5/rank_0/0", 5),
        ("step_5/rank_0/1", 5),
        ("step_5/rank_1/0", 5),
        ("step_6/rank_0/0", 6),
        ("step_6/rank_0/1", 6),
        ("step_6/rank_1/0", 6),
        ("step_6/rank_1/1", 6),
    ]
    batch = both.run.to_batch()
    assert batch.steps.tolist() == [5, 5, 5, 6, 6, 6, 6]
    assert batch.group_ids.tolist() == list(range(7))  # no group id in the export: each sample alone
    logged = CreditConfig(profile="prime-rl", estimator="logged")
    for step in (5, 6):
        alone = load_run(root / f"step_{step}")
        assert {t.step for t in alone.run.trajectories} == {step}
        adv = advantages_of_step(both, alone, step, logged)
        ab = alone.run.to_batch()
        assert torch.equal(adv, ab.logged_advantages * ab.action_mask) and adv.any()
        assert not advantages_of_step(both, alone, step, CreditConfig(profile="prime-rl", estimator="grpo")).any()
    step6 = [t for t in both.run.trajectories if t.step == 6]
    assert [t.metadata["logged_advantages"][0] for t in step6] == [0.75, -0.5, 0.25, 1.25]


def test_a_renamed_step_folder_keeps_the_records_step(run, tmp_path):
    """A step folder renamed after the fact: the records' ``step`` wins, the disagreement is noted naming the file."""
    root, _, _ = run
    moved = tmp_path / "token_exports" / "step_9"
    moved.mkdir(parents=True)
    (moved / "rank_0.jsonl").write_text((root / "step_4" / "rank_0.jsonl").read_text())
    (moved / "STABLE").touch()
    res = load_run(tmp_path / "token_exports")
    assert [(t.id, t.step) for t in res.run.trajectories] == [("step_4/rank_0/0", 4)]
    (note,) = [p for p in res.problems if (p.field or "").rsplit(".", 1)[-1] == "step"]
    assert note.scope == "run" and note.file == str(moved / "rank_0.jsonl") and note.line == 1
    assert "records say step 4 but the folder name 'step_9' says step 9" in note.reason
