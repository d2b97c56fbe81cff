"""Paste the generated tables into the README and docs/SECURITY.md again (the tests fail when they are stale).

    python scripts/readme_tables.py

Each table is found by its first three header cells and replaced, up to its last row, by what its generator
makes now: ``engine.registry.estimator_table()``, ``engine.policy_losses.policy_loss_table()``,
``engine.profiles.profile_table()`` (README.md) and ``engine.io.reading.budgets.budget_table()``
(docs/SECURITY.md). Run it after adding, removing or renaming an estimator, a loss, a profile or a budget.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def paste(text: str, table: str) -> str:
    """``text`` with the table whose header starts like ``table``'s replaced by ``table``."""
    lines = text.splitlines(keepends=True)
    key = "|".join(table.splitlines()[0].split("|")[:4])
    start = next(i for i, line in enumerate(lines) if line.startswith(key))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join(lines[:start]) + table + "\n" + "".join(lines[end:])


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from engine.io.reading.budgets import budget_table
    from engine.policy_losses import policy_loss_table
    from engine.profiles import profile_table
    from engine.registry import estimator_table

    for name, tables in (
        ("README.md", (estimator_table(), policy_loss_table(), profile_table())),
        ("docs/SECURITY.md", (budget_table(),)),
    ):
        path = ROOT / name
        text = path.read_text()
        for table in tables:
            text = paste(text, table)
        path.write_text(text)
        print(path)


if __name__ == "__main__":
    main()
