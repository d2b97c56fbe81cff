"""Adapter ``art_yaml``: OpenPipe ART's trajectory log (``<art_path>/<project>/models/<model>/trajectories/<split>/
<step:04d>.yaml``), written by ``LocalBackend._log`` with ``serialize_trajectory_groups``
(``src/art/utils/trajectory_logging.py``).

The file is one YAML list (``yaml.dump``), one item per ``TrajectoryGroup``: ``{"metadata", "trajectories":
[{"reward", "metrics", "metadata", "messages_and_choices", "logs"}]}``. ``messages_and_choices`` mixes plain
chat messages (``{"role", "content", ...}``) and OpenAI ``Choice`` dicts (``{"finish_reason", "index",
"message": {...}}``, ``logprobs`` removed). Read with PyYAML's safe constructor, aliases counted against budgets
(``engine.io.reading.yaml_records``). Text only, so:

* Prompt: the messages before the first Choice, rendered with the Qwen2.5 ChatML template. The trajectory's
  ``tools`` are not written, so the prompt has no tool schema.
* Response: the rest, rendered with ChatML and re-tokenized. A Choice is what ART trains on (its tokens come from
  the logprobs, ``src/art/local/tokenize.py``): a ``model`` segment. A plain assistant message is context ART does
  not train on (unless ``allow_training_without_logprobs``): its segment is ``system``. A Choice's message is the
  assistant's (OpenAI ``Choice.message.role``); one with another role is refused, naming it.
* ``reward`` (what ART's GRPO advantage uses) -> global reward ``reward``; numeric ``metrics`` ->
  ``metadata.reward_components`` (shown, never trained on); trajectory ``metadata`` and ``logs`` ->
  ``metadata.art``; group ``metadata`` -> ``metadata.art_group``.
* Groups: one ``TrajectoryGroup`` is one group (ART normalizes rewards within it): group ``<file stem>/group-<g>``,
  id ``<file stem>/group-<g>/traj-<i>`` (trajectories that raised were dropped by the writer).
* A Choice with ``finish_reason == "length"`` -> ``metadata.truncated``; the ``<|im_end|>`` the template puts
  after it was not generated, so it is a ``system`` segment, not part of the model segment.
* Step: only the file name says it (``STEP_FILE``). OpenPipe/ART ``src/art/local/backend.py`` (commit
  ``779559fd``), ``LocalBackend._log``: ``iteration = self.__get_step(model)`` (``get_model_step``,
  ``src/art/utils/get_model_step.py``: the largest all-digit checkpoint folder in the model's folder, 0 when none;
  0 for a model that is not trainable) and ``file_name = f"{iteration:04d}.yaml"`` in
  ``trajectories/<split>/`` (``get_trajectories_split_dir``, ``src/art/utils/output_dirs.py``). ``_train_model``
  logs the groups (split ``train``) before it trains on them, and ``LocalService.train``
  (``src/art/local/service.py``) saves the result as checkpoint ``step + 1``: the name is the step of the
  checkpoint the batch was sampled from and trained on. The records carry no step (``trajectory_to_dict`` writes
  ``reward``, ``metrics``, ``metadata``, ``messages_and_choices``, ``logs``; both metadata dicts are the user's).
  A ``val`` split file is named the same way: the evaluation at that step.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import require_mapping
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_component, as_float, is_number, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.problems import RecordError
from engine.io.reading.yaml_records import iter_yaml_records
from engine.io.text.chatml import IM_END, checked_messages, render_prompt, render_response

NAME = "art_yaml"
STEP_FILE = re.compile(r"(\d{4,})\.yaml")  # LocalBackend._log: f"{iteration:04d}.yaml"
CONTEXT_ROLE = "system"  # an assistant message ART does not train on


def sniff(rec: object) -> bool:
    """A serialized ``TrajectoryGroup``: ``metadata`` plus ``trajectories`` with ``messages_and_choices``."""
    if not isinstance(rec, Mapping) or "metadata" not in rec or not isinstance(rec.get("trajectories"), list):
        return False
    trajs = rec["trajectories"]
    return not trajs or (isinstance(trajs[0], Mapping) and {"messages_and_choices", "reward"} <= set(trajs[0]))


def _plain(value: object) -> object:
    """YAML scalars as JSON ones (``safe_load`` turns date-like text into dates)."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _messages(items: object) -> tuple[list[dict], list[bool], list[str | None]]:
    """Chat messages, whether each is a Choice (trainable), and each Choice's finish reason."""
    if not isinstance(items, list):
        raise RecordError("messages_and_choices", f"expected a list, got {type_name(items)}")
    msgs, trainable, finish = [], [], []
    for k, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise RecordError(f"messages_and_choices[{k}]", f"expected an object, got {type_name(item)}")
        is_choice = "message" in item
        msg = item["message"] if is_choice else item
        if not isinstance(msg, Mapping):
            raise RecordError(f"messages_and_choices[{k}].message", f"expected an object, got {type_name(msg)}")
        if is_choice and msg.get("role") != "assistant":  # OpenAI's Choice.message.role is always "assistant"
            raise RecordError(
                f"messages_and_choices[{k}].message.role",
                f"a Choice whose message role is {msg.get('role')!r}: a Choice is the policy's own output (role "
                "assistant), which ART trains on; loaded as another role it would train nothing",
            )
        msgs.append(dict(msg))
        trainable.append(is_choice)
        finish.append(item.get("finish_reason") if is_choice else None)
    return checked_messages(msgs, "messages_and_choices"), trainable, finish


