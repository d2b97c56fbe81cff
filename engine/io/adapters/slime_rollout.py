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
loaded the same way, with a problem; it is a ``bool`` field, so anything else (``"no"``) refuses the sample.
slime's advantages are computed after this dump, so none are logged here.

Step: the rollout id, which the record states. ``save_debug_rollout_data`` (same file and commit) writes
``{"rollout_id": rollout_id, ...}`` to ``path_template.format(rollout_id=("eval_" if evaluation else "") +
str(rollout_id))``; ``train.py`` calls ``RolloutManager.generate(rollout_id)`` (``slime/ray/rollout.py``, which
dumps) then trains on that rollout, once per ``rollout_id in range(start_rollout_id, num_rollout)``: one rollout is
one training step. ``rollout_id`` -> ``Trajectory.step``. ``STEP_FILE`` is the name ``--dump-details`` gives
(``slime/utils/arguments.py``: ``f"{dump_details}/rollout_data/{{rollout_id}}.pt"``); ``--save-debug-rollout-data``
takes any template, so other names say no step and the record's ``rollout_id`` is the only one. The samples'
``index`` and ``group_index`` are the data source's running counters (``slime/rollout/data_source.py``), unique
across the run. An evaluation's dump (``RolloutManager.eval``: the same template with ``eval_<rollout_id>``, beside
the training dumps) holds evaluation rollouts, not a training batch: its trajectories get no step (a note says so;
in a folder of training dumps the file is then skipped) and ``metadata.eval_rollout_id``.
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
from engine.io.reading.coerce import (
    as_component,
    as_flag,
    as_float,
    as_float_array,
    as_mask,
    as_token_ids,
    is_number,
    type_name,
)
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, as_step
from engine.io.reading.limits import HALF_DTYPES, check_values, check_zip, decoded_limit, tensor_array
from engine.io.reading.problems import RecordError

NAME = "slime_rollout"
STEP_FILE = re.compile(r"(\d+)\.pt")  # --dump-details: rollout_data/{rollout_id}.pt
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
    """A tensor as a numpy array (a 0-d one as its number): bf16/fp16 as float32, a sparse one or a strided view
    made dense if the file's tensors' dense bytes stay under the load ceiling (counted before any is made);
    ``RecordError`` for token ids in half precision (bf16 is exact only up to 256, fp16 up to 2,048). Anything
    else unchanged."""
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
        comps = {str(k): as_component(v, f"reward.{k}") for k, v in value.items() if is_number(v)}
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
    removed = as_flag(s.get("remove_sample"), "remove_sample")  # Sample.remove_sample: bool; "no" is not true
    if removed:
        mask = np.zeros(n, dtype=bool)
        reason = "slime zeroes this sample's loss mask; loaded with no action token"
        ctx.problem(None, f"samples[{b}].remove_sample", reason)
    index = s.get("index")
    group = s.get("group_index")
    status = s.get("status")
    if status is not None and not isinstance(status, str):
        reason = (
            f"{type_name(status)}, not one of slime's Sample.Status texts (to_dict writes its value): whether the "
            "sample was truncated is unknown, so it is read as not truncated"
        )
        ctx.note(f"samples[{b}].status", reason, once=f"slime-status\0{ctx.file}")
    truncated = isinstance(status, str) and status == "truncated"
    metadata = {"truncated": truncated, "status": status, "rollout_id": rollout}
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


EVAL = -1  # _step's answer for an evaluation's dump


def _step(rollout_id: object, stem: str, ctx: LoadContext) -> int | None:
    """The step of a dump's samples: its ``rollout_id`` (None when it has none); ``EVAL`` for an evaluation's dump
    (the file name ends in ``eval_<rollout_id>``), noted. A rollout id that is not a step is a problem (no step)."""
    if rollout_id is None:
        return None
    try:
        step = as_step(rollout_id, "rollout_id")
    except RecordError as err:
        ctx.problem(None, err.field, f"{err.reason}; the samples get no step")
        return None
    if stem.endswith(f"eval_{step}"):
        ctx.note(
            "rollout_id",
            f"an evaluation's dump (slime names it eval_{step}): evaluation rollouts at rollout {step}, not a training "
            "batch; its trajectories get no step",
        )
        return EVAL
    return step


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """One trajectory per sample; a bad sample is a problem ``samples[b].<field>``."""
    from engine.io.reading.fields import prompt_group_id

    obj = load_dump(path)
    rollout, stem, samples = str(obj.get("rollout_id")), Path(path).stem, obj["samples"]
    step = _step(obj.get("rollout_id"), stem, ctx)
    count = sum(_values(s.get("tokens")) for s in samples if isinstance(s, Mapping))
    check_values(path, f"the tokens of its {len(samples):,} samples", count)  # before any is converted
    dict_rewards = False
    for b, s in enumerate(samples):
        prefix = f"samples[{b}]."
        got = ctx.attempt(None, prefix, _trajectory, s, b, rollout, stem, ctx)
        if got is None:
            continue
        traj, is_dict = got
        if step == EVAL:
            traj.metadata["eval_rollout_id"] = obj.get("rollout_id")
        else:
            traj.step = step
        if not traj.group_id:
            traj.group_id = prompt_group_id(traj.prompt_token_ids.tolist())
            ctx.problem(None, f"{prefix}group_index", "no group_index; grouped by prompt token ids")
        if is_dict and not dict_rewards:
            dict_rewards = True
            ctx.note(  # about the file, skipping nothing: listed, and strict=True does not refuse the file for it
                "reward",
                "rewards are dicts: slime trains on reward[--reward-key], which the file does not name; every numeric "
                "entry is a global component (weight 1 unless CreditConfig.global_weights says otherwise)",
            )
        yield None, prefix, traj
