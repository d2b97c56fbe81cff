"""Adapter ``verl_tensors``: a verl batch dump (``DataProto.batch`` + ``non_tensor_batch`` as plain arrays).

Files: ``.pt`` read with ``torch.load(weights_only=True)`` (never unpickles code; a dict of tensors, lists and
strings, optionally nested as ``{"batch": {...}, "non_tensor_batch": {...}}``, as ``engine.io.export_verl_batch``
writes it), ``.npz`` read with ``allow_pickle=False``, or Parquet with one row per trajectory and list columns.
verl's own writers pickle (``DataProto.save_to_disk``, ``torch.save`` of a TensorDict, numpy object arrays for
``uid``): those files are refused with a message that points to ``export_verl_batch``.

Keys (verl names): ``responses`` [B, T] (or ``response_ids``); ``attention_mask`` [B, T] or [B, P+T] (the last T
columns are the response); ``response_mask`` [B, T] (1 = generated; absent -> every attended token is
generated, as verl assumes); ``prompts`` [B, P]; ``old_log_probs`` (else the agent loop's ``rollout_log_probs``,
noted in the run's metadata), ``ref_log_prob``, ``values`` [B, T]; ``uid``/``index`` [B] group ids;
``reward_baselines`` [B]; ``advantages`` [B, T] (verl's own, kept as ``metadata.logged_advantages`` to compare);
optional ``turn_ids`` [B, T] or KG-R1 ``turn_sequence_tensor`` [B, P+T] (only checked: ids on generated tokens
must not go backwards).

The reward is token-level, as verl trains on it: ``token_level_scores``, else the agent loop's ``rm_scores``,
else ``token_level_rewards`` (after verl's in-reward KL, if that was on; noted). Other 1-D numeric arrays
(``score``, ``acc``, … of ``reward_extra_info``) are ``metadata.reward_components``: shown, never added to the
reward. Only when no token-level reward exists does a 1-D ``score`` (what verl's reward function returns and
places on the last response token) become the reward, reported; with neither, every reward is 0 and a problem
says so. bf16/fp16 tensors are read as float32, sparse ones densified.
Runs of ``response_mask`` = 1 are model segments, runs of 0 inside the attention mask tool segments.
A field whose shape or dtype does not fit ``responses`` is reported and ignored; a bad row (token id out of
range, NaN on a real token, a mask value other than 0/1, a null Parquet row) is a problem ``row[b].<field>``.
Padding is never checked (its masks are: a NaN or 7 in a mask would silently drop or keep a token).

Steps: verl writes none into a batch. ``RayPPOTrainer.fit`` (``verl/trainer/ppo/ray_trainer.py`` at verl-project/verl
``1dda039``, volcengine/verl ``b178a3c``) sets ``meta_info["global_steps"]`` on ``gen_batch`` only, and the
rollout's output that is ``union``-ed into the training batch carries its own ``meta_info`` (``timing``,
``reward_extra_keys``: ``AgentLoopWorker._postprocess`` / ``AgentLoopManager.generate_sequences``), so the batch
after ``compute_advantage`` has no step; its ``min_global_steps`` / ``max_global_steps`` columns are the weight
versions that generated each row (set by the rollout server), not the step that trains on it. The step is the
file's name, as docs/FORMAT.md ("verl batches") has the trainer write it: ``export_verl_batch(batch,
f"creditlens/{self.global_steps}.pt")`` (``STEP_FILE``: ``<N>.pt``). A file named otherwise has no step.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.adapters.common import load_weights_only
from engine.io.adapters.generations import mask_segments
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_float_array, as_mask, as_token_ids
from engine.io.reading.context import LoadContext, max_load_bytes
from engine.io.reading.fields import prompt_group_id
from engine.io.reading.limits import HALF_DTYPES, check_npz, check_values, check_zip, decoded_limit, tensor_array
from engine.io.reading.problems import RecordError

NAME = "verl_tensors"
STEP_FILE = re.compile(r"(\d+)\.pt")  # f"{self.global_steps}.pt", as docs/FORMAT.md's export names it
PER_TOKEN = {
    "old_log_probs": "log_probs",
    "ref_log_prob": "ref_log_probs",
    "values": "values",
    "entropys": "entropy",  # the actor's compute_log_prob(calculate_entropy=True); verl's trainer pops it before union
}
TOKEN_REWARDS = ("token_level_scores", "rm_scores", "token_level_rewards")  # first present is the reward
EXPORT_HINT = (
    "CreditLens never unpickles files (loading a pickle runs code). In the trainer, write the batch with "
    "engine.io.export_verl_batch(batch, 'step.pt') or the few lines in docs/FORMAT.md ('verl batches'), which "
    "store plain tensors and strings"
)
NOT_REWARDS = frozenset(
    {
        "uid",
        "index",
        "reward_baselines",
        "truncated",
        "step",
        "prompt_length",
        "response_length",
        "trajectory_ids",
        "ids",
    }
)


def sniff_columns(names: list[str]) -> bool:
    return ("responses" in names or "response_ids" in names) and bool({"attention_mask", "response_mask"} & set(names))


ID_FIELDS = ("responses", "response_ids", "prompts", "uid", "index")  # integers: half precision would round them


class _Densifier:
    """Tensors as numpy arrays: bf16/fp16 as float32, sparse ones made dense. Before converting, each field's
    values (dense shape) are held against what a load may hold, and the bytes the conversions allocate against
    what it may still decode. Half-precision ids are refused: bf16 holds integers exactly only up to 256 and
    fp16 up to 2,048, so token or group ids stored that way may not be the ones the trainer used."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path, self.limit, self.made = path, limit, 0

    def tensor(self, value, name: str):
        import torch

        if not isinstance(value, torch.Tensor):
            return value
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype in HALF_DTYPES and name in ID_FIELDS:
            raise ValueError(
                f"{self.path}: {name}: ids stored as {dtype} (exact only up to "
                f"{256 if dtype == 'bfloat16' else 2048}); store token and group ids as integers"
            )
        arr, made = tensor_array(value, self.path, name, decoded_limit(self.limit) - self.made)
        self.made += made
        return arr

    def field(self, value, name: str):
        """A top-level value; a list of per-row tensors becomes a list of arrays."""
        import torch

        if isinstance(value, torch.Tensor):
            check_values(self.path, f"field {name!r} (shape {list(value.shape)})", value.numel(), self.limit)
            return self.tensor(value, name)
        if isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
            count = sum(v.numel() for v in value if isinstance(v, torch.Tensor))
            check_values(self.path, f"field {name!r} ({len(value):,} tensors)", count, self.limit)
            return [self.tensor(v, name) for v in value]
        return value


