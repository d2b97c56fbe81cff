"""Retokenization lint: a run that gives both token ids and text must say the same thing in both (needs the
loaded Run and its tokenizer; ``engine.io`` fills whichever of the two a source left out)."""

from __future__ import annotations

import numpy as np
import torch

from engine.lint.context import LintContext, nof, span
from engine.lint.model import register_check


def diff_region(ids: np.ndarray, other: np.ndarray) -> tuple[int, int]:
    """[start, end) of ``ids`` (non-empty) outside its longest common prefix and suffix with ``other``."""
    n, m = len(ids), len(other)
    k = min(n, m)
    neq = np.flatnonzero(ids[:k] != other[:k])
    start = int(neq[0]) if len(neq) else k
    tail = np.flatnonzero(ids[::-1][: k - start] != other[::-1][: k - start])
    end = n - (int(tail[0]) if len(tail) else k - start)
    if end <= start:  # one is a prefix/suffix of the other: point at the token where they part
        start = min(start, n - 1)
        end = start + 1
    return start, end


@register_check(
    "retokenization_mismatch",
    severity="error",
    description="a segment's token ids and its text disagree, or retokenizing the text gives other ids",
    reference=(
        "docs/conventions/rllm.md §2.2 (rLLM re-tokenises step text; token_mismatch metric), engine.io.text.tokenize"
    ),
    explanation="""Each segment of a loaded run has both text and token ids (a source may give one, the loader
    fills the other with the run's tokenizer). When decode(ids) differs from the text, the two disagree (error):
    the text shown is not what was trained, or the ids belong to another tokenizer. When decode(ids) equals the
    text but encode(text) gives other ids (warning), the sampled ids are a non-canonical tokenization: a trainer
    that re-tokenises the text (rLLM's stepwise rows re-tokenise each step's prompt, docs/conventions/rllm.md §2.2; its
    engine reports token_mismatch) trains on different tokens, and log-probs no longer line up. The highlighted tokens
    are where the ids leave the re-encoding.""",
    needs=("run",),
)
def retokenization_mismatch(ctx: LintContext):
    from engine.io.text.tokenize import decode_many, encode_many, get_backend

    run = ctx.run
    trajs = getattr(run, "trajectories", None)
    if not trajs or len(trajs) != ctx.batch.batch_size:
        return None
    tok = get_backend(getattr(run, "tokenizer", None))
    where, ids, texts = [], [], []
    for i, traj in enumerate(trajs):
        start = 0
        for seg in traj.segments:
            if seg.num_tokens and seg.text is not None:
                where.append((i, start))
                ids.append(np.asarray(seg.token_ids))
                texts.append(seg.text)
            start += seg.num_tokens
    encoded = encode_many(tok, texts)
    off = [k for k, (a, b) in enumerate(zip(ids, encoded, strict=True)) if not np.array_equal(a, b)]
    if not off:
        return None
    decoded = decode_many(tok, [ids[k] for k in off])
    B, T = ctx.batch.batch_size, ctx.batch.num_tokens
    differs, noncanon = torch.zeros(B, T, dtype=torch.bool), torch.zeros(B, T, dtype=torch.bool)
    n_diff = 0
    for k, text in zip(off, decoded, strict=True):
        (i, start), (a, b) = where[k], diff_region(ids[k], encoded[k])
        target = noncanon if text == texts[k] else differs
        n_diff += target is differs
        target[i, start + a : start + b] = True
    if n_diff:
        return ctx.finding(
            "retokenization_mismatch",
            f"token ids decode to other text than the segment's in {nof(n_diff, 'segment')} ({span(differs)}); "
            f"non-canonical tokenizations: {len(off) - n_diff} more",
            token_mask=differs | noncanon,
        )
    return ctx.finding(
        "retokenization_mismatch",
        f"non-canonical tokenization in {nof(len(off), 'segment')}: re-encoding the text gives other ids at "
        f"{span(noncanon)}",
        severity="warning",
        token_mask=noncanon,
    )
