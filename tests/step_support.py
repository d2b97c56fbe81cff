"""Checks shared by the trainer-dump step tests (``test_io_writer_*.py``): a run folder of two steps loads each
trajectory with its step, keeps groups apart across steps, and computes each step as its file (or folder) alone."""

from __future__ import annotations

from collections import Counter

import torch

from engine import CreditConfig, compute_credit
from engine.io import load_run
from engine.io.data.run import Run


def group_sizes(run: Run) -> dict[int | None, list[int]]:
    """Each step's group sizes, in the order the groups first appear."""
    counts = Counter((t.step, t.group_id) for t in run.trajectories)
    out: dict[int | None, list[int]] = {}
    for (step, _), n in counts.items():
        out.setdefault(step, []).append(n)
    return out


def assert_ids_unique_per_step(run: Run) -> None:
    keys = [(t.step, t.id) for t in run.trajectories]
    assert len(keys) == len(set(keys)), "trajectory ids repeat within a step"


def assert_step_as_alone(run: Run, step: int, alone_path, config: CreditConfig, **load_kw) -> None:
    """``run``'s rows of ``step`` get exactly the advantages of computing ``alone_path`` (that step's file) alone."""
    alone = load_run(alone_path, **load_kw).run
    rows = [i for i, t in enumerate(run.trajectories) if t.step == step]
    assert [run.trajectories[i].id for i in rows] == [t.id for t in alone.trajectories]
    assert {t.step for t in alone.trajectories} == {step}
    res = compute_credit(run.to_batch(), config, device="cpu")
    one = compute_credit(alone.to_batch(), config, device="cpu").advantages
    T = one.shape[1]
    assert torch.equal(res.advantages[rows, :T], one)
    assert not res.advantages[rows, T:].any()  # the wider run's padding past this step's tokens
    assert one.abs().sum() > 0  # not all ties: a step of zero advantages would pass whatever the grouping


def advantages_of_step(both, alone, step: int, cfg: CreditConfig) -> torch.Tensor:
    """compute_credit on the whole run and on ``step``'s folder alone (two ``LoadResult``s): step's rows must be the
    same rows, in the same order, with exactly the advantages computing the folder alone gives (returned)."""
    batch, alone_batch = both.run.to_batch(), alone.run.to_batch()
    rows = (batch.steps == step).nonzero().squeeze(1)
    assert [both.run.trajectories[i].id for i in rows.tolist()] == [t.id for t in alone.run.trajectories]
    res, ref = compute_credit(batch, cfg, device="cpu"), compute_credit(alone_batch, cfg, device="cpu")
    width = ref.advantages.shape[1]
    assert torch.equal(res.advantages[rows, :width], ref.advantages)
    assert not res.advantages[rows, width:].any()
    return ref.advantages
