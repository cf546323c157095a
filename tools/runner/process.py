"""Run one shell command and say exactly how it ended: `run_command` and `arun_command`.

Neither raises for anything the command does: a missing shell or working directory, a non-zero
exit, a timeout, a signal — each comes back as a `CommandResult` (see `results.py`).

How a command runs:

* What it runs with — the shell, the limits, the environment, the sandbox — is a `RunOptions`
  (`options`), given whole (`options=`) or field by field as keywords. Both entry points, and
  background jobs, decide everything before the spawn in one function, `plan_command`; both
  entry points are one body up to the started command (`_launched`, driven two ways: twin.py).
* `[shell, "-c", preamble + command, "bashgraph", ...]` (see `launch`) with stdin from
  /dev/null, in a new session and process group, started with `os.posix_spawn` (see `spawn`).
  `shell` must be POSIX-compatible (bash, dash, busybox sh). The preamble enters `cwd` and, when
  the command could change directory, records where the shell ended (so a later call can
  continue where `cd` left off; `final_cwd` is None when the shell was killed). A command that
  needs neither runs as plain `shell -c command`.
* With `sandbox`, the shell runs inside it (see `spawn` and `sandbox`): a sandbox that could not
  start the command is `spawn_error` (kind `sandbox`, with bubblewrap's own message); what the
  sandbox forbids (writing outside the workdir, the network) makes the command fail on its own:
  an ordinary `exit_error` with the evidence in stderr. A command killed by a signal inside the
  sandbox exits 128+n there, so it is an `exit_error` too (the hint names the signal).
* The environment is inherited minus secrets (`options.scrub_env`), plus the caller's
  `env`, plus `BASHGRAPH_RUN_ID`, the marker `reaper` uses to find escaped processes.
* Output: stdout and stderr are captured apart, in bounded memory (`capture`); `on_output`
  receives the recent text while the command runs (`live`).
* Timeout: SIGTERM to the group and to everything found carrying the marker, `grace` seconds,
  then SIGKILL; the call returns within timeout + grace + 0.5 s even when a grandchild holds the
  pipes. Background processes that still hold the pipes after the shell exited get 0.5 s, then
  the same treatment; background processes that do not hold them are left alone (see
  `supervisor`).

The sync form waits with `poll(2)` on the pipes and a pidfd of the shell. The async form puts the
same descriptors in a selector of their own and registers that one with the event loop; it makes
no blocking call on the loop's thread. The few steps that may block — writing a spill file, the
`/proc` scans and waits that stop a process tree, looking up a shell not seen before — run in a
thread of its own, started only when one is needed (`drive`): an ordinary command starts none.
It does not use `asyncio.create_subprocess_exec`: on Python 3.11 that waits for each child in a
thread of its own (`ThreadedChildWatcher`) and costs more per call (see docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar, Unpack

from bashgraph.tools.results import CommandResult, args_error
from bashgraph.tools.runner import launch, spawn, twin
from bashgraph.tools.runner.classify import SpawnTarget, spawn_error_result
from bashgraph.tools.runner.live import OutputCallback, OutputRelay, guarded
from bashgraph.tools.runner.options import (
    DEFAULT_GRACE,
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_OPTIONS,
    DEFAULT_TIMEOUT,
    PathArg,
    RunOptionFields,
    RunOptions,
    argument_problem,
    build_env,
    merged,
)
from bashgraph.tools.runner.reaper import MARKER_VAR
from bashgraph.tools.runner.spawn import Plan
from bashgraph.tools.runner.supervisor import Supervisor

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT",
    "RunOptions",
    "arun_command",
    "plan_command",
    "run_command",
]


def run_command(
    command: str,
    *,
    cwd: PathArg | None = None,
    on_output: OutputCallback | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    **overrides: Unpack[RunOptionFields],
) -> CommandResult:
    """Run `command` with `shell -c` in `cwd` and return how it ended; never raises for its failure.

    `options`: how it runs (`RunOptions`: the timeout, the environment, the output cap, the
    sandbox, ...); any of its fields given as a keyword (`timeout=5`) replaces that field for
    this call. `on_output(stream_name, text)`: the recent output while the command runs, made
    safe like the stored text, about ten times a second at most (see `live`); an exception it
    raises is logged and ends only the live output.
    """
    live = guarded(on_output) if on_output else None
    launched = twin.run(_launched(command, cwd, options, overrides, ask_cwd=True, watch=_PollSet, live=live))
    return launched if isinstance(launched, CommandResult) else _polled(*launched)


async def arun_command(
    command: str,
    *,
    cwd: PathArg | None = None,
    on_output: OutputCallback | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    **overrides: Unpack[RunOptionFields],
) -> CommandResult:
    """`run_command` for asyncio: same arguments, same results, no blocking call on the loop.

    `on_output` is called on the event loop's thread. With an absolute `cwd` it never asks
    `os.getcwd()`: without `process_cwd` the preamble enters `cwd` (a `cd`, ~0.1 ms); with
    `cwd` None or relative it must ask. A shell name seen for the first time is looked up on
    PATH in a thread. Cancelling it kills the command's process tree before the cancellation
    propagates.
    """
    relay = OutputRelay(guarded(on_output)) if on_output else None
    must_ask = cwd is None or not os.path.isabs(cwd)
    launched = await twin.arun(_launched(command, cwd, options, overrides, ask_cwd=must_ask,
                                         watch=twin.ReadySet, live=relay))
    return launched if isinstance(launched, CommandResult) else await _looped(*launched, relay)


class _Watcher(Protocol):
    """The descriptors a run waits on: `_PollSet` for the sync form, `twin.ReadySet` for the
    async one."""

    def register(self, fd: int) -> None: ...
    def unregister(self, fd: int) -> None: ...
    def close(self) -> None: ...


_W = TypeVar("_W", bound=_Watcher)


def _launched(
    command: str, cwd: PathArg | None, options: RunOptions, overrides: RunOptionFields, *,
    ask_cwd: bool, watch: Callable[[], _W], live: OutputCallback | None,
) -> twin.Steps[tuple[Supervisor, _W] | CommandResult]:
    """Both forms up to a started command: its supervisor and the descriptors it watches, or
    the result of a command that never started. The one step that differs: looking up a shell
    not seen before (on PATH, in a thread in the async form)."""
    started = time.monotonic()
    if overrides:
        options = merged(options, overrides)
    plan = plan_command(command, cwd, options, ask_cwd=ask_cwd)
    if isinstance(plan, CommandResult):
        return plan
    if not plan.executable:  # a shell name not looked up yet: once per name and PATH
        executable = yield twin.blocking(spawn.resolve, plan.target.shell, plan.env.get("PATH"))
        plan = plan._replace(executable=executable)
    try:
        watcher = watch()  # before the spawn: failing here leaves nothing running
    except OSError as exc:
        return spawn_error_result(exc, plan.target)
    spawned = spawn.spawn(plan)
    if isinstance(spawned, CommandResult):
        watcher.close()
        return spawned
    sup = Supervisor(plan, spawned, started=started, forget=watcher.unregister, on_output=live)
    try:
        for fd in sup.watched():
            watcher.register(fd)
    except BaseException:
        sup.abort()
        watcher.close()
        raise
    return sup, watcher


def _polled(sup: Supervisor, polls: _PollSet) -> CommandResult:
    """The sync form's run: `poll(2)` until the command is done."""
    try:
        twin.poll_loop(sup, polls.poller)
        return sup.result()
    finally:
        sup.abort()


