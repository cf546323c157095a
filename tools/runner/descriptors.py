"""Which of this process's descriptors above 2 a spawned shell would inherit.

Python opens everything non-inheritable, so the answer is almost always "none"; a C library that
opened a descriptor without O_CLOEXEC, an `os.dup2`, or the process that started ours (some job
runners and CI agents leave an inheritable pipe end open) is why the spawn has to look. A leaked
pipe end would let a command's background process keep somebody else's reader waiting.

Looking costs a listing of `/proc/self/fd` and one `fcntl` per descriptor, on every spawn, before
it. The listing goes through a directory descriptor kept open rather than the path: resolving
`/proc/self/fd` is a third of this module's cost (about 2 % of a whole `true` command). The kept
descriptor is checked before each use (by inode), used under a lock (see `_FdListing`), and
closed in a forked child, whose `/proc/self` is another directory.
"""

from __future__ import annotations

import contextlib
import os
import threading

_FD_DIR = "/proc/self/fd"


class _FdListing:
    """The kept descriptor of `/proc/self/fd`, with what identifies it as still ours.

    One lock covers opening and listing: `os.listdir(fd)` reads through a duplicate that shares
    the kept descriptor's read position, so two threads listing at once would each see part of
    the directory (a spawn would then miss an inheritable descriptor), and two threads opening
    at once would leak one descriptor. A listing takes microseconds; spawns are not slowed.
    """

    def __init__(self) -> None:
        self.owner = -1  # the pid that opened it
        self.fd = -1
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) when opened
        self.lock = threading.Lock()
        self.fork_hook = False

    def names(self) -> list[str]:
        with self.lock:
            fd = self._valid_fd()
            if fd < 0:
                return []
            try:
                return os.listdir(fd)
            except OSError:
                return []

    def _valid_fd(self) -> int:
        """The descriptor, (re)opened when missing, replaced behind our back, or inherited."""
        pid = os.getpid()
        if self.fd >= 0:
            if self.owner == pid and _identity(self.fd) == self.identity:
                return self.fd
            # Closed or replaced by someone else (the number may be somebody's now), or a fork
            # the hook did not see: either way not ours to close.
            self.fd = -1
        try:
            fd = os.open(_FD_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return -1
        self.owner, self.fd, self.identity = pid, fd, _identity(fd)
        if not self.fork_hook:
            self.fork_hook = True
            os.register_at_fork(after_in_child=self.after_fork)
        return fd

    def after_fork(self) -> None:
        """In a forked child: its copy lists the parent's table. The copy is closed at once,
        while the number is certainly still ours; the lock is new (another thread may have held
        the parent's at the fork)."""
        self.lock = threading.Lock()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = -1


_LISTING = _FdListing()


def inheritable_descriptors() -> list[int]:
    """Descriptors above 2 that are open and inheritable right now ([] without /proc)."""
    found = []
    for name in _LISTING.names():
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # the descriptor the listing itself used, closed since
                continue
    return found


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
