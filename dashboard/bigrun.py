"""Big runs: when the dashboard pages, samples or searches instead of showing every trajectory (pure, no Streamlit).

* A run is **big** above ``BIG_ROWS`` trajectories or ``BIG_TOKENS`` padded tokens (B·T). Pages that compute
  schemes besides the sidebar's (Compare, Reward designer, Run analytics, Learn) and the Diagnostics lints then
  work on a **sample**: whole groups, evenly spaced in run order, at most ``SAMPLE_ROWS`` trajectories and
  ``SAMPLE_TOKENS`` padded tokens, plus the group of the trajectory in the sidebar. Group statistics are exact
  (every rollout of a sampled prompt is in); batch-level ones (GAE and REINFORCE++ whitening, token-mean weights)
  are the sample's.
* Plots of one point per trajectory show ``PLOT_ROWS`` trajectories sampled evenly; tables of one row per
  trajectory show ``TABLE_ROWS`` at a time, paged.
* The sidebar's trajectory picker lists ``PICKER_ROWS`` ids per page above ``PICKER_ROWS`` trajectories, with a
  search by id.
Each page says on screen what it shows ("showing 2,000 of 50,000 trajectories, sampled evenly", "page 3 of 25").
"""

from __future__ import annotations

import numpy as np

BIG_ROWS = 5_000
BIG_TOKENS = 16_000_000
SAMPLE_ROWS = 2_000
SAMPLE_TOKENS = 1_000_000
PLOT_ROWS = 2_000
TABLE_ROWS = 2_000
PICKER_ROWS = 1_000
SEARCH_HITS = 200  # ids listed for a search


def is_big(trajectories: int, max_length: int) -> bool:
    """Whether a run of ``trajectories`` rows padded to ``max_length`` tokens is sampled on the heavy pages."""
    return trajectories > BIG_ROWS or trajectories * max_length > BIG_TOKENS


def sample_size(max_length: int) -> int:
    """Trajectories a sample aims at: ``SAMPLE_ROWS``, fewer when rows are long (``SAMPLE_TOKENS`` in all)."""
    return max(1, min(SAMPLE_ROWS, SAMPLE_TOKENS // max(max_length, 1)))


def even_groups(group_ids: np.ndarray, limit: int, keep: int | None = None) -> np.ndarray:
    """Sorted row indices of whole groups chosen evenly spaced in first-seen order, about ``limit`` rows in all,
    plus every row of the group of row ``keep``. ``group_ids``: (B,) group of each row."""
    group_ids = np.asarray(group_ids)
    uniq, first, counts = np.unique(group_ids, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")  # groups in the order the run first shows them
    n = int(np.clip(round(limit / counts.mean()), 1, len(uniq)))
    chosen = uniq[order[np.unique(np.linspace(0, len(order) - 1, n).round().astype(int))]]
    if keep is not None:
        chosen = np.union1d(chosen, group_ids[keep : keep + 1])
    return np.flatnonzero(np.isin(group_ids, chosen))


def even_rows(total: int, limit: int) -> np.ndarray:
    """``min(total, limit)`` row indices spread evenly over ``range(total)``, first and last included."""
    if total <= limit:
        return np.arange(total)
    return np.unique(np.linspace(0, total - 1, limit).round().astype(int))


def pages(total: int, size: int) -> int:
    return max(1, -(-total // size))


def page_slice(page: int, total: int, size: int) -> slice:
    """Rows of 1-based ``page`` (clamped to the pages there are)."""
    page = min(max(page, 1), pages(total, size))
    return slice((page - 1) * size, min(page * size, total))


def sampled_note(shown: int, total: int, how: str = "sampled evenly", noun: str = "trajectories") -> str:
    return f"Showing {shown:,} of {total:,} {noun}, {how}."


def paged_note(page: int, total: int, size: int, noun: str = "trajectories") -> str:
    rows, n = page_slice(page, total, size), pages(total, size)
    return f"Page {min(max(page, 1), n):,} of {n:,}: {noun} {rows.start + 1:,}–{rows.stop:,} of {total:,}."


def search(ids: tuple[str, ...], text: str, limit: int = SEARCH_HITS) -> list[int]:
    """Indices of the first ``limit`` ids containing ``text`` (case-insensitive); an exact id comes first."""
    needle = text.strip().lower()
    if not needle:
        return []
    hits = [i for i, x in enumerate(ids) if needle in x.lower()]
    exact = [i for i in hits if ids[i].lower() == needle]
    return (exact + [i for i in hits if i not in exact])[:limit]
