"""``run_lints``: every registered check over one (batch, scheme) pair, findings sorted by severity."""

from __future__ import annotations

from collections.abc import Iterable

from engine.batch import TrajectoryBatch
from engine.config import CreditConfig
from engine.credit import CreditResult, compute_credit
from engine.lint.context import LintContext
from engine.lint.model import CHECKS, SEVERITY_RANK, Finding


def run_lints(
    batch: TrajectoryBatch,
    cfg: CreditConfig | None = None,
    result: CreditResult | None = None,
    run=None,
    checks: Iterable[str] | None = None,
) -> list[Finding]:
    """Findings of ``checks`` (default: all of ``CHECKS``) on ``batch`` under ``cfg``, most severe first.

    ``result`` is ``compute_credit(batch, cfg)`` when not given (it must have been computed from this batch and
    scheme); ``run`` is the loaded ``engine.io`` Run, needed by checks that read token text (skipped without).
    Raises ``ValueError`` for an unknown check name, or when the scheme cannot run on this batch.
    """
    cfg = cfg or (result.config if result is not None else CreditConfig())
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; registered: {sorted(CHECKS)}")
    if result is None:
        result = compute_credit(batch, cfg)
    ctx = LintContext(batch=batch.to(result.advantages.device), cfg=cfg, result=result, run=run)
    findings: list[Finding] = []
    for name in names:
        check = CHECKS[name]
        if "run" in check.needs and run is None:
            continue
        out = check.fn(ctx)
        findings += [out] if isinstance(out, Finding) else list(out or [])
    order = {n: i for i, n in enumerate(CHECKS)}
    return sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], order[f.check]))
