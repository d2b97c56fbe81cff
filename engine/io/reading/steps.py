"""Which training step each loaded trajectory belongs to, and what is wrong with a run's steps.

A trainer computes advantages one step's batch at a time, so a step is the unit every group and batch-wide
statistic lives in. Where a trainer says the step, in the order this module asks:

1. the record itself (verl's ``step``, TRL's ``step`` column, rLLM's ``training_step``, ROLL's ``global_step``,
   prime-rl's token-export ``step``, the native ``step`` field): the adapter sets ``Trajectory.step``;
2. the file's name, as the trainer names a step's file (``Adapter.step_file``: verl ``<step>.jsonl``, TRL
   ``completions_<step>.parquet``, slime ``<rollout_id>.pt``, ROLL ``rollout_dump_data.step_<N>.jsonl``);
3. the nearest folder between the run folder and the file named as the trainer names a step's folder
   (``Adapter.step_folder``: prime-rl ``step_<N>``, rLLM ``train_step_<N>_epoch_<E>``, AReaL ``<version>``).

A record whose own step disagrees with its file's name keeps its own (noted: the file was renamed or copied).
Run-level rules (``StepCheck``): in a run where some files say a step, a file none of whose records has one is
skipped with a problem (merging it into a step would change that step's groups); two files that claim the same
step are kept only when they are shards of one step folder (prime-rl's ``rank_R`` files), otherwise the later
file's trajectories of that step are skipped with a problem naming both; a file whose records go back to an
earlier step is noted (the run is ordered by step number, whatever the order in the file). A run in which no file
says a step is one step: its trajectories keep ``step=None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.io.data.model import Trajectory
from engine.io.reading.problems import ProblemLog

PARENT_LEVELS = 3  # a single file's step folder is looked for this many folders up
LINES_NAMED = 20  # records without a step in a file with steps: named one by one, then counted
MAX_STEP = 2**53  # beyond a float64's integers: no trainer counts steps this high (a hash, not a step)


def match_step(pattern: re.Pattern[str] | None, name: str) -> int | None:
    """The step ``pattern`` (group 1) reads from ``name``, or None when it does not fullmatch."""
    if pattern is None or (m := pattern.fullmatch(name)) is None:
        return None
    step = int(m.group(1))
    return step if step < MAX_STEP else None


@dataclass(frozen=True)
class PathStep:
    """The step a file's path gives: ``step`` (None: the path names none), ``where`` it was read (for messages) and
    the step ``folder`` it came from (None: the file's own name, or no step), whose files are shards of one step."""

    step: int | None = None
    where: str = ""
    folder: Path | None = None


def path_step(
    file: Path, step_file: re.Pattern[str] | None, step_folder: re.Pattern[str] | None, root: Path | None
) -> PathStep:
    """The step ``file``'s name gives, else its nearest step folder.

    ``root``: the folder the run was opened at (the folders from it down to the file are asked, the root
    included: opening ``step_5/`` itself gives step 5; then ``PARENT_LEVELS`` folders above it: opening
    ``step_5/train/effective/`` too); None for a single file (its ``PARENT_LEVELS`` parents)."""
    if (step := match_step(step_file, file.name)) is not None:
        return PathStep(step, f"file name {file.name!r}")
    parents = list(file.parents)
    if root is not None and root in parents:  # the folders from the file up to the run folder, then above it
        parents = parents[: parents.index(root) + 1] + list(root.parents)[:PARENT_LEVELS]
    else:
        parents = parents[:PARENT_LEVELS]
    for folder in parents:
        if (step := match_step(step_folder, folder.name)) is not None:
            return PathStep(step, f"folder name {folder.name!r}", folder)
    return PathStep()


@dataclass
class _FileSteps:
    file: Path
    steps: set[int]
    shard_folder: Path | None  # the step folder the file's step came from (its shards may share the step)
    unknown: int  # trajectories with no step from the record or the path
    ids: frozenset[str]  # the file's trajectories
    unknown_lines: list[tuple[int | None, str]] = field(default_factory=list)  # (line, prefix) of the first ones


@dataclass
class StepCheck:
    """Collects each file's steps during a load and applies the run-level rules (module docstring)."""

    log: ProblemLog
    files: list[_FileSteps] = field(default_factory=list)

    def assign(self, file: Path, trajectories: list[Trajectory], found: PathStep, lines) -> None:
        """Give the step ``file``'s path gives (``found``, from ``path_step``) to its trajectories that do not
        state one; note disagreements and steps that go backwards in the file. ``lines``: each trajectory's (line or
        None, field prefix: ``[3].`` in a JSON array), where its problems point."""
        step, where = found.step, found.where
        unknown, disagree, last, back = 0, None, None, None
        unknown_lines: list[tuple[int | None, str]] = []
        for traj, (line, prefix) in zip(trajectories, lines, strict=True):
            if traj.step is None:
                traj.step = step
            elif step is not None and traj.step != step and disagree is None:
                disagree = (traj.step, line, prefix)
            if traj.step is None:
                unknown += 1
                if len(unknown_lines) < LINES_NAMED:
                    unknown_lines.append((line, prefix))
            elif last is not None and traj.step < last and back is None:
                back = (last, traj.step, line, prefix)
            last = traj.step if traj.step is not None else last
        if disagree is not None:
            self.log.note(
                str(file),
                f"{disagree[2]}step",
                f"records say step {disagree[0]} but the {where} says step {step}; each record keeps the step it "
                "states (was the file renamed or copied from another step?)",
                disagree[1],
            )
        if back is not None:
            self.log.note(
                str(file),
                f"{back[3]}step",
                f"steps out of order: step {back[1]} after step {back[0]}; the run orders its steps by number",
                back[2],
            )
        steps = {t.step for t in trajectories if t.step is not None}
        ids = frozenset(t.id for t in trajectories)
        self.files.append(_FileSteps(file, steps, found.folder, unknown, ids, unknown_lines))

    def resolve(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        """The run's trajectories after the run-level rules (problems logged): every one with an int step, or, where
        no file says a step, every one with None (one step)."""
        if not any(f.steps for f in self.files):  # no file says a step: the run is one step, unnumbered
            return trajectories
        dropped: set[tuple[str, int | None]] = set()  # (trajectory id, step) pairs skipped
        owner: dict[int, _FileSteps] = {}
        for f in self.files:
            if f.unknown and not f.steps:
                why = (
                    "its step cannot be read: neither its records nor its file or folder name say which training "
                    "step it holds, while other files of this run do; file skipped (name the file as the trainer "
                    "does, or give each record a step)"
                )
                self.log.add(str(f.file), None, "step", why)
                dropped |= {(i, None) for i in f.ids}
            elif f.unknown:  # some records of a file with steps state none: each named (the first ones)
                why = (
                    "no training step while the file's other records have one; this record is skipped (it would join "
                    "some step's batch by guess)"
                )
                for line, prefix in f.unknown_lines:
                    self.log.add(str(f.file), line, f"{prefix}step", why)
                if f.unknown > len(f.unknown_lines):
                    more = f.unknown - len(f.unknown_lines)
                    self.log.note(str(f.file), "step", f"{more:,} more records without a step skipped")
                dropped |= {(i, None) for i in f.ids}
            for step in sorted(f.steps):
                first = owner.setdefault(step, f)
                if first is f or (first.shard_folder is not None and first.shard_folder == f.shard_folder):
                    continue
                dropped |= {(i, step) for i in f.ids}
                self.log.add(
                    str(f.file),
                    None,
                    "step",
                    f"step {step} is also claimed by {first.file}; two files holding one step would merge two "
                    f"batches into one, so this file's step-{step} trajectories are skipped",
                )
        return [t for t in trajectories if (t.id, t.step) not in dropped]
