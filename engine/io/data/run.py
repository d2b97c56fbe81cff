"""A loaded run: its trajectories plus the views the dashboard needs (tokens as text, roles, the batch).

Treat a ``Run`` as immutable once loaded: ``content_hash`` is computed once and used as a cache key.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.batch import TrajectoryBatch
from engine.io.data.layout import TokenLayout, token_layout
from engine.io.data.model import PER_TOKEN_FIELDS, Trajectory
from engine.io.text.display import display_pieces, piece_offsets, pieces_from_bytes
from engine.io.text.qwen_vocab import VARIANTS, id_bytes_table
from engine.io.text.tokenize import canonical_name, get_tokenizer


@dataclass(eq=False)
class Run:
    """Trajectories of one run. ``source`` names the input format, ``tokenizer`` the vocabulary the token ids
    belong to (``"qwen2.5"`` unless the input said otherwise)."""

    trajectories: list[Trajectory]
    name: str = ""
    source: str = "native"
    tokenizer: str | None = "qwen2.5"
    metadata: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.trajectories)

    @functools.cached_property
    def content_hash(self) -> str:
        """Hex digest over everything that decides the numbers (ids, groups, steps, prompts, tokens, arrays, rewards,
        metadata, tokenizer); the same content loaded from JSONL or Parquet gives the same hash."""
        h = hashlib.blake2b(digest_size=16)
        h.update(json.dumps(["creditlens-run-v1", canonical_name(self.tokenizer)]).encode())
        for t in self.trajectories:
            head = [t.id, t.group_id, t.prompt, t.turn_rewards, t.global_rewards, t.metadata, t.step]
            h.update(json.dumps(head, sort_keys=True, ensure_ascii=False, default=str).encode())
            _update_array(h, t.prompt_token_ids, np.int32)
            for s in t.segments:
                h.update(json.dumps([s.role, s.text]).encode())
                _update_array(h, s.token_ids, np.int32)
                for name in PER_TOKEN_FIELDS:
                    _update_array(h, getattr(s, name), np.float32)
        return h.hexdigest()

    @functools.cached_property
    def steps(self) -> list[int]:
        """The run's training steps in order ([] when its files say none: the run is one step)."""
        return sorted({t.step for t in self.trajectories if t.step is not None})

    def step_run(self, step: int) -> Run:
        """The trajectories of training step ``step`` as a ``Run`` of their own (one trainer batch); ``KeyError`` for
        a step the run does not hold."""
        if step not in self.steps:
            raise KeyError(f"step {step} is not in this run (its steps: {_step_list(self.steps)})")
        return Run(
            [t for t in self.trajectories if t.step == step],
            name=f"{self.name} · step {step}",
            source=self.source,
            tokenizer=self.tokenizer,
            metadata=self.metadata,
        )

    def layout(self, i: int) -> TokenLayout:
        """Per-token arrays (ids, role codes, action flags, turn ids) of trajectory ``i``."""
        return token_layout(self.trajectories[i])

    def token_texts(self, i: int) -> list[str]:
        """Readable text of each response token of trajectory ``i`` (pieces join to ``response_text(i)``)."""
        ids = self.layout(i).token_ids
        canon = canonical_name(self.tokenizer)
        if canon in VARIANTS:  # built-in vocabulary: decode from the byte table, no tokenizer build
            table = id_bytes_table(canon)
            return pieces_from_bytes([table[t] if 0 <= t < len(table) else b"" for t in ids.tolist()])
        return display_pieces(get_tokenizer(self.tokenizer), ids)

    def token_offsets(self, i: int) -> list[tuple[int, int]]:
        """(start, end) of each response token in ``response_text(i)``."""
        return piece_offsets(self.token_texts(i))

    def response_text(self, i: int) -> str:
        """The decoded response of trajectory ``i`` (template and tool text included)."""
        return "".join(self.token_texts(i))

    def token_roles(self, i: int) -> list[str]:
        """``"model" | "tool" | "user" | "system"`` for each response token of trajectory ``i``."""
        return self.layout(i).roles

    def prompt_text(self, i: int) -> str:
        return self.trajectories[i].prompt

    def to_batch(self, device: torch.device | str | None = None, share_memory: bool = False) -> TrajectoryBatch:
        """All trajectories as one padded ``TrajectoryBatch`` [B, T] (see ``engine.io.data.batching``).
        ``share_memory``: the run's token ids and per-token arrays become read-only views of the batch's CPU rows
        (one copy instead of two when both are kept; the content and ``content_hash`` do not change)."""
        from engine.io.data.batching import build_batch

        return build_batch(self.trajectories, device, share_memory=share_memory)


def _step_list(steps: list[int]) -> str:
    if not steps:
        return "none: the run is one step"
    return ", ".join(map(str, steps)) if len(steps) <= 8 else f"{steps[0]}, {steps[1]}, … {steps[-1]} ({len(steps)})"


def _update_array(h, arr: np.ndarray | None, dtype) -> None:
    if arr is None:
        h.update(b"\x00none")
    else:
        data = np.ascontiguousarray(arr, dtype=dtype)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes())
