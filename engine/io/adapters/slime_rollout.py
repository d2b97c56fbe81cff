"""Adapter ``slime_rollout``: slime's debug rollout dump (``--save-debug-rollout-data``, e.g.
``<dump_details>/rollout_data/<rollout_id>.pt``).

Writer: THUDM/slime ``slime/observability/rollout_data_utils.py`` ``save_debug_rollout_data`` (commit
``624b824a``): ``torch.save({"rollout_id": id, "samples": [sample.to_dict() for sample in data]}, path)``, where
``Sample.to_dict`` (``slime/utils/types.py``) is the sample's ``__dict__`` with ``status`` as its string value and
``spec_info`` / ``prefix_cache_info`` as dicts. CreditLens reads it with ``torch.load(weights_only=True)`` and
never unpickles code: plain dicts, lists, strings, numbers and tensors load; anything else (numpy values, PIL
images in ``multimodal_inputs``, custom objects a generate function put in ``metadata``) makes the file refuse
to load with a message that says what to export instead.

Per sample: ``tokens`` = prompt + response ids; the last ``response_length`` are the response; ``loss_mask``
(one per response token, None = all 1) -> runs of 1 are ``model`` segments, runs of 0 (tool / environment tokens
``append_response_tokens(trainable=False)`` adds) ``tool`` segments; ``rollout_log_probs`` -> log-probs.
``reward``: a number -> global component ``reward``; a dict (a reward model returning several values; slime
trains on ``reward[--reward-key]``, which the file does not name) -> each numeric entry a component, with a
problem. ``status == "truncated"`` -> ``metadata.truncated``. Group = ``group_index`` (slime normalises rewards
over the ``n_samples_per_prompt`` samples of a prompt), scoped to the file's ``rollout_id``; id = ``index``.
``remove_sample`` true -> slime zeroes the sample's loss mask (it still enters the group's reward statistics):
loaded the same way, with a problem. slime's advantages are computed after this dump, so none are logged here.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from engine.io.adapters.common import load_weights_only
from engine.io.adapters.generations import mask_segments
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_float, as_float_array, as_mask, as_token_ids, is_number, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id
from engine.io.reading.limits import HALF_DTYPES, check_values, check_zip, decoded_limit, tensor_array
from engine.io.reading.problems import RecordError

NAME = "slime_rollout"
KEEP = ("tokens", "response_length", "loss_mask", "rollout_log_probs", "reward", "group_index", "index", "status")
EXPORT_HINT = (
    "export plain data instead, e.g. torch.save({'rollout_id': rollout_id, 'samples': [{k: s.to_dict()[k] for k in "
    + repr(list(KEEP))
    + "} for s in samples]}, path)"
)


def sniff_zip(path: Path) -> bool:
    """A ``torch.save`` archive whose pickle names ``rollout_id``, ``samples`` and ``response_length`` (read as
    bytes, never unpickled)."""
    check_zip(path)  # refuses an archive whose members declare more than the load ceiling, before reading any
    try:
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if name is None:
                return False
            data = z.read(name)
    except (OSError, zipfile.BadZipFile):
        return False
    return all(key in data for key in (b"rollout_id", b"samples", b"response_length"))


def load_dump(path: Path) -> dict:
    obj = load_weights_only(
        path,
        "the slime rollout dump holds objects torch.load(weights_only=True) refuses",
        f"; CreditLens never unpickles code: {EXPORT_HINT}",
    )
    if not isinstance(obj, Mapping) or not isinstance(obj.get("samples"), list):
        raise ValueError(f"{path}: expected {{'rollout_id', 'samples': [...]}} (slime save_debug_rollout_data)")
    return obj


def _list(value: object, field: str, ctx: LoadContext) -> object:
    """A tensor as a numpy array (a 0-d one as its number): bf16/fp16 as float32, a sparse one made dense if
    the file's dense bytes stay under the load ceiling; ``RecordError`` for token ids in half precision (bf16
    is exact only up to 256, fp16 up to 2,048). Anything else unchanged."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return value
    if not isinstance(value, torch.Tensor):
        return value
    dtype = str(value.dtype).removeprefix("torch.")
    if field == "tokens" and dtype in HALF_DTYPES:
        raise RecordError(field, f"token ids stored as {dtype}, which rounds ids; store them as integers")
    try:
        arr, made = tensor_array(value, ctx.file, field, decoded_limit() - ctx.dense_bytes)
    except ValueError as e:
        raise RecordError(field, str(e).removeprefix(f"{ctx.file}: {field}: ")) from None
    ctx.dense_bytes += made
    return arr.item() if arr.ndim == 0 else arr


