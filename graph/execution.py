"""Running one tool call for the graph: validate, consult the journal, run, record.

The sync and async paths share `_begin` / `_finish`; only the line that runs the command differs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import ToolCall

from bashgraph.graph.config import AgentConfig
from bashgraph.tools.bash import BASH_TOOL_NAME, validate_bash_args
from bashgraph.tools.process import arun_command, run_command
from bashgraph.tools.redact import Redactor
from bashgraph.tools.results import CommandResult, SpawnErrorKind, args_error, spawn_failure


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


@dataclass
class _Plan:
    call_id: str
    ctx: CallContext
    kwargs: dict[str, Any] = field(default_factory=dict)


class Executor:
    """Runs the model's tool calls with the agent's settings. One per compiled graph."""

    def __init__(self, config: AgentConfig, journal: Journal | None = None) -> None:
        self.config = config
        self.journal = journal
        self.workdir = os.path.abspath(config.workdir)
        # Secrets are those of this process's environment: what a command could print.
        self.redactor = Redactor.from_environ(os.environ) if config.redact else None

    def run(self, call: ToolCall, cwd: str | None, ctx: CallContext) -> CommandResult:
        plan = self._begin(call, cwd, ctx)
        if isinstance(plan, CommandResult):
            return plan
        return self._finish(plan, run_command(**plan.kwargs))

    async def arun(self, call: ToolCall, cwd: str | None, ctx: CallContext) -> CommandResult:
        plan = self._begin(call, cwd, ctx)
        if isinstance(plan, CommandResult):
            return plan
        return self._finish(plan, await arun_command(**plan.kwargs))

    def _begin(self, call: ToolCall, cwd: str | None, ctx: CallContext) -> _Plan | CommandResult:
        """Validate and journal a call; a CommandResult means "answer this, run nothing"."""
        if call["name"] != BASH_TOOL_NAME:
            return args_error(f"unknown tool {call['name']!r}; the only tool is {BASH_TOOL_NAME!r}")
        args = validate_bash_args(call["args"], max_timeout=self.config.max_timeout_s)
        if isinstance(args, CommandResult):
            return args
        call_id = ctx.key(call.get("id") or "")
        known = self._recorded(call_id, ctx)
        if known is not None:
            return known
        if self.journal is not None and ctx.thread_id is not None:
            self.journal.start(ctx.thread_id, call_id, ctx.attempt, args.command)
        return _Plan(call_id, ctx, self._run_kwargs(args.command, args.timeout, cwd))

    def _recorded(self, call_id: str, ctx: CallContext) -> CommandResult | None:
        """A result the journal already holds, or `interrupted` for a call that never finished."""
        if self.journal is None or ctx.thread_id is None:
            return None
        entry = self.journal.lookup(ctx.thread_id, call_id, ctx.attempt)
        if entry is None:
            return None
        if entry.result is not None:
            return entry.result
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started_at))
        return spawn_failure(
            SpawnErrorKind.INTERRUPTED, entry.command,
            f"started at {started} but the run stopped before it finished; it may have had "
            "side effects, so it was not run again",
        )

    def _run_kwargs(self, command: str, timeout: float | None, cwd: str | None) -> dict[str, Any]:
        config = self.config
        return {
            "command": command,
            "cwd": cwd or self.workdir,
            "timeout": timeout or config.timeout_s,
            "shell": config.shell,
            "max_output_chars": config.max_output_chars,
            "grace": config.grace_s,
            "pass_env": config.pass_env,
            "spill_dir": config.spill_dir,
        }

    def _finish(self, plan: _Plan, result: CommandResult) -> CommandResult:
        # Redacted before the journal, the checkpoint or the model ever holds the text.
        if self.redactor is not None:
            result = self.redactor.redact_result(result)
        if self.journal is not None and plan.ctx.thread_id is not None:
            self.journal.finish(plan.ctx.thread_id, plan.call_id, plan.ctx.attempt, result)
        return result
