"""What a lint reports (``Finding``) and the registry of checks (``CHECKS``) the CLI and the dashboard list.

A check is ``fn(ctx: LintContext) -> Finding | list[Finding] | None``, registered with ``@register_check`` under
a unique name with its worst severity, a one-line description, the section of docs/conventions/, upstream
issue or paper it comes from, and a longer explanation that every finding it makes carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

SEVERITIES: tuple[str, ...] = ("error", "warning", "info")  # most severe first
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    """One problem a check found in a (run, scheme) pair.

    severity: "error" (credit reaches tokens it should not, or a reward signal is lost), "warning" (credit is
    distorted: amplified noise, raw scores, length bias) or "info" (a fact worth knowing, e.g. wasted rollouts).
    check: the registered check name. message: one line, with the numbers. rows: offending trajectories
    (batch rows, sorted). tokens: row → offending token positions, for highlighting (empty when the finding is
    about whole trajectories). count: number of offending units the message counts (tokens for token-level
    findings, trajectories or steps otherwise). explanation: why it matters, with its
    reference (docs/conventions/ section, upstream issue, paper).
    """

    severity: str
    check: str
    message: str
    rows: list[int] = field(default_factory=list)
    tokens: dict[int, list[int]] = field(default_factory=dict)
    count: int = 0
    explanation: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"Finding.severity: {self.severity!r} is not one of {list(SEVERITIES)}")

    @property
    def num_tokens(self) -> int:
        return sum(len(v) for v in self.tokens.values())

    def to_dict(self) -> dict:
        """JSON-ready dict (token dict keys become strings in JSON; ``from_dict`` turns them back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        kw = dict(d)
        kw["tokens"] = {int(k): list(v) for k, v in kw.get("tokens", {}).items()}
        return cls(**kw)


CheckFn = Callable[["object"], "Finding | list[Finding] | None"]


@dataclass(frozen=True)
class Check:
    """A registered lint: ``fn`` plus what the dashboard lists (worst severity, description, reference) and the
    inputs it needs beyond the batch and scheme (``"run"``: the loaded Run, for token text)."""

    name: str
    fn: CheckFn
    severity: str
    description: str
    reference: str
    explanation: str
    needs: tuple[str, ...] = ()


CHECKS: dict[str, Check] = {}


def register_check(
    name: str, *, severity: str, description: str, reference: str, explanation: str, needs: tuple[str, ...] = ()
) -> Callable[[CheckFn], CheckFn]:
    """Decorator: add ``fn`` to ``CHECKS`` under ``name``; a second registration of the name raises."""
    if severity not in SEVERITY_RANK:
        raise ValueError(f"check {name!r}: severity {severity!r} is not one of {list(SEVERITIES)}")

    def deco(fn: CheckFn) -> CheckFn:
        if name in CHECKS and CHECKS[name].fn is not fn:
            raise ValueError(f"check {name!r} is already registered")
        CHECKS[name] = Check(name, fn, severity, description, reference, " ".join(explanation.split()), needs)
        return fn

    return deco
