"""Running one tool call for the graph: validate, consult the journal, run, record.

The sync and async paths share `_begin` / `_finish`; only the line that runs the command differs.

What the runs need from the file system is looked up once, by `Executor.setup`: the workdir and
this process's directory, the shell's path, the spill directory, and — with `config.sandbox` —
whether bubblewrap works here and the sandbox itself. So the async path makes no blocking call
on the event loop. `setup` runs at construction, unless the Executor is built on a running
event loop (a LangGraph server calls graph factories there): then the first command runs it in a
thread. The sandbox's task-limit cgroup is removed by `close()`, which runs by itself when the
Executor is garbage-collected or the interpreter exits; `collect_executors` lets a session close
the Executors it built when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from langchain_core.messages import ToolCall

from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import ConfigError
from bashgraph.tools.bash_tool import BASH_TOOL_NAME, validate_bash_args
from bashgraph.tools.capture import default_spill_dir
from bashgraph.tools.handover import in_thread
from bashgraph.tools.live import OutputCallback
from bashgraph.tools.process import arun_command, run_command
from bashgraph.tools.redact import Redactor
from bashgraph.tools.results import CommandResult, SpawnErrorKind, args_error, spawn_failure
from bashgraph.tools.sandbox import BwrapSandbox, sandbox_available

_T = TypeVar("_T")


@dataclass(frozen=True)
class JournalEntry:
    """What the journal knows of one call: when it started and, if it finished, its result."""

    command: str
    started_at: float
    result: CommandResult | None = None


class Journal(Protocol):
    """Durable record of commands, so a resume never runs one twice (see graph/journal.py)."""

    def lookup(self, thread_id: str, call_id: str, attempt: int) -> JournalEntry | None: ...

    def start(self, thread_id: str, call_id: str, attempt: int, command: str) -> None: ...

    def finish(self, thread_id: str, call_id: str, attempt: int, result: CommandResult) -> None: ...


@dataclass(frozen=True)
class CallContext:
    """Where a call runs: thread, the model reply that asked for it, and the attempt number.

    Some OpenAI-compatible servers reuse tool-call ids (`call_0` in every reply), so a call is
    known by its reply's message id *and* its tool-call id.
    """

    thread_id: str | None
    message_id: str = ""
    attempt: int = 0

    def key(self, call_id: str) -> str:
        return f"{self.message_id}/{call_id}"


@dataclass(frozen=True)
class _Plan:
    call_id: str
    ctx: CallContext
    command: str
    timeout: float | None
    cwd: str | None
    journal: Journal | None


@dataclass(frozen=True)
class Setup:
    """What every run of one Executor shares, looked up once (see the module docstring)."""

    workdir: str
    process_cwd: str | None  # this process's directory (async runs: run there, no `cd` needed)
    shell: str  # absolute when found on PATH; else as configured (the spawn then says why)
    spill_dir: str
    sandbox: BwrapSandbox | None


class Executor:
    """Runs the model's tool calls with the agent's settings. One per compiled graph."""

    def __init__(self, config: AgentConfig, journal: Journal | None = None) -> None:
        self.config = config
        self.journal = journal
        # Secrets are those of this process's environment: what a command could print.
        self.redactor = Redactor.from_environ(os.environ) if config.redact else None
        self._setup: Setup | None = None
        self._setup_lock = threading.Lock()
        self._close_sandbox: weakref.finalize[Any, Any] | None = None
        built = _collecting.get()
        if built is not None:
            built.append(self)
        if not _event_loop_running():
            self.setup()

    def setup(self) -> Setup:
        """Look up what runs need (blocking; once). ConfigError when the sandbox cannot work."""
        with self._setup_lock:
            if self._setup is None:
                self._setup = self._look_up()
                if self._setup.sandbox is not None:
                    self._close_sandbox = weakref.finalize(self, _close_quietly,
                                                           self._setup.sandbox)
            return self._setup

    def close(self) -> None:
        """Remove the sandbox's task-limit cgroup (if any); safe to call more than once."""
        if self._close_sandbox is not None:
            self._close_sandbox()

    def run(self, call: ToolCall, cwd: str | None, ctx: CallContext,
            on_output: OutputCallback | None = None) -> CommandResult:
        """Run one call; `on_output(stream, text)` gets its live output (redacted)."""
        setup = self.setup()  # before the journal: a set-up error must not look like a run
        plan = self._begin(call, cwd, ctx, self._journal_for(ctx))
        if isinstance(plan, CommandResult):
            return plan
        # Sync: the runner asks os.getcwd() itself, so a later os.chdir is always seen.
        kwargs = self._run_kwargs(plan, setup, on_output, process_cwd=None)
        return self._finish(plan, run_command(**kwargs))

    async def arun(self, call: ToolCall, cwd: str | None, ctx: CallContext,
                   on_output: OutputCallback | None = None) -> CommandResult:
        """`run` for asyncio: no blocking call on the event loop (set-up runs in a thread)."""
        setup = self._setup
        if setup is None:
            setup = await in_thread(asyncio.get_running_loop(), self.setup)
        journal = self._journal_for(ctx)
        # A server's store may not be called from its event loop (its sync calls hop onto that
        # loop), and its I/O must not block the loop: such a journal is used from a thread.
        off_loop = journal is not None and _in_a_store(journal)
        begin = functools.partial(self._begin, call, cwd, ctx, journal)
        plan = await _in_thread(begin) if off_loop else begin()
        if isinstance(plan, CommandResult):
            return plan
        kwargs = self._run_kwargs(plan, setup, on_output, process_cwd=setup.process_cwd)
        finish = functools.partial(self._finish, plan, await arun_command(**kwargs))
        return await _in_thread(finish) if off_loop else finish()

    def _look_up(self) -> Setup:
        config = self.config
        workdir = os.path.abspath(config.workdir)
        sandbox = None
        if config.sandbox:
            problem = _sandbox_problem()
            if problem:
                raise ConfigError(f"the sandbox is on, but {problem}")
            sandbox = BwrapSandbox(workdir, allow_network=config.allow_network,
                                   bwrap=shutil.which("bwrap") or "bwrap")
        try:
            here: str | None = os.getcwd()
        except OSError:
            here = None
        return Setup(
            workdir=workdir, process_cwd=here,
            shell=shutil.which(config.shell) or config.shell,
            spill_dir=config.spill_dir or str(default_spill_dir()),
            sandbox=sandbox,
        )

    def _begin(self, call: ToolCall, cwd: str | None, ctx: CallContext,
               journal: Journal | None) -> _Plan | CommandResult:
        """Validate and journal a call; a CommandResult means "answer this, run nothing"."""
        if call["name"] != BASH_TOOL_NAME:
            return args_error(f"unknown tool {call['name']!r}; the only tool is {BASH_TOOL_NAME!r}")
        args = validate_bash_args(call["args"], max_timeout=self.config.max_timeout_s)
        if isinstance(args, CommandResult):
            return args
        call_id = ctx.key(call.get("id") or "")
        if journal is None or ctx.thread_id is None:
            return _Plan(call_id, ctx, args.command, args.timeout, cwd, None)
        entry = journal.lookup(ctx.thread_id, call_id, ctx.attempt)
        if entry is not None and entry.command != args.command:
            # The call was changed after it was journaled (a state edit, a replay): the row
            # holds another command's result. The new command gets a row of its own.
            call_id = f"{call_id}#{hashlib.sha256(args.command.encode()).hexdigest()[:16]}"
            entry = journal.lookup(ctx.thread_id, call_id, ctx.attempt)
        if entry is not None:
            return _recorded_result(entry)
        journal.start(ctx.thread_id, call_id, ctx.attempt, args.command)
        return _Plan(call_id, ctx, args.command, args.timeout, cwd, journal)

    def _journal_for(self, ctx: CallContext) -> Journal | None:
        """The session's journal; else, inside a run that has a LangGraph store (the server
        gives every run one), a journal kept in that store (graph/store_journal.py)."""
        if self.journal is not None or ctx.thread_id is None:
            return self.journal
        from bashgraph.graph.store_journal import StoreJournal, store_of  # imports this module

        store = store_of()
        return StoreJournal(store) if store is not None else None

    def _run_kwargs(self, plan: _Plan, setup: Setup, on_output: OutputCallback | None,
                    process_cwd: str | None) -> dict[str, Any]:
        config = self.config
        if on_output is not None and self.redactor is not None:
            on_output = functools.partial(_redacted, self.redactor, on_output)
        return {
            "command": plan.command,
            "cwd": plan.cwd or setup.workdir,
            "timeout": plan.timeout or config.timeout_s,
            "shell": setup.shell,
            "max_output_chars": config.max_output_chars,
            "grace": config.grace_s,
            "pass_env": config.pass_env,
            "spill_dir": setup.spill_dir,
            "sandbox": setup.sandbox,
            "on_output": on_output,
            "process_cwd": process_cwd,
        }

    def _finish(self, plan: _Plan, result: CommandResult) -> CommandResult:
        # Redacted before the journal, the checkpoint or the model ever holds the text.
        if self.redactor is not None:
            result = self.redactor.redact_result(result)
        if plan.journal is not None and plan.ctx.thread_id is not None:
            plan.journal.finish(plan.ctx.thread_id, plan.call_id, plan.ctx.attempt, result)
        return result


