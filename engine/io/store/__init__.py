"""The files CreditLens writes: its native format (JSONL and Parquet, described by ``schema/trajectory.v1.json``),
which ``save_run`` writes and the ``native`` adapter reads, and the pickle-free verl batch export for trainers."""
