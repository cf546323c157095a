"""Old spill files are removed, so a long-lived agent does not fill the disk with them.

Every stream over the cap leaves a file of up to 1 GiB. When a stream starts spilling into the
default directory (`<tmp>/bashgraph-spill`), the spill files there older than `MAX_AGE_S` are
removed first — at most once per `PRUNE_INTERVAL_S` in a process, so a burst of large outputs
scans the directory once. Only files named like spill files (`<run>-stdout-<x>.log`,
`<run>-stderr-<x>.log`) are touched. A directory the caller chose (`spill_dir=`) is theirs and
is never pruned. A result that names a removed file still says how large the stream was; the
file itself is gone, as after any temp-directory cleaning.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

MAX_AGE_S = 7 * 24 * 3600.0
PRUNE_INTERVAL_S = 3600.0

_SPILL_NAME = re.compile(r"[0-9a-f]+-std(?:out|err)-[^/]*\.log")


class _Schedule:
    """When this process last pruned (monotonic seconds)."""

    last = -math.inf


def prune_if_due(directory: Path, now: float | None = None) -> int:
    """Remove old spill files from `directory` unless this process did so recently.

    Returns how many were removed. Never raises: a file that cannot be removed is left.
    """
    moment = time.monotonic() if now is None else now
    if moment - _Schedule.last < PRUNE_INTERVAL_S:
        return 0
    _Schedule.last = moment
    return prune(directory, older_than=time.time() - MAX_AGE_S)


def prune(directory: Path, *, older_than: float) -> int:
    """Remove the spill files in `directory` last written before `older_than` (epoch seconds)."""
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not _SPILL_NAME.fullmatch(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < older_than:
                os.unlink(entry.path)
                removed += 1
        except OSError:  # gone already, or not ours to remove
            continue
    return removed


def reset_schedule() -> None:
    """Forget the last prune (tests; a process that wants a prune on its next spill)."""
    _Schedule.last = -math.inf
