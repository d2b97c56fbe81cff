"""A run over training: per-step statistics of its credit (``stats``), the run folder as step sources
(``index``), and the timeline computed one step at a time, incrementally (``compute``, ``store``)."""
