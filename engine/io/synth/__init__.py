"""Seeded generators: synthetic runs of any size and the shipped sample runs (all marked synthetic)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.io.load import save_run
from engine.io.synth.generic import synth_run
from engine.io.synth.kgqa import kgqa_run
from engine.io.synth.python_tool import python_tool_run
from engine.io.synth.search import search_records
from engine.io.synth.search_steps import search_steps_run, write_search_steps

PRESETS = ("kgqa_multiturn", "python_tool_two_rollouts", "search_agent", "search_steps")


def write_preset(name: str, out: str | Path, seed: int = 0) -> Path:
    """Write sample run ``name`` to ``out`` (native JSONL/Parquet; ``search_agent`` as tagged_text JSONL;
    ``search_steps`` as a folder of native Parquet step files, ``out/step_0001.parquet`` ...)."""
    out = Path(out)
    if name == "kgqa_multiturn":
        save_run(kgqa_run(seed), out)
    elif name == "python_tool_two_rollouts":
        save_run(python_tool_run(), out)
    elif name == "search_agent":
        if out.suffix != ".jsonl":
            raise ValueError("search_agent is written in the tagged_text input format: use a .jsonl path")
        out.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in search_records(seed)), encoding="utf-8"
        )
    elif name == "search_steps":
        write_search_steps(out, seed)
    else:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return out


__all__ = [
    "PRESETS",
    "kgqa_run",
    "python_tool_run",
    "search_records",
    "search_steps_run",
    "synth_run",
    "write_preset",
    "write_search_steps",
]
