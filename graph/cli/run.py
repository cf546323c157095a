"""`bashgraph run` and `bashgraph resume`: stream a thread, answer its questions, report the stop.

One event loop per command (see `signals` for Ctrl-C); the session is an AsyncSession, whose
cancelled run stops the running command (see `aopen_session`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StateSnapshot

from bashgraph.graph import AgentConfig, AsyncSession, ConfigError, StoreError, ThreadBusyError, aopen_session
from bashgraph.graph.cli import questions
from bashgraph.graph.cli.progress import Renderer, chunk_events, stop_events
from bashgraph.graph.cli.signals import SigintGuard
from bashgraph.graph.cli.status import OPTIONS_KEY, ResumeHint, Stop, options_to_store, stored_options
from bashgraph.graph.models import as_model_error, choose_model_name
from bashgraph.graph.store import locate
from bashgraph.tools.safety import one_line

STREAM_MODES = ("updates", "custom")
MODEL_NODE = "agent"
ESCALATE_NODE = "escalate"
_MODEL_FAILURES = (openai.APIError, json.JSONDecodeError, httpx.HTTPError)


@dataclass(frozen=True)
class Action:
    """What to stream next: new input, None (continue), or an answer (a Command)."""

    inputs: dict[str, Any] | Command[Any] | None = None
    checkpoint_id: str | None = None
    """Continue from this checkpoint instead of the latest (re-asking an escalation)."""
    ask_person: bool = False
    """Run with on_environment_error="ask": a person is answering, so the graph must ask."""


@dataclass(frozen=True)
class RunSettings:
    """Everything `run` and `resume` share."""

    db: str | None
    config: AgentConfig
    model: BaseChatModel
    renderer: Renderer
    hint: ResumeHint
    tokens: bool = False
    """Stream the model's words as they come (the terminal shows them; the client then streams)."""
    ask: Callable[[dict[str, Any]], Any] | None = None
    """Asks a person on the terminal; None when nobody can answer (pipe, --json)."""
    notice: str | None = None
    """Said on stderr once the thread is known to be runnable (which model is used, and why):
    a refusal (no such thread, busy) is said first and alone."""


# ----------------------------------------------------------------------------- entry points


def run_task(task: str, thread_id: str, settings: RunSettings) -> int:
    """Start `task` on `thread_id` (new, or finished and given a follow-up)."""

    async def first(session: AsyncSession) -> Action:
        snapshot = await session.astate(thread_id)
        if unfinished(snapshot):
            hint = settings.hint.merged(stored_options(snapshot.metadata))  # how it was run
            raise ConfigError(f"thread {thread_id} has not finished; continue it with: "
                              f"{hint.command(thread_id)}")
        return Action(inputs={"messages": [HumanMessage(task)]})

    return Driver(settings, thread_id, "run", task).execute(first)


def resume_thread(thread_id: str, answer: Any, settings: RunSettings) -> int:
    """Continue a stopped thread; `answer` answers its pending question."""

    async def first(session: AsyncSession) -> Action | Stop:
        snapshot = await session.astate(thread_id)
        if snapshot.created_at is None:
            raise ConfigError(f"no thread {thread_id} in the checkpoint database {session.url}")
        if snapshot.interrupts:
            return stop_of(snapshot)  # the driver answers it (given answer, a person) or pauses
        if answer is not None and not _faulted(snapshot):
            raise ConfigError(f"thread {thread_id} is not waiting for an answer; drop --answer")
        if unfinished(snapshot):
            return Action()
        if _faulted(snapshot) and (checkpoint := await before_last_escalation(session, thread_id)):
            return Action(checkpoint_id=checkpoint, ask_person=True)
        finished = stop_of(snapshot)
        return dataclasses.replace(finished, reason=f"already finished; {finished.reason or 'nothing to do'}")

    return Driver(settings, thread_id, "resume", None, answer).execute(first)


async def before_last_escalation(session: AsyncSession, thread_id: str) -> str | None:
    """The checkpoint about to run `escalate` that ended the thread, if it ended there.

    A thread stopped as `environment_fault` is finished; resuming it re-runs its last
    escalation from this checkpoint, so a person can answer retry / skip / abort / a hint.
    """
    rows = await session.ahistory(thread_id)
    return next((row.checkpoint_id for row in rows if row.next == (ESCALATE_NODE,)), None)