async def _looped(sup: Supervisor, inner: twin.ReadySet, relay: OutputRelay | None) -> CommandResult:
    """The async form's run: on the event loop, then in a thread when a step may block."""
    loop = asyncio.get_running_loop()
    try:
        finished_here = await twin.LoopDriver(loop, inner, sup).run()
    except asyncio.CancelledError:
        await twin.abort_in_thread(loop, sup)
        raise
    except BaseException:
        sup.abort()
        raise
    finally:
        inner.close()
    if finished_here and not sup.result_needs_thread():
        return sup.result()
    return await twin.finish_in_thread(loop, sup, relay)


class _PollSet:
    """The sync form's descriptors: a `poll(2)` set."""

    __slots__ = ("poller",)

    def __init__(self) -> None:
        self.poller = select.poll()

    def register(self, fd: int) -> None:
        self.poller.register(fd, select.POLLIN)

    def unregister(self, fd: int) -> None:
        try:  # three times per command: a bare `try` costs less than `contextlib.suppress`
            self.poller.unregister(fd)
        except (KeyError, OSError, ValueError):
            return

    def close(self) -> None:
        """Nothing to close: a poll object holds no descriptor."""


def plan_command(
    command: str, cwd: PathArg | None, options: RunOptions, *, ask_cwd: bool = True
) -> Plan | CommandResult:
    """Check the arguments and decide everything the spawn needs: the one plan of every path
    (`run_command`, `arun_command`, a background job); an `args_error` for a bad argument.

    `ask_cwd`: ask `os.getcwd()` when `options.process_cwd` is None. The async form asks only
    when it must (`cwd` None or relative); otherwise the preamble enters `cwd` whatever our
    directory. `Plan.executable` is "" when the shell still has to be looked up on PATH.
    """
    problem = argument_problem(command, options)
    if problem:
        return args_error(problem, command if isinstance(command, str) else "")
    run_id = os.urandom(16).hex()
    full_env = build_env(extra=options.env, pass_env=options.pass_env,
                         inherit_env=options.inherit_env)
    inherited = full_env.get(MARKER_VAR)
    # Keep an outer run's marker too, so a bashgraph running inside bashgraph stays findable.
    full_env[MARKER_VAR] = f"{inherited}:{run_id}" if inherited else run_id
    here = options.process_cwd
    if here is None and ask_cwd:
        here = _process_cwd()
    given_cwd = None if cwd is None else _absolute(cwd, here)
    start_dir = given_cwd or here
    if start_dir:
        # The shell takes $PWD from here when it names its directory, so `$PWD` (reported back
        # as final_cwd) is exactly start_dir even when no `cd` is needed.
        full_env["PWD"] = start_dir
    sandbox, shell = options.sandbox, options.shell
    # A sandbox enters the start directory itself, and looks the shell up on its own PATH.
    enter = "" if sandbox is not None or start_dir == here else start_dir or ""
    executable = shell if sandbox is not None else spawn.known_executable(
        shell, full_env.get("PATH"))
    spill_dir = options.spill_dir
    return Plan(
        target=SpawnTarget(command, shell, given_cwd, start_dir),
        enter_dir=enter,
        track_cwd=launch.may_change_directory(command, shell, full_env),
        executable=executable or "",
        env=full_env,
        timeout=DEFAULT_TIMEOUT if options.timeout is None else float(options.timeout),
        grace=float(options.grace),
        max_output_chars=options.max_output_chars,
        spill_dir=None if spill_dir is None else Path(spill_dir),
        run_id=run_id,
        sandbox=sandbox,
    )


def _absolute(cwd: PathArg, here: str | None) -> str:
    """`cwd` made absolute against `here` (normalised, like `os.path.abspath`)."""
    path = os.fspath(cwd)
    if os.path.isabs(path) or here is None:
        return os.path.abspath(path)  # no getcwd for an absolute path
    return os.path.normpath(os.path.join(here, path))


def _process_cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # our own directory was removed: the shell starts there all the same
        return None
