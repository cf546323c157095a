"""Sessions: the agent bound to one database, with its checkpointer, journal and thread locks.

    with open_session("~/runs.sqlite", model=model, config=AgentConfig()) as session:
        for chunk in session.run({"messages": [("user", "list files")]}, "t1"):
            ...
        for chunk in session.run(None, "t1"):  # resume after a crash, Ctrl-C or kill -9
            ...

    async with aopen_session("~/runs.sqlite", model=model) as session:  # the same, for asyncio
        async for chunk in session.arun(None, "t1"):
            ...

`run` and `arun` hold the thread's lock while they stream, so a second worker gets
ThreadBusyError and executes nothing; the journal makes the resume run no command twice. When
the block ends — at its end, by an error, Ctrl-C or a cancelled task — the lock is free, the
agent's background jobs are stopped and the database's connections are closed.

Why an async session: with the "custom" stream mode LangGraph's sync `stream` runs each node in
a worker thread, which a Ctrl-C (KeyboardInterrupt in the main thread) cannot reach; LangGraph
then waits for the command to end by itself. Cancelling `arun`'s task cancels the command: its
process tree is killed and its journal entry left without a result, so a resume reports it as
`spawn_error/interrupted`.

`model=None` builds the agent without a model: the one `config` names is made on the first
model call, so a session that only inspects threads (`state`, `history`, `fork`) needs none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Self, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StateSnapshot

from bashgraph.graph.build import Agent, build_graph
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import StoreError, UnfinishedThreadError
from bashgraph.graph.execution import Executor, collect_executors
from bashgraph.graph.models.deferred import LazyModel
from bashgraph.graph.store.checkpoints import Location, aopen_checkpointer, locate, open_checkpointer, store_errors
from bashgraph.graph.store.journal import AnyJournal, open_journal
from bashgraph.graph.store.locks import held_off_loop, thread_lock
from bashgraph.graph.store.saver_guard import guard_saver, read_errors
from bashgraph.graph.store.threads import (
    CheckpointRow,
    ThreadInfo,
    ahistory,
    alist_threads,
    fork,
    fork_id,
    history,
    list_threads,
    thread_config,
)
from bashgraph.tools.runner import in_thread, to_its_end

#: The threads held by the `lock` blocks the running code is inside, as (session holder, thread).
#: A context variable, not a field: a hold must not reach other tasks or threads of the session.
_HELD: ContextVar[frozenset[tuple[int, str]]] = ContextVar("bashgraph_held_threads", default=frozenset())

class _Holder:
    """What a session shares with the sessions made from it (`with_config`): the identity its
    `lock` blocks hold threads under, and whether its block has ended."""

    ended = False


RunInput = dict[str, Any] | Command[Any] | None
"""New input (a dict), None (continue the thread), or an answer (`Command(resume=...)`)."""


@dataclass
class _SessionParts:
    """What both sessions hold: the agent, its database, and what ending the session cleans up."""

    agent: Agent
    saver: BaseCheckpointSaver[Any]
    journal: AnyJournal
    location: Location
    model: BaseChatModel | None = None
    """The agent's chat model; None: made from `config` on the first model call."""
    config: AgentConfig = field(default_factory=AgentConfig)
    _executors: list[Executor] = field(default_factory=list, repr=False)
    """The Executors of every agent built for this session or one made from it (`with_config`)."""
    _lazy: LazyModel | None = field(default=None, repr=False)
    """Without `model`: the model `config` names, made on the first model call, shared by the
    sessions made from this one."""
    _holder: _Holder = field(default_factory=_Holder, repr=False)
    """Who this session's `lock` blocks hold threads for, and whether its block has ended
    (shared with the sessions made from it)."""

    @classmethod
    def _bind(cls, saver: BaseCheckpointSaver[Any], journal: AnyJournal, location: Location,
              model: BaseChatModel | None, config: AgentConfig | None) -> Self:
        guard_saver(saver, location)
        config = config or AgentConfig()
        executors: list[Executor] = []
        lazy = LazyModel(config) if model is None else None
        agent = _build(model or lazy, config, saver, journal, executors)
        return cls(agent=agent, saver=saver, journal=journal, location=location, model=model,
                   config=config, _executors=executors, _lazy=lazy)

    @property
    def url(self) -> str:
        """The database, as errors and the CLI name it (no password)."""
        return self.location.label

    @contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        """Hold `thread_id` for a block, or raise ThreadBusyError.

        Runs of the thread inside the block (`run` / `arun` of this session or of one made from
        it by `with_config`) use this hold instead of taking the lock again: the caller can look
        at the thread, decide what to run and run it, with no other worker in between. The hold
        belongs to the code inside the block (and the tasks it starts): another task or thread
        running the thread on this same session gets ThreadBusyError, like any other worker.
        """
        self._refuse_if_ended("hold a thread")
        with self._take(thread_id):
            token = _HELD.set(_HELD.get() | {(id(self._holder), thread_id)})
            try:
                yield
            finally:
                _HELD.reset(token)

    def with_config(self, config: AgentConfig) -> Self:
        """This session with its agent rebuilt for `config`: the same model and database, the
        same held threads, and its background jobs stopped when this session's block ends."""
        self._refuse_if_ended("build an agent")  # its jobs' executor would never be closed
        # The model made for this session serves the new agent too when `config` names the
        # same one: the client is not made, nor the local weights loaded, a second time.
        agent = _build(self.model or self._lazy, config, self.saver, self.journal, self._executors)
        return dataclasses.replace(self, agent=agent, config=config)

    def _start_run(self, thread_id: str, config: RunnableConfig | None,
                   stream_kwargs: dict[str, Any]) -> tuple[RunnableConfig, AbstractContextManager[Any]]:
        """The run's config and the thread's hold (the lock, unless a `lock` block holds it).

        Durability defaults to "sync": a step's checkpoint is saved before the next step
        starts. With LangGraph's default ("async") a kill just after the model replied could
        lose the reply while its commands already run; the model, asked again, would pick new
        call ids and the journal could not recognise the commands it already started.
        """
        stream_kwargs.setdefault("durability", "sync")
        self._refuse_if_ended("run a thread")
        return _with_thread(config, thread_id), self._hold(thread_id)

    def _reading(self) -> AbstractContextManager[None]:
        """Read errors as one line; a session whose block has ended says so (its connections
        are closed: reading through them would look like a damaged database)."""
        self._refuse_if_ended("use the database")
        return read_errors(self.location)

    def _refuse_if_ended(self, what: str) -> None:
        if self._holder.ended:
            raise StoreError(f"the session of {self.url} has ended; open a new one to {what}")

    def _hold(self, thread_id: str) -> AbstractContextManager[Any]:
        """The thread's lock, unless a `lock` block of this session already holds it."""
        held = (id(self._holder), thread_id) in _HELD.get()
        return nullcontext() if held else self._take(thread_id)

    @contextmanager
    def _take(self, thread_id: str) -> Iterator[None]:
        """The thread's lock. Other workers may have run the thread since this process last
        held it: what its agents remember of the thread's jobs is read from the journal again."""
        with thread_lock(self.location.target, thread_id):
            for executor in self._executors:
                executor.jobs.forget(thread_id)
            yield


