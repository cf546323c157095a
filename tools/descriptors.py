"""Which of this process's descriptors above 2 a spawned shell would inherit.

Python opens everything non-inheritable, so the answer is almost always "none"; a C library that
opened a descriptor without O_CLOEXEC, an `os.dup2`, or the process that started ours (this very
VM's job runner leaves an inheritable pipe end at fd 251) is why the spawn has to look. A leaked
pipe end would let a command's background process keep somebody else's reader waiting.

Looking costs a listing of `/proc/self/fd` and one `fcntl` per descriptor, on every spawn, before
it. The listing goes through a directory descriptor kept open rather than the path: resolving
`/proc/self/fd` is most of the price of a listing (measured: a third of this module's cost, about
2 % of a whole `true` command). The kept descriptor is checked before each use (by inode), and
reopened in a forked child, whose `/proc/self` is another directory.
"""

from __future__ import annotations

import contextlib
import os

_FD_DIR = "/proc/self/fd"


class _FdListing:
    """The kept descriptor of `/proc/self/fd`, with what identifies it as still ours."""

    def __init__(self) -> None:
        self.owner = -1  # the pid that opened it
        self.fd = -1
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) when opened

    def names(self) -> list[str]:
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
            if self.owner != pid:  # a forked child: its copy lists the parent's table
                with contextlib.suppress(OSError):
                    os.close(self.fd)
            # else: closed by someone else, and the number may be somebody's now: not ours to close
            self.fd = -1
        try:
            fd = os.open(_FD_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return -1
        self.owner, self.fd, self.identity = pid, fd, _identity(fd)
        return fd


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
