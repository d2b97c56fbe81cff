"""Adapter ``trl_completions``: TRL GRPOTrainer's completion logs (``completions/completions_<step>.parquet``).

Written by ``GRPOTrainer.log`` (huggingface/trl ``trl/trainer/grpo_trainer.py``, commit ``f2cd5771``) when
``log_completions=True``: one pandas row per completion of the latest generation batch, columns ``step``,
``prompt``, ``completion``, one float column per reward function (named after the function; ``NaN`` where it
returned ``None``), the columns reward functions added with ``log_extra``, and ``advantage`` (TRL's own, one
float per completion). What that means here:

* **Text only, re-tokenized.** ``prompt``/``completion`` are ``batch_decode(..., skip_special_tokens=True)``
  of the ids TRL trained on, so the chat-template special tokens and the end-of-sequence token are gone. The
  completion is one ``model`` segment tokenized with the load's tokenizer (``load_run(tokenizer=...)``; the
  offline Qwen2.5 one by default): its ids are what that tokenizer gives for the text, which may differ from
  TRL's model tokenizer, and the EOS token the policy generated is not re-appended (which token it was depends
  on the model). Tool calls inside a completion (``GRPOTrainer(tools=...)``) cannot be told apart from the text.
* **Rewards.** Each reward-function column is a global reward component of that name. TRL trains on the
  weighted sum ``Σ_k reward_weights[k] · r_k`` (NaN counted as 0), but the file does not hold the weights: a
  file with several reward columns gets one problem saying the weights are unknown and that CreditLens's
  scheme weighs each column 1.0 (TRL's default) unless ``CreditConfig.global_weights`` names them. A NaN
  (``None`` from the reward function) is stored as 0, as TRL's ``nansum`` counts it, and marked absent
  (``global_rewards_present``: ``normalize_then_sum``, estimator ``gdpo``, leaves it out of that function's group
  statistics, as TRL's ``nanmean``/``nanstd`` do; one problem per column);
  a row whose every reward is NaN is skipped (TRL leaves it out of the group baseline and gives it advantage 0).
  Numeric ``log_extra`` columns cannot be told apart from reward columns (both sit between ``completion`` and
  ``advantage``); they are taken as reward columns and the weights problem lists them all. Other columns go to
  ``metadata.logged_columns``; one there that is neither numbers, text nor booleans (a list, a struct, bytes, a
  decimal) is named in a problem (it is no reward TRL wrote). TRL's rewards and advantages are float32 tensors: a
  cell of ±inf, or beyond float32, skips its row with a problem naming the column (only NaN means "no reward").
* **Groups.** TRL normalises over consecutive blocks of ``num_generations`` rows (``rewards.view(-1,
  num_generations)``), which the file does not store; the block boundaries are recovered as runs of the same
  prompt text, and group ids carry the file name so that the same prompt in two steps' files never merges. When
  the same prompt fills two adjacent blocks, a run of ``k × G`` rows (``G`` the shortest run) is split into
  ``k`` groups of ``G`` (a problem says so); runs that are not a multiple of ``G`` are reported and kept whole, and
  so is a file whose rows all share one prompt. Blocks of one prompt that fill every run twice over cannot be
  told apart (the ``logged_advantage_mismatch`` lint then shows it).
* **Logged advantage** -> ``metadata.logged_advantage``. The file has no truncation flag: ``metadata.truncated``
  is left unset (False) and the completion-length limit is unknown.
* **Step.** ``GRPOTrainer.log`` (same file and commit, the ``table`` it builds after ``super().log``) writes
  ``"step": [self.state.global_step] * N`` and names the file ``f"completions_{self.state.global_step:05d}.parquet"``
  in ``<output_dir>/completions/`` (no step folder): each row's ``step`` column -> ``Trajectory.step`` (and
  ``metadata.step``); ``STEP_FILE`` (``completions_<5+ digits>.parquet``) gives the step of a file whose ``step``
  column is null. The file holds the rows of the ``_logs`` deques (``maxlen=generation_batch_size``) as they stand at
  that logging step: one generation batch, stamped with the step at which it was logged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

from engine.config import KGR1_GLOBAL_WEIGHTS
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_float
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_step
from engine.io.reading.problems import RecordError

NAME = "trl_completions"
REQUIRED = ("step", "prompt", "completion", "advantage")
STEP_FILE = re.compile(r"completions_(\d{5,})\.parquet")  # f"completions_{global_step:05d}.parquet"


def sniff_columns(names: list[str]) -> bool:
    return set(REQUIRED) <= set(names)


def _is_numeric(column_type: object) -> bool:
    """An integer or float Arrow column: what a reward column can be (TRL logs a float32 tensor's ``tolist()``)."""
    import pyarrow as pa

    return pa.types.is_floating(column_type) or pa.types.is_integer(column_type)


def _is_text_like(column_type: object) -> bool:
    """Text, booleans or nothing: what a ``log_extra`` column holds besides numbers, kept as logged columns."""
    import pyarrow as pa

    return (
        pa.types.is_string(column_type)
        or pa.types.is_large_string(column_type)
        or pa.types.is_boolean(column_type)
        or pa.types.is_null(column_type)
    )


def _read_columns(path: Path) -> tuple[dict[str, list], dict[str, object]]:
    """(column values, column Arrow types) of the file, pandas' index columns left out."""
    from engine.io.store.native_parquet import read_checked

    table = read_checked(path)  # footer and decoded sizes against the load ceiling, before any value is decoded
    names = [name for name in table.column_names if not name.startswith("__")]
    types = {name: table.schema.field(name).type for name in names}
    return {name: table.column(name).to_pylist() for name in names}, types


def prompt_runs(prompts: list) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of equal consecutive prompts."""
    runs, start = [], 0
    for i in range(1, len(prompts) + 1):
        if i == len(prompts) or prompts[i] != prompts[start]:
            runs.append((start, i))
            start = i
    return runs


def group_blocks(prompts: list, ctx: LoadContext) -> list[int]:
    """Group index of each row: TRL's blocks of ``num_generations`` rows, recovered from runs of one prompt."""
    runs = prompt_runs(prompts)
    size = min((b - a for a, b in runs), default=0)
    if len(runs) == 1 and size > 1:
        ctx.note(
            "prompt",
            f"every row has the same prompt: kept as one group of {size} (if num_generations was smaller, TRL "
            "normalised consecutive blocks of num_generations rows; the file does not say)",
        )
    groups, g = [], 0
    for a, b in runs:
        n = b - a
        if n > size and n % size == 0:
            ctx.note(
                f"row[{a}:{b}].prompt",
                f"the same prompt fills {n} consecutive rows, {n // size} × the smallest group ({size}); split into "
                f"{n // size} groups of {size} (TRL normalises consecutive blocks of num_generations rows)",
            )
        elif n != size:
            ctx.note(
                f"row[{a}:{b}].prompt",
                f"a group of {n} rows where the smallest has {size}; kept as one group (num_generations is not in "
                "the file)",
            )
        k = n // size if n % size == 0 else 1
        for j in range(n):
            groups.append(g + (j * k) // n)
        g += k
    return groups


def _reward_columns(cols: dict[str, list], types: dict[str, object], ctx: LoadContext) -> tuple[list[str], list[str]]:
    """(reward columns, other columns): the numeric columns between ``completion`` and ``advantage`` are rewards.
    A column there that is not numbers is kept with the logged columns, never read as a reward, and named in a
    problem when it cannot be a ``log_extra`` column: it comes before a reward column (TRL writes the rewards
    first), it holds what no log_extra column does (a list, a struct, bytes, a decimal), or every value is a number
    written as text."""
    names = list(cols)
    between = names[names.index("completion") + 1 : names.index("advantage")]
    others = [c for c in names if c not in REQUIRED and c not in between]
    rewards = [c for c in between if _is_numeric(types[c])]
    if not rewards:  # GRPOTrainer needs a reward function, and logs one float column for each
        held = ", ".join(f"{c!r} ({types[c]})" for c in between) or "none"
        ctx.note(
            between[0] if between else "advantage",
            "no column of numbers between completion and advantage, where TRL writes one float column per reward "
            f"function (columns there: {held}; kept in metadata.logged_columns): the trajectories load without "
            "rewards",
        )
        return [], between + others
    last_reward = max(between.index(c) for c in rewards)
    for k, name in enumerate(between):
        if name in rewards:
            continue
        if k < last_reward:  # GRPOTrainer.log writes {..., **rewards, **extra, "advantage"}: extras come after rewards
            ctx.note(
                name,
                f"a column of {types[name]} values before the reward column {between[last_reward]!r}, where TRL "
                "writes only reward columns (floats; its log_extra columns come after them): a reward column "
                "stored as another type? Not read as a reward; kept in metadata.logged_columns",
            )
        elif not _is_text_like(types[name]):
            ctx.note(
                name,
                f"a column of {types[name]} values where TRL writes its reward columns (a float per row): not read "
                "as a reward; kept in metadata.logged_columns",
            )
        elif _numbers_as_text(cols[name]):
            ctx.note(
                name,
                "every value is a number written as text, where TRL writes its reward columns as floats: a reward "
                "column stored as text? Not read as a reward; kept in metadata.logged_columns",
            )
    return rewards, [c for c in between if c not in rewards] + others


def _numbers_as_text(values: list) -> bool:
    """True if ``values`` (a text column) holds at least one value and every one that is not null reads as a number:
    a reward column written as text rather than a ``log_extra`` column of words."""
    seen = False
    for value in values:
        if value is None:
            continue
        if not isinstance(value, str):
            return False
        try:
            float(value)
        except ValueError:
            return False
        seen = True
    return seen


def _reward_notices(cols: dict[str, list], rewards: list[str], ctx: LoadContext) -> None:
    if len(rewards) > 1:
        named = {k: w for k, w in KGR1_GLOBAL_WEIGHTS if k in rewards}
        but = f" (the default scheme's KG-R1 weights name {named})" if named else ""
        ctx.note(
            "reward_weights",
            f"TRL trains on the weighted sum of the reward columns {rewards}; the file does not hold "
            "GRPOConfig.reward_weights, so each column weighs 1.0 (TRL's default) unless CreditConfig.global_weights "
            f"names it{but} (numeric log_extra columns would be counted here too)",
        )
    for name in rewards:
        nan = sum(1 for v in cols[name] if v is None or (isinstance(v, float) and math.isnan(v)))
        if nan:
            ctx.note(
                name,
                f"{nan} row(s) are NaN (the reward function returned None); stored as 0, as TRL's nansum counts them, "
                "and left out of the function's own group statistics under normalize_then_sum (estimator gdpo)",
            )


def _reward(value: object, name: str) -> float | None:
    """A reward cell: None for NaN (TRL's None from the reward function), else a number a float32 holds; ±inf or a
    number beyond float32 is a ``RecordError`` (TRL's rewards are a float32 tensor: it writes neither)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return as_float(value, name)


def _trajectory(cols: dict, i: int, rewards: list[str], extras: list[str], group: str, stem: str) -> Trajectory:
    prompt, completion = cols["prompt"][i], cols["completion"][i]
    if not isinstance(prompt, str):
        raise RecordError("prompt", "expected a string")
    if not isinstance(completion, str):
        raise RecordError("completion", "expected a string")
    if not completion:
        raise RecordError("completion", "empty completion: the response has zero tokens")
    values = {name: _reward(cols[name][i], name) for name in rewards}
    if rewards and all(v is None for v in values.values()):
        raise RecordError(
            None,
            "every reward function returned None (NaN): TRL leaves this completion out of its group's baseline and "
            "gives it advantage 0; skipped",
        )
    advantage = as_float(cols["advantage"][i], "advantage")  # TRL's float32 advantages: finite, never beyond
    step = cols["step"][i]
    step = None if step is None or (isinstance(step, float) and math.isnan(step)) else as_step(step, "step")
    metadata: dict = {"step": step, "logged_advantage": advantage}
    logged = {c: cols[c][i] for c in extras if cols[c][i] is not None}
    if logged:
        metadata["logged_columns"] = logged
    return Trajectory(
        id=f"{stem}/row-{i}",
        group_id=group,
        prompt=prompt,
        segments=[Segment(role="model", text=completion)],
        global_rewards={name: v for name, v in values.items() if v is not None},  # absent: stored 0, marked absent
        metadata=metadata,
        step=step,
    )


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """One trajectory per row; a bad row is a problem ``row[i].<field>``."""
    cols, types = _read_columns(path)
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise ValueError(f"{path}: a TRL completions log needs columns {list(REQUIRED)}; missing {missing}")
    rewards, extras = _reward_columns(cols, types, ctx)
    _reward_notices(cols, rewards, ctx)
    stem = Path(path).stem
    groups = group_blocks(cols["prompt"], ctx)
    n = len(cols["prompt"])
    for i in range(n):
        traj = ctx.attempt(None, f"row[{i}].", _trajectory, cols, i, rewards, extras, f"{stem}/group-{groups[i]}", stem)
        if traj is not None:
            yield None, f"row[{i}].", traj
        if i % 256 == 0:
            ctx.progress(i / max(n, 1), f"reading {Path(path).name}: row {i:,} of {n:,}")