@dataclass
class Session(_SessionParts):
    """The agent and everything it persists to, for one database (see `open_session`)."""

    def run(self, inputs: RunInput, thread_id: str, *, config: RunnableConfig | None = None,
            **stream_kwargs: Any) -> Iterator[Any]:
        """Stream a run (`inputs`), a resume (`None`) or an answer (`Command(resume=...)`).

        A generator: the thread lock is taken when iteration starts and held until it ends
        or the generator is closed. Yields exactly what `agent.stream` yields. `config` may
        name a `checkpoint_id` to continue from instead of the thread's latest checkpoint.
        New input (a dict, or a `Command` with no `resume`) to a thread stopped mid-run or
        waiting for an answer raises UnfinishedThreadError.
        """
        run_config, hold = self._start_run(thread_id, config, stream_kwargs)
        with hold, store_errors(self.location):
            if _is_new_input(inputs):
                _refuse_if_unfinished(thread_id, self.agent.get_state(run_config))
            yield from self.agent.stream(cast(Any, inputs), run_config, **stream_kwargs)

    def state(self, thread_id: str) -> StateSnapshot:
        """The latest state of a thread (values, next nodes, pending interrupts)."""
        with self._reading():
            return self.agent.get_state(thread_config(thread_id))

    def threads(self) -> list[ThreadInfo]:
        """Every thread in the database, most recently updated first."""
        with self._reading():
            return list_threads(self.saver)

    def history(self, thread_id: str) -> list[CheckpointRow]:
        """The checkpoints of a thread, newest first."""
        with self._reading():
            return history(self.agent, thread_id)

    def fork(self, thread_id: str, checkpoint_id: str, new_thread_id: str | None = None) -> str:
        """A new thread continuing from `checkpoint_id` of `thread_id`; returns its id.

        The new thread is held while it is made: a second fork into the same id, or a run of
        it, gets ThreadBusyError instead of mixing into a half-made copy.
        """
        new_thread_id = new_thread_id or fork_id(thread_id)
        with self._hold(new_thread_id), self._reading():
            return fork(self.agent, thread_id, checkpoint_id, new_thread_id, self.journal)

    def _close(self) -> None:
        self._holder.ended = True
        for executor in self._executors:
            executor.close()


