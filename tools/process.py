"""Run one shell command and say exactly how it ended: `run_command` and `arun_command`.

Neither raises for anything the command does: a missing shell or working directory, a non-zero
exit, a timeout, a signal — each comes back as a `CommandResult` (see `results.py`).

How a command runs:

* `[shell, "-c", preamble + command, "bashgraph", ...]` (see `launch`) with stdin from
  /dev/null, in a new session and process group, started with `os.posix_spawn` (SIGPIPE and
  SIGXFSZ reset to their defaults, inheritable descriptors other than 0-2 closed, like
  `subprocess` does). `shell` must be POSIX-compatible (bash, dash, busybox sh). The preamble
  enters `cwd` and, when the command could change directory, records where the shell ended (so
  a later call can continue where `cd` left off; `final_cwd` is None when the shell was
  killed). A command that needs neither runs as plain `shell -c command`.
* The environment is inherited minus secrets (`environment.scrub_env`), plus the caller's
  `env`, plus `BASHGRAPH_RUN_ID`, the marker `reaper` uses to find escaped processes.
* Output: stdout and stderr are captured apart, in bounded memory (`capture`).
* Timeout: SIGTERM to the group and to everything found carrying the marker, `grace` seconds,
  then SIGKILL; the call returns within timeout + grace + 0.5 s even when a grandchild holds the
  pipes. Background processes that still hold the pipes after the shell exited get 0.5 s, then
  the same treatment; background processes that do not hold them are left alone (see
  `supervisor`).

The sync form waits with `poll(2)` on the pipes and a pidfd of the shell; the async form puts
the same descriptors in a selector of their own and registers that one with the event loop.
It does not use `asyncio.create_subprocess_exec`: on Python 3.11 that waits for each child in a
thread of its own (`ThreadedChildWatcher`) and costs more per call (1.5x the spawn floor here,
see docs/benchmarks.md); here both forms share the spawn, the state machine and the
classification, and no thread is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import select
import selectors
import shutil
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from bashgraph.tools import launch
from bashgraph.tools.classify import SpawnTarget, spawn_error_result
from bashgraph.tools.environment import build_env
from bashgraph.tools.reaper import MARKER_VAR
from bashgraph.tools.results import CommandResult, args_error
from bashgraph.tools.supervisor import Child, Plan, Supervisor

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_OUTPUT_CHARS = 10_000
DEFAULT_GRACE = 2.0

_PathArg = str | os.PathLike[str]


def run_command(
    command: str,
    *,
    cwd: _PathArg | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    inherit_env: bool = True,
    shell: str = "bash",
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    grace: float = DEFAULT_GRACE,
    spill_dir: _PathArg | None = None,
) -> CommandResult:
    """Run `command` with `shell -c` and return how it ended; never raises for its failure.

    `timeout` None means `DEFAULT_TIMEOUT` (pass `math.inf` for none). `env` is set on top of the
    scrubbed inherited environment (or of a minimal one, with `inherit_env=False`); `pass_env`
    names inherited variables to keep even if they look secret. Each stream keeps at most
    `max_output_chars` characters; a longer one is spilled whole to a file in `spill_dir`.
    """
    started = time.monotonic()
    plan = _plan(command, cwd=cwd, timeout=timeout, env=env, pass_env=pass_env,
                 inherit_env=inherit_env, shell=shell, max_output_chars=max_output_chars,
                 grace=grace, spill_dir=spill_dir)
    if isinstance(plan, CommandResult):
        return plan
    spawned = _spawn(plan)
    if isinstance(spawned, CommandResult):
        return spawned
    poller = select.poll()
    sup = Supervisor(plan, *spawned, started=started,
                     forget=functools.partial(_unregister, poller))
    try:
        for fd in sup.watched():
            poller.register(fd, select.POLLIN)
        while not sup.done:
            wait = sup.wait_time(time.monotonic())
            for fd, _ in poller.poll(None if wait is None else math.ceil(wait * 1000)):
                sup.on_ready(fd)
            sup.step(time.monotonic())
            if pause := sup.take_pause():
                time.sleep(pause)
        return sup.result()
    finally:
        sup.abort()


async def arun_command(
    command: str,
    *,
    cwd: _PathArg | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    inherit_env: bool = True,
    shell: str = "bash",
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    grace: float = DEFAULT_GRACE,
    spill_dir: _PathArg | None = None,
) -> CommandResult:
    """`run_command` for asyncio: same arguments, same results, no thread.

    Cancelling it kills the command's process tree before the cancellation propagates.
    """
    started = time.monotonic()
    plan = _plan(command, cwd=cwd, timeout=timeout, env=env, pass_env=pass_env,
                 inherit_env=inherit_env, shell=shell, max_output_chars=max_output_chars,
                 grace=grace, spill_dir=spill_dir)
    if isinstance(plan, CommandResult):
        return plan
    try:
        inner = selectors.DefaultSelector()  # before the spawn: failing here leaves nothing running
    except OSError as exc:
        return spawn_error_result(exc, plan.target)
    spawned = _spawn(plan)
    if isinstance(spawned, CommandResult):
        inner.close()
        return spawned
    loop = asyncio.get_running_loop()
    sup = Supervisor(plan, *spawned, started=started,
                     forget=functools.partial(_unregister, inner))
    try:
        for fd in sup.watched():
            inner.register(fd, selectors.EVENT_READ)
        await _drive(loop, inner, sup)
        return sup.result()
    finally:
        sup.abort()
        inner.close()


async def _drive(
    loop: asyncio.AbstractEventLoop, inner: selectors.DefaultSelector, sup: Supervisor
) -> None:
    """Step the supervisor when its descriptors are ready; wake up to re-arm the deadline.

    The run's descriptors sit in a selector of their own (epoll on Linux, kqueue on BSD), and
    only that one is registered with the event loop: one `add_reader` per command instead of
    one per descriptor (the loop's bookkeeping for each costs more than the kernel's). The
    coroutine sleeps until the run is done, its phase changed (a new deadline), or the current
    deadline passed.
    """
    wake: asyncio.Future[None] = loop.create_future()
    poll_fd = inner.fileno()

    def ready() -> None:
        phase, changed = sup.phase, False
        for key, _ in inner.select(0):
            changed |= sup.on_ready(key.fd)
        if changed:
            sup.step(time.monotonic())
            if (sup.done or sup.phase is not phase) and not wake.done():
                wake.set_result(None)
        if sup.done:
            loop.remove_reader(poll_fd)
        elif pause := sup.take_pause():
            loop.remove_reader(poll_fd)
            loop.call_later(pause, resume)

    def resume() -> None:
        if not sup.done:
            loop.add_reader(poll_fd, ready)

    loop.add_reader(poll_fd, ready)
    try:
        while not sup.done:
            wait = sup.wait_time(time.monotonic())
            if wait is None or wait > 0:
                timer = None if wait is None else loop.call_later(wait, _settle, wake)
                try:
                    await wake
                finally:
                    if timer is not None:
                        timer.cancel()
            wake = loop.create_future()
            sup.step(time.monotonic())
    finally:
        loop.remove_reader(poll_fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _unregister(poller: select.poll | selectors.BaseSelector, fd: int) -> None:
    with contextlib.suppress(KeyError, OSError):
        poller.unregister(fd)


def _plan(
    command: str,
    *,
    cwd: _PathArg | None,
    timeout: float | None,
    env: Mapping[str, str] | None,
    pass_env: Iterable[str],
    inherit_env: bool,
    shell: str,
    max_output_chars: int,
    grace: float,
    spill_dir: _PathArg | None,
) -> Plan | CommandResult:
    """Check the arguments and decide everything the spawn needs."""
    problem = _argument_problem(command, timeout, grace, max_output_chars)
    if problem:
        return args_error(problem, command if isinstance(command, str) else "")
    run_id = os.urandom(16).hex()
    full_env = build_env(extra=env, pass_env=pass_env, inherit_env=inherit_env)
    inherited = full_env.get(MARKER_VAR)
    # Keep an outer run's marker too, so a bashgraph running inside bashgraph stays findable.
    full_env[MARKER_VAR] = f"{inherited}:{run_id}" if inherited else run_id
    given_cwd = None if cwd is None else os.path.abspath(cwd)
    here = _process_cwd()
    start_dir = given_cwd or here
    if start_dir:
        # The shell takes $PWD from here when it names its directory, so `$PWD` (reported back
        # as final_cwd) is exactly start_dir even when no `cd` is needed.
        full_env["PWD"] = start_dir
    return Plan(
        target=SpawnTarget(command, shell, given_cwd, start_dir),
        enter_dir="" if start_dir == here else start_dir or "",
        track_cwd=launch.may_change_directory(command, shell, full_env),
        executable=_resolve(shell, full_env.get("PATH")),
        env=full_env,
        timeout=DEFAULT_TIMEOUT if timeout is None else float(timeout),
        grace=float(grace),
        max_output_chars=max_output_chars,
        spill_dir=None if spill_dir is None else Path(spill_dir),
        run_id=run_id,
    )


def _argument_problem(
    command: object, timeout: float | None, grace: float, max_output_chars: int
) -> str | None:
    if not isinstance(command, str):
        return f"'command' must be a string, got {type(command).__name__}"
    if "\0" in command:
        return "'command' contains NUL bytes"
    if timeout is not None and not timeout > 0:
        return f"'timeout' must be a positive number of seconds, got {timeout!r}"
    if not (grace >= 0 and math.isfinite(grace)):
        return f"'grace' must be a finite number of seconds >= 0, got {grace!r}"
    if max_output_chars < 0:
        return f"'max_output_chars' must be >= 0, got {max_output_chars!r}"
    return None


def _process_cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # our own directory was removed: the shell starts there all the same
        return None


def _spawn(plan: Plan) -> tuple[Child, tuple[int, int], launch.CwdChannel] | CommandResult:
    """Start the shell with its output on two fresh pipes; a CommandResult if it cannot start.

    Running out of descriptors for the pipes is a spawn failure too (`resource`), not an error.
    """
    target = plan.target
    fds: list[int] = []
    channel = launch.CwdChannel(plan.run_id, needed=False)
    try:
        channel = launch.CwdChannel(plan.run_id, needed=bool(plan.enter_dir) or plan.track_cwd)
        out_read, out_write = os.pipe()
        fds += (out_read, out_write)
        err_read, err_write = os.pipe()
        fds += (err_read, err_write)
        argv = launch.argv(target.shell, target.command, channel.path, plan.enter_dir,
                           plan.track_cwd)
        pid = os.posix_spawn(
            plan.executable, argv, plan.env, file_actions=_file_actions(out_write, err_write),
            setsid=True, setsigdef=_DEFAULT_SIGNALS,
        )
    except OSError as exc:
        _close(*fds)
        channel.close()
        return spawn_error_result(exc, target)
    except (ValueError, TypeError) as exc:  # NUL or '=' in the environment, a non-str value
        _close(*fds)
        channel.close()
        return args_error(f"cannot pass the environment to the shell: {exc}", target.command)
    _close(out_write, err_write)
    os.set_blocking(out_read, False)
    os.set_blocking(err_read, False)
    return Child(pid), (out_read, err_read), channel


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


def _close_inherited() -> list[tuple[int, int]]:
    """Close actions for inheritable descriptors above 2 (what `subprocess` does by default).

    Python opens everything non-inheritable, so this list is almost always empty; a C library
    that opened a descriptor without O_CLOEXEC is the reason to look.
    """
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    actions = []
    for name in names:
        fd = int(name)
        with contextlib.suppress(OSError):  # the descriptor listdir itself used is gone
            if fd > 2 and os.get_inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
    return actions


_resolved: dict[tuple[str, str | None], str] = {}


def _resolve(shell: str, path: str | None) -> str:
    """The shell's absolute path, looked up in `path` once (names with a slash are used as is).

    A name that is not found is returned unchanged, so the spawn fails with the real ENOENT;
    that answer is not remembered, so a shell installed later is found.
    """
    if "/" in shell:
        return shell
    key = (shell, path)
    found = _resolved.get(key)
    if found is None:
        found = shutil.which(shell, path=path)
        if found is None:
            return shell
        if len(_resolved) >= 64:
            _resolved.clear()
        _resolved[key] = found
    return found


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)
