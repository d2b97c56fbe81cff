"""Confining a path to allowed folders: the one check behind the dashboard's run sources
(``dashboard.sources.resolve_allowed``) and the tokenizer files a server-side load may read
(``engine.io.text.tokenize.allowed_tokenizer``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def confine(path: str | Path, roots: Iterable[str | Path], base: str | Path) -> Path:
    """``path`` (relative to ``base`` unless absolute) with ``..`` and every symlink resolved, checked to lie inside
    one of ``roots`` (resolved the same way); raises ``ValueError`` for a NUL byte, traversal (``..``), an absolute
    path or a symlink leading out, or a missing file."""
    if "\x00" in str(path):
        raise ValueError("path contains a NUL byte")
    raw = Path(path)
    try:
        candidate = (raw if raw.is_absolute() else Path(base) / raw).resolve()
        allowed = [Path(root).resolve() for root in roots]
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise ValueError(f"{path!s}: cannot be resolved ({e})") from None
    if not any(candidate.is_relative_to(root) for root in allowed):
        raise ValueError(f"{path!s}: outside the allowed directories")
    if not candidate.exists():
        raise ValueError(f"{path!s}: no such file")
    return candidate
