"""Adapter ``prime_rl_tokens``: prime-rl's trainer-side token export (``enable_token_export``), one packed sample
per line of ``<output_dir>/token_exports/step_N/rank_R.jsonl``.

Writer: PrimeIntellect-ai/prime-rl, commit ``559b4477``, ``src/prime_rl/trainer/rl/token_export.py``:
``TokenExporter.export`` runs after each micro-step's forward pass (``src/prime_rl/trainer/rl/train.py``) and
slices the packed micro-batch by its ``sequence_lengths``, one entry per sample packed into it
(``src/prime_rl/trainer/batch.py`` ``_materialize_bin``); the last sample's slice carries the micro-batch's
padding, which ``_trim_padding`` removes (padding has ``env_name`` "" and no loss token). A slice without a loss
token is not written. Each line is ``json.dumps(record, separators=(",", ":"), allow_nan=False)``:
``schema_version`` (1), ``step``, ``rank``, ``micro_step``, ``micro_sequence_idx`` (the sample's place in its
micro-batch, skipped ones counted), ``export_sequence_idx`` (its place in the file), ``env_name``, and aligned
per-token columns: ``token_ids``, ``position_ids`` (0..n-1: ``prepare_sample`` numbers each sample from 0),
``loss_mask``, ``advantages``, ``inference_logprobs``, ``trainer_logprobs``, ``entropy``, ``mismatch_kl``,
``log_importance_ratio``, ``importance_ratio``, ``prob_delta``, ``is_masked(_high/_low)``, ``rl_weights``,
``ce_weights``, ``ref_kl_weights``. Every float is written through ``_json_float``: a non-finite value becomes
``null``; a column the trainer did not compute is all ``null``. A ``STABLE`` file in the step folder marks the
step complete (touched after every rank flushed).

Step: ``export(progress.step, ...)`` (``train.py``) writes the trainer's ``progress.step`` both as the record's
``step`` and as the folder name (``TokenExporter._export_dir``: ``step_{step}``; ``_write`` puts the record in the
file of its own ``step``), so ``Trajectory.step`` is the record's ``step``; ``STEP_FOLDER`` gives the same number
from the path, and a record whose ``step`` differs from its folder's (a renamed folder) keeps its own, noted.
The rank files of one ``step_N`` are shards of one step.

What CreditLens makes of it: one trajectory per record (id ``step_N/rank_R/K``, K = ``export_sequence_idx``).
Prompt = the ids before the first loss token; then runs of loss tokens are ``model`` segments with
``log_probs`` = ``trainer_logprobs``, ``rollout_log_probs`` = ``inference_logprobs`` and ``entropy``; other runs
(tool output, chat scaffolding) are ``tool`` segments. prime-rl's ``advantages`` (one per response token) ->
``metadata.logged_advantages`` (the batch's ``logged_advantages``: the estimator ``logged`` trains on them). The
export holds no reward and no group id (both stay in the orchestrator): every reward is 0 and every sample is its
own group, both said in the load report. The derived columns
(``importance_ratio``, ``is_masked``, ...) are checked but not kept: CreditLens's policy stage recomputes them from
the two log-probs (``policy_ratio_base="rollout"``, ``policy_loss="dppo_tv"``).

Refused with a problem naming the line and field: a missing field, a column whose length differs from
``token_ids`` (prime-rl's ``_check_lengths`` refuses those too; nothing is trimmed), a value of the wrong type, a
non-finite number (the writer writes none), a ``null`` log-prob, entropy or advantage on a loss token (a
non-finite value in training), ``position_ids`` other than 0..n-1, and a record without a loss token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.adapters.generations import mask_segments
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_mask, as_token_ids, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_step
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records

NAME = "prime_rl_tokens"
SCHEMA_VERSION = 1
STABLE = "STABLE"
STEP_DIR = re.compile(r"step_(\d+)")
STEP_FOLDER = STEP_DIR  # token_exports/step_N/rank_R.jsonl: a folder load of token_exports reads every step
RANK_FILE = re.compile(r"rank_(\d+)\.jsonl")
COUNTERS = ("step", "rank", "micro_step", "micro_sequence_idx", "export_sequence_idx")
FLOATS = ("advantages", "inference_logprobs", "trainer_logprobs", "entropy")  # loaded: no null on a loss token
DERIVED = ("mismatch_kl", "log_importance_ratio", "importance_ratio", "prob_delta")  # null where not computed
WEIGHTS = ("rl_weights", "ce_weights", "ref_kl_weights")  # null: the default stream (rl 1.0, no ce / ref_kl)
FLAGS = ("is_masked", "is_masked_high", "is_masked_low")  # null where not computed (a non-default loss)
COLUMNS = ("token_ids", "position_ids", "loss_mask", *FLOATS, *DERIVED, *FLAGS, *WEIGHTS)
NUMBER_TYPES, FLAG_TYPES = {int, float, type(None)}, {bool, type(None)}
FLOAT32_MAX = float(np.finfo(np.float32).max)
NULL_IS = "prime-rl's writer writes a non-finite value as null (_json_float)"


def sniff(rec: object) -> bool:
    return (
        isinstance(rec, Mapping)
        and "export_sequence_idx" in rec
        and all(k in rec for k in ("token_ids", "loss_mask", "trainer_logprobs", "inference_logprobs"))
    )


def is_marker(path: Path) -> bool:
    """prime-rl's ``STABLE`` marker beside its rank files: not data, not reported."""
    return path.name == STABLE and any(_rank_files(path.parent))