@dataclass
class AsyncSession(_SessionParts):
    """`Session` for asyncio (see `aopen_session`): LangGraph's async saver, the same journal,
    locks and clean-up."""

    async def arun(self, inputs: RunInput, thread_id: str, *, config: RunnableConfig | None = None,
                   **stream_kwargs: Any) -> AsyncGenerator[Any, None]:
        """`Session.run` for asyncio: yields exactly what `agent.astream` yields.

        The lock is held until the iteration ends, fails or is cancelled; a caller that stops
        iterating early should close the iterator (`contextlib.aclosing`) to free it at once.
        """
        run_config, hold = self._start_run(thread_id, config, stream_kwargs)
        # SQLite's lock is a flock that never waits; PostgreSQL's talks to the server.
        waits = self.location.kind == "postgres" and not isinstance(hold, nullcontext)
        taken = held_off_loop(hold) if waits else _as_async(hold)
        async with taken:
            with store_errors(self.location):
                if _is_new_input(inputs):
                    _refuse_if_unfinished(thread_id, await self.agent.aget_state(run_config))
                async for chunk in self.agent.astream(cast(Any, inputs), run_config, **stream_kwargs):
                    yield chunk

    async def astate(self, thread_id: str) -> StateSnapshot:
        """The latest state of a thread (values, next nodes, pending interrupts)."""
        with self._reading():
            return await self.agent.aget_state(thread_config(thread_id))

    async def ahistory(self, thread_id: str) -> list[CheckpointRow]:
        """The checkpoints of a thread, newest first."""
        with self._reading():
            return await ahistory(self.agent, thread_id)

    async def athreads(self) -> list[ThreadInfo]:
        """Every thread in the database, most recently updated first."""
        with self._reading():
            return await alist_threads(self.saver)

    async def afork(self, thread_id: str, checkpoint_id: str, new_thread_id: str | None = None) -> str:
        """`Session.fork` for asyncio. Cancelled, it waits for the copy to end and removes it:
        a cancelled fork leaves no thread."""
        new_thread_id = new_thread_id or fork_id(thread_id)
        copy = functools.partial(fork, self.agent, thread_id, checkpoint_id, new_thread_id, self.journal)
        with self._hold(new_thread_id), self._reading():
            # LangGraph's sync state calls, in a worker thread: the async saver hands each of
            # them to this loop, which is free meanwhile (a fork is a few reads and one write).
            copying = asyncio.ensure_future(in_thread(asyncio.get_running_loop(), copy))
            try:
                return await asyncio.shield(copying)
            except asyncio.CancelledError:
                # To its end: a second cancellation must not leave the copy half undone.
                await to_its_end(asyncio.ensure_future(self._undo_fork(copying, new_thread_id)))
                raise

    async def _undo_fork(self, copying: asyncio.Future[str], new_thread_id: str) -> None:
        """Wait for a cancelled fork's copy (its worker thread cannot be stopped), then delete
        what it made."""
        await asyncio.wait([copying])
        if not copying.cancelled() and copying.exception() is None:
            await self.saver.adelete_thread(new_thread_id)
            await in_thread(asyncio.get_running_loop(),
                            functools.partial(self.journal.delete_thread, new_thread_id))

    async def _aclose(self) -> None:
        self._holder.ended = True
        loop = asyncio.get_running_loop()
        for executor in self._executors:
            # In a thread: closing waits for the jobs' processes to go. To its end: a second
            # Ctrl-C must not leave a job running.
            await to_its_end(in_thread(loop, executor.close))


