"""The bundled multi-step sample ``sample_runs/search_steps``: seeded, reproduced by its command, and telling the
story its README promises, measured with the engine step by step (each step computed as its own batch)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from test_io_support import SAMPLES

from engine.__main__ import main
from engine.config import CreditConfig
from engine.credit import compute_credit
from engine.io import load_run
from engine.io.data.run import Run
from engine.io.synth import PRESETS
from engine.io.synth.search_steps import (
    LONG_CORRECT_FROM,
    RETRIEVER_STRETCH,
    REWARD_CHANGE_STEP,
    STEPS,
    step_trajectories,
)

FOLDER = SAMPLES / "search_steps"
STRETCH = range(RETRIEVER_STRETCH[0], RETRIEVER_STRETCH[1] + 1)


@pytest.fixture(scope="module")
def loaded():
    return load_run(FOLDER)


@pytest.fixture(scope="module")
def per_step(loaded):
    """Per step: solve rate, share of zero-variance groups under GRPO, tool tokens per trajectory, mean entropy of
    the model tokens, and the within-group correlation of advantage with response length (mixed groups only)."""
    run = loaded.run
    out = {}
    for s in run.steps:
        sr = run.step_run(s)
        batch = sr.to_batch()
        res = compute_credit(batch, CreditConfig(profile="verl", estimator="grpo"))
        trajs = sr.trajectories
        scores = res.scores.numpy()
        assert scores.tolist() == [t.global_rewards["score"] for t in trajs]
        std = res.group_std.numpy()
        groups = np.array([t.group_id for t in trajs])
        zero = {g: bool(std[groups == g][0] == 0) for g in np.unique(groups)}
        mask = batch.action_mask.numpy()
        adv = (res.advantages.numpy() * mask).sum(1) / mask.sum(1)
        assert np.all(adv[std == 0] == 0)  # GRPO gives a zero-variance group no credit
        length = mask.sum(1)
        centred = length - np.array([length[groups == g].mean() for g in groups])
        mixed = std > 0
        out[s] = {
            "solve": float((scores >= 1).mean()),
            "zero_var": float(np.mean(list(zero.values()))),
            "tool": float(np.mean([sum(x.num_tokens for x in t.segments if x.role == "tool") for t in trajs])),
            "searches": float(np.mean([sum(x.role == "tool" for x in t.segments) for t in trajs])),
            "entropy": float(
                np.concatenate([x.entropy for t in trajs for x in t.segments if x.role == "model"]).mean()
            ),
            "length_corr": float(np.corrcoef(centred[mixed], adv[mixed])[0, 1]),
        }
    return out


def _mean(per_step: dict, key: str, steps) -> float:
    return float(np.mean([per_step[s][key] for s in steps]))


# ------------------------------------------------------------------------------------------------ the folder
def test_preset_is_seeded():
    assert "search_steps" in PRESETS

    def digest(seed: int) -> str:
        return Run([t for s in (1, REWARD_CHANGE_STEP, STEPS) for t in step_trajectories(s, seed)]).content_hash

    assert digest(0) == digest(0)
    assert digest(1) != digest(0)


def test_bundled_folder_loads_as_40_steps(loaded):
    assert loaded.problems == []
    run = loaded.run
    assert run.name == "search_steps" and run.source == "native" and run.tokenizer == "qwen2.5"
    assert run.steps == list(range(1, STEPS + 1)) and len(run) == STEPS * 64
    assert sorted(p.name for p in FOLDER.iterdir()) == ["README.md"] + [f"step_{s:04d}.parquet" for s in run.steps]
    assert sum(p.stat().st_size for p in FOLDER.iterdir()) < 3 * 2**20
    assert run.metadata["synthetic"] is True and run.metadata["story"]["reward_change_step"] == REWARD_CHANGE_STEP
    for s in (1, 26, STEPS):
        trajs = run.step_run(s).trajectories
        # the same 8 prompts (group ids) and rollout ids in every step: groups stay apart because steps do
        assert Counter(t.group_id for t in trajs) == {f"p{q}": 8 for q in range(8)}
        assert len({t.id for t in trajs}) == 64
        for t in trajs:
            assert t.step == s and set(t.global_rewards) == {"score"}
            assert {"log_probs", "rollout_log_probs", "ref_log_probs", "entropy"} <= set(t.metadata["synthesized"])
            for seg in t.segments:
                assert (seg.role == "tool") == seg.text.startswith("\n\n<information>")
                if seg.role == "model":
                    assert all(getattr(seg, f) is not None for f in ("log_probs", "rollout_log_probs", "entropy"))
                    gap = np.abs(seg.log_probs - seg.rollout_log_probs)
                    assert gap.max() < 0.69 and gap.mean() > 0  # a small train/inference mismatch, not a broken one
    batch = run.step_run(1).to_batch()
    assert batch.old_log_probs is not None and batch.rollout_log_probs is not None
    assert batch.ref_log_probs is not None and batch.entropy is not None and batch.values is None
    # one batch of all 40 steps computes each step alone: 40 x 8 groups, not 8
    res = compute_credit(run.to_batch(), CreditConfig(profile="verl", estimator="grpo"))
    assert len(res.step_rows) == STEPS


@pytest.mark.slow  # synthesizes and writes the 40-step folder again (4 s)
def test_command_reproduces_the_bundled_folder(tmp_path, loaded):
    out = tmp_path / "search_steps"
    assert main(["synth", "--preset", "search_steps", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"step_{s:04d}.parquet" for s in range(1, STEPS + 1)]
    again = load_run(out)
    assert again.problems == [] and again.run.content_hash == loaded.run.content_hash
    assert main(["synth", "--preset", "search_steps", "--out", str(tmp_path / "x.parquet")]) == 2  # a folder only


# ------------------------------------------------------------------------------------------------ the story
def test_solve_rate_rises_and_entropy_falls(per_step):
    first, last = _mean(per_step, "solve", range(1, 6)), _mean(per_step, "solve", range(STEPS - 4, STEPS + 1))
    assert first < 0.2 and last > 0.75 and last - first > 0.5
    blocks = [_mean(per_step, "solve", range(a, a + 10)) for a in (1, 11, 21, 31)]
    assert blocks == sorted(blocks)
    entropy = [_mean(per_step, "entropy", range(a, a + 10)) for a in (1, 11, 21, 31)]
    assert entropy == sorted(entropy, reverse=True) and per_step[1]["entropy"] - per_step[STEPS]["entropy"] > 0.4


def test_reward_change_makes_zero_variance_groups(loaded, per_step):
    run = loaded.run
    before = {t.global_rewards["score"] for s in range(1, REWARD_CHANGE_STEP) for t in run.step_run(s).trajectories}
    after = {
        t.global_rewards["score"] for s in range(REWARD_CHANGE_STEP, STEPS + 1) for t in run.step_run(s).trajectories
    }
    assert before == {0.0, 0.5, 1.0} and after == {0.0, 1.0}
    zv_before = _mean(per_step, "zero_var", range(1, REWARD_CHANGE_STEP))
    zv_after = _mean(per_step, "zero_var", range(REWARD_CHANGE_STEP, STEPS + 1))
    assert zv_before < 0.15 and zv_after > 0.4 and zv_after > 3 * zv_before


def test_retriever_stretch_multiplies_tool_tokens(loaded, per_step):
    inside = _mean(per_step, "tool", STRETCH)
    outside = _mean(per_step, "tool", [s for s in per_step if s not in STRETCH])
    assert inside >= 3 * outside
    # per search, every step of the stretch reads ~4x the documents of any other step
    per_search = {s: v["tool"] / v["searches"] for s, v in per_step.items()}
    assert min(per_search[s] for s in STRETCH) > 3 * max(v for s, v in per_search.items() if s not in STRETCH)
    run = loaded.run
    for s in (RETRIEVER_STRETCH[0] - 1, RETRIEVER_STRETCH[0], RETRIEVER_STRETCH[1], RETRIEVER_STRETCH[1] + 1):
        k = {t.metadata["retriever_top_k"] for t in run.step_run(s).trajectories}
        assert k == ({12} if s in STRETCH else {3})
    # without state masking the documents are trained on; with Search-R1's own masking they are not
    sr = run.step_run(RETRIEVER_STRETCH[0] + 2)
    batch = sr.to_batch()
    tool = np.zeros(tuple(batch.action_mask.shape), dtype=bool)
    for i in range(len(sr)):
        roles = sr.token_roles(i)
        tool[i, : len(roles)] = [r == "tool" for r in roles]
    weights = {}
    for masking in (True, False):
        res = compute_credit(batch, CreditConfig(profile="search-r1", estimator="grpo", state_masking=masking))
        w = np.abs(res.effective_weights.numpy())
        weights[masking] = w[tool].sum() / w.sum()
    assert weights[True] == 0 and weights[False] > 0.5


def test_longer_correct_answers_late_give_a_length_slope(per_step):
    late = [per_step[s]["length_corr"] for s in range(LONG_CORRECT_FROM, STEPS + 1)]
    early = _mean(per_step, "length_corr", range(1, LONG_CORRECT_FROM))
    assert min(late) > 0.6 and early < 0.25