def _parquet_arrays(path: Path, limit: int) -> dict[str, object]:
    from engine.io.store.native_parquet import read_checked

    table = read_checked(path, limit)  # footer and decoded sizes against the load ceiling, before any value is decoded
    out = {}
    for name in table.column_names:
        rows = _list_rows(table.column(name))
        if rows is not None:
            out[name] = rows
            continue
        col = table.column(name).to_pylist()
        if any(isinstance(v, list) for v in col):  # list column: one array per row, None for a null row
            out[name] = [None if v is None else np.asarray(v) for v in col]
        else:
            out[name] = np.asarray(col)
    return out


def _list_rows(column) -> list | None:
    """A list column of numbers without nulls inside as one numpy slice per row (None for a null row), views
    of the Arrow buffer: no Python object per value (``to_pylist`` takes ~36 bytes an id). None for any other
    column (read as before)."""
    import pyarrow as pa

    from engine.io.store.native_parquet import ListView, is_list_type

    arr = column.combine_chunks()
    if not is_list_type(arr.type):
        return None
    kind = arr.type.value_type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        return None
    if arr.values.null_count:
        return None
    view = ListView(arr)
    return [view[i] for i in range(len(arr))]


def _npz_arrays(path: Path, limit: int) -> dict[str, object]:
    check_npz(path, limit)  # member sizes and npy headers, before numpy allocates anything
    out = {}
    try:
        with np.load(path, allow_pickle=False) as data:
            for k in data.files:
                try:
                    out[k] = data[k]
                except ValueError as e:  # an object array (verl's non_tensor_batch keeps uid as dtype=object)
                    if "allow_pickle" not in str(e):
                        raise ValueError(f"{path}: field {k!r} cannot be read ({e})") from None
                    raise ValueError(
                        f"{path}: field {k!r} is a numpy object array, which only a pickle can read. Save it as "
                        f"strings (np.asarray(x, dtype=str)), or: {EXPORT_HINT}"
                    ) from None
    except (OSError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as e:  # a bad CRC, a cut file
        raise ValueError(f"{path}: not a readable .npz archive ({type(e).__name__}: {e})") from None
    return out


def load_arrays(path: Path, limit: int | None = None) -> dict[str, object]:
    """name -> array ([B, ...] numpy, or a list of per-row arrays for Parquet); raises ValueError if unreadable
    or if what the file declares is over ``limit`` (default: the load ceiling, ``max_load_bytes``)."""
    limit = max_load_bytes() if limit is None else limit
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        return _parquet_arrays(path, limit)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a .pt/.npz zip archive or Parquet file")
    names = [info.filename for info in check_zip(path, limit)]
    if any(n.endswith(".npy") for n in names):
        return _npz_arrays(path, limit)
    obj = load_weights_only(
        path,
        "cannot load safely with torch.load(weights_only=True): it holds Python objects",
        f", e.g. a TensorDict or numpy object arrays. {EXPORT_HINT}",
    )
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path}: expected a dict of tensors, got {type(obj).__name__}")
    dense = _Densifier(path, limit)
    flat: dict[str, object] = {}
    for key, value in obj.items():
        if key in ("batch", "non_tensor_batch") and isinstance(value, Mapping):
            flat.update({k: dense.field(v, str(k)) for k, v in value.items()})
        elif key != "meta_info":
            flat[key] = dense.field(value, str(key))
    return flat


