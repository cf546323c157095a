"""Starting the shell: the plan, the spawn itself, and the shell process's handle.

The shell starts with `os.posix_spawn` in a new session and process group, stdin from
/dev/null, stdout and stderr on two fresh pipes, SIGPIPE and SIGXFSZ reset to their defaults,
and no inheritable descriptor above 2 (like `subprocess`).

With a sandbox (`Plan.sandbox`), the process spawned is the sandbox's wrapper (`bwrap`, or the
`/bin/sh` step that puts it in its task-limit cgroup first), with two more descriptors: the
write end of the sandbox's status pipe as fd 3 (`STATUS_FD`), and, when the final directory is
tracked, the write end of the cwd channel as fd 4 (`launch.SANDBOX_CHANNEL_FD`; the sandbox's
own /proc cannot reach the runner's descriptors, `/dev/fd/4` can). The sandbox enters the start
directory itself (`--chdir`), so the preamble never `cd`s there.

Which of this process's descriptors above 2 the shell would inherit (`inheritable_descriptors`):
Python opens everything non-inheritable, so the answer is almost always "none"; a C library that
opened a descriptor without O_CLOEXEC, an `os.dup2`, or the process that started ours (some job
runners and CI agents leave an inheritable pipe end open) is why the spawn has to look. A leaked
pipe end would let a command's background process keep somebody else's reader waiting.
Looking costs a listing of `/proc/self/fd` and one `fcntl` per descriptor, on every spawn, before
it. The listing goes through a directory descriptor kept open rather than the path: resolving
`/proc/self/fd` is a third of the listing's cost (about 2 % of a whole `true` command). The kept
descriptor is checked before each use (by inode), used under a lock (see `_FdListing`), and
closed in a forked child, whose `/proc/self` is another directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import NamedTuple

from bashgraph.tools.results import CommandResult, args_error
from bashgraph.tools.runner import launch
from bashgraph.tools.runner.classify import SpawnTarget, sandbox_spawn_error, spawn_error_result
from bashgraph.tools.runner.launch import CwdChannel
from bashgraph.tools.safety.sandbox import Sandbox, read_status_fd

#: Where the sandbox's wrapper finds the write end of its status pipe.
STATUS_FD = 3


class Plan(NamedTuple):
    """Everything decided before the spawn."""

    target: SpawnTarget
    enter_dir: str  # where the preamble must `cd` first ("" when the shell already starts there)
    track_cwd: bool  # the command may change directory: the preamble reports where it ended
    executable: str
    env: dict[str, str]
    timeout: float
    grace: float
    max_output_chars: int
    spill_dir: Path | None  # None: the default, looked up only when a stream spills
    run_id: str
    sandbox: Sandbox | None = None  # the shell runs inside it


class Child:
    """The spawned process: its pid and, once reaped, its return code (negative: killed by it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Reap the process if it has exited; its return code, or None while it runs."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Someone else reaped it (SIGCHLD set to SIG_IGN): the status is lost. subprocess
                # reports 0 in this case too.
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int | None:
        """`poll` until the process is reaped or `timeout` seconds have passed (this blocks)."""
        until = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < until:
            time.sleep(0.001)
        return self.returncode


class Spawned:
    """What a successful spawn hands over: the shell, the read ends of its output pipes, the
    cwd channel and, sandboxed, the status pipe (each closed by whoever finishes with it)."""

    __slots__ = ("channel", "pipes", "proc", "status_fd")

    def __init__(self, proc: Child, pipes: tuple[int, int], channel: CwdChannel,
                 status_fd: int = -1) -> None:
        self.proc = proc
        self.pipes = pipes  # stdout and stderr read ends, non-blocking
        self.channel = channel
        # The read end of the sandbox's status pipe (-1: not sandboxed, or closed). Open until
        # the result is built: bwrap writing to a closed pipe dies of SIGPIPE.
        self.status_fd = status_fd

    def take_status(self) -> str | None:
        """What the sandbox wrote on its status pipe (None when there is none); closes it.

        Call after the shell exited: bwrap is the only writer.
        """
        if self.status_fd < 0:
            return None
        fd, self.status_fd = self.status_fd, -1
        return read_status_fd(fd)

    def close_status(self) -> None:
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1


def spawn(plan: Plan) -> Spawned | CommandResult:
    """Start the shell; a CommandResult if it cannot start.

    Running out of descriptors for the pipes is a spawn failure too (`resource`), not an error.
    """
    target = plan.target
    fds: list[int] = []
    channel = CwdChannel(plan.run_id, needed=False)
    sandbox = plan.sandbox
    wrapper: str | None = None  # set once the sandbox's wrapper is what fails to start
    try:
        if plan.enter_dir or plan.track_cwd:  # else the preamble writes nothing: the one above
            channel = CwdChannel(plan.run_id, child_fd=launch.SANDBOX_CHANNEL_FD if sandbox else None)
        out_read, out_write = _pipe(fds)
        err_read, err_write = _pipe(fds)
        argv: list[str] = list(launch.argv(target.shell, target.command, channel.path,
                                           plan.enter_dir, plan.track_cwd))
        actions = _file_actions(out_write, err_write)
        status_read = -1
        if sandbox is None:
            pid = os.posix_spawn(plan.executable, argv, plan.env, file_actions=actions,
                                 setsid=True, setsigdef=_DEFAULT_SIGNALS)
        else:
            status_read, status_write = _pipe(fds, above=launch.SANDBOX_CHANNEL_FD)
            argv = sandbox.wrap(argv, cwd=target.start_dir or ".", status_fd=STATUS_FD)
            actions.append((os.POSIX_SPAWN_DUP2, status_write, STATUS_FD))
            if channel.write_fd >= 0:
                actions.append((os.POSIX_SPAWN_DUP2, channel.write_fd, launch.SANDBOX_CHANNEL_FD))
            wrapper = argv[0]
            pid = _spawn_wrapper(argv, plan.env, actions)
    except OSError as exc:
        _close(*fds)
        channel.close()
        if wrapper is not None:
            return sandbox_spawn_error(exc, target, wrapper)
        return spawn_error_result(exc, target)
    except (ValueError, TypeError) as exc:  # NUL or '=' in the environment, a non-str value
        _close(*fds)
        channel.close()
        return args_error(f"cannot pass the environment to the shell: {exc}", target.command)
    keep = (out_read, err_read, status_read)
    _close(*(fd for fd in fds if fd not in keep))
    os.set_blocking(out_read, False)
    os.set_blocking(err_read, False)
    return Spawned(Child(pid), (out_read, err_read), channel, status_read)


def _spawn_wrapper(argv: list[str], env: dict[str, str], actions: list[tuple[int | str, ...]]
                   ) -> int:
    """Spawn the sandbox's wrapper; a bare name is looked up on this process's PATH by libc."""
    start = os.posix_spawn if "/" in argv[0] else os.posix_spawnp
    return start(argv[0], argv, env, file_actions=actions, setsid=True,
                 setsigdef=_DEFAULT_SIGNALS)


def _pipe(opened: list[int], above: int = -1) -> tuple[int, int]:
    """A pipe (both ends added to `opened`) whose write end is numbered above `above`, so a
    dup2 onto a low number cannot clobber another descriptor that is still to be placed."""
    read_end, write_end = os.pipe()
    opened.append(read_end)
    if write_end <= above:
        write_end = launch.fd_above(write_end, above)
    opened.append(write_end)
    return read_end, write_end


def _file_actions(stdout: int, stderr: int) -> list[tuple[int | str, ...]]:
    """stdin from /dev/null, the two pipes, and nothing else inherited."""
    return [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, stdout, 1),
        (os.POSIX_SPAWN_DUP2, stderr, 2),
        *_close_inherited(),
    ]


#: Python ignores SIGPIPE (and SIGXFSZ); a shell must start with the defaults, or `yes | head`
#: would print "Broken pipe" errors instead of ending quietly. Ignored signals survive exec.
_DEFAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name)
)


def _close_inherited() -> list[tuple[int | str, ...]]:
    """Close actions for inheritable descriptors above 2 (what `subprocess` does by default)."""
    return [(os.POSIX_SPAWN_CLOSE, fd) for fd in inheritable_descriptors()]


_resolved: dict[tuple[str, str | None], str] = {}


def known_executable(shell: str, path: str | None) -> str | None:
    """The shell's absolute path if it is already known (a name with a slash always is)."""
    return shell if "/" in shell else _resolved.get((shell, path))


def resolve(shell: str, path: str | None) -> str:
    """The shell's absolute path, looked up in `path` once (this reads the file system).

    A name that is not found is returned unchanged, so the spawn fails with the real ENOENT;
    that answer is not remembered, so a shell installed later is found.
    """
    found = known_executable(shell, path)
    if found is None:
        found = shutil.which(shell, path=path)
        if found is None:
            return shell
        if len(_resolved) >= 64:
            _resolved.clear()
        _resolved[(shell, path)] = found
    return found


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


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
