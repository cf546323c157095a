"""How the shell is launched: the preamble, and the channel that brings back the final cwd.

The shell runs `[shell, "-c", preamble + command, "bashgraph", cwd_channel, start_dir]`, or just
`[shell, "-c", command, "bashgraph"]` when no preamble is needed. The preamble is POSIX sh (bash,
dash and busybox sh run it), built from:

1. `ENTER` (only when `start_dir` is not the runner's own directory): `cd` there. This is done
   here rather than by the spawn because `os.posix_spawn` cannot change directory before Python
   3.13, and `subprocess.Popen` costs about a tenth of a millisecond more per call. When `cd`
   fails the preamble writes `!` to the channel and exits: the runner reports the directory as
   a spawn error, not the command (and drops the shell's message). Either way `$PWD` is then
   exactly `start_dir` (the runner sets `PWD` in the environment for the no-`cd` case);
2. `TRACK` (only when `may_change_directory`): keep the channel and arm an EXIT trap that writes
   `$PWD` to it (it also runs when the command calls `exit`, and when the shell dies of SIGTERM —
   the runner ignores it then). `$PWD` is the logical path the shell maintains through every
   `cd`, so a command that did not move reports the very string it was started in. A trap
   costs more than itself: the shell can no longer `exec` the command's last program, it forks
   it and waits (about 0.7 ms). Commands that cannot move are not tracked, their final
   directory is their start directory;
3. `CLEAR`: drop the positional parameters, so the command sees none.

The command follows on the same line, so the shell parses and runs it exactly as `sh -c
command` would (line numbers in its error messages included) and its exit status is the
shell's. Pasting it after the preamble rather than running `eval "$1"` saves the `eval`; it
cannot change the preamble's meaning, which ends with `; `. A command that replaces the EXIT
trap, or `exec`s another program, reports no final directory, and so does one whose first line
does not parse (the preamble on that line never runs).

The channel is a pipe the runner keeps open; the shell reaches its write end through
`/proc/<runner pid>/fd/<n>`, which costs less than creating and removing a file, and leaves no
descriptor open in the command's processes. Without `/proc` it is a file in a temporary directory.
In a sandbox neither works (its /proc shows only its own processes, its /tmp is private): the
write end is inherited as fd `SANDBOX_CHANNEL_FD` and named `/dev/fd/4`, which reaches the
runner's pipe from inside bubblewrap. The command's processes then hold that descriptor too;
the runner reads the channel without waiting for them to close it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bashgraph.tools.safety.secret_guard import is_dumpable

#: Enters the start directory, or reports `CD_FAILED` on the channel and exits.
ENTER = "cd -- \"$2\" || { echo '!' >| \"$1\"; exit 1; }; "
#: Keeps the channel and arms the EXIT trap that reports `$PWD` on it.
#: NUL-terminated: a directory name may hold any byte but NUL, line breaks included.
TRACK = "__bashgraph_cwd=$1; trap 'printf \"%s\\0\" \"$PWD\" >| \"$__bashgraph_cwd\"' EXIT; "
#: Clears the positional parameters, so the command sees none.
CLEAR = "set --; "
#: What the preamble writes to the channel when it could not enter the start directory.
CD_FAILED = "!"
#: The descriptor a sandboxed shell finds the channel's write end on.
SANDBOX_CHANNEL_FD = 4

#: Text through which a command can change the shell's directory: the builtins that do it
#: (`chdir` is dash's name for `cd`), running other text as shell code (`eval`, `source`, `.`),
#: and expansions, which can produce any command name (`c=cd; $c /`).
_MAY_MOVE = re.compile(r"cd|chdir|pushd|popd|source|eval|[$`]|(?:^|[\s;&|(){}])\.(?:\s|$)")
#: Quoting the shell removes before it looks a name up: `c''d`, `c\d` and `"c"d` all run `cd`.
_UNQUOTE = str.maketrans("", "", "'\"\\")
#: Shells whose non-interactive startup reads nothing but `BASH_ENV` (checked separately).
_PLAIN_SHELLS = frozenset({"bash", "sh", "dash"})


def may_change_directory(command: str, shell: str, env: Mapping[str, str]) -> bool:
    """False only when running `command` provably leaves the shell where it started.

    Then no EXIT trap is needed to learn the final directory, and the shell is free to `exec`
    the command's last program instead of forking it and waiting (bash does this for `-c`, and
    it saves about 0.7 ms per command here). A directory changes only through `cd`, `chdir`,
    `pushd` and `popd`, whose names must appear in the text unless the text runs other text
    (`eval`, `source`, `.`, `$…`, backquotes) or the shell runs code the text does not show:
    a startup file (`BASH_ENV`, `ENV`, any shell but bash and dash) or an exported function
    (`BASH_FUNC_*`). Any of these, or just the letters `cd` anywhere once quotes, backslashes
    and line continuations are taken out, and the answer is True.
    """
    # A backslash-newline joins two lines into one word (`c\<newline>d`); then quotes go.
    if _MAY_MOVE.search(command.replace("\\\n", "").translate(_UNQUOTE)) is not None:
        return True
    if shell.rpartition("/")[2] not in _PLAIN_SHELLS or "BASH_ENV" in env or "ENV" in env:
        return True
    # One search of the joined names costs a fraction of a startswith per variable.
    return "\0BASH_FUNC_" in "\0" + "\0".join(env)


def argv(shell: str, command: str, channel: str, start_dir: str, track: bool) -> tuple[str, ...]:
    """The shell's argv: the command behind the preamble it needs, or alone when it needs none.

    `start_dir` "" means: stay where the shell starts (no `cd`); `track`: arm the EXIT trap.
    """
    if not start_dir and not track:
        return (shell, "-c", command, "bashgraph")
    preamble = (ENTER if start_dir else "") + (TRACK if track else "") + CLEAR
    return (shell, "-c", preamble + command, "bashgraph", channel, start_dir)


class CwdChannel:
    """Where the preamble writes the shell's final working directory (or `CD_FAILED`)."""

    def __init__(self, run_id: str, needed: bool = True, child_fd: int | None = None) -> None:
        """`needed` False: the preamble will write nothing, so nothing is opened.

        `child_fd`: the spawn gives the shell the write end as this descriptor (a sandbox);
        the pipe's own write end is then numbered above it, so duplicating it cannot clobber
        another descriptor the spawn still has to place.
        """
        self._read_fd = self._write_fd = -1
        self.path = ""
        self._file = False
        self._line: str | None = None  # what `take` found
        self._taken = False
        if not needed:
            return
        if child_fd is not None:
            self._read_fd, write_fd = os.pipe()
            try:
                self._write_fd = fd_above(write_fd, child_fd) if write_fd <= child_fd else write_fd
            except OSError:
                os.close(self._read_fd)
                raise
            os.set_blocking(self._read_fd, False)
            self.path = f"/dev/fd/{child_fd}"
        elif _proc_fd_available():
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._read_fd, False)
            self.path = f"/proc/{os.getpid()}/fd/{self._write_fd}"
        else:
            self._file = True
            self.path = os.path.join(tempfile.gettempdir(), f"bashgraph-cwd-{run_id}")

    @property
    def write_fd(self) -> int:
        """The pipe's write end (-1 for a file channel or none)."""
        return self._write_fd

    def take(self) -> str | None:
        """The last record the preamble wrote (None if none): a directory ended by NUL, or
        `CD_FAILED` ended by a line break. Closes the channel; later calls return the same.

        Call it only once the shell has exited.
        """
        if not self._taken:
            data = self._take_file() if self._file else self._take_pipe()
            self.close()
            self._taken = True
            if data.endswith(b"\0"):
                self._line = os.fsdecode(data[:-1].rsplit(b"\0", 1)[-1])
            elif data.endswith(b"\n") and len(data) >= 2:
                self._line = os.fsdecode(data[:-1].rsplit(b"\n", 1)[-1])
        return self._line

    def close(self) -> None:
        """Release the pipe (or remove the file); safe to call more than once."""
        if self._file:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        for fd in (self._read_fd, self._write_fd):
            if fd >= 0:
                os.close(fd)
        self._read_fd = self._write_fd = -1

    def _take_pipe(self) -> bytes:
        if self._read_fd < 0:
            return b""
        if self._write_fd >= 0:
            os.close(self._write_fd)  # the shell is gone: nothing else may write
            self._write_fd = -1
        chunks = []
        with contextlib.suppress(OSError):
            while True:
                chunks.append(os.read(self._read_fd, 65536))
                if len(chunks[-1]) < 65536:  # a short read: empty, and no writer is left
                    break
        return b"".join(chunks)

    def _take_file(self) -> bytes:
        try:
            return Path(self.path).read_bytes()
        except OSError:
            return b""


def fd_above(fd: int, above: int) -> int:
    """A close-on-exec duplicate of `fd` numbered above `above`; `fd` itself is closed."""
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above + 1)
    finally:
        os.close(fd)


@functools.cache
def _proc_fd_available() -> bool:
    # A non-dumpable runner (`secret_guard.protect_secrets`) keeps its /proc/<pid>/fd from its
    # commands: they get the file instead.
    return os.path.isdir("/proc/self/fd") and is_dumpable()
