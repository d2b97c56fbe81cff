"""Where runs may come from: the bundled samples, files under ``CREDITLENS_DATA_DIR``, or an upload.

Paths are confined: a path is accepted only if, after resolving ``..`` and every symlink, it lies inside
``sample_runs/`` or the data directory (resolved the same way). Nothing here reads a run; ``services`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = REPO_ROOT / "sample_runs"
DATA_DIR_ENV = "CREDITLENS_DATA_DIR"
DEFAULT_SAMPLE = "kgqa_multiturn"
# The scheme a sample opens with: its source's own trainer conventions (a sample not listed opens with "gae"
# where it has critic values, else "grpo"; see ``sample_scheme``). Each entry: (scheme code, why, in words).
SAMPLE_SCHEMES: dict[str, tuple[str, str]] = {
    "python_tool_two_rollouts": (
        "grpo,p:rllm",
        "rLLM's worked example: the trajectory reward is the sum of the step rewards (1.0 / 0.0), GRPO with "
        "rLLM's population std",
    ),
    "kgqa_multiturn": (
        "gae",
        "KG-R1 style run: verl's GAE on its critic values (synthesized for this sample; KG-R1's own profile is a "
        "choice away)",
    ),
    "search_agent": ("grpo,p:search-r1", "Search-R1 style run without values: GRPO under Search-R1's conventions"),
    "search_steps": (
        "grpo,p:search-r1",
        "Search-R1 style run over 40 training steps: GRPO under Search-R1's conventions, each step its own batch "
        "(state masking on: turn it off to see credit land on the retrieved documents, most of all in steps 26-32)",
    ),
    "lint_cases": ("gae", "the dashboard's default; each case's triggering scheme is in its README"),
    "lint_cases/kgr1": (
        "grpo,p:kg-r1",
        "KG-R1's structured rewards under its own profile, whose bookkeeping keys leak into the reward (lint "
        "bookkeeping_reward_leak)",
    ),
    "lint_cases/policy": (
        "grpo",
        "the trainer's and the rollout engine's log-probs of the same tokens, three of them more than 2× apart, no "
        "rollout correction yet (lint train_inference_mismatch; the sidebar's policy loss section sets one), and "
        "the policy's entropy, near zero in one prompt's rollouts (lint entropy_collapse)",
    ),
}
# Run formats whose trainer a profile reproduces: an uploaded or data-directory run of that format opens under
# it, its other sidebar fields kept (``format_scheme``). Each entry: (the fields it sets, why, in words).
FORMAT_SCHEMES: dict[str, tuple[dict[str, object], str]] = {
    "trl_completions": (
        {"profile": "trl", "estimator": "grpo"},
        "TRL's GRPOTrainer conventions (ε = 1e-4; a group's lone scorable row gets 0), so that CreditLens's "
        "advantages can equal the ones TRL logged (lint logged_advantage_mismatch)",
    ),
    "verifiers_traces": (
        {"profile": "prime-rl", "estimator": "grpo", "norm_adv_by_std_in_grpo": False},
        "prime-rl's conventions (GRPO without the std, a lone row gets 0, tokens whose advantage is 0 leave the "
        "loss), so that CreditLens's advantages can equal the ones prime-rl logged (lint logged_advantage_mismatch)",
    ),
    "prime_rl_tokens": (
        {
            "profile": "prime-rl",
            "estimator": "logged",
            "policy_loss": "dppo_tv",
            "policy_ratio_base": "rollout",
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.2,
        },
        "prime-rl's default loss (DPPO-Binary-TV, the ratio against the inference log-probs, dppo_mask_low / high "
        "0.2: set them to the run's) on the advantages prime-rl logged, so that the ratio, the masked tokens and the "
        "gradient weights are the ones prime-rl trained with. The export has no rewards or groups: an estimator "
        "that recomputes advantages gives 0 here",
    ),
}
SAMPLE_FAMILY_SCHEMES: dict[str, tuple[str, str]] = {  # by the folder a sample file is in
    "nemo_gym": ("grpo", "NeMo Gym rollouts train with GRPO (NeMo RL); their critic values are synthesized"),
}
# Suffixes a run file may have, in any case (the loader sniffs the format; these only decide what is listed).
# Each one the loader reads (engine.io.load.DATA_SUFFIXES, case-insensitive as here) or, for the compressed
# ones, refuses with a message that says to decompress the file: what is listed loads or says why it cannot.
RUN_SUFFIXES = (
    ".jsonl",
    ".json",
    ".jsonl.gz",
    ".json.gz",
    ".parquet",
    ".pt",
    ".pth",
    ".npz",
    ".yaml",
    ".yml",
)
LISTING_LIMIT = 2000


@dataclass(frozen=True)
class RunRef:
    """A run's address: ``kind`` is sample | data | upload; ``name`` the sample name, the path relative to the
    data directory, or the uploaded file's content hash. ``str()`` is what deep links carry."""

    kind: str
    name: str

    def __str__(self) -> str:
        return self.name if self.kind == "sample" else f"{self.kind}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> RunRef:
        kind, sep, name = text.partition(":")
        if sep and kind in ("sample", "data", "upload"):
            return cls(kind, name)
        return cls("sample", text)


def _is_run_file(p: Path) -> bool:
    name = p.name.lower()
    return p.is_file() and not name.startswith(".") and name.endswith(RUN_SUFFIXES)