def _row(data: dict, name: str, b: int):
    value = data.get(name)
    return None if value is None or value[b] is None else np.asarray(value[b])


SAME_LENGTH = ("response_mask", *TOKEN_REWARDS, "rollout_log_probs", "advantages", "turn_ids", *PER_TOKEN)
AT_LEAST = ("attention_mask", "turn_sequence_tensor")  # [B, P+T]: the response is the last T columns
PER_ROW = ("reward_baselines", "truncated")


def _rows(value: object) -> int | None:
    """Number of rows of an array or list (None for a scalar or anything else)."""
    if isinstance(value, list) or (isinstance(value, np.ndarray) and value.ndim > 0):
        return len(value)
    return None


def _misfit(data: dict, name: str, B: int) -> str | None:
    """Why field ``name`` does not fit ``responses`` (None if it does); null Parquet rows always fit."""
    value = data[name]
    shape, dtype = f"shape does not match responses ({B} rows)", "values are not numbers"
    if _rows(value) != B:
        return shape
    if name in PER_ROW:
        try:
            arr = np.asarray(value)
        except ValueError:  # ragged
            return shape
        return shape if arr.ndim != 1 else (dtype if arr.dtype.kind not in "biuf" else None)
    for b in range(B):
        row, resp = _row(data, name, b), _row(data, "responses", b)
        if row is None or resp is None or resp.ndim != 1:  # a responses row that is no row is reported per row
            continue
        width = len(row) - len(resp) if row.ndim == 1 else -1
        if width < 0 or (width and name not in AT_LEAST):
            return shape
        if row.dtype.kind not in "biuf":
            return dtype
        prompt = _row(data, "prompts", b) if name == "attention_mask" else None
        if prompt is not None and prompt.ndim == 1 and len(prompt) > width:
            return shape
    return None


def _check_shapes(data: dict, B: int, ctx: LoadContext) -> None:
    """Drop (with a problem) any field whose shape or dtype does not fit ``responses``."""
    for name in (*SAME_LENGTH, *AT_LEAST, *PER_ROW):
        why = _misfit(data, name, B) if data.get(name) is not None else None
        if why:
            ctx.problem(None, name, f"{why}; field ignored")
            del data[name]


def _group_ids(data: dict, B: int) -> list[str | None]:
    for key in ("uid", "index"):
        if data.get(key) is not None and _rows(data[key]) == B:
            return [str(x.tolist() if isinstance(x, np.ndarray) else x) for x in data[key]]
    return [None] * B


def _numeric_list(value: list) -> np.ndarray | None:
    """A list of plain numbers (a non-tensor column written by ``export_verl_batch``) as an array, else None."""
    if not all(isinstance(x, (int, float)) for x in value):  # bool is an int
        return None
    return np.asarray(value)


def _row_columns(data: dict, B: int) -> dict[str, np.ndarray]:
    """1-D numeric arrays of length B that are not ids or per-row settings: reward components."""
    out = {}
    for key, value in data.items():
        arr = _numeric_list(value) if isinstance(value, list) else np.asarray(value)
        if key in NOT_REWARDS or arr is None or arr.ndim != 1 or len(arr) != B or arr.dtype.kind not in "biuf":
            continue
        out[key] = arr.astype(np.float64)
    return out


def _reward_source(data: dict, columns: dict, ctx: LoadContext) -> tuple[str | None, dict]:
    """Which field is the reward (token-level first) and the global rewards; reports every fallback."""
    for name in TOKEN_REWARDS:
        if data.get(name) is not None:
            if name == "token_level_rewards":
                ctx.run_metadata["reward_source"] = "token_level_rewards (after verl's in-reward KL, if it was on)"
            return name, {}
    if "score" in columns:
        ctx.note(
            "score",
            "no token-level reward (token_level_scores, rm_scores, token_level_rewards): the 1-D 'score' column is "
            "each row's reward (verl's reward function places it on the last response token)",
        )
        return None, {"score": columns["score"]}
    names = sorted(k for k in columns if not k.startswith("__"))
    shown = f" (1-D columns {names} are shown as reward components, not trained on)" if names else ""
    ctx.note(
        None,
        "no reward field: none of token_level_scores, rm_scores, token_level_rewards or a 1-D 'score', so every "
        f"reward is 0{shown}",
    )
    return None, {}


