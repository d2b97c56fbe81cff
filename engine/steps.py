"""A batch that holds several training steps is computed one step at a time, each step alone.

A trainer computes advantages on one step's batch: GRPO and RLOO groups, GAE and REINFORCE++ whitening, batch
means and stds (PRPO, FlashREINFORCE, GPG's α), the KL controller, the loss aggregation's token and row counts all
see that step only. The same prompt sampled at steps 5 and 6 is two groups of n, not one of 2n. So
``compute_credit`` on a batch whose ``steps`` hold more than one value runs the whole pipeline on each step's rows
(``split_steps``) and puts the results back in the batch's row order (``merge_steps``): every [B, …] quantity of
row i is exactly what computing its step alone gives. Nothing batch-wide is left to cross steps, whatever the
caller does with the result.

What does not live on rows is kept per step: ``metrics`` that differ between steps are named ``step <s>/<name>``
(equal ones keep their name), ``notes`` that differ read ``step <s>: …``, and ``notes["steps"]`` lists the steps.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from engine.batch import TrajectoryBatch

if TYPE_CHECKING:
    from engine.config import CreditConfig
    from engine.credit import CreditResult


def split_steps(batch: TrajectoryBatch) -> list[tuple[int, torch.Tensor]]:
    """[(step, rows)] of a batch of several steps, steps ascending (rows: [n_s] long indices, batch order);
    [] for a batch of one step (or with no steps): it is computed as it is."""
    if batch.steps is None:
        return []
    values = batch.step_values
    if len(values) < 2:
        return []
    return [(s, (batch.steps == s).nonzero().squeeze(1)) for s in values]


def scatter_rows(B: int, rows: list[torch.Tensor], parts: list[torch.Tensor]) -> torch.Tensor:
    """One [B, …] tensor from per-step [n_s, …] parts: part s goes to ``rows[s]``; trailing dims padded with 0 to
    the largest part's (a step with fewer turns). Parts that are one constant expanded (a view the policy stage
    left at 1) stay one constant expanded when they all hold the same value."""
    first = parts[0]
    trailing = [max(p.shape[d] for p in parts) for d in range(1, first.dim())]
    shape = (B, *trailing)
    if all(is_expanded_constant(p) for p in parts):
        values = {p.reshape(-1)[0].item() if p.numel() else None for p in parts} - {None}
        if len(values) <= 1:
            fill = values.pop() if values else 0
            return torch.full((), fill, dtype=first.dtype, device=first.device).expand(shape)
    out = torch.zeros(shape, dtype=first.dtype, device=first.device)
    for idx, part in zip(rows, parts, strict=True):
        out[(idx, *(slice(0, n) for n in part.shape[1:]))] = part
    return out


def is_expanded_constant(t: torch.Tensor) -> bool:
    """One value expanded to the tensor's shape (every stride 0): a view the policy stage left at 1, or at 0 without
    the log-probs."""
    return t.dim() > 0 and all(st == 0 for st in t.stride())


def merge_metrics(steps: list[int], parts: list[dict[str, float]]) -> dict[str, float]:
    """Per-step metrics as one dict: a metric every step has with one value keeps its name; otherwise each step's
    is ``step <s>/<name>``."""
    out: dict[str, float] = {}
    for k in dict.fromkeys(k for p in parts for k in p):
        vals = [p.get(k) for p in parts]
        if all(k in p for p in parts) and all(v == vals[0] for v in vals):
            out[k] = vals[0]
        else:
            out.update({f"step {s}/{k}": p[k] for s, p in zip(steps, parts, strict=True) if k in p})
    return out


def merge_tensors(B: int, rows: list[torch.Tensor], parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per-step dicts of row tensors ([n_s, …]) as one dict of [B, …] tensors; a key every step has. A tensor that
    is not one value per row (an estimator's scalar) is kept only when every step has the same one."""
    out = {}
    for k in parts[0]:
        if not all(k in p for p in parts):
            continue
        vals = [p[k] for p in parts]
        if all(v.dim() > 0 and v.shape[0] == len(r) for v, r in zip(vals, rows, strict=True)):
            out[k] = scatter_rows(B, rows, vals)
        elif all(v.shape == vals[0].shape and bool((v == vals[0]).all()) for v in vals):
            out[k] = vals[0]
    return out


@dataclass(frozen=True)
class StepParts:
    """A multi-step result's per-step results, until its views are asked for (``CreditResult.views``)."""

    B: int
    steps: tuple[int, ...]
    rows: tuple[torch.Tensor, ...]
    results: tuple[CreditResult, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def views(self, cfg: CreditConfig) -> dict[str, torch.Tensor]:
        return merge_tensors(self.B, list(self.rows), [r.views() for r in self.results])


def merge_steps(B: int, steps: list[int], rows: list[torch.Tensor], results: list[CreditResult]) -> CreditResult:
    """One ``CreditResult`` of the whole batch from each step's own (``results[s]`` computed on ``rows[s]``)."""
    from engine.credit import CreditResult

    def stacked(name: str) -> torch.Tensor:
        return scatter_rows(B, rows, [getattr(r, name) for r in results])

    first = results[0]
    notes = {}
    for k in dict.fromkeys(k for r in results for k in r.notes):
        said = [(s, r.notes[k]) for s, r in zip(steps, results, strict=True) if k in r.notes]
        same = len(said) == len(results) and len({v for _, v in said}) == 1
        notes[k] = said[0][1] if same else "; ".join(f"step {s}: {v}" for s, v in said)
    notes["steps"] = (
        f"{len(steps)} steps ({', '.join(map(str, steps))}), each computed alone as the trainer computes its batch"
    )
    placements = list(dict.fromkeys(r.placement for r in results))
    return CreditResult(
        config=first.config,
        device=first.device,
        seconds=sum(r.seconds for r in results),
        placement=placements[0] if len(placements) == 1 else " / ".join(placements),
        token_level_scores=stacked("token_level_scores"),
        token_level_rewards=stacked("token_level_rewards"),
        values=None if first.values is None else stacked("values"),
        returns=stacked("returns"),
        advantages=stacked("advantages"),
        advantage_mask=stacked("advantage_mask"),
        extras=merge_tensors(B, rows, [r.extras for r in results]),
        notes=notes,
        metrics=merge_metrics(steps, [r.metrics for r in results]),
        step_rows=tuple(zip(steps, rows, strict=True)),
        _pending=StepParts(B, tuple(steps), tuple(rows), tuple(results)),
    )
