"""Input formats. Each adapter turns one file into ``(line, field_prefix, Trajectory)`` items and reports bad
records to the load context; detection (``engine.io.detect``) asks each adapter's ``sniff`` in order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
    """A named input format: ``read`` the file; ``sniff`` a first JSON record / ``sniff_columns`` a column list.

    ``specific``: the sniff requires keys only one trainer's writer writes, so detection asks it before the
    generic sniffs (a tagged AReaL ``completion`` is not a Search-R1 transcript).
    """

    name: str
    summary: str
    read: Reader
    sniff: Callable[[object], bool] | None = None
    sniff_columns: Callable[[list[str]], bool] | None = None
    specific: bool = False


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        Adapter(
            "native",
            "CreditLens native JSONL/Parquet (schema trajectory.v1)",
            native.read,
            native.sniff,
            native.sniff_columns,
        ),
        Adapter("nemo_gym", "NeMo Gym rollouts (Responses-API items)", nemo_gym.read, nemo_gym.sniff),
        Adapter(
            "rllm",
            "rLLM Episode / Trajectory / Step JSON, legacy engine outputs, chat-completion dumps",
            rllm.read,
            rllm.sniff,
        ),
        Adapter(
            "kgr1_eval",
            "KG-R1 evaluator per-sample results ({dataset}_detailed_results.jsonl)",
            kgr1.eval_read,
            kgr1.eval_sniff,
        ),
        Adapter(
            "kgr1_rollout_dump",
            "KG-R1 generation dump (refused: per-sample aggregates, no per-turn rewards)",
            kgr1.dump_read,
            kgr1.dump_sniff,
        ),
        Adapter(
            "verl_rollout",
            "verl rollout dump JSONL (input, output, score, step, extras)",
            verl_rollout.read,
            verl_rollout.sniff,
        ),
        Adapter(
            "tagged_text",
            "Search-R1 / KG-R1 tagged transcripts with outcome or structured rewards",
            tagged_text.read,
            tagged_text.sniff,
        ),
        Adapter(
            "verl_tensors",
            "verl batch dump (.pt weights_only, .npz, Parquet)",
            verl_tensors.read,
            None,
            verl_tensors.sniff_columns,
        ),
        Adapter(
            "trl_completions",
            "TRL GRPOTrainer completion logs (completions_<step>.parquet: text, reward columns, advantage)",
            trl_completions.read,
            None,
            trl_completions.sniff_columns,
        ),
        Adapter(
            "verifiers_traces",
            "prime-rl / verifiers v1 episodes (traces.jsonl: message-graph nodes with token_ids, mask, logprobs)",
            verifiers_traces.read,
            verifiers_traces.sniff,
        ),
        Adapter(
            prime_rl_tokens.NAME,
            "prime-rl trainer token export (token_exports/step_N/rank_R.jsonl: one packed sample per line, "
            "token ids, loss mask, trainer and inference log-probs, entropy, advantages)",
            prime_rl_tokens.read,
            prime_rl_tokens.sniff,
            specific=True,
        ),
        Adapter(
            "slime_rollout",
            "slime debug rollout dump (.pt: {rollout_id, samples: [Sample.to_dict()]}, weights_only)",
            slime_rollout.read,
        ),
        Adapter(
            "skyrl_eval", "SkyRL eval dump (dumped_evals/*.jsonl)", skyrl_eval.read, skyrl_eval.sniff, specific=True
        ),
        Adapter(
            "areal_rollout",
            "AReaL rollout dump (rollout/<version>/<task_id>.jsonl)",
            areal_rollout.read,
            areal_rollout.sniff,
            specific=True,
        ),
        Adapter(
            "roll_rollout",
            "ROLL RLVR rollout dump (rollout_dump_data.step_N.jsonl, one line of columns)",
            roll_rollout.read,
            roll_rollout.sniff,
            specific=True,
        ),
        Adapter(
            "art_yaml",
            "OpenPipe ART trajectory log (trajectories/<split>/<step>.yaml, TrajectoryGroup list)",
            art_yaml.read,
            art_yaml.sniff,
            specific=True,
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