def _turns_go_backwards(turns: np.ndarray) -> bool:
    t = turns[turns >= 0]
    return bool(t.size > 1 and (np.diff(t) < 0).any())


def _trajectory(
    data: dict, b: int, group: str | None, reward: str | None, rewards: dict, columns: dict, stem: str
) -> Trajectory:
    ids = _row(data, "responses", b)
    if ids is None or ids.ndim != 1:
        raise RecordError("responses", "expected a row of token ids")
    T = len(ids)
    attn = _row(data, "attention_mask", b)
    attn = as_mask(attn, "attention_mask") if attn is not None else None  # 0/1 only: NaN or 7 is a problem
    resp_attn = attn[len(attn) - T :] if attn is not None else np.ones(T, dtype=bool)
    valid = resp_attn
    ids = as_token_ids(ids[valid], "responses")  # padding may hold anything
    generated = _row(data, "response_mask", b)
    generated = as_mask(generated, "response_mask") if generated is not None else valid
    per_token = {}
    for src, dst in PER_TOKEN.items():
        value = _row(data, src, b)
        if value is None and src == "old_log_probs":
            src, value = "rollout_log_probs", _row(data, "rollout_log_probs", b)
        if value is not None:
            per_token[dst] = as_float_array(value[valid], src)
    rollout = _row(data, "rollout_log_probs", b) if "log_probs" in per_token else None
    if rollout is not None and _row(data, "old_log_probs", b) is not None:  # both: the mismatch is kept
        per_token["rollout_log_probs"] = as_float_array(rollout[valid], "rollout_log_probs")
    scores = _row(data, reward, b) if reward else None
    if scores is not None:
        per_token["scores"] = as_float_array(scores[valid], reward)
    for key in ("turn_ids", "turn_sequence_tensor"):
        turns = _row(data, key, b)
        if turns is not None and _turns_go_backwards(turns[-T:][valid & generated]):
            raise RecordError(key, "turn ids go backwards")
    prompt_ids = _row(data, "prompts", b)
    if prompt_ids is not None:
        if attn is not None and len(attn) > T and len(prompt_ids):
            prompt_ids = prompt_ids[attn[: len(attn) - T][-len(prompt_ids) :] > 0]
        prompt_ids = as_token_ids(prompt_ids, "prompts")
    metadata: dict = {}
    shown = {k: float(v[b]) for k, v in columns.items() if k not in rewards and not k.startswith("__")}
    if shown:
        metadata["reward_components"] = shown
    for key in (k for k in columns if k.startswith("__")):  # verl's bookkeeping (__num_turns__): a fact, no reward
        metadata[key.strip("_")] = float(columns[key][b])
    advantages = _row(data, "advantages", b)
    if advantages is not None:
        metadata["logged_advantages"] = as_float_array(advantages[valid], "advantages").tolist()
    if data.get("reward_baselines") is not None:
        metadata["reward_baseline"] = float(np.asarray(data["reward_baselines"])[b])
    if data.get("truncated") is not None:
        metadata["truncated"] = bool(np.asarray(data["truncated"])[b])
    return Trajectory(
        id=f"{stem}/row-{b}",
        group_id=group or (prompt_group_id(prompt_ids.tolist()) if prompt_ids is not None else f"{stem}/row-{b}"),
        prompt=None if prompt_ids is not None else "",
        segments=mask_segments(ids, generated[valid], other_role="tool", **per_token),
        global_rewards={k: float(v[b]) for k, v in rewards.items()},  # only a fallback 'score'; else token-level
        metadata=metadata,
        prompt_token_ids=prompt_ids,
    )


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """Yield one trajectory per batch row; a bad row becomes a problem ``row[b].<field>``."""
    data = load_arrays(path)
    if "responses" not in data and "response_ids" in data:
        data["responses"] = data.pop("response_ids")
    if "responses" not in data:
        raise ValueError(f"{path}: a verl tensor dump needs 'responses'; found {sorted(data)}")
    B = _rows(data["responses"])
    if B is None:
        raise ValueError(f"{path}: 'responses' is not a [B, T] array")
    _check_shapes(data, B, ctx)
    groups, columns = _group_ids(data, B), _row_columns(data, B)
    reward, rewards = _reward_source(data, columns, ctx)
    if data.get("old_log_probs") is None and data.get("rollout_log_probs") is not None:
        ctx.run_metadata["log_probs_source"] = "rollout_log_probs (the rollout engine's, no old_log_probs)"
    for b in range(B):
        traj = ctx.attempt(
            None, f"row[{b}].", _trajectory, data, b, groups[b], reward, rewards, columns, Path(path).stem
        )
        if traj is not None:
            yield None, f"row[{b}].", traj
        if b % 256 == 0:
            ctx.progress(b / max(B, 1), f"reading {Path(path).name}: row {b:,} of {B:,}")
