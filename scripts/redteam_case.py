"""One red-team input (``scripts/redteam.py``): what to load, how, and what its outcome must be."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Case:
    family: str
    name: str
    path: str  # what to load (a file or a directory)
    fmt: str | None = None
    must_flag: bool = False
    expect_n: int | None = None  # trajectories a clean load must hold (the good files of a folder)
    reader: str | None = None  # the trainer reader the input is built for (its seed came from a writer mimic)
    seed: str | None = None  # the clean file it was made from: problems that file's load has too are no flag
    env: dict[str, str] = field(default_factory=dict)  # environment set for this load only
    timeout: float | None = None  # seconds before it counts as a hang (None: the run's --timeout)
    mem_gb: float | None = None  # address-space limit of the load (None: the run's --mem-gb; never above it)
    cli: bool = False  # loaded as the command line loads it (no tokenizer roots), not as the dashboard does


def twice(case: Case) -> list[Case]:
    """A trainer reader's input loaded both ways: its format detected, and forced (``fmt`` = the reader)."""
    detected = Case(**{**case.__dict__, "name": f"{case.name} (detected)", "fmt": None})
    forced = Case(**{**case.__dict__, "name": f"{case.name} (forced)", "fmt": case.reader})
    return [detected, forced]
