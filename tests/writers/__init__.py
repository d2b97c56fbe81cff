"""Mimics of the trainers' own dump writers, one module per trainer.

Each module follows the writer code of a trainer (its docstring names the repository, file, function and commit)
and writes a small file the way that trainer does at test time, returning the ground truth the loader must
recover: token ids, action mask, groups, rewards, truncation flags and, where the trainer logs them, its
advantages. Nothing here is copied from the trainers; the lines re-state what their writers do.
"""