def _rank_files(folder: Path) -> Iterator[Path]:
    return (p for p in folder.iterdir() if RANK_FILE.fullmatch(p.name))


def _counter(rec: Mapping, key: str) -> int:
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RecordError(key, f"expected a non-negative integer, got {type_name(value)} {value!r}")
    return value


def _floats(value: object, key: str, n: int) -> np.ndarray:
    """A column of numbers and nulls as [n] float64, null -> NaN; anything else (a string, a boolean, a
    non-finite number) is refused, naming its position."""
    _check_list(value, key, n)
    if not set(map(type, value)) <= NUMBER_TYPES:  # bool is not int here: True would pass as 1.0
        i, v = next((i, v) for i, v in enumerate(value) if type(v) not in NUMBER_TYPES)
        raise RecordError(f"{key}[{i}]", f"expected a number or null, got {type_name(v)} {v!r:.40}")
    obj = np.array(value, dtype=object)
    null = np.equal(obj, None)
    try:
        out = np.where(null, 0.0, obj).astype(np.float64)
    except OverflowError:
        out = np.array([float("inf") if abs(v) > 1e308 else v for v in np.where(null, 0.0, obj)], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        i = int(bad[0])
        raise RecordError(f"{key}[{i}]", f"non-finite value {value[i]!r:.40}: {NULL_IS}, so no export holds one")
    big = np.flatnonzero(np.abs(out) > FLOAT32_MAX)
    if big.size:
        i = int(big[0])
        raise RecordError(
            f"{key}[{i}]", f"{value[i]!r:.40} is beyond float32: the writer converts every value to float32"
        )
    out[null] = np.nan
    return out


def _flags(value: object, key: str, n: int) -> None:
    _check_list(value, key, n)
    if not set(map(type, value)) <= FLAG_TYPES:
        i, v = next((i, v) for i, v in enumerate(value) if type(v) not in FLAG_TYPES)
        raise RecordError(f"{key}[{i}]", f"expected true, false or null, got {type_name(v)} {v!r:.40}")


def _check_list(value: object, key: str, n: int) -> None:
    if not isinstance(value, list):
        raise RecordError(key, f"expected a list, got {type_name(value)}")
    if len(value) != n:
        raise RecordError(
            key,
            f"{len(value)} values for {n} token_ids: the columns of one record must align (prime-rl's "
            "_check_lengths refuses misaligned ones); record not loaded, nothing trimmed",
        )


def _columns(rec: Mapping) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(token ids [n], loss mask [n], the loaded float columns [n]) after checking every column."""
    ids = as_token_ids(rec["token_ids"], "token_ids")
    n = len(ids)
    if not n:
        raise RecordError("token_ids", "no tokens")
    _check_list(rec["loss_mask"], "loss_mask", n)
    mask = as_mask(rec["loss_mask"], "loss_mask")
    _check_list(rec["position_ids"], "position_ids", n)
    pos = as_token_ids(rec["position_ids"], "position_ids")  # non-negative integers
    off = np.flatnonzero(pos != np.arange(n))
    if off.size:
        i = int(off[0])
        raise RecordError(
            f"position_ids[{i}]",
            f"{int(pos[i])} where {i} was expected: prime-rl's exporter writes one packed sample per record, "
            "numbered from 0 (prepare_sample), so position ids restart only between records",
        )
    floats = {key: _floats(rec[key], key, n) for key in (*FLOATS, *DERIVED, *WEIGHTS)}
    for key in FLAGS:
        _flags(rec[key], key, n)
    if not mask.any():
        raise RecordError("loss_mask", "no loss token: prime-rl's exporter does not write such a sequence")
    for key in FLOATS:
        bad = np.flatnonzero(mask & np.isnan(floats[key]))
        if bad.size:
            raise RecordError(f"{key}[{int(bad[0])}]", f"null on a loss token: {NULL_IS}; record not loaded")
    return ids, mask, floats


def convert(rec: object, ctx: LoadContext, line: int | None) -> Trajectory:
    """One export record -> one trajectory (see the module doc)."""
    if not isinstance(rec, Mapping):
        raise RecordError(None, f"expected a JSON object per record, got {type_name(rec)}")
    missing = [k for k in ("schema_version", *COUNTERS, "env_name", *COLUMNS) if k not in rec]
    if missing:
        raise RecordError(missing[0], f"missing (prime-rl's exporter writes it in every record; missing: {missing})")
    if rec["schema_version"] != SCHEMA_VERSION or isinstance(rec["schema_version"], bool):
        raise RecordError("schema_version", f"{rec['schema_version']!r}: only version {SCHEMA_VERSION} is known")
    step, rank, micro_step, micro_idx, k = (_counter(rec, key) for key in COUNTERS)
    env = rec["env_name"]
    if env is not None and not isinstance(env, str):
        raise RecordError("env_name", f"expected text or null, got {type_name(env)}")
    ids, mask, cols = _columns(rec)
    _component_notes(mask, cols, ctx, line)
    start = int(np.argmax(mask))  # the first loss token: the response starts there
    segments = mask_segments(
        ids[start:],
        mask[start:],
        other_role="tool",
        log_probs=cols["trainer_logprobs"][start:].astype(np.float32),
        rollout_log_probs=cols["inference_logprobs"][start:].astype(np.float32),
        entropy=cols["entropy"][start:].astype(np.float32),
    )
    for seg in segments:  # the trainer's numbers on context tokens are not the policy's: kept off them
        if seg.role != "model":
            seg.log_probs = seg.rollout_log_probs = seg.entropy = None
    metadata = {
        "logged_advantages": cols["advantages"][start:].tolist(),  # float32 values, written as float64
        "env_name": env,
        "step": step,
        "rank": rank,
        "micro_step": micro_step,
        "micro_sequence_idx": micro_idx,
        "export_sequence_idx": k,
    }
    tid = f"step_{step}/rank_{rank}/{k}"
    return Trajectory(
        id=tid,
        group_id=tid,
        prompt=None,
        segments=segments,
        metadata=metadata,
        prompt_token_ids=ids[:start],
        step=as_step(step, "step"),
    )


def _component_notes(mask: np.ndarray, cols: dict[str, np.ndarray], ctx: LoadContext, line: int | None) -> None:
    """Tokens prime-rl trains with another loss than the RL one are said once per file: a loss token with an rl
    weight of 0, and any token with a ce / ref_kl weight (``compute_loss``: their membership is weight != 0,
    whatever the loss mask). CreditLens shows every loss_mask token as an RL token and no other as trained."""
    rl, ce, ref_kl = (np.nan_to_num(cols[k], nan=d) for k, d in zip(WEIGHTS, (1.0, 0.0, 0.0), strict=True))
    if (mask & (rl == 0)).any() or (ce != 0).any() or (ref_kl != 0).any():
        ctx.note(
            "rl_weights",
            "tokens prime-rl trains with its ce or ref_kl loss (a ce / ref_kl weight, or an rl weight of 0 on a loss "
            "token; compute_loss): CreditLens shows every loss_mask token as an RL token and no other token as "
            "trained",
            line,
            once=f"{ctx.file}:components",
        )


def _file_notes(path: Path, ctx: LoadContext) -> None:
    ctx.run_metadata["no_rewards"] = "prime-rl's token export holds no rewards (they stay in the orchestrator)"
    ctx.note(
        None,
        "prime-rl's token export holds no reward and no group id (both stay in the orchestrator): every reward is 0 "
        "and every sample its own group, so the estimators that recompute advantages have nothing to work with; "
        "prime-rl's own advantages are kept as logged advantages (estimator logged trains on them), and the policy "
        "views use the trainer's and the inference log-probs (profile prime-rl, PPO ratio against rollout, policy "
        "loss dppo_tv)",
        once=f"{NAME}:no-rewards",
    )
    ctx.note(
        "token_ids",
        "the export does not name the model: token text is decoded with the load's tokenizer (pass the run's "
        "model as tokenizer= if it is not Qwen2.5's vocabulary)",
        once=f"{NAME}:model",
    )
    if STEP_DIR.fullmatch(path.parent.name) and not (path.parent / STABLE).exists():
        ctx.note(
            STABLE,
            f"{path.parent.name} has no STABLE marker: prime-rl touches it once every rank has flushed the step, "
            "so this file may be incomplete",
        )


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    _file_notes(Path(path), ctx)
    for line, prefix, rec in iter_json_records(str(path), ctx):
        traj = ctx.attempt(line, prefix, convert, rec, ctx, line)
        if traj is not None:
            yield line, prefix, traj
