"""NeMo Gym's OpenAI Responses-API items -> chat messages, with what reading them changed or made up.

* Items: ``message`` (user / system / developer / assistant), ``reasoning``, ``function_call``,
  ``function_call_output``. Consecutive assistant-side items of one generation merge into one assistant message.
* Content parts: text parts (``input_text``, ``output_text``, ``summary_text``, ...) give their ``text``,
  ``refusal`` its refusal text. An ``input_image`` (``input_video``) part becomes Qwen-VL's placeholder
  ``<|vision_start|><|image_pad|><|vision_end|>`` (``<|video_pad|>``) where its chat template puts the image;
  a problem names the part (the real model sees one pad token per image patch) and ``metadata.placeholders``
  lists it. Any other part without text (audio, files) refuses the record: its tokens cannot be placed.
* Token bundles: the vLLM model server puts ``prompt_token_ids`` / ``generation_token_ids`` /
  ``generation_log_probs`` on the last output item of each generation. Agents that get no ids from their model
  server (hermes, harbor) write ``generation_token_ids: []``: that is "no ids", never "zero tokens"; the
  generation's rendered text is tokenized instead (``Notes.empty_generations``).
* Transitions: with ``return_transitions`` (the default) the aviary agent writes ``response.output`` as one list
  per step, each the whole agent state after that step (request input + first observation + every action and
  observation so far). ``flatten_transitions`` takes each step's new items in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.io.reading.coerce import as_float_array, as_token_ids, type_name
from engine.io.reading.problems import RecordError

PLACEHOLDERS = {  # Qwen2-VL / Qwen2.5-VL / Qwen3-VL chat templates: one pad token stands for the patches
    "input_image": "<|vision_start|><|image_pad|><|vision_end|>",
    "input_video": "<|vision_start|><|video_pad|><|vision_end|>",
}
TEXT_PART_TYPES = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
ASSISTANT_KINDS = frozenset({"reasoning", "function_call"})


@dataclass
class Notes:
    """What reading one record changed or made up: problems ``(field, reason)``, synthesized field names, the
    fields of empty ``generation_token_ids`` and of the parts rendered as placeholders."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    synthesized: set[str] = field(default_factory=set)
    empty_generations: list[str] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)

    def problem(self, field_: str, reason: str) -> None:
        self.problems.append((field_, reason))


def indexed(items: Sequence, field_: str) -> list[tuple[str, object]]:
    """``[(f"{field_}[j]", item), ...]``: each item with the field path problems name it by."""
    return [(f"{field_}[{j}]", item) for j, item in enumerate(items)]


def flatten_transitions(output: list, field_: str, notes: Notes) -> list[tuple[str, object]]:
    """``response.output`` as one item sequence: flat items as they are; aviary's per-step lists as step 0's
    items, then the items each later step appends. A step that rewrites an earlier item (``collapse_old_env_states``
    hides old environment states) is a problem; the items are kept as first written."""
    if not any(isinstance(x, list) for x in output):
        return indexed(output, field_)
    if not all(isinstance(x, list) for x in output):
        raise RecordError(field_, "mixes output items and per-step lists of items")
    items = indexed(output[0], f"{field_}[0]")
    for k in range(1, len(output)):
        prev, cur = output[k - 1], output[k]
        if len(cur) < len(prev):
            raise RecordError(
                f"{field_}[{k}]", f"step {k} holds {len(cur)} items, fewer than step {k - 1} ({len(prev)})"
            )
        if cur[: len(prev)] != prev:
            notes.problem(
                f"{field_}[{k}]",
                f"step {k} rewrites items of step {k - 1} (aviary collapse_old_env_states); each item is loaded "
                "as first written, so later turns show context the model no longer saw",
            )
        items += [(f"{field_}[{k}][{j}]", cur[j]) for j in range(len(prev), len(cur))]
    return items


def is_assistant_side(item: object) -> bool:
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type", "message")
    if not isinstance(kind, str):  # refused where the item is converted (items_to_messages)
        return False
    return kind in ASSISTANT_KINDS or (kind == "message" and item.get("role", "assistant") == "assistant")


