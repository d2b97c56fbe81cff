"""Field conventions shared by the adapters: default ids, group ids, structured rewards, metadata flags."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from engine.io.reading.coerce import as_float, as_reward_dict, is_number, type_name
from engine.io.reading.problems import RecordError

MAX_TURN_KEY = 10_000  # a keyed turn creates empty placeholder turns before it; bounded so a typo cannot hang


def stable_hash(value: object, n: int = 12) -> str:
    """Short hex digest of a JSON-able value (sorted keys), stable across runs and machines."""
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha1(data.encode("utf-8")).hexdigest()[:n]


def prompt_group_id(prompt: object) -> str:
    """Group id for rollouts that carry none: rollouts with the same prompt form one group."""
    return f"prompt-{stable_hash(prompt)}"


def as_id(value: object, field: str) -> str:
    """Ids may be strings or integers in the wild; we keep strings."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RecordError(field, f"expected a string or integer id, got {type_name(value)}")
    return str(value)


def as_step(value: object, field: str) -> int:
    """A training step as a trainer writes it: a non-negative integer (an integral float, as a Parquet or
    pandas column of steps with a null in it holds them, or a string of digits, also accepted)."""
    digits = value.strip() if isinstance(value, str) else ""
    if digits.isascii() and digits.isdigit() and len(digits) <= 20:  # not "²", nor thousands of digits int() refuses
        value = int(digits)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(
            field, f"expected a training step (a non-negative integer), got {type_name(value)} {value!r:.40}"
        )
    if not 0 <= value < 2**53:
        raise RecordError(field, f"expected a training step (a non-negative integer), got {value}")
    return value


def parse_turn_rewards(value: object, field: str, scalar_name: str = "turn_reward") -> list[dict[str, float]]:
    """Turn rewards as a 0-based list of component dicts.

    Accepts a list (turn k at index k) of dicts or numbers, or a KG-R1 dict keyed by 1-based turn numbers
    (``{"1": {...}, "2": 0.25}``; JSON makes the keys strings). A bare number becomes ``{scalar_name: x}``.
    Missing turns inside a keyed dict become ``{}`` (the turn exists, no components).
    """
    if isinstance(value, list):
        return [_turn_entry(v, f"{field}[{k}]", scalar_name) for k, v in enumerate(value)]
    if not isinstance(value, Mapping):
        raise RecordError(field, f"expected a list or an object keyed by turn number, got {type_name(value)}")
    keyed: dict[int, dict[str, float]] = {}
    for key, v in value.items():
        try:
            k = int(key)
        except (TypeError, ValueError):
            raise RecordError(f"{field}.{key}", "turn keys must be 1-based integers") from None
        if k < 1:
            raise RecordError(f"{field}.{key}", "turn keys must be 1-based integers (KG-R1 numbers turns from 1)")
        if k > MAX_TURN_KEY:
            raise RecordError(f"{field}.{key}", f"turn number {k} is beyond {MAX_TURN_KEY:,} (placeholders up to it)")
        keyed[k] = _turn_entry(v, f"{field}.{key}", scalar_name)
    return [keyed.get(k, {}) for k in range(1, max(keyed, default=0) + 1)]


def _turn_entry(v: object, field: str, scalar_name: str) -> dict[str, float]:
    if is_number(v):
        return {scalar_name: as_float(v, field)}
    return as_reward_dict(v, field)


def mark_synthesized(metadata: dict, *names: str) -> None:
    """Record in ``metadata["synthesized"]`` that fields were made up (kept sorted and unique)."""
    have = set(metadata.get("synthesized", []))
    have.update(names)
    metadata["synthesized"] = sorted(have)
