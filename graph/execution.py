"""Running one tool call for the graph: consult the journal, run, record.

The tools' call runner (`bashgraph.tools.CallRunner`) validates the call, runs it and redacts
what it printed; around it, this journals the call (so a resume never runs it twice), hands
background calls and the job tools to the run's jobs (graph/jobs.py), and answers a call the
journal shows was cut off. `run` and `arun` are one body
(`_run_steps`, driven two ways: tools/runner/twin.py); only the calls that may block differ.

What the runs need from the file system is looked up once, by `Executor.setup`: the workdir and
this process's directory, the shell's path, the spill directory, and — with `config.safety.sandbox` —
whether bubblewrap works here and the sandbox itself. With the config's limits they make the
`RunOptions` every command of the Executor runs with (built once; a call adds only its command,
directory, time limit and journal marker). So the async path makes no blocking call on the
event loop. `setup` runs at construction, unless the Executor is built on a running
event loop (a LangGraph server calls graph factories there): then the first command runs it in a
thread. The sandbox's task-limit cgroup is removed by `close()`, which runs by itself when the
Executor is garbage-collected or the interpreter exits; `collect_executors` lets a session close
the Executors it built when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import ToolCall

from bashgraph.graph.call_journal import (
    CALL_MARKER_VAR,
    CallContext,
    Journal,
    Partial,
    PartialOutput,
    interrupted_result,
    load_partial,
    record_path,
    recording,
    save_partial,
    sweep_cut_off,
    unrecorded_result,
)
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.jobs import Answer, RunJobs
from bashgraph.graph.run_setup import Setup, look_up
from bashgraph.graph.store.held_locks import check_held
from bashgraph.graph.store.journal_rows import JournalEntry
from bashgraph.graph.store.store_journal import StoreJournal, store_of
from bashgraph.tools import (
    BASH_TOOL_NAME,
    JOB_TOOL_NAMES,
    BashArgs,
    CallRunner,
    CommandResult,
    args_error,
    validate_job_args,
)
from bashgraph.tools.jobs import JobRequest
from bashgraph.tools.runner import OutputCallback, in_thread, to_its_end, twin
from bashgraph.tools.safety import BwrapSandbox, Redactor

_T = TypeVar("_T")


@dataclass(frozen=True)
class _Plan:
    call_id: str
    ctx: CallContext
    args: BashArgs
    cwd: str | None
    marker: str


#: Receives the stream events a call produced besides its live output (`job_start`, ...).
EventCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class _CutOff:
    """A call the journal shows started and never finished: its runner died."""

    entry: JournalEntry


class Executor:
    """Runs the model's tool calls with the agent's settings. One per compiled graph."""

    def __init__(self, config: AgentConfig, journal: Journal | None = None) -> None:
        self.config = config
        self.journal = journal
        # Secrets are those of this process's environment: what a command could print.
        redactor = Redactor.from_environ(os.environ) if config.safety.redact else None
        self.calls = CallRunner(redactor=redactor, max_timeout=config.execution.max_timeout_s, background=True)
        self._setup: Setup | None = None
        self._setup_lock = threading.Lock()
        self._close_sandbox: weakref.finalize[Any, Any] | None = None
        self.jobs = RunJobs.for_journal(config.budgets.max_jobs, config.execution.options.grace, journal)
        built = _collecting.get()
        if built is not None:
            built.append(self)
        if not _event_loop_running():
            self.setup()

    def setup(self) -> Setup:
        """Look up what runs need (blocking; once). ConfigError when the sandbox cannot work."""
        with self._setup_lock:
            if self._setup is None:
                self._setup = look_up(self.config)
                if self._setup.sandbox is not None:
                    self._close_sandbox = weakref.finalize(self, _close_quietly,
                                                           self._setup.sandbox)
            return self._setup

    def close(self) -> None:
        """Stop every background job and remove the sandbox's task-limit cgroup (if any); safe
        to call more than once."""
        self.jobs.close()
        if self._close_sandbox is not None:
            self._close_sandbox()

    def run(self, call: ToolCall, cwd: str | None, ctx: CallContext,
            on_output: OutputCallback | None = None,
            on_event: EventCallback | None = None) -> CommandResult:
        """Run one call; `on_output(stream, text)` gets its live output (redacted), `on_event`
        the job events it produced."""
        return twin.run(self._run_steps(call, cwd, ctx, on_output, on_event, on_loop=False))

    async def arun(self, call: ToolCall, cwd: str | None, ctx: CallContext,
                   on_output: OutputCallback | None = None,
                   on_event: EventCallback | None = None) -> CommandResult:
        """`run` for asyncio: no blocking call on the event loop (set-up runs in a thread, and
        so does every job operation; their events are emitted back on the loop's thread)."""
        return await twin.arun(self._run_steps(call, cwd, ctx, on_output, on_event, on_loop=True))

    def _run_steps(self, call: ToolCall, cwd: str | None, ctx: CallContext, on_output: OutputCallback | None,
                   on_event: EventCallback | None, *, on_loop: bool) -> twin.Steps[CommandResult]:
        """`run` and `arun`: each step that may block runs inline, or in a thread (tools/runner/twin.py)."""
        setup = self._setup
        if setup is None:  # before the journal: a set-up error must not look like a run
            setup = yield twin.blocking(self.setup)
        ctx = self._with_journal(ctx)
        if self.jobs.needs_recovery(ctx.thread_id):
            yield twin.blocking(self.jobs.recover, ctx.thread_id)
        if call["name"] in JOB_TOOL_NAMES:
            return self._emitted((yield twin.blocking(self._job_tool, call, ctx)), on_event)
        plan = yield self._journal_step(ctx, self._begin, call, cwd, ctx)
        if isinstance(plan, _CutOff):
            swept = yield twin.blocking(sweep_cut_off, plan.entry, self.config.execution.options.grace)
            recorded = yield twin.blocking(self._partial_of, setup, plan.entry)
            return interrupted_result(plan.entry, swept, cwd, recorded)
        if isinstance(plan, CommandResult):
            return plan
        options = setup.loop_options if on_loop else setup.options
        if plan.args.background:
            request = JobRequest(plan.args.command, plan.cwd or setup.workdir, options)
            # The event names the call as the call's other events do (not by its journal key).
            answer = yield twin.blocking(self.jobs.start, request, ctx.thread_id, call.get("id") or "")
            result = self.calls.redact(self._emitted(answer, on_event))
        else:
            command = {"options": options, "cwd": plan.cwd or setup.workdir, "env": {CALL_MARKER_VAR: plan.marker}}
            result = yield twin.call(self._run_command, self._arun_command, plan, setup, on_output, command)
        finished: CommandResult = yield self._journal_step(ctx, self._finish, plan, result)
        return finished

    def _run_command(self, plan: _Plan, setup: Setup, on_output: OutputCallback | None,
                     command: dict[str, Any]) -> CommandResult:
        return self.calls.run(plan.args, on_output=on_output, **command)

    async def _arun_command(self, plan: _Plan, setup: Setup, on_output: OutputCallback | None,
                            command: dict[str, Any]) -> CommandResult:
        """The call runner's `arun`; cancelled, what the command printed so far is saved for a
        resume to report (with a journal and a spill directory)."""
        seen = PartialOutput() if plan.ctx.journal is not None else None
        try:
            # Redacted before `seen` keeps it, as before anyone else does.
            return await self.calls.arun(plan.args, on_output=recording(seen, on_output), **command)
        except asyncio.CancelledError:
            if seen is not None and setup.options.spill_dir:
                path = record_path(setup.options.spill_dir, plan.marker)
                await to_its_end(in_thread(asyncio.get_running_loop(),
                                           functools.partial(save_partial, path, seen.stopped_now())))
            raise

    def _journal_step(self, ctx: CallContext, step: Callable[..., _T], *args: Any) -> twin.Step[_T]:
        """A step that writes the journal: inline in `run`; in `arun`, see `_journaled`."""
        bound = functools.partial(step, *args)
        return twin.Step(bound, functools.partial(self._journaled, ctx, bound))

    async def _journaled(self, ctx: CallContext, step: Callable[[], _T]) -> _T:
        """Run a step that writes the journal: in a thread when there is one, never on the loop.

        An async saver on the same SQLite file holds its write lock across awaits, so a journal
        write blocking the loop would wait for a lock only the loop can release ("database is
        locked" once the busy timeout ends), and would stall every other run meanwhile. A journal
        in a LangGraph server's store may not be called from the server's loop at all.
        """
        if ctx.journal is None:
            return step()
        return await in_thread(asyncio.get_running_loop(), step)

    @staticmethod
    def _partial_of(setup: Setup, entry: JournalEntry) -> Partial | None:
        """What a cancelled run of `entry` recorded on this host (blocking), if anything."""
        if entry.marker is None or not setup.options.spill_dir:
            return None
        return load_partial(record_path(setup.options.spill_dir, entry.marker))

    def _job_tool(self, call: ToolCall, ctx: CallContext) -> Answer:
        """`bash_output` / `bash_kill` (blocking), redacted like every result."""
        job_id = validate_job_args(call["args"])
        if isinstance(job_id, CommandResult):
            return Answer(job_id)
        answer = self.jobs.answer(call["name"], job_id, ctx.thread_id, self.config.execution.options.max_output_chars)
        answer.result = self.calls.redact(answer.result)
        return answer

    def _emitted(self, answer: Answer, on_event: EventCallback | None) -> CommandResult:
        """The answer's result, after its events went to `on_event` (job output redacted)."""
        if on_event is None:
            return answer.result
        for event in answer.events:
            if "text" in event:
                event = {**event, "text": self.calls.redact_text(event["text"])}  # noqa: PLW2901
            on_event(event)
        return answer.result

    def settle(self, call: ToolCall, cwd: str | None, ctx: CallContext) -> CommandResult | None:
        """What became of a call that was never answered, run nothing (blocking: a sweep may wait
        up to grace + 5 s): its journaled result, `interrupted` once what is left of its run is
        stopped, an args error, or None when it never started. With no journal to ask (and for a
        job tool, which is never journaled), it may have run: `interrupted`, saying so."""
        ctx = self._with_journal(ctx)
        if call["name"] in JOB_TOOL_NAMES:
            # Never journaled: it may have stopped the job, or read output no one will see again.
            args = call["args"] if isinstance(call["args"], dict) else {}
            return unrecorded_result(f"{call['name']} {args.get('job_id', '')}".rstrip(), cwd)
        found = self._recorded(call, ctx)
        if isinstance(found, _CutOff):
            return interrupted_result(found.entry, sweep_cut_off(found.entry, self.config.execution.options.grace), cwd)
        if isinstance(found, CommandResult):
            return found
        if ctx.journal is None or ctx.thread_id is None:
            return unrecorded_result(found[1].command, cwd)
        return None

    def settle_retry(self, call: ToolCall, cwd: str | None, ctx: CallContext) -> CommandResult | None:
        """`settle` for a retry (`ctx.attempt`) of a call already answered: None when the retry
        never started, or when there is no journal to say (the stored answer stands; a job tool
        is never journaled)."""
        ctx = self._with_journal(ctx)
        if ctx.journal is None or ctx.thread_id is None or call["name"] in JOB_TOOL_NAMES:
            return None
        return self.settle(call, cwd, ctx)

    def _begin(self, call: ToolCall, cwd: str | None,
               ctx: CallContext) -> _Plan | CommandResult | _CutOff:
        """Validate and journal a call; a CommandResult means "answer this, run nothing", a
        _CutOff "answer `interrupted` once what is left of its run is stopped"."""
        found = self._recorded(call, ctx)
        if not isinstance(found, tuple):
            return found
        call_id, args = found
        marker = os.urandom(16).hex()
        if ctx.journal is not None and ctx.thread_id is not None:
            check_held(ctx.thread_id)  # a lock lost meanwhile: another worker may run the thread
            ctx.journal.start(ctx.thread_id, call_id, ctx.attempt, args.command, marker)
        return _Plan(call_id, ctx, args, cwd, marker)

    def _recorded(self, call: ToolCall,
                  ctx: CallContext) -> CommandResult | _CutOff | tuple[str, BashArgs]:
        """Validate a call and read its journal row: an answer (args error or recorded result), a
        cut-off start, or (its row's key, its arguments) when it never started."""
        if call["name"] != BASH_TOOL_NAME:
            tools = ", ".join((BASH_TOOL_NAME, *JOB_TOOL_NAMES))
            return args_error(f"unknown tool {call['name']!r}; the tools are {tools}")
        args = self.calls.check(call["args"])
        if isinstance(args, CommandResult):
            return args
        call_id = ctx.key(call.get("id") or "")
        entry = self._entry(call_id, ctx)
        if entry is not None and entry.command != args.command:
            # The call was changed after it was journaled (a state edit, a replay): the row
            # holds another command's result. The new command gets a row of its own; what is
            # left of a cut-off original on this host is stopped first, as on any resume.
            if entry.result is None:
                sweep_cut_off(entry, self.config.execution.options.grace)
            call_id = f"{call_id}#{hashlib.sha256(args.command.encode()).hexdigest()[:16]}"
            entry = self._entry(call_id, ctx)
        if entry is not None:
            return entry.result if entry.result is not None else _CutOff(entry)
        return call_id, args

    def _entry(self, call_id: str, ctx: CallContext) -> JournalEntry | None:
        if ctx.journal is None or ctx.thread_id is None:
            return None
        return ctx.journal.lookup(ctx.thread_id, call_id, ctx.attempt)

    def _with_journal(self, ctx: CallContext) -> CallContext:
        """`ctx` with its journal: the session's; else, inside a run that has a LangGraph store
        (the server gives every run one), a journal kept in that store (graph/store/store_journal.py)."""
        if ctx.journal is not None or ctx.thread_id is None:
            return ctx
        if self.journal is not None:
            return dataclasses.replace(ctx, journal=self.journal)
        store = store_of()
        return dataclasses.replace(ctx, journal=StoreJournal(store)) if store is not None else ctx

    def _finish(self, plan: _Plan, result: CommandResult) -> CommandResult:
        """Journal the (redacted) result of a call that started."""
        if plan.ctx.journal is not None and plan.ctx.thread_id is not None:
            plan.ctx.journal.finish(plan.ctx.thread_id, plan.call_id, plan.ctx.attempt, result)
        return result


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
