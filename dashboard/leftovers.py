"""Upload copies a killed server left behind, and removing them when a server starts.

``loading.load_upload`` writes each upload to a private temporary folder ``creditlens-upload-<pid>-<random>``
(``<pid>``: the server's process id) and deletes it when the load ends. A server killed mid-load (``kill -9``,
the OOM killer) cannot delete it: an 88 MB upload stayed in ``/tmp``. On start (``warmup.lifespan``) a server
removes the upload folders in the temporary directory whose process is gone, and never one of a live process:
two servers on one machine each keep theirs. A folder whose process id is alive but belongs to a process that
started after the folder was written (the id was reused, as in a restarted container) is stale too. Folders of
the older name without a process id (``creditlens-upload-<random>``) are removed once they are an hour old
(an upload's folder lives as long as its load: seconds to minutes).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

PREFIX = "creditlens-upload-"
LEGACY_MAX_AGE_S = 3600
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")


def upload_prefix() -> str:
    """The prefix of this process's upload folders: ``creditlens-upload-<pid>-``."""
    return f"{PREFIX}{os.getpid()}-"


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def _started_at(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds) from ``/proc``; None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat: start time in clock ticks after boot
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def is_stale(folder: Path, now: float | None = None) -> bool:
    """Whether upload folder ``folder`` belongs to no live server (see the module docstring)."""
    try:
        written = folder.stat().st_mtime
    except OSError:
        return False
    m = _OWNED.match(folder.name)
    if m is None:  # an older server's name: no owner to ask, only its age
        return (now if now is not None else time.time()) - written > LEGACY_MAX_AGE_S
    pid = int(m.group(1))
    if not _alive(pid):
        return True
    started = _started_at(pid)
    return started is not None and started > written + 1.0  # the id now names a process younger than the folder


def remove_stale_uploads(tmpdir: str | Path | None = None) -> list[Path]:
    """Remove the stale upload folders in ``tmpdir`` (default ``tempfile.gettempdir()``); returns those removed.
    Only folders of this exact name pattern, and only this user's (a folder we cannot delete is left)."""
    root = Path(tmpdir if tmpdir is not None else tempfile.gettempdir())
    removed = []
    try:
        candidates = sorted(root.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for folder in candidates:
        if folder.is_symlink() or not folder.is_dir() or not is_stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed
