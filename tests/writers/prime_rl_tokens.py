"""Mimic of prime-rl's trainer-side token export, ``<output_dir>/token_exports/step_N/rank_R.jsonl`` (+ ``STABLE``).

Sources: PrimeIntellect-ai/prime-rl, commit 559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21):

* ``src/prime_rl/trainer/rl/token_export.py``: ``TokenExporter.export`` / ``_write`` / ``mark_stable``,
  ``_export_columns``, ``_compute_export_tensors``, ``_trim_padding``, ``_slice_columns``, ``_check_lengths``,
  ``_json_float``, ``_first_non_empty``: restated below line for line (the module imports prime-rl's config classes
  and loss, which need the trainer's environment, so it cannot be imported here). Each line is
  ``json.dumps(record, separators=(",", ":"), allow_nan=False) + "\\n"``, the file opened ``"w"`` on a (step, rank)'s
  first record and ``"a"`` after.
* ``src/prime_rl/trainer/rl/train.py``: ``token_exporter.export(progress.step, micro_step, micro_batch, out,
  sequence_lengths, config.loss)`` after each micro-step's forward pass; ``out["logprobs"]`` / ``out["entropy"]`` are
  shifted right over the packed micro-batch, position 0 padded with log(1/V) / log(V) (``shift_tensor_right``);
  ``mark_stable()`` after a barrier at the end of the step.
* ``src/prime_rl/trainer/batch.py``: ``prepare_sample`` (``position_ids = range(len(input_ids))``, ``env_names =
  [env_name] * n``), ``_materialize_bin`` (samples concatenated, ``sequence_lengths`` one per sample, absent weight
  streams filled with ``STREAM_FILL`` = rl 1.0, ce 0.0, ref_kl 0.0), ``pad_micro_batch`` (input id 1, advantage 0,
  loss mask False, ``position_ids`` range(pad), inference log-prob 0, env name "", streams 0.0; the padding joins the
  last sample's ``sequence_lengths`` entry).
* ``src/prime_rl/trainer/rl/loss.py``: ``compute_importance_ratio_and_mismatch_kl``.
* ``src/prime_rl/orchestrator/trajectories.py`` ``trace_to_samples``: a sample's ``advantages`` is the branch's
  spread stream (the rollout's advantage on its sampled tokens, 0 elsewhere).
* ``packages/prime-rl-configs/src/prime_rl/configs/trainer.py``: ``DefaultLossConfig`` (dppo_mask_low 0.2,
  dppo_mask_high 0.2).

Tokens come from CreditLens's offline Qwen2.5 tokenizer; log-probs, drifts and entropies are made up (seeded).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from engine.io.text.tokenize import encode_many, get_tokenizer

SCHEMA_VERSION = 1
VOCAB = 151_936  # Qwen2.5's model vocabulary: the pad values of shift_tensor_right
STREAM_FILL = {"rl_weights": 1.0, "ce_weights": 0.0, "ref_kl_weights": 0.0}


@dataclass
class DefaultLossConfig:
    dppo_mask_low: float = 0.2
    dppo_mask_high: float = 0.2


@dataclass
class Sample:
    """One training sample: ``parts`` = (text, trained) in order (the prompt first, untrained), its advantage,
    and optional per-token weight streams. ``nan_entropy_at``: a token whose entropy the forward pass made
    non-finite (the writer then writes null)."""

    env_name: str
    parts: list[tuple[str, bool]]
    advantage: float
    seed: int
    rl_weights: list[float] | None = None
    ce_weights: list[float] | None = None
    nan_entropy_at: int | None = None
    # filled by ``materialize``
    token_ids: list[int] = field(default_factory=list)
    mask: list[bool] = field(default_factory=list)
    inference: list[float] = field(default_factory=list)
    trainer: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)


def materialize(s: Sample, tok) -> None:
    """Token ids, mask, the rollout's and the trainer's log-probs, entropy, advantages of a sample (seeded)."""
    for text, trained in s.parts:
        ids = encode_many(tok, [text])[0].tolist()
        s.token_ids += ids
        s.mask += [trained] * len(ids)
    n, rng = len(s.token_ids), np.random.default_rng(s.seed)
    p = rng.uniform(0.05, 0.95, n)  # sampling probabilities; the trainer's drift up to ±0.45 in probability
    q = np.clip(p + rng.uniform(-0.45, 0.45, n), 0.01, 0.99)
    m = np.asarray(s.mask)
    s.inference = np.where(m, np.log(p), 0.0).astype(np.float32).tolist()  # context tokens: no sampling log-prob
    s.trainer = np.log(q).astype(np.float32).tolist()
    s.entropy = rng.uniform(0.0, 3.0, n).astype(np.float32).tolist()
    if s.nan_entropy_at is not None:
        s.entropy[s.nan_entropy_at] = math.nan
    s.advantages = [s.advantage if t else 0.0 for t in s.mask]


def pack(samples: list[Sample], pad_to_multiple_of: int) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``_materialize_bin`` + ``pad_micro_batch`` as tensors of shape (1, L), and the forward pass's output
    (``logprobs``, ``entropy`` in the current-token convention after ``shift_tensor_right``)."""
    cols: dict[str, list] = {k: [] for k in ("input_ids", "position_ids", "loss_mask", "advantages", "inference")}
    cols |= {"env_names": [], "trainer": [], "entropy": []}
    streams = {k: ([] if any(getattr(s, k, None) is not None for s in samples) else None) for k in STREAM_FILL}
    lengths = []
    for s in samples:
        n = len(s.token_ids)
        cols["input_ids"] += s.token_ids
        cols["position_ids"] += list(range(n))
        cols["loss_mask"] += s.mask
        cols["advantages"] += s.advantages
        cols["inference"] += s.inference
        cols["env_names"] += [s.env_name] * n
        cols["trainer"] += s.trainer
        cols["entropy"] += s.entropy
        for k, fill in STREAM_FILL.items():
            if streams[k] is not None:
                own = getattr(s, k, None)
                streams[k] += own if own is not None else [fill] * n
        lengths.append(n)
    pad = (pad_to_multiple_of - len(cols["input_ids"]) % pad_to_multiple_of) % pad_to_multiple_of
    cols["input_ids"] += [1] * pad
    cols["advantages"] += [0.0] * pad
    cols["loss_mask"] += [False] * pad
    cols["position_ids"] += list(range(pad))
    cols["inference"] += [0.0] * pad
    cols["env_names"] += [""] * pad
    cols["trainer"] += [-1.5] * pad  # what the model predicts on padding: never read
    cols["entropy"] += [2.5] * pad
    for k in STREAM_FILL:
        if streams[k] is not None:
            streams[k] += [0.0] * pad
    lengths[-1] += pad
    cols["trainer"][0] = math.log(1.0 / VOCAB)  # shift_tensor_right's pad values at the pack's position 0
    cols["entropy"][0] = math.log(float(VOCAB))
    row = lambda v, dtype: torch.tensor([v], dtype=dtype)  # noqa: E731
    micro_batch = {
        "input_ids": row(cols["input_ids"], torch.long),
        "position_ids": row(cols["position_ids"], torch.long),
        "loss_mask": row(cols["loss_mask"], torch.bool),
        "advantages": row(cols["advantages"], torch.float32),
        "inference_logprobs": row(cols["inference"], torch.float32),
        "env_names": cols["env_names"],
        "sequence_lengths": lengths,
        **{k: (row(v, torch.float32) if v is not None else None) for k, v in streams.items()},
    }
    out = {"logprobs": row(cols["trainer"], torch.float32), "entropy": row(cols["entropy"], torch.float32)}
    return micro_batch, out


# ------------------------------------------------------------------------ token_export.py, restated
class TokenExporter:
    def __init__(self, output_dir: Path, rank: int) -> None:
        self.rank = rank
        self.output_dir = output_dir / "token_exports"
        self._initialized_files: set[tuple[int, int]] = set()
        self._sequences_by_file: dict[tuple[int, int], int] = {}
        self._pending_stable_dirs: set[Path] = set()

    def export(self, step, micro_step, micro_batch, model_output, sequence_lengths, loss_config) -> None:
        columns = _export_columns(micro_batch, model_output, loss_config)
        _check_lengths(columns)
        file_key = (step, self.rank)
        start = 0
        for micro_sequence_idx, length in enumerate(sequence_lengths):
            raw_end = start + length
            end = _trim_padding(columns, start, raw_end)
            if end > start and any(columns["loss_mask"][start:end]):
                self._write(
                    {
                        "schema_version": SCHEMA_VERSION,
                        "step": step,
                        "rank": self.rank,
                        "micro_step": micro_step,
                        "micro_sequence_idx": micro_sequence_idx,
                        "export_sequence_idx": self._sequences_by_file.get(file_key, 0),
                        "env_name": _first_non_empty(columns["env_names"][start:end]),
                        **_slice_columns(columns, start, end),
                    },
                    step,
                )
                self._sequences_by_file[file_key] = self._sequences_by_file.get(file_key, 0) + 1
            start = raw_end

    def mark_stable(self) -> None:
        while self._pending_stable_dirs:
            stable_dir = self._pending_stable_dirs.pop()
            (stable_dir / "STABLE").touch()

    def _write(self, record: dict[str, Any], step: int) -> None:
        file_key = (step, self.rank)
        mode = "a" if file_key in self._initialized_files else "w"
        step_dir = self.output_dir / f"step_{step}"
        step_dir.mkdir(parents=True, exist_ok=True)
        export_file = step_dir / f"rank_{self.rank}.jsonl"
        with export_file.open(mode, encoding="utf-8") as file:
            file.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        self._initialized_files.add(file_key)
        self._pending_stable_dirs.add(export_file.parent)


