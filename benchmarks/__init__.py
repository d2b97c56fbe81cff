"""CreditLens's benchmarks: each prints its numbers against a baseline measured in the same run, asserts nothing,
and is run from the repository root as a module. docs/PERFORMANCE.md records their results.

* ``python -m benchmarks.credit``: the vectorized engine against loops written like the references
  (``reference_loops``), every estimator's ``compute_credit``, and the pipeline against its estimator alone.
* ``python -m benchmarks.load``: loading a big run from JSONL and Parquet.
* ``python -m benchmarks.big_run``: a 50,000-trajectory run through load, batch and two schemes, with peak memory;
  ``--server`` (= ``python -m benchmarks.big_server``) measures the real dashboard on it in Chromium.
* ``python -m benchmarks.timeline``: a 100-step run's whole timeline cold, one new step, peak memory against one
  step's, and the Timeline page's first paint with its cache warm.
* ``python -m benchmarks.ray_run``: the same run's timeline and per-token dataset in one process and with
  ``--ray local``: wall time, Ray's overhead, tokens per second per worker, the driver's peak over its idle size.
* ``python -m benchmarks.dashboard_speed``: interactions, eight concurrent sessions and the cold first paint
  (``first_paint``) of the real dashboard in Chromium; ``wire_session`` drives browserless sessions.

``batches.synthetic_batch`` (a random multi-turn batch with every input filled) and ``reference_loops`` are
shared with the tests.
"""