def _mark_generated(segs: list[Segment], trainable: list[bool], finish: list, msgs: list[dict]) -> list[Segment]:
    """The k-th model segment renders the k-th assistant message: a plain one becomes context; a Choice cut by
    the length limit did not generate the template's ``<|im_end|>``, which moves to a ``system`` segment."""
    assistants = [(t, f) for m, t, f in zip(msgs, trainable, finish, strict=True) if m["role"] == "assistant"]
    out: list[Segment] = []
    k = 0
    for seg in segs:
        out.append(seg)
        if seg.role != "model":
            continue
        is_choice, reason = assistants[k]
        k += 1
        if not is_choice:
            seg.role = CONTEXT_ROLE
        elif reason == "length" and seg.text.endswith(IM_END):
            seg.text = seg.text[: -len(IM_END)]
            out.append(Segment(role="system", text=IM_END))
    return out


def convert(rec: Mapping, traj_id: str, group_id: str, group_meta: object) -> Trajectory:
    rec = require_mapping(rec)
    msgs, trainable, finish = _messages(rec.get("messages_and_choices"))
    if True not in trainable:
        raise RecordError("messages_and_choices", "no Choice: nothing in this trajectory was generated by the policy")
    first = trainable.index(True)
    segs = _mark_generated(render_response(msgs[first:]), trainable[first:], finish[first:], msgs[first:])
    metrics = rec.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise RecordError("metrics", f"expected an object, got {type_name(metrics)}")
    metadata: dict = {
        "truncated": "length" in finish,
        "art": {"metadata": _plain(rec.get("metadata") or {}), "logs": _plain(rec.get("logs") or [])},
        "art_group": _plain(group_meta or {}),
    }
    components = {str(k): as_component(v, f"metrics.{k}") for k, v in metrics.items() if is_number(v)}
    if components:
        metadata["reward_components"] = components
    return Trajectory(
        id=traj_id,
        group_id=group_id,
        prompt=render_prompt(msgs[:first]),
        segments=segs,
        global_rewards={"reward": as_float(rec.get("reward"), "reward")},
        metadata=metadata,
    )


def read(path: Path, ctx: LoadContext):
    stem = Path(path).stem
    for _, prefix, group in iter_yaml_records(str(path), ctx):
        if not sniff(group):
            ctx.log.add_error(ctx.file, None, RecordError(None, "expected a trajectory group"), prefix)
            continue
        g = prefix.strip("[].")
        for i, rec in enumerate(group["trajectories"]):
            where = f"{prefix}trajectories[{i}]."
            ids = (f"{stem}/group-{g}/traj-{i}", f"{stem}/group-{g}")
            traj = ctx.attempt(None, where, convert, rec, *ids, group.get("metadata"))
            if traj is not None:
                yield None, where, traj