def text(content: object, field_: str, notes: Notes) -> str:
    """Text of a content value: a string, or content parts joined (see the module docstring for parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RecordError(field_, f"expected text or content parts, got {type_name(content)}")
    return "".join(_part_text(p, f"{field_}[{i}]", notes) for i, p in enumerate(content))


def _part_text(part: object, field_: str, notes: Notes) -> str:
    if not isinstance(part, Mapping):
        raise RecordError(field_, f"expected a content part object, got {type_name(part)}")
    kind = part.get("type")
    if kind is not None and not isinstance(kind, str):
        raise RecordError(f"{field_}.type", f"expected a content part type name, got {type_name(kind)}")
    value = part.get("refusal") if kind == "refusal" else part.get("text")
    if isinstance(value, str):
        return value
    if kind in PLACEHOLDERS:
        notes.placeholders.append(field_)
        notes.synthesized.add(kind)
        notes.problem(
            field_,
            f"{kind} rendered as the placeholder {PLACEHOLDERS[kind]} where the Qwen-VL chat template puts it; "
            "the model saw one pad token per patch",
        )
        return PLACEHOLDERS[kind]
    if value is None and (kind is None or kind in TEXT_PART_TYPES):
        return ""
    raise RecordError(f"{field_}.type", f"content part of type {kind!r} has no text; its tokens cannot be placed")


def _generation(item: Mapping, field_: str, notes: Notes) -> dict | None:
    """The item's token bundle ``{"ids", "log_probs"?, "prompt_ids"?}``; ``None`` without one or with ``[]``."""
    raw = item.get("generation_token_ids")
    if raw is None:
        return None
    if isinstance(raw, list) and not raw:
        notes.empty_generations.append(f"{field_}.generation_token_ids")
        return None
    gen = {"ids": as_token_ids(raw, f"{field_}.generation_token_ids")}
    if item.get("generation_log_probs") is not None:
        gen["log_probs"] = as_float_array(item["generation_log_probs"], f"{field_}.generation_log_probs")
    if item.get("prompt_token_ids"):  # [] (an agent without ids) is no prompt
        gen["prompt_ids"] = as_token_ids(item["prompt_token_ids"], f"{field_}.prompt_token_ids")
    return gen


def items_to_messages(items: Sequence[tuple[str, object]], notes: Notes) -> list[dict]:
    """Responses-API items (with their field paths) -> chat messages; assistant-side items of one generation
    merge into one message, which keeps its token bundle under ``"_gen"``."""
    msgs: list[dict] = []
    current: dict | None = None
    for where, item in items:
        if not isinstance(item, Mapping):
            raise RecordError(where, f"expected an item object, got {type_name(item)}")
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise RecordError(f"{where}.type", f"expected an item type name, got {type_name(kind)}")
        role = item.get("role", "assistant")
        if not isinstance(role, str):
            raise RecordError(f"{where}.role", f"expected a role name, got {type_name(role)}")
        gen = _generation(item, where, notes)
        if kind == "function_call_output":
            current = None
            msgs.append({"role": "tool", "content": text(item.get("output"), f"{where}.output", notes)})
        elif kind == "message" and role != "assistant":
            current = None
            content = text(item.get("content"), f"{where}.content", notes)
            msgs.append({"role": "system" if role == "developer" else role, "content": content})
        elif kind in ("reasoning", "message", "function_call"):
            if _starts_new_message(current, kind, gen):
                current = {"role": "assistant"}
                msgs.append(current)
            _add_item(current, kind, item, gen, where, notes)
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


def _add_item(message: dict, kind: str, item: Mapping, gen: dict | None, where: str, notes: Notes) -> None:
    """Fold one assistant-side item into the assistant ``message`` (reasoning, content or a tool call)."""
    if kind == "reasoning":
        message["reasoning"] = text(item.get("summary"), f"{where}.summary", notes)
    elif kind == "message":
        message["content"] = text(item.get("content"), f"{where}.content", notes)
    else:
        call = {"name": item.get("name", ""), "arguments": item.get("arguments", "{}")}
        message.setdefault("tool_calls", []).append(call)
    if gen is not None:
        message["_gen"] = gen