def _build(model: BaseChatModel | LazyModel | None, config: AgentConfig, saver: BaseCheckpointSaver[Any],
           journal: AnyJournal, executors: list[Executor]) -> Agent:
    """The agent; the Executors it built join `executors`, which the session closes at its end."""
    with collect_executors() as built:
        agent = build_graph(model=model, config=config, checkpointer=saver, journal=journal)
    executors.extend(built)
    return agent


@asynccontextmanager
async def _as_async(hold: AbstractContextManager[Any]) -> AsyncIterator[None]:
    with hold:
        yield


def _is_new_input(inputs: RunInput) -> bool:
    """A dict, or a Command that answers nothing (`update` or `goto` alone): either starts
    from the thread's state as new input does, and must not land in an unfinished step."""
    return isinstance(inputs, dict) or (isinstance(inputs, Command) and inputs.resume is None)


def _refuse_if_unfinished(thread_id: str, snapshot: StateSnapshot) -> None:
    """UnfinishedThreadError when the checkpoint a run with new input starts from (the thread's
    latest, or the `checkpoint_id` of its config) stopped mid-run or waits for an answer."""
    # `tasks`, not only `next`: a crash after a step's writes were saved and before its
    # checkpoint leaves tasks whose writes wait to be applied, and `next` empty.
    if snapshot.tasks or snapshot.next or snapshot.interrupts:
        waiting = "waits for an answer" if snapshot.interrupts else "stopped mid-run"
        raise UnfinishedThreadError(
            f"thread {thread_id} {waiting}: continue it with run(None, ...) or answer it "
            "with run(Command(resume=...), ...) before giving it new input")


def _with_thread(config: RunnableConfig | None, thread_id: str) -> RunnableConfig:
    merged: dict[str, Any] = dict(config or {})
    merged["configurable"] = {**merged.get("configurable", {}), "thread_id": thread_id}
    return merged  # type: ignore[return-value]


@contextmanager
def open_session(
    db: str | None, *, model: BaseChatModel | None = None, config: AgentConfig | None = None
) -> Iterator[Session]:
    """Open the database `db` (None: $BASHGRAPH_DB or the default file) and build the agent.

    When the block ends, the agent's Executors are closed (background jobs stopped, a
    sandbox's cgroup removed), then the journal and the checkpointer.
    """
    location = locate(db)
    with open_checkpointer(location.target) as saver, open_journal(location.target) as journal:
        session = Session._bind(saver, journal, location, model, config)
        try:
            yield session
        finally:
            session._close()


@asynccontextmanager
async def aopen_session(
    db: str | None, *, model: BaseChatModel | None = None, config: AgentConfig | None = None
) -> AsyncIterator[AsyncSession]:
    """`open_session` for asyncio: LangGraph's async saver, the same database rules and journal.

    When the block ends — also by an error, Ctrl-C or cancellation — the Executors are closed
    (their background jobs stopped), then the journal and the checkpointer.
    """
    location = locate(db)
    async with aopen_checkpointer(location.target) as saver:
        with open_journal(location.target) as journal:
            session = AsyncSession._bind(saver, journal, location, model, config)
            try:
                yield session
            finally:
                await session._aclose()
