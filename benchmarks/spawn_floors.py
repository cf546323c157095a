"""Reference points for the per-call cost of `run_command`, measured in the same run.

* `floor`: `os.posix_spawn` of `bash -c true` and `waitpid` — the issue's floor.
* `capture_floor`: the floor plus the kernel work of any runner that captures output: two
  pipes, stdin from /dev/null, a new session, both pipes read to their end.
* `bare_runner`: the least a runner with `run_command`'s guarantees for a *finished* command
  pays, with no structure: a scrubbed environment with a run marker, the working directory,
  the close actions for inheritable descriptors, a pidfd to notice the shell's exit while
  something else may hold the pipes, non-blocking reads, and a `CommandResult`. No timeout
  handling, no caps, no spill files, no escapees — so it is a lower bound, not a competitor.
"""

from __future__ import annotations

import os
import select
import signal
import time

from bashgraph.tools.results import CommandResult, Outcome
from bashgraph.tools.runner.options import build_env
from bashgraph.tools.runner.spawn import inheritable_descriptors

BASH = "/bin/bash" if os.path.exists("/bin/bash") else "/usr/bin/bash"
_FLOOR_ENV = dict(os.environ)
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def floor() -> None:
    os.waitpid(os.posix_spawn(BASH, ["bash", "-c", "true"], _FLOOR_ENV), 0)


def capture_floor() -> None:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.posix_spawn(BASH, ["bash", "-c", "true"], _FLOOR_ENV,
                         file_actions=_stdio(out_write, err_write), setsid=True,
                         setsigdef=_DEFAULT_SIGNALS)
    os.close(out_write)
    os.close(err_write)
    for fd in (out_read, err_read):
        while os.read(fd, 65536):
            pass
        os.close(fd)
    os.waitpid(pid, 0)


def bare_runner(command: str = "true", close_inherited: bool = True) -> CommandResult:
    """`close_inherited` False: skip the descriptor scan (what that guarantee costs)."""
    started = time.monotonic()
    env = build_env(extra=None, pass_env=(), inherit_env=True)
    env["BASHGRAPH_RUN_ID"] = os.urandom(16).hex()
    here = env["PWD"] = os.getcwd()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    actions = _stdio(out_write, err_write)
    if close_inherited:
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in inheritable_descriptors()]
    pid = os.posix_spawn(BASH, ["bash", "-c", command, "bashgraph"], env, file_actions=actions,
                         setsid=True, setsigdef=_DEFAULT_SIGNALS)
    os.close(out_write)
    os.close(err_write)
    chunks: dict[int, list[bytes]] = {out_read: [], err_read: []}
    code = _wait(pid, chunks)
    return CommandResult(
        outcome=Outcome.OK if code == 0 else Outcome.EXIT_ERROR, command=command, cwd=here,
        exit_code=code, stdout=b"".join(chunks[out_read]).decode("utf-8", "replace"),
        stderr=b"".join(chunks[err_read]).decode("utf-8", "replace"),
        duration_s=round(time.monotonic() - started, 6), final_cwd=here)


def _wait(pid: int, chunks: dict[int, list[bytes]]) -> int:
    """Read the pipes until their end and reap the shell; its exit status."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in (*chunks, pidfd):
        if fd != pidfd:
            os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    waiting, code = 3, -1
    while waiting:
        for fd, _ in poller.poll():
            data = b"" if fd == pidfd else os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
                continue
            if fd == pidfd:
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            poller.unregister(fd)
            os.close(fd)
            waiting -= 1
    return code


def _stdio(stdout: int, stderr: int) -> list[tuple[int | str, ...]]:
    return [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stderr, 2)]
