"""Loading side of CreditLens: read rollouts of many trainers into one validated ``Run``.

    from engine.io import load_run
    res = load_run("sample_runs/kgqa_multiturn")        # format detected from content
    batch = res.run.to_batch()                           # engine.batch.TrajectoryBatch, padded [B, T]
    for p in res.problems: print(p)                      # bad records, never silently dropped

Formats: see ``engine.io.adapters`` and ``docs/FORMAT.md``. Rooms: ``load`` and ``detect`` (the entry points),
``adapters`` (one reader per input format), ``reading`` (untrusted files read safely, the problems log), ``text``
(tokenizers, ChatML and tagged-text segments), ``data`` (``Trajectory``, ``Run``, layout, batching), ``store`` (the
native format and the verl export), ``synth`` (seeded synthetic runs).
"""

from engine.io.data.model import Segment, Trajectory
from engine.io.data.run import Run
from engine.io.load import LoadResult, load_run, save_run
from engine.io.reading.problems import Problem
from engine.io.store.verl_export import export_verl_batch

__all__ = ["LoadResult", "Problem", "Run", "Segment", "Trajectory", "export_verl_batch", "load_run", "save_run"]