def _export_columns(micro_batch, model_output, loss_config) -> dict[str, list[Any]]:
    token_ids = _tensor_to_ints(micro_batch["input_ids"])
    seq_len = len(token_ids)
    trainer_logprobs = model_output["logprobs"]
    export_tensors = _compute_export_tensors(micro_batch, trainer_logprobs, loss_config)
    return {
        "token_ids": token_ids,
        "position_ids": _tensor_to_ints(micro_batch["position_ids"]),
        "loss_mask": _tensor_to_bools(micro_batch["loss_mask"]),
        "advantages": _tensor_to_floats(micro_batch["advantages"]),
        "inference_logprobs": _tensor_to_floats(micro_batch["inference_logprobs"]),
        "trainer_logprobs": _tensor_to_floats(trainer_logprobs),
        "entropy": _tensor_to_floats(model_output["entropy"]),
        "mismatch_kl": _optional_tensor_to_floats(export_tensors["mismatch_kl"], seq_len),
        "log_importance_ratio": _optional_tensor_to_floats(export_tensors["log_importance_ratio"], seq_len),
        "importance_ratio": _optional_tensor_to_floats(export_tensors["importance_ratio"], seq_len),
        "prob_delta": _optional_tensor_to_floats(export_tensors["prob_delta"], seq_len),
        "is_masked": _optional_tensor_to_bools(export_tensors["is_masked"], seq_len),
        "is_masked_high": _optional_tensor_to_bools(export_tensors["is_masked_high"], seq_len),
        "is_masked_low": _optional_tensor_to_bools(export_tensors["is_masked_low"], seq_len),
        "rl_weights": _optional_tensor_to_floats(micro_batch.get("rl_weights"), seq_len),
        "ce_weights": _optional_tensor_to_floats(micro_batch.get("ce_weights"), seq_len),
        "ref_kl_weights": _optional_tensor_to_floats(micro_batch.get("ref_kl_weights"), seq_len),
        "env_names": list(micro_batch["env_names"]),
    }


def compute_importance_ratio_and_mismatch_kl(trainer_logprobs: Tensor, inference_logprobs: Tensor):
    log_importance_ratio = trainer_logprobs - inference_logprobs
    importance_ratio = torch.exp(log_importance_ratio)
    mismatch_kl = importance_ratio - log_importance_ratio - 1
    return log_importance_ratio, importance_ratio, mismatch_kl


