"""Adapter ``nemo_gym``: NVIDIA NeMo Gym rollouts (OpenAI Responses-API items), one rollout per JSONL line.

Written by ``RolloutCollectionHelper.run_from_config`` (``ng_collect_rollouts``): the agent's verify response
(``response``, ``reward``, the environment's other fields) plus ``_ng_task_index``, ``_ng_rollout_index``,
``agent_ref``, one ``orjson.dumps`` line each.

* Prompt: ``responses_create_params.input`` (a string, or message items) plus ``instructions`` and ``tools``
  (``response.tools``, the model server's echo, when the request lists none), rendered with the Qwen2.5 ChatML
  template (tools in the system block). Aviary's per-step lists (``nemo_gym_items.flatten_transitions``) start
  with the agent's input and first observation: those leading non-assistant items belong to the prompt.
* Response: ``response.output`` items in order (``nemo_gym_items``). Consecutive assistant-side items form one
  assistant message = one model segment (``<think>`` reasoning, content, ``<tool_call>`` blocks, ``<|im_end|>``);
  ``function_call_output`` items are tool segments, ``user`` messages (environment turns, e.g. blackjack) user
  segments; template glue goes to the non-model side.
* Real token ids: an item with ``generation_token_ids`` / ``generation_log_probs`` / ``prompt_token_ids`` keeps
  them (model segment text is then decoded from the ids); when the next generation's prompt extends the
  previous prompt + generation, the extra ids become the observation segment verbatim. ``generation_token_ids:
  []`` (an agent whose model server gave no ids) keeps the rendered text, marked ``synthesized:
  generation_token_ids`` and reported. A rollout without any assistant output (0 action tokens) is reported.
* Rewards: ``reward`` is the global reward; every other numeric (or boolean) top-level field is a
  ``reward_components`` entry (shown, never summed), except bookkeeping (indices, ids, timings, counts of
  tests, ``mask_sample``). ``_ng_task_index`` -> group (else the prompt), ``_ng_rollout_index`` -> id.
* ``mask_sample: true`` (top level, or ``instance_config.mask_sample`` as some resources servers write it) means
  "exclude this rollout from the loss": ``metadata.exclude_from_loss``, which the batch turns into a zero action
  mask for the row; the file's load reports how many.
* Step: none. NeMo Gym writes no training step: ``RolloutCollectionHelper.run_from_config``
  (``nemo_gym/rollout_collection.py``, NVIDIA-NeMo/Gym ``07d6b0d0``) writes every result to the one
  ``output_jsonl_fpath`` the caller names, adding only ``_ng_task_index``, ``_ng_rollout_index`` and ``agent_ref``;
  no record field, file or folder name of its own carries a step or policy version. So no ``STEP_FILE`` /
  ``STEP_FOLDER``: every trajectory has ``step=None`` (a load is one step), even in a folder another trainer names as
  a step's. Rollout files from several collections loaded together are one step: their ``_ng_task_index`` groups
  merge across files.
* Tokenizer: the run's tokenizer is ``"qwen3"`` unless the caller names one. NeMo Gym's open-model rollouts come
  from Qwen3 models, whose generations contain Qwen3-only ids (``<think>`` = 151667).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.io.adapters.common import read_records, require_mapping
from engine.io.adapters.generations import attach_generations
from engine.io.adapters.nemo_gym_items import (
    Notes,
    flatten_transitions,
    indexed,
    is_assistant_side,
    items_to_messages,
    text,
)
from engine.io.data.model import Trajectory
from engine.io.reading.coerce import as_component, as_float, is_number, type_name
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import mark_synthesized, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.text.chatml import render_prompt, render_response

NAME = "nemo_gym"
NOT_REWARDS = frozenset(
    {
        "_ng_task_index",
        "_ng_rollout_index",
        "task_idx",
        "id",
        "terminated",
        "truncated",
        "mask_sample",
        "num_tests_run",
        "total_test_execution_time_s",
        "mean_test_execution_time_s",
    }
)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and "responses_create_params" in rec and isinstance(rec.get("response"), Mapping)


def _tools(tools: object, field_: str) -> list[dict]:
    if tools is not None and not isinstance(tools, list):
        raise RecordError(field_, f"expected a list, got {type_name(tools)}")
    out = []
    for t in tools or []:
        if isinstance(t, Mapping) and t.get("type", "function") == "function":
            fn = t["function"] if isinstance(t.get("function"), Mapping) else t
            out.append(
                {"type": "function", "function": {k: fn[k] for k in ("name", "description", "parameters") if k in fn}}
            )
    return out


def _messages(rec: Mapping, notes: Notes) -> tuple[list[dict], list[dict]]:
    """(prompt messages, response messages) of one record."""
    params = rec.get("responses_create_params")
    if not isinstance(params, Mapping):
        raise RecordError("responses_create_params", f"expected an object, got {type_name(params)}")
    raw_input = params.get("input")
    if raw_input is not None and not isinstance(raw_input, (str, list)):
        raise RecordError(
            "responses_create_params.input", f"expected text or a list of items, got {type_name(raw_input)}"
        )
    prompt_items = [] if isinstance(raw_input, str) else indexed(raw_input or [], "responses_create_params.input")
    if not isinstance(rec.get("response"), Mapping):
        raise RecordError("response", f"expected an object, got {type_name(rec.get('response'))}")
    output = rec["response"].get("output")
    if not isinstance(output, list):
        raise RecordError("response.output", f"expected a list of items, got {type_name(output)}")
    items = flatten_transitions(output, "response.output", notes)
    transitions = any(isinstance(x, list) for x in output)
    if transitions:  # the agent's state begins with its input (a string made a message) + first observation
        lead = next((j for j, (_, item) in enumerate(items) if is_assistant_side(item)), len(items))
        prompt_items, items = items[:lead], items[lead:]
    prompt_msgs = [{"role": "user", "content": raw_input}] if isinstance(raw_input, str) and not transitions else []
    prompt_msgs += items_to_messages(prompt_items, notes)
    if params.get("instructions"):
        instructions = text(params["instructions"], "responses_create_params.instructions", notes)
        prompt_msgs.insert(0, {"role": "system", "content": instructions})
    return prompt_msgs, items_to_messages(items, notes)


def _mask_sample(rec: Mapping) -> bool:
    """NeMo Gym's "exclude this rollout from the loss" flag, top level or under ``instance_config``."""
    flags = {"mask_sample": rec.get("mask_sample")}
    if isinstance(rec.get("instance_config"), Mapping):
        flags["instance_config.mask_sample"] = rec["instance_config"].get("mask_sample")
    for where, value in flags.items():
        if value is not None and not isinstance(value, bool):
            raise RecordError(where, f"expected true or false, got {type_name(value)}")
    return any(value is True for value in flags.values())