async def _in_thread(func: Callable[[], _T]) -> _T:
    return await in_thread(asyncio.get_running_loop(), func)


def _in_a_store(journal: Journal) -> bool:
    from bashgraph.graph.store_journal import StoreJournal  # imports this module

    return isinstance(journal, StoreJournal)


def _recorded_result(entry: JournalEntry) -> CommandResult:
    """The result the journal holds, or `interrupted` for a call that never finished."""
    if entry.result is not None:
        return entry.result
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started_at))
    return spawn_failure(
        SpawnErrorKind.INTERRUPTED, entry.command,
        f"started at {started} but the run stopped before it finished; it may have had "
        "side effects, so it was not run again",
    )


_collecting: ContextVar[list[Executor] | None] = ContextVar("bashgraph_executors", default=None)


@contextmanager
def collect_executors() -> Iterator[list[Executor]]:
    """Every Executor built inside the block, so their owner can `close()` them later."""
    built: list[Executor] = []
    token = _collecting.set(built)
    try:
        yield built
    finally:
        _collecting.reset(token)


def _redacted(redactor: Redactor, callback: OutputCallback, stream: str, text: str) -> None:
    callback(stream, redactor.redact(text))


@functools.cache
def _sandbox_problem() -> str | None:
    """Why bubblewrap cannot sandbox here (asked once per process: it starts bwrap)."""
    return sandbox_available()


def _event_loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _close_quietly(sandbox: BwrapSandbox) -> None:
    """Remove the cgroup; from a thread of its own when called on an event loop's thread (a
    garbage collection there must not wait for the last sandboxed processes to leave it)."""
    if _event_loop_running():
        threading.Thread(target=_close_ignoring_errors, args=(sandbox,), daemon=True).start()
    else:
        _close_ignoring_errors(sandbox)


def _close_ignoring_errors(sandbox: BwrapSandbox) -> None:
    with contextlib.suppress(OSError):  # a cgroup we cannot remove stays; nothing else to do
        sandbox.close()