def _compute_export_tensors(micro_batch, trainer_logprobs: Tensor, loss_config) -> dict[str, Tensor | None]:
    fields: dict[str, Tensor | None] = dict.fromkeys(
        ("log_importance_ratio", "importance_ratio", "mismatch_kl", "prob_delta", "is_masked", "is_masked_high")
        + ("is_masked_low",)
    )
    rl_weights = micro_batch.get("rl_weights")
    ref_kl_weights = micro_batch.get("ref_kl_weights")
    no_rl = rl_weights is not None and not bool((rl_weights != 0).any())
    no_ref_kl = ref_kl_weights is None or not bool((ref_kl_weights != 0).any())
    if no_rl and no_ref_kl:
        return fields
    inference_logprobs = micro_batch["inference_logprobs"]
    loss_mask = micro_batch["loss_mask"]
    advantages = micro_batch["advantages"]
    with torch.no_grad():
        log_ratio, ratio, mismatch_kl = compute_importance_ratio_and_mismatch_kl(trainer_logprobs, inference_logprobs)
        prob_delta = torch.exp(trainer_logprobs) - torch.exp(inference_logprobs)
        fields["log_importance_ratio"] = log_ratio
        fields["importance_ratio"] = ratio
        fields["mismatch_kl"] = mismatch_kl
        fields["prob_delta"] = prob_delta
        if isinstance(loss_config, DefaultLossConfig):
            invalid_high = prob_delta > loss_config.dppo_mask_high
            invalid_low = prob_delta < -loss_config.dppo_mask_low
            positive_advantages = advantages > 0
            negative_advantages = advantages < 0
            invalid = torch.where(positive_advantages, invalid_high, invalid_low)
            fields["is_masked"] = loss_mask & invalid
            fields["is_masked_high"] = loss_mask & positive_advantages & invalid_high
            fields["is_masked_low"] = loss_mask & negative_advantages & invalid_low
    return fields


def _tensor_to_ints(tensor: Tensor) -> list[int]:
    return [int(value) for value in tensor.detach().cpu().reshape(-1).tolist()]


def _tensor_to_bools(tensor: Tensor) -> list[bool]:
    return [bool(value) for value in tensor.detach().cpu().reshape(-1).tolist()]


def _tensor_to_floats(tensor: Tensor) -> list[float | None]:
    values = tensor.detach().to(dtype=torch.float32, device="cpu").reshape(-1).tolist()
    return [_json_float(value) for value in values]


def _optional_tensor_to_floats(tensor: Tensor | None, seq_len: int) -> list[float | None]:
    return [None] * seq_len if tensor is None else _tensor_to_floats(tensor)


def _optional_tensor_to_bools(tensor: Tensor | None, seq_len: int) -> list[bool | None]:
    return [None] * seq_len if tensor is None else _tensor_to_bools(tensor)


def _check_lengths(columns: Mapping[str, Sequence[Any]]) -> None:
    lengths = {key: len(values) for key, values in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"Token export fields must have aligned lengths, got {lengths}")


def _slice_columns(columns: Mapping[str, Sequence[Any]], start: int, end: int) -> dict[str, list[Any]]:
    return {key: list(values[start:end]) for key, values in columns.items() if key != "env_names"}


def _trim_padding(columns: Mapping[str, Sequence[Any]], start: int, end: int) -> int:
    env_names = columns["env_names"]
    loss_mask = columns["loss_mask"]
    while end > start and env_names[end - 1] == "" and not loss_mask[end - 1]:
        end -= 1
    return end


def _json_float(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return value


def _first_non_empty(values: Sequence[str]) -> str | None:
    for value in values:
        if value:
            return value
    return None


# ------------------------------------------------------------------------ a run
def write_run(
    output_dir: str | Path,
    steps: dict[int, dict[int, list[list[Sample]]]],
    pad_to_multiple_of: int = 8,
    stable: bool = True,
    loss_config: object | None = None,
) -> Path:
    """Write ``steps[step][rank]`` = the rank's micro-batches (each a list of samples packed together) the way the
    trainer's loop does; returns the ``token_exports`` folder. ``stable=False``: no ``STABLE`` marker (a step still
    being written)."""
    tok = get_tokenizer()
    loss_config = DefaultLossConfig() if loss_config is None else loss_config
    for step, ranks in steps.items():
        for rank, micro_batches in ranks.items():
            exporter = TokenExporter(Path(output_dir), rank)
            for micro_step, samples in enumerate(micro_batches):
                for s in samples:
                    if not s.token_ids:
                        materialize(s, tok)
                micro_batch, out = pack(samples, pad_to_multiple_of)
                exporter.export(step, micro_step, micro_batch, out, micro_batch["sequence_lengths"], loss_config)
            if stable:
                exporter.mark_stable()
    return Path(output_dir) / "token_exports"