def _faulted(snapshot: StateSnapshot) -> bool:
    return not unfinished(snapshot) and snapshot.values.get("status") == "environment_fault"


def unfinished(snapshot: StateSnapshot) -> bool:
    """The thread has work left: tasks of its next step (with or without their writes saved:
    a crash between a step's writes and its checkpoint leaves `next` empty) or a question."""
    return bool(snapshot.tasks or snapshot.next or snapshot.interrupts)


def stop_of(snapshot: StateSnapshot) -> Stop:
    """Where a thread stands after a stream ended without an exception."""
    values = snapshot.values
    if snapshot.interrupts:
        pending = [i.value if isinstance(i.value, dict) else {"summary": str(i.value)}
                   for i in snapshot.interrupts]
        return Stop("paused", questions.summary(pending[0]), pending, [i.id for i in snapshot.interrupts])
    return Stop(str(values.get("status") or "running"), values.get("reason"))


# ----------------------------------------------------------------------------- the driver


def _drop_output() -> None:
    """Point stdout and stderr at /dev/null, so the interpreter's last flush cannot fail."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)


class Driver:
    """Runs one command's loop: stream, and while paused, answer and stream again."""

    def __init__(self, settings: RunSettings, thread_id: str, command: str, task: str | None,
                 answer: Any = None) -> None:
        self.settings = settings
        self.thread_id = thread_id
        self.command = command
        self.task = task
        self._answer = answer  # a given --answer is used once, for the first question
        self._sigint = SigintGuard(on_signal=settings.renderer.pause)
        self._started = False  # the start event was written: the thread may have run

    def execute(self, first: Callable[[AsyncSession], Awaitable[Action | Stop]]) -> int:
        stop = self._sigint.run(self._drive(first))
        if stop.status == "pipe_closed":
            return self._after_pipe_closed(stop)
        try:
            for event in stop_events(stop, self.thread_id, self.settings.hint):
                self.settings.renderer.emit(event)
            self.settings.renderer.close()
        except OSError:
            if stop.status != "hangup":
                raise
            _drop_output()  # the terminal is gone: the exit status still says what happened
        return int(stop.exit_status)

    def _after_pipe_closed(self, stop: Stop) -> int:
        """stdout was closed (`bashgraph run … | head -1`): where the run stopped goes to stderr,
        if that is still open, and nothing more to stdout."""
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)  # the interpreter's last flush of stdout would fail again
        os.close(null)
        line = f"bashgraph: {stop.reason}"
        if self._started:
            line += f"; continue it with: {self.settings.hint.command(self.thread_id)}"
        with contextlib.suppress(OSError):
            print(one_line(line), file=sys.stderr)
        return int(stop.exit_status)

    def _announce(self) -> None:
        """The model notice and the `start` event: the thread passed its checks and will run."""
        if self.settings.notice:
            print(self.settings.notice, file=sys.stderr)
        self._emit({"event": "start", "command": self.command, "task": self.task,
                    "model": choose_model_name(self.settings.config),
                    "db": locate(self.settings.db).label})
        self._started = True

    async def _drive(self, first: Callable[[AsyncSession], Awaitable[Action | Stop]]) -> Stop:
        try:
            async with aopen_session(self.settings.db, model=self.settings.model,
                                     config=self.settings.config) as session:
                # The lock before the first look at the thread: what `first` decides (an
                # answer is wanted, the thread is unfinished) stays true while this runs.
                with session.lock(self.thread_id):
                    return await self._drive_locked(session, first)
        except asyncio.CancelledError:
            return Stop(self._sigint.status,
                        f"interrupted by {self._sigint.name}; the running command was stopped")
        except ThreadBusyError as exc:
            return Stop("busy", str(exc))
        except StoreError as exc:
            return Stop("store_error", str(exc))
        except ConfigError as exc:
            return Stop("config_error", str(exc))
        except BrokenPipeError:
            return Stop("pipe_closed", "stdout was closed; the run stopped where it was")

    async def _drive_locked(self, session: AsyncSession,
                            first: Callable[[AsyncSession], Awaitable[Action | Stop]]) -> Stop:
        if self.command == "resume":  # the hints it prints carry the options the thread ran with
            stored = stored_options((await session.astate(self.thread_id)).metadata)
            self.settings = dataclasses.replace(self.settings, hint=self.settings.hint.merged(stored))
        step = await first(session)  # a refusal (ConfigError) ends here, before anything is said
        try:
            self._announce()
        except BrokenPipeError:
            return Stop("pipe_closed", "stdout was closed before the run started; nothing ran")
        if isinstance(step, Stop):
            step = self._next_step(step)  # a question pending from an earlier run
        while isinstance(step, Action):
            stop = await self._stream(self._with_asking(session, step), step)
            step = self._next_step(stop)
        return step

    def _with_asking(self, session: AsyncSession, action: Action) -> AsyncSession:
        """The session's graph, rebuilt to ask a person when one is answering it."""
        config = self.settings.config
        if not action.ask_person or config.budgets.on_environment_error == "ask":
            return session
        asking = dataclasses.replace(config.budgets, on_environment_error="ask")
        return session.with_config(dataclasses.replace(config, budgets=asking))

    async def _stream(self, session: AsyncSession, action: Action) -> Stop:
        modes = [*STREAM_MODES, "messages"] if self.settings.tokens else list(STREAM_MODES)
        # From an earlier checkpoint (re-asking an escalation), or the thread's latest.
        start: RunnableConfig = {"metadata": {OPTIONS_KEY: json.dumps(options_to_store(self.settings.hint.options))}}
        if action.checkpoint_id:
            start["configurable"] = {"checkpoint_id": action.checkpoint_id}
        chunks = session.arun(action.inputs, self.thread_id, config=start, stream_mode=modes)
        try:
            # Closed here, not left to the loop's shutdown: a write that fails (stdout closed)
            # ends the run, and its cancelled steps must finish before the loop closes.
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    for event in chunk_events(chunk, self.thread_id):
                        self.settings.renderer.emit(event)
        except (asyncio.CancelledError, ThreadBusyError, StoreError, ConfigError, BrokenPipeError):
            raise  # not the model's failure, even when the model's step is next
        except Exception as exc:
            snapshot = await session.astate(self.thread_id)
            if MODEL_NODE not in snapshot.next and not isinstance(exc, _MODEL_FAILURES):
                raise
            return self._model_failure(exc)
        return stop_of(await session.astate(self.thread_id))

    def _model_failure(self, exc: Exception) -> Stop:
        config = self.settings.config
        base_url = config.chat.base_url or os.environ.get("OPENAI_BASE_URL")
        # How many retries were made is read from the failed request, not assumed to be the most
        # allowed (a long Retry-After makes none).
        error = as_model_error(exc, base_url=base_url, model=choose_model_name(config),
                               retry_after_max_s=config.chat.retry_after_max_s)
        return Stop("model_error", str(error))

    def _next_step(self, stop: Stop) -> Action | Stop:
        """After a pause, the answer to stream next; otherwise the stop itself."""
        if stop.status != "paused":
            return stop
        answer, self._answer = self._answer, None
        if answer is None and self.settings.ask is not None:
            with self._sigint.default():
                try:
                    answer = self.settings.ask(stop.pending[0])
                except KeyboardInterrupt:
                    return Stop(self._sigint.status, "no answer given; the question is still pending")
                except EOFError:
                    return stop  # the input ended (Ctrl-D): nobody can answer here, as without a terminal
        if answer is None:
            return stop
        self._emit({"event": "answer", "answer": answer})
        # Keyed by the interrupt the person saw: if another worker answered it meanwhile, this
        # answer matches nothing, the newer question stays pending and is shown instead.
        resume = {stop.pending_ids[0]: answer} if stop.pending_ids else answer
        return Action(inputs=Command(resume=resume), ask_person=True)

    def _emit(self, event: dict[str, Any]) -> None:
        self.settings.renderer.emit({**event, "thread_id": self.thread_id})


