"""Vectorized reverse discounted scans: the core of GAE and REINFORCE++ without a Python loop over time.

``discounted_reverse_cumsum(x, c)`` computes ``y_t = Σ_{k ≥ t} c^(k−t) x_k`` along the last axis. The sequence is
cut into chunks of L tokens; inside a chunk the scan is one matmul with the upper-triangular Toeplitz matrix
``M[j, k] = c^(k−j)``; the chunk carries obey the same recurrence with factor ``c^L`` and are solved by the same
function recursively. Cost: O(B·T·L) multiply-adds in a few large kernels, on CPU or GPU.

Holes (tokens outside a mask) are handled by *compaction*: each row's valid tokens are moved to the left in
order, scanned, and scattered back (``compact`` / ``expand``), which is exactly "skip holes, apply the discount
once per valid token" (verl PR #2337, #7278).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CHUNK = 64
ROW_BLOCK = 1024  # rows per block of a row-wise scan over a big batch (see ``by_row_blocks``)


def discounted_reverse_cumsum(x: torch.Tensor, c: float, chunk: int = CHUNK) -> torch.Tensor:
    """y[..., t] = Σ_{k≥t} c^(k−t) · x[..., k], for x of shape (..., T) and a constant 0 ≤ c."""
    *lead, T = x.shape
    if T == 0:
        return x.clone()
    L = min(chunk, T)
    n = -(-T // L)
    xp = torch.nn.functional.pad(x.reshape(-1, T), (0, n * L - T)).reshape(-1, n, L)  # (R, n, L)
    j = torch.arange(L, device=x.device, dtype=x.dtype)
    expo = j[None, :] - j[:, None]  # (L, L): k − j
    base = torch.tensor(float(c), device=x.device, dtype=x.dtype)
    M = torch.where(expo >= 0, base.pow(expo.clamp(min=0)), torch.zeros((), dtype=x.dtype, device=x.device))
    local = xp @ M.T  # (R, n, L): scan inside each chunk, zero boundary
    if n > 1:
        heads = local[..., 0]  # (R, n): value at each chunk start
        starts = discounted_reverse_cumsum(heads, float(c) ** L, chunk)  # (R, n)
        carry = torch.nn.functional.pad(starts[:, 1:], (0, 1))  # y at the start of the next chunk
        tail_pow = base.pow(L - j)  # (L,): c^(L−j)
        local = local + carry[..., None] * tail_pow
    return local.reshape(-1, n * L)[:, :T].reshape(*lead, T)


def by_row_blocks(fn, *xs: torch.Tensor, block: int | None = None):
    """``fn(*xs)`` for a ``fn`` whose output row i depends only on row i of each input (a scan along T), run
    ``block`` rows at a time when B is larger (default ``ROW_BLOCK``), so that only one block's temporaries are
    alive: GAE on 50,000 × 1,000 tokens peaks ~2 GB lower. The last block takes the remainder (``block`` to
    2·``block`` − 1 rows): a matmul over only a few rows can take another BLAS path and round the last bit of a
    float32 differently, blocks of a thousand rows give the whole batch's numbers bit for bit (tested). Returns
    what ``fn`` returns (a tensor or a tuple of tensors, each (B, ...))."""
    B = xs[0].shape[0]
    block = block or ROW_BLOCK
    if B < 2 * block:
        return fn(*xs)
    bounds = [i * block for i in range(B // block)] + [B]  # the last block takes the remainder
    outs: list[torch.Tensor] = []
    single = False
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        part = fn(*(x[start:stop] for x in xs))
        single = isinstance(part, torch.Tensor)
        parts = (part,) if single else tuple(part)
        if not outs:
            outs = [torch.empty((B, *q.shape[1:]), dtype=q.dtype, device=q.device) for q in parts]
        for out, q in zip(outs, parts, strict=True):
            out[start:stop] = q
    return outs[0] if single else tuple(outs)


class Compaction:
    """Index maps between a (B, T) row layout and its compacted form (valid tokens moved left, in order).

    Built once per mask and reused for every tensor (rewards, values, results), so the cumsum/scatter index
    work is paid once.
    """

    def __init__(self, mask: torch.Tensor) -> None:
        B, T = mask.shape
        m = mask.bool()
        self.mask = mask
        self.count = m.sum(-1, keepdim=True)  # (B, 1) valid tokens per row
        before = torch.cumsum(m, dim=-1).sub_(m.to(torch.uint8))  # (B, T) valid tokens strictly before t
        self.dest = before.masked_fill(~m, T)  # invalid → a spare column
        # compacted index of the first valid token ≥ t; = count (one past the last) after the last valid token.
        # before[t] ≤ t ≤ T − 1, so it always indexes the row.
        self.next_idx = before
        self.valid = torch.arange(T, device=mask.device) < self.count  # (B, T) in the compacted layout

    def compact(self, x: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """Each row's valid entries moved left, order kept; the rest ``fill``. (B, T)."""
        B, T = x.shape
        out = torch.full((B, T + 1), fill, dtype=x.dtype, device=x.device)
        return out.scatter_(1, self.dest, x)[:, :T]

    def expand_next_valid(self, y: torch.Tensor) -> torch.Tensor:
        """Back to the row layout; a hole gets the value of the next valid token, the tail after the last valid
        token gets 0. (B, T)."""
        y0 = torch.nn.functional.pad(y, (0, 1)).scatter_(1, self.count, 0.0)  # (B, T+1): 0 one past the last valid
        return torch.gather(y0, 1, self.next_idx)