def _note_generations(msgs: list[dict], notes: Notes) -> None:
    """Report generations without ids and a response without any assistant output (0 action tokens)."""
    if notes.empty_generations:
        n, total = len(notes.empty_generations), _n_assistant(msgs)
        notes.synthesized.add("generation_token_ids")
        notes.problem(
            notes.empty_generations[0],
            f"empty ([]) on {n} of {total} generations: the model server returned no token ids, so their rendered "
            "text is tokenized instead and they have no log-probs (metadata.synthesized)",
        )
    if msgs and not _n_assistant(msgs):  # an empty output is refused as an empty trajectory
        notes.problem("response.output", "no assistant output: this rollout has 0 action tokens")


def _n_assistant(msgs: list[dict]) -> int:
    return sum(m["role"] == "assistant" for m in msgs)


def convert(rec: object, default_id: str, stem: str = "", notes: Notes | None = None) -> Trajectory:
    rec = require_mapping(rec)
    notes = Notes() if notes is None else notes
    prompt_msgs, msgs = _messages(rec, notes)
    _note_generations(msgs, notes)
    gens = [m.get("_gen") for m in msgs if m["role"] == "assistant"]
    segs = attach_generations(render_response(msgs), gens)
    first_gen = next((m["_gen"] for m in msgs if m.get("_gen")), None)
    prompt_ids = first_gen.get("prompt_ids") if first_gen else None
    # The trainer's reward is the scalar `reward`; the environment's other numbers (accuracy, counts, subtask
    # scores) describe it and are kept as metadata, never summed into it.
    rewards = {"reward": as_float(rec["reward"], "reward")} if "reward" in rec else {}
    components = {
        key: as_component(value, key)
        for key, value in rec.items()
        if key not in NOT_REWARDS and key != "reward" and is_number(value)
    }
    task, rollout = rec.get("_ng_task_index"), rec.get("_ng_rollout_index")
    metadata = _metadata(rec, rewards, components, notes)
    # Agents that take their tools from the environment (aviary's seed_session) send them to the model but not
    # in the request they log; the model server echoes them in response.tools.
    where = "responses_create_params" if rec["responses_create_params"].get("tools") else "response"
    prompt = render_prompt(prompt_msgs, _tools(rec[where].get("tools"), f"{where}.tools"))
    return Trajectory(
        id=f"{stem}/task-{task}/rollout-{rollout}" if task is not None and rollout is not None else default_id,
        group_id=f"{stem}/task-{task}" if task is not None else prompt_group_id(prompt),
        prompt=None if prompt_ids is not None else prompt,
        segments=segs,
        global_rewards=rewards,
        metadata=metadata,
        prompt_token_ids=prompt_ids,
    )


