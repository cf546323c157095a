"""The thread locks this process holds, so a run can check its lock before each command.

A lock can be lost while it is held: its PostgreSQL connection ended (an administrator, an idle
connection killer, a network cut), or its SQLite lock file was removed. Nothing tells the
holder. Another worker can then take the thread and resume it, and both would start commands:
the same call run twice. So the executor checks, before it journals a command's start, that
every lock this process holds for the thread is still held (`check_held`): a stat of the lock
file, or one round trip on the lock's own connection. A lost lock is a StoreError, and the run
stops before the command starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bashgraph.graph.errors import StoreError

#: A held lock's check: None while the lock is held, else what was lost.
Check = Callable[[], str | None]

_guard = threading.Lock()
_held: dict[str, list[Check]] = {}


@contextmanager
def holding(thread_id: str, check: Check) -> Iterator[None]:
    """Register a lock on `thread_id` for the block (its `check` says whether it is still held)."""
    with _guard:
        _held.setdefault(thread_id, []).append(check)
    try:
        yield
    finally:
        with _guard:
            checks = _held.get(thread_id, [])
            if check in checks:
                checks.remove(check)
            if not checks:
                _held.pop(thread_id, None)


def check_held(thread_id: str) -> None:
    """Raise StoreError when a lock this process holds on `thread_id` has been lost."""
    with _guard:
        checks = list(_held.get(thread_id, ()))
    for check in checks:
        problem = check()
        if problem is not None:
            raise StoreError(f"lost the lock of thread {thread_id}: {problem}; another worker may run "
                             "it now, so no further command is started")