def compact(x: torch.Tensor, mask: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Move each row's valid entries (mask == 1) to the left, keeping order; the rest is ``fill``. (B, T)."""
    return Compaction(mask).compact(x, fill)


def expand_next_valid(y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Inverse of ``compact`` that also fills holes: position t gets the compacted value of the first valid token
    at or after t; positions after the last valid token get 0. (B, T)."""
    return Compaction(mask).expand_next_valid(y)


def next_hole_distance(mask: torch.Tensor) -> torch.Tensor:
    """For each t, (index of the first position ≥ t with mask 0, or T) − t. (B, T) long."""
    B, T = mask.shape
    pos = torch.arange(T, device=mask.device).expand(B, T)
    hole_pos = torch.where(mask.bool(), torch.full_like(pos, T), pos)
    first = torch.flip(torch.cummin(torch.flip(hole_pos, [-1]), dim=-1).values, [-1])
    return first - pos


@dataclass(frozen=True)
class TurnSegments:
    """The runs of equal turn id along each row of ``turn_ids`` [B, T], for per-turn sums without a [B, T] index.

    Slot of a token = 1 + its turn id clamped to −1..K: 0 for padding, 1..K for the turns 0..K−1 that exist,
    K+1 for a turn beyond them; its key is row·(K+2) + slot. ``keys`` [S] and ``lengths`` [S] are the runs of
    equal keys over the flattened rows (a row's turns are contiguous, so S ≈ B·(K+1)). A sum over a run adds its
    tokens in order, exactly as a scatter-add into zeros does; a turn split into several runs (turn ids going
    backwards) adds its runs' sums in order."""

    keys: torch.Tensor
    lengths: torch.Tensor
    rows: int
    turns: int

    @classmethod
    def of(cls, turn_ids: torch.Tensor, K: int) -> TurnSegments:
        B = turn_ids.shape[0]

        def runs(ids: torch.Tensor, first_row: int) -> tuple[torch.Tensor, torch.Tensor]:
            offsets = torch.arange(first_row, first_row + ids.shape[0], device=ids.device) * (K + 2) + 1
            keys = ids.to(torch.long, copy=True).clamp_(min=-1, max=K).add_(offsets[:, None])  # row·(K+2) + slot
            return torch.unique_consecutive(keys.flatten(), return_counts=True)

        step = max(ROW_BLOCK, 2**22 // max(turn_ids.shape[1], 1))  # bounded [rows, T] int64 temporaries
        parts = [runs(turn_ids[i : i + step], i) for i in range(0, B, step)]
        return cls(torch.cat([k for k, _ in parts]), torch.cat([n for _, n in parts]), B, K)

    def sums(self, *xs: torch.Tensor) -> torch.Tensor:
        """s[i, k, j] = Σ_{t: turn_ids[i, t] = k} xs[j][i, t]. (B, K, len(xs))."""
        out = []
        for x in xs:
            run = torch.segment_reduce(x.reshape(-1), "sum", lengths=self.lengths)
            per_slot = torch.zeros(self.rows * (self.turns + 2), dtype=x.dtype, device=x.device)
            out.append(per_slot.index_add_(0, self.keys, run).view(self.rows, self.turns + 2)[:, 1 : self.turns + 1])
        return torch.stack(out, dim=-1)