def _values(value: object) -> int:
    """How many values a sample's ``tokens`` declares (a sparse tensor: its dense shape)."""
    if isinstance(value, (list, tuple)):
        return len(value)
    numel = getattr(value, "numel", None)
    return int(numel()) if callable(numel) else 0


def _rewards(value: object) -> tuple[dict[str, float], bool]:
    """Global reward components and whether the reward was a dict."""
    if value is None:
        raise RecordError("reward", "no reward (the sample was not scored)")
    if isinstance(value, Mapping):
        comps = {str(k): as_float(v, f"reward.{k}") for k, v in value.items() if is_number(v)}
        if not comps:
            raise RecordError("reward", "a reward dict without numeric entries")
        return comps, True
    return {"reward": as_float(value, "reward")}, False


def _trajectory(s: object, b: int, rollout: str, stem: str, ctx: LoadContext) -> tuple[Trajectory, bool]:
    if not isinstance(s, Mapping):
        raise RecordError(None, f"expected a Sample.to_dict() dict, got {type_name(s)}")
    tokens = as_token_ids(_list(s.get("tokens"), "tokens", ctx), "tokens")
    n = s.get("response_length")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= len(tokens):
        raise RecordError("response_length", f"expected 1..{len(tokens)} (the response's token count), got {n!r}")
    mask = _list(s.get("loss_mask"), "loss_mask", ctx)
    mask = np.ones(n, dtype=bool) if mask is None else as_mask(mask, "loss_mask")
    if len(mask) != n:
        raise RecordError("loss_mask", f"{len(mask)} entries for response_length {n}")
    lp = _list(s.get("rollout_log_probs"), "rollout_log_probs", ctx)
    lp = None if lp is None else as_float_array(lp, "rollout_log_probs")
    if lp is not None and len(lp) != n:
        raise RecordError("rollout_log_probs", f"{len(lp)} values for response_length {n}")
    rewards, is_dict = _rewards(_list(s.get("reward"), "reward", ctx))
    removed = bool(s.get("remove_sample"))
    if removed:
        mask = np.zeros(n, dtype=bool)
        reason = "slime zeroes this sample's loss mask; loaded with no action token"
        ctx.problem(None, f"samples[{b}].remove_sample", reason)
    index = s.get("index")
    group = s.get("group_index")
    metadata = {"truncated": s.get("status") == "truncated", "status": s.get("status"), "rollout_id": rollout}
    if removed:
        metadata["remove_sample"] = True
    if s.get("label") is not None:
        metadata["label"] = s.get("label")
    return (
        Trajectory(
            id=f"{stem}/sample-{as_id(index, 'index')}" if index is not None else f"{stem}/row-{b}",
            group_id=f"rollout-{rollout}/group-{as_id(group, 'group_index')}" if group is not None else "",
            prompt=None,
            segments=mask_segments(tokens[-n:], mask, other_role="tool", log_probs=lp),
            global_rewards=rewards,
            metadata=metadata,
            prompt_token_ids=tokens[:-n],
        ),
        is_dict,
    )


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """One trajectory per sample; a bad sample is a problem ``samples[b].<field>``."""
    from engine.io.reading.fields import prompt_group_id

    obj = load_dump(path)
    rollout, stem, samples = str(obj.get("rollout_id")), Path(path).stem, obj["samples"]
    count = sum(_values(s.get("tokens")) for s in samples if isinstance(s, Mapping))
    check_values(path, f"the tokens of its {len(samples):,} samples", count)  # before any is converted
    dict_rewards = False
    for b, s in enumerate(samples):
        prefix = f"samples[{b}]."
        got = ctx.attempt(None, prefix, _trajectory, s, b, rollout, stem, ctx)
        if got is None:
            continue
        traj, is_dict = got
        if not traj.group_id:
            traj.group_id = prompt_group_id(traj.prompt_token_ids.tolist())
            ctx.problem(None, f"{prefix}group_index", "no group_index; grouped by prompt token ids")
        if is_dict and not dict_rewards:
            dict_rewards = True
            ctx.problem(
                None,
                "reward",
                "rewards are dicts: slime trains on reward[--reward-key], which the file does not name; every numeric "
                "entry is a global component (weight 1 unless CreditConfig.global_weights says otherwise)",
            )
        yield None, prefix, traj
