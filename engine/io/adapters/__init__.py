"""Input formats. Each adapter turns one file into ``(line, field_prefix, Trajectory)`` items and reports bad
records to the load context; detection (``engine.io.detect``) asks each adapter's ``sniff`` in order."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from engine.io.adapters import (
    areal_rollout,
    art_yaml,
    kgr1,
    native,
    nemo_gym,
    prime_rl_tokens,
    rllm,
    roll_rollout,
    skyrl_eval,
    slime_rollout,
    tagged_text,
    trl_completions,
    verifiers_traces,
    verl_rollout,
    verl_tensors,
)
from engine.io.data.model import Trajectory
from engine.io.reading.context import LoadContext

Reader = Callable[[Path, LoadContext], Iterator[tuple[int | None, str, Trajectory]]]


@dataclass(frozen=True)
class Adapter:
    r"""A named input format: ``read`` the file; ``sniff`` a first JSON record / ``sniff_columns`` a column list.

    ``specific``: the sniff requires keys only one trainer's writer writes, so detection asks it before the
    generic sniffs (a tagged AReaL ``completion`` is not a Search-R1 transcript).

    ``step_file`` / ``step_folder``: how the trainer names a step's file / folder (a pattern ``fullmatch``-ed on
    the name, group 1 the step: verl ``(\d+)\.jsonl``, prime-rl ``step_(\d+)``); from the adapter module's
    ``STEP_FILE`` / ``STEP_FOLDER``. A step a record states itself is read by the adapter (``Trajectory.step``);
    these give the step of records that do not (``engine.io.reading.steps``). ``step_member``: where a step folder
    holds the step's training batch (the file's path inside it, ``/``-separated; prime-rl's
    ``train/effective/traces.jsonl``): a folder load leaves the folder's other files of this format out, noted.
    ``step_depth``: how many levels of folders the trainer writes inside a step folder (prime-rl's rollouts: 2); a
    folder load reads that deep into a step folder, and no deeper.
    """

    name: str
    summary: str
    read: Reader
    sniff: Callable[[object], bool] | None = None
    sniff_columns: Callable[[list[str]], bool] | None = None
    specific: bool = False
    step_file: re.Pattern[str] | None = None
    step_folder: re.Pattern[str] | None = None
    step_member: re.Pattern[str] | None = None
    step_depth: int = 0


def _steps(module: ModuleType) -> dict:
    """A format's step naming: its module's ``STEP_FILE``, ``STEP_FOLDER`` and ``STEP_MEMBER`` patterns (None where
    it has none) and ``STEP_DEPTH`` (0 where it has none)."""
    out = {name.lower(): getattr(module, name, None) for name in ("STEP_FILE", "STEP_FOLDER", "STEP_MEMBER")}
    return out | {"step_depth": getattr(module, "STEP_DEPTH", 0)}


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        Adapter(
            "native",
            "CreditLens native JSONL/Parquet (schema trajectory.v1)",
            native.read,
            native.sniff,
            native.sniff_columns,
            **_steps(native),
        ),
        Adapter(
            "nemo_gym", "NeMo Gym rollouts (Responses-API items)", nemo_gym.read, nemo_gym.sniff, **_steps(nemo_gym)
        ),
        Adapter(
            "rllm",
            "rLLM Episode / Trajectory / Step JSON, legacy engine outputs, chat-completion dumps",
            rllm.read,
            rllm.sniff,
            **_steps(rllm),
        ),
        Adapter(
            "kgr1_eval",
            "KG-R1 evaluator per-sample results ({dataset}_detailed_results.jsonl)",
            kgr1.eval_read,
            kgr1.eval_sniff,
            **_steps(kgr1),
        ),
        Adapter(
            "kgr1_rollout_dump",
            "KG-R1 generation dump (refused: per-sample aggregates, no per-turn rewards)",
            kgr1.dump_read,
            kgr1.dump_sniff,
            **_steps(kgr1),
        ),
        Adapter(
            "verl_rollout",
            "verl rollout dump JSONL (input, output, score, step, extras)",
            verl_rollout.read,
            verl_rollout.sniff,
            **_steps(verl_rollout),
        ),
        Adapter(
            "tagged_text",
            "Search-R1 / KG-R1 tagged transcripts with outcome or structured rewards",
            tagged_text.read,
            tagged_text.sniff,
            **_steps(tagged_text),
        ),
        Adapter(
            "verl_tensors",
            "verl batch dump (.pt weights_only, .npz, Parquet)",
            verl_tensors.read,
            None,
            verl_tensors.sniff_columns,
            **_steps(verl_tensors),
        ),
        Adapter(
            "trl_completions",
            "TRL GRPOTrainer completion logs (completions_<step>.parquet: text, reward columns, advantage)",
            trl_completions.read,
            None,
            trl_completions.sniff_columns,
            **_steps(trl_completions),
        ),
        Adapter(
            "verifiers_traces",
            "prime-rl / verifiers v1 episodes (traces.jsonl: message-graph nodes with token_ids, mask, logprobs)",
            verifiers_traces.read,
            verifiers_traces.sniff,
            **_steps(verifiers_traces),
        ),
        Adapter(
            prime_rl_tokens.NAME,
            "prime-rl trainer token export (token_exports/step_N/rank_R.jsonl: one packed sample per line, "
            "token ids, loss mask, trainer and inference log-probs, entropy, advantages)",
            prime_rl_tokens.read,
            prime_rl_tokens.sniff,
            specific=True,
            **_steps(prime_rl_tokens),
        ),
        Adapter(
            "slime_rollout",
            "slime debug rollout dump (.pt: {rollout_id, samples: [Sample.to_dict()]}, weights_only)",
            slime_rollout.read,
            **_steps(slime_rollout),
        ),
        Adapter(
            "skyrl_eval",
            "SkyRL eval dump (dumped_evals/*.jsonl)",
            skyrl_eval.read,
            skyrl_eval.sniff,
            specific=True,
            **_steps(skyrl_eval),
        ),
        Adapter(
            "areal_rollout",
            "AReaL rollout dump (rollout/<version>/<task_id>.jsonl)",
            areal_rollout.read,
            areal_rollout.sniff,
            specific=True,
            **_steps(areal_rollout),
        ),
        Adapter(
            "roll_rollout",
            "ROLL RLVR rollout dump (rollout_dump_data.step_N.jsonl, one line of columns)",
            roll_rollout.read,
            roll_rollout.sniff,
            specific=True,
            **_steps(roll_rollout),
        ),
        Adapter(
            "art_yaml",
            "OpenPipe ART trajectory log (trajectories/<split>/<step>.yaml, TrajectoryGroup list)",
            art_yaml.read,
            art_yaml.sniff,
            specific=True,
            **_steps(art_yaml),
        ),
    )
}


def summary_reason(rec: object) -> str | None:
    """Why a file's only record is a summary a trainer writes beside its rollouts (None when it is not one)."""
    return rllm.batch_summary(rec) or kgr1.passatk_summary(rec)


def get_adapter(name: str) -> Adapter:
    """The adapter called ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in ADAPTERS:
        raise ValueError(f"unknown format {name!r}; known formats: {', '.join(ADAPTERS)}")
    return ADAPTERS[name]
