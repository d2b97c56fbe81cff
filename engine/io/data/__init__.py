"""The loaded data in memory: ``Segment`` / ``Trajectory`` (the data model), the ``Run`` that holds them, each
trajectory's per-token layout (action mask, turn ids), the padded ``TrajectoryBatch`` built from a run, and the
advantages a trainer logged."""
