"""Find and kill every process a command started, including those that left its process group.

Each command runs as the leader of a new session and process group, and carries a unique marker
in its environment (`BASHGRAPH_RUN_ID`, inherited by everything it starts). To end a command we
signal the group with `killpg`, and then look in `/proc` for every process that is still in the
command's session or process group, or whose environment holds the marker: that also finds what
escaped with `setsid`, a double fork, `set -m` job control or `nohup` (the idea of Jenkins'
ProcessTreeKiller). Found processes are tracked with pidfds, so a pid reused by an unrelated
process is never signalled, and their exit is observed without polling `/proc` again.

What this cannot catch: a process that leaves the session *and* drops the marker from its
environment (`setsid env -i cmd`), or that overwrites its environment block in memory. The opt-in
sandbox (a private PID namespace, a later issue) closes that gap: killing its init kills all.

Why not `PR_SET_CHILD_SUBREAPER`: it is process-wide state, so every orphan of every child of the
host process (a LangGraph server, a notebook) would be re-parented to it and would have to be
reaped by someone — a zombie leak, or stolen exit statuses if we reaped with `waitpid(-1)`. The
marker costs nothing until a command must be killed, and the `/proc` scan (about a millisecond
per hundred processes) only runs then.

Without `/proc` (not Linux) only the process group is signalled; without pidfds (Linux < 5.3)
processes are signalled by pid.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

MARKER_VAR = "BASHGRAPH_RUN_ID"
_PROC = Path("/proc")


class Reaper:
    """Signals one command's processes: all of them, or only those still holding its pipes."""

    def __init__(self, leader: int, token: str, holding: frozenset[bytes] | None = None) -> None:
        """`holding`: when given, only processes with one of these open (`pipe:[inode]`) count."""
        self.leader = leader  # the shell: pid, process group id and session id
        self._token = token.encode()
        # Without /proc the holders cannot be told apart: the whole group it is.
        self._holding = holding if _PROC.is_dir() else None
        self._pidfds: dict[int, int] = {}  # pid -> pidfd, or -1 when pidfds are unavailable
        self.outsiders = 0  # found by the marker alone: escaped the session and the group

    def signal_all(self, *signals: int) -> None:
        """Send `signals`, in order, to every process found (and to the group, unless filtered)."""
        self._discover()
        for sig in signals:
            if self._holding is None:
                with contextlib.suppress(OSError):
                    os.killpg(self.leader, sig)
            for pid, pidfd in self._pidfds.items():
                _send(pid, pidfd, sig)

    def settled(self, *signals: int) -> bool:
        """True when every process found so far has exited and a new scan finds no other.

        Newly found ones (forked while we were killing) get `signals` at once.
        """
        if self._any_alive() or (not _PROC.is_dir() and _group_alive(self.leader)):
            return False
        before = set(self._pidfds)
        self._discover()
        fresh = set(self._pidfds) - before
        for pid in fresh:
            for sig in signals:
                _send(pid, self._pidfds[pid], sig)
        return not fresh

    @property
    def found(self) -> int:
        """How many processes were found (and signalled) so far."""
        return len(self._pidfds)

    def close(self) -> None:
        for pidfd in self._pidfds.values():
            if pidfd >= 0:
                os.close(pidfd)
        self._pidfds.clear()

    def _any_alive(self) -> bool:
        return any(_alive(pid, pidfd) for pid, pidfd in self._pidfds.items())

    def _discover(self) -> None:
        for pid, insider in scan(self.leader, self._token):
            if pid in self._pidfds:
                continue
            if self._holding is not None and not _holds(pid, self._holding):
                continue
            pidfd = open_pidfd(pid)
            # Re-check after opening: the pid may have been reused in between.
            if _belongs(pid, self.leader, self._token) is None:
                if pidfd >= 0:
                    os.close(pidfd)
                continue
            self._pidfds[pid] = pidfd
            self.outsiders += not insider


def pipe_names(*fds: int) -> frozenset[bytes]:
    """How /proc shows the pipes behind `fds` in other processes' fd tables (`pipe:[inode]`)."""
    return frozenset(f"pipe:[{os.fstat(fd).st_ino}]".encode() for fd in fds)


def _holds(pid: int, names: frozenset[bytes]) -> bool:
    """True when process `pid` has one of the pipes `names` open."""
    directory = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(directory)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"{directory}/{fd}").encode() in names:
                return True
        except OSError:
            continue
    return False


def scan(leader: int, token: bytes) -> list[tuple[int, bool]]:
    """Live processes of the command: (pid, True if still in its session or group)."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    me = os.getpid()
    found: list[tuple[int, bool]] = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        insider = _belongs(int(name), leader, token)
        if insider is not None:
            found.append((int(name), insider))
    return found


def _belongs(pid: int, leader: int, token: bytes) -> bool | None:
    """True: in the session or group; False: outside but marked; None: not ours (or gone)."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    # Fields after the command name, which may itself contain spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 4 or fields[0] in (b"Z", b"X"):
        return None
    if int(fields[2]) == leader or int(fields[3]) == leader:
        return True
    return False if token in _read(f"/proc/{pid}/environ") else None


def _group_alive(leader: int) -> bool:
    try:
        os.killpg(leader, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def open_pidfd(pid: int) -> int:
    """A pidfd for `pid` (signals reach exactly that process, never a reused pid), or -1."""
    if not hasattr(os, "pidfd_open"):
        return -1
    try:
        return os.pidfd_open(pid)
    except OSError:
        return -1


def _send(pid: int, pidfd: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)


def _alive(pid: int, pidfd: int) -> bool:
    """Not exited yet (a zombie waiting for its parent counts as exited)."""
    if pidfd >= 0:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return not poller.poll(0)
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def marked(token: str) -> list[int]:
    """Live processes (not this one) whose environment holds `token`, wherever they are now."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    me, needle = os.getpid(), token.encode()
    # -1 is no process's group or session: only the environment can make a process match.
    return [int(name) for name in names
            if name.isdigit() and int(name) != me and _belongs(int(name), -1, needle) is False]


def sweep(token: str, grace: float = 2.0, wait: float = 5.0) -> tuple[int, int]:
    """Stop every process still carrying `token` (a command cut off by its runner's death):
    SIGTERM and SIGCONT, `grace` seconds, SIGKILL, then up to `wait` seconds for them to go.

    Returns (processes found, processes still alive at the end). Processes forked meanwhile are
    found by the rescans. Only this machine's `/proc` is searched.
    """
    found: dict[int, int] = {}

    def discover(*signals: int) -> None:
        for pid in marked(token):
            if pid in found:
                continue
            pidfd = open_pidfd(pid)
            if _belongs(pid, -1, token.encode()) is not False:  # reused meanwhile
                if pidfd >= 0:
                    os.close(pidfd)
                continue
            found[pid] = pidfd
            for sig in signals:
                _send(pid, pidfd, sig)

    def alive() -> list[int]:
        return [pid for pid, pidfd in found.items() if _alive(pid, pidfd)]

    def settle(seconds: float, *signals: int) -> bool:
        end = time.monotonic() + seconds
        while True:
            discover(*signals)
            if not alive():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)

    try:
        polite = (signal.SIGTERM, signal.SIGCONT)
        discover(*polite)
        if not settle(grace, *polite):
            for pid in alive():
                _send(pid, found[pid], signal.SIGKILL)
            settle(wait, signal.SIGKILL)
        return len(found), len(alive())
    finally:
        for pidfd in found.values():
            if pidfd >= 0:
                os.close(pidfd)