def _flag(rec: Mapping, key: str) -> bool:
    """A boolean field (absent or null: false); a "no" or a 2 is an error, never read as true."""
    value = rec.get(key)
    if value is not None and not isinstance(value, bool):
        raise RecordError(key, f"expected true or false, got {value!r:.40}")
    return bool(value)


def _metadata(rec: Mapping, rewards: dict, components: dict, notes: Notes) -> dict:
    """Truncation, the loss exclusion, reward components, the record's other scalars, what was made up."""
    metadata = {
        "truncated": _flag(rec, "truncated") or rec["response"].get("status") == "incomplete",
        "nemo_gym": {
            k: v
            for k, v in rec.items()
            if k not in rewards and k not in components and isinstance(v, (str, int, float, bool))
        },
    }
    if _mask_sample(rec):
        metadata["exclude_from_loss"] = True
    if components:
        metadata["reward_components"] = components
    if isinstance(rec.get("agent_ref"), Mapping):
        metadata["nemo_gym"]["agent"] = rec["agent_ref"].get("name")
    if notes.placeholders:
        metadata["placeholders"] = list(notes.placeholders)
    if notes.synthesized:
        mark_synthesized(metadata, *notes.synthesized)
    return metadata


def read(path: Path, ctx: LoadContext):
    """Trajectories of one rollouts file; what a record's reading changed is reported against its line, and
    the rollouts NeMo Gym excludes from the loss (``mask_sample``) are counted in one problem."""
    ctx.run_tokenizer = ctx.run_tokenizer or "qwen3"
    stem = Path(path).stem
    current: list[Notes] = []  # the notes of the record just converted, read before the next one is

    def one(rec: object, default_id: str) -> Trajectory:
        current[:] = [Notes()]
        return convert(rec, default_id, stem, current[0])

    masked, total = [], 0
    for line, prefix, traj in read_records(path, ctx, one):
        for field_, reason in current[0].problems:
            ctx.problem(line, f"{prefix}{field_}", reason)
        total += 1
        if traj.metadata.get("exclude_from_loss"):
            masked.append(str(line) if line is not None else traj.id)
        yield line, prefix, traj
    if masked:
        ctx.problem(
            None,
            "mask_sample",
            f"{len(masked)} of {total} rollouts carry mask_sample=true (lines {', '.join(masked)}): NeMo Gym "
            "excludes them from the loss, so their action mask is 0 (metadata.exclude_from_loss)",
        )
