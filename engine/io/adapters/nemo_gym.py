"""Adapter ``nemo_gym``: NVIDIA NeMo Gym rollouts (OpenAI Responses-API items), one rollout per JSONL line.

* Prompt: ``responses_create_params.input`` (a string, or message items) plus ``instructions`` and ``tools``,
  rendered with the Qwen2.5 ChatML template (tools in the system block).
* Response: ``response.output`` items in order. Consecutive assistant-side items (``reasoning``, assistant
  ``message``, ``function_call``) form one assistant message = one model segment (``<think>`` reasoning,
  content, ``<tool_call>`` blocks, ``<|im_end|>``); ``function_call_output`` items are tool segments, ``user``
  messages (environment turns, e.g. blackjack) user segments; template glue goes to the non-model side.
* Real token ids: an item with ``generation_token_ids`` / ``generation_log_probs`` / ``prompt_token_ids`` keeps
  them (model segment text is then decoded from the ids); when the next generation's prompt extends the
  previous prompt + generation, the extra ids become the observation segment verbatim.
* Rewards: ``reward`` then every other numeric (or boolean) top-level field as global components, except
  bookkeeping (indices, ids, timings, counts of tests). ``_ng_task_index`` -> group, ``_ng_rollout_index`` -> id.
* Tokenizer: the run's tokenizer is ``"qwen3"`` unless the caller names one. NeMo Gym's open-model rollouts come
  from Qwen3 models, whose generations contain Qwen3-only ids (``<think>`` = 151667).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from engine.io.adapters.common import read_records, require_mapping
from engine.io.adapters.generations import attach_generations
from engine.io.chatml import render_prompt, render_response
from engine.io.coerce import as_float, as_float_array, as_token_ids, is_number, type_name
from engine.io.context import LoadContext
from engine.io.fields import prompt_group_id
from engine.io.model import Trajectory
from engine.io.problems import RecordError

NAME = "nemo_gym"
NOT_REWARDS = frozenset(
    {
        "_ng_task_index",
        "_ng_rollout_index",
        "id",
        "terminated",
        "truncated",
        "num_tests_run",
        "total_test_execution_time_s",
        "mean_test_execution_time_s",
    }
)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and "responses_create_params" in rec and isinstance(rec.get("response"), Mapping)


def _text(content: object, field: str = "content") -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") or "" for p in content if isinstance(p, Mapping)]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)
    raise RecordError(field, f"expected text or content parts, got {type_name(content)}")


def _generation(item: Mapping, field: str) -> dict | None:
    if item.get("generation_token_ids") is None:
        return None
    gen = {"ids": as_token_ids(item["generation_token_ids"], f"{field}.generation_token_ids")}
    if item.get("generation_log_probs") is not None:
        gen["log_probs"] = as_float_array(item["generation_log_probs"], f"{field}.generation_log_probs")
    if item.get("prompt_token_ids") is not None:
        gen["prompt_ids"] = as_token_ids(item["prompt_token_ids"], f"{field}.prompt_token_ids")
    return gen


def items_to_messages(items: Sequence, field: str) -> list[dict]:
    """Responses-API items -> chat messages; assistant-side items of one generation merge into one message."""
    msgs: list[dict] = []
    current: dict | None = None
    for j, item in enumerate(items):
        where = f"{field}[{j}]"
        if not isinstance(item, Mapping):
            raise RecordError(where, f"expected an item object, got {type_name(item)}")
        kind = item.get("type", "message")
        role = item.get("role", "assistant")
        gen = _generation(item, where)
        if kind == "function_call_output":
            current = None
            msgs.append({"role": "tool", "content": _text(item.get("output"))})
        elif kind == "message" and role != "assistant":
            current = None
            msgs.append({"role": "system" if role == "developer" else role, "content": _text(item.get("content"))})
        elif kind in ("reasoning", "message", "function_call"):
            if _starts_new_message(current, kind, gen):
                current = {"role": "assistant"}
                msgs.append(current)
            _add_item(current, kind, item, gen)
        else:
            raise RecordError(f"{where}.type", f"unknown item type {kind!r}")
    return msgs


def _starts_new_message(current: dict | None, kind: str, gen: dict | None) -> bool:
    """A new generation begins at reasoning after output, at text after text/calls, or at a second id list."""
    if current is None:
        return True
    if kind == "reasoning":
        return len(current) > 1
    if kind == "message" and (current.get("content") or current.get("tool_calls")):
        return True
    return gen is not None and current.get("_gen") is not None


def _add_item(message: dict, kind: str, item: Mapping, gen: dict | None) -> None:
    """Fold one assistant-side item into the assistant ``message`` (reasoning, content or a tool call)."""
    if kind == "reasoning":
        message["reasoning"] = _text(item.get("summary"), "summary")
    elif kind == "message":
        message["content"] = _text(item.get("content"))
    else:
        call = {"name": item.get("name", ""), "arguments": item.get("arguments", "{}")}
        message.setdefault("tool_calls", []).append(call)
    if gen is not None:
        message["_gen"] = gen


def _tools(tools: object) -> list[dict]:
    if tools is not None and not isinstance(tools, list):
        raise RecordError("responses_create_params.tools", f"expected a list, got {type_name(tools)}")
    out = []
    for t in tools or []:
        if isinstance(t, Mapping) and t.get("type", "function") == "function":
            fn = t["function"] if isinstance(t.get("function"), Mapping) else t
            out.append(
                {"type": "function", "function": {k: fn[k] for k in ("name", "description", "parameters") if k in fn}}
            )
    return out


def convert(rec: object, default_id: str, stem: str = "") -> Trajectory:
    rec = require_mapping(rec)
    params = rec.get("responses_create_params")
    if not isinstance(params, Mapping):
        raise RecordError("responses_create_params", f"expected an object, got {type_name(params)}")
    raw_input = params.get("input")
    if raw_input is not None and not isinstance(raw_input, (str, list)):
        raise RecordError(
            "responses_create_params.input", f"expected text or a list of items, got {type_name(raw_input)}"
        )
    prompt_msgs = (
        [{"role": "user", "content": raw_input}]
        if isinstance(raw_input, str)
        else items_to_messages(raw_input or [], "responses_create_params.input")
    )
    if params.get("instructions"):
        prompt_msgs.insert(0, {"role": "system", "content": _text(params["instructions"])})
    if not isinstance(rec.get("response"), Mapping):
        raise RecordError("response", f"expected an object, got {type_name(rec.get('response'))}")
    output = rec["response"].get("output")
    if not isinstance(output, list):
        raise RecordError("response.output", f"expected a list of items, got {type_name(output)}")
    msgs = items_to_messages(output, "response.output")
    gens = [m.get("_gen") for m in msgs if m["role"] == "assistant"]
    segs = attach_generations(render_response(msgs), gens)
    first_gen = next((m["_gen"] for m in msgs if m.get("_gen")), None)
    prompt_ids = first_gen.get("prompt_ids") if first_gen else None
    # The trainer's reward is the scalar `reward`; the environment's other numbers (accuracy, counts, subtask
    # scores) describe it and are kept as metadata, never summed into it.
    rewards = {"reward": as_float(rec["reward"], "reward")} if "reward" in rec else {}
    components = {
        key: as_float(value, key)
        for key, value in rec.items()
        if key not in NOT_REWARDS and key != "reward" and is_number(value)
    }
    task, rollout = rec.get("_ng_task_index"), rec.get("_ng_rollout_index")
    status = rec["response"].get("status")
    metadata = {
        "truncated": bool(rec.get("truncated")) or status == "incomplete",
        "nemo_gym": {
            k: v
            for k, v in rec.items()
            if k not in rewards and k not in components and isinstance(v, (str, int, float, bool))
        },
    }
    if components:
        metadata["reward_components"] = components
    if isinstance(rec.get("agent_ref"), Mapping):
        metadata["nemo_gym"]["agent"] = rec["agent_ref"].get("name")
    prompt = render_prompt(prompt_msgs, _tools(params.get("tools")))
    return Trajectory(
        id=f"{stem}/task-{task}/rollout-{rollout}" if task is not None and rollout is not None else default_id,
        group_id=f"{stem}/task-{task}" if task is not None else prompt_group_id(prompt),
        prompt=None if prompt_ids is not None else prompt,
        segments=segs,
        global_rewards=rewards,
        metadata=metadata,
        prompt_token_ids=prompt_ids,
    )


def read(path: Path, ctx: LoadContext):
    ctx.run_tokenizer = ctx.run_tokenizer or "qwen3"
    stem = Path(path).stem
    return read_records(path, ctx, lambda rec, default_id: convert(rec, default_id, stem))