def _strip_suffix(rel: str) -> str:
    low = rel.lower()
    for suf in sorted(RUN_SUFFIXES, key=len, reverse=True):
        if low.endswith(suf):
            return rel[: -len(suf)]
    return rel


def list_samples(root: Path = SAMPLES_DIR) -> dict[str, Path]:
    """Sample name → path. A run file directly in ``root`` is a sample named by its stem; a folder holding one
    run file is a sample named by the folder (``kgqa_multiturn``), and so is a folder of a run's steps (step files
    or step folders, ``search_steps``: ``engine.timeline.index.looks_like_step_run``); a folder holding several
    other files is one sample per file (``nemo_gym/blackjack``); a subfolder holding one run file is a sample of
    its own (``lint_cases/kgr1``)."""
    from engine.timeline.index import looks_like_step_run

    if not root.is_dir():
        return {}
    out: dict[str, Path] = {}
    for p in sorted(root.iterdir()):
        if p.name.startswith("."):
            continue
        if _is_run_file(p):
            out[_strip_suffix(p.name)] = p
        elif p.is_dir():
            if looks_like_step_run(p):  # one run of several steps
                out[p.name] = p
                continue
            files = sorted(f for f in p.iterdir() if _is_run_file(f))
            if len(files) == 1:
                out[p.name] = p  # the loader reads a folder (and names the run after it)
            for f in files if len(files) > 1 else []:
                out[f"{p.name}/{_strip_suffix(f.name)}"] = f
            for sub in sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith(".")):
                if sum(1 for f in sub.iterdir() if _is_run_file(f)) == 1:  # lint_cases/kgr1, lint_cases/policy
                    out[f"{p.name}/{sub.name}"] = sub
    return out


def sample_scheme(name: str, has_values: bool) -> tuple[str, str]:
    """(scheme code, why) sample ``name`` opens with."""
    if name in SAMPLE_SCHEMES:
        return SAMPLE_SCHEMES[name]
    if name.partition("/")[0] in SAMPLE_FAMILY_SCHEMES:
        return SAMPLE_FAMILY_SCHEMES[name.partition("/")[0]]
    if has_values:
        return "gae", "verl's GAE on the run's critic values"
    return "grpo", "verl's GRPO (the run has no critic values)"


def format_scheme(source: str) -> tuple[dict[str, str], str] | None:
    """(sidebar fields, why) a run read by the format(s) ``source`` names (``Run.source``, "+"-joined for a
    folder) opens with; None when its formats do not all share one entry of ``FORMAT_SCHEMES``."""
    formats = set(source.split("+"))
    return FORMAT_SCHEMES.get(formats.pop()) if len(formats) == 1 else None


def data_dir() -> Path | None:
    """The allowed data directory from ``CREDITLENS_DATA_DIR`` (resolved), or None when unset or missing."""
    raw = os.environ.get(DATA_DIR_ENV, "").strip()
    if not raw:
        return None
    p = Path(raw).expanduser().resolve()
    return p if p.is_dir() else None


def allowed_roots() -> list[Path]:
    """``sample_runs/`` and the data directory (when set): the folders a server-side load may read, run files and
    the tokenizer files their headers name (``engine.io.load_run(tokenizer_roots=...)``)."""
    roots = [SAMPLES_DIR.resolve()]
    d = data_dir()
    if d is not None:
        roots.append(d)
    return roots


def resolve_allowed(path: str | Path, base: Path | None = None) -> Path:
    """``path`` (relative to ``base``, default the data directory) resolved and checked to lie inside an allowed
    root; raises ``ValueError`` for traversal (``..``), symlinks leading out, or a missing file."""
    base = base if base is not None else data_dir()
    if base is None:
        raise ValueError(f"no data directory: set {DATA_DIR_ENV} to allow reading files")
    from engine.io.reading.confine import confine  # the one confinement check, shared with the loader's tokenizer files

    return confine(path, allowed_roots(), base)


def list_data_files(limit: int = LISTING_LIMIT) -> list[str]:
    """Run files under the data directory, as paths relative to it (symlinks leading out are left out). A folder of
    a run's steps (step files or step folders) is one entry, the folder's path, and is not looked into."""
    from engine.timeline.index import looks_like_step_run

    root = data_dir()
    if root is None:
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        runs = [d for d in dirnames if not d.startswith(".") and looks_like_step_run(Path(dirpath) / d)]
        for d in sorted(runs):
            try:
                resolve_allowed(Path(dirpath) / d, root)
            except ValueError:
                continue
            out.append((Path(dirpath) / d).relative_to(root).as_posix())
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in runs)
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if not _is_run_file(p):
                continue
            try:
                resolve_allowed(p, root)
            except ValueError:
                continue
            out.append(p.relative_to(root).as_posix())
            if len(out) >= limit:
                return out
    return out


def file_stamp(path: Path) -> tuple[int, int]:
    """(latest mtime in ns, total size) of a file or of the files directly in a folder: a cache key that changes
    when the run's content does."""
    files = [f for f in path.iterdir() if f.is_file()] if path.is_dir() else [path]
    stats = [f.stat() for f in files]
    return max((s.st_mtime_ns for s in stats), default=0), sum(s.st_size for s in stats)


def sample_path(name: str) -> Path:
    """The checked path of sample ``name``; ``KeyError`` if there is no such sample."""
    samples = list_samples()
    if name not in samples:
        raise KeyError(name)
    return resolve_allowed(samples[name], SAMPLES_DIR.resolve())
