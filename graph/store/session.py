"""A Session: the agent bound to one database, with its checkpointer, journal and thread locks.

    with open_session("~/runs.sqlite", model=model, config=AgentConfig()) as session:
        for chunk in session.run({"messages": [("user", "list files")]}, "t1"):
            ...
        for chunk in session.run(None, "t1"):  # resume after a crash, Ctrl-C or kill -9
            ...

`run` holds the thread's lock while it streams, so a second worker gets ThreadBusyError and
executes nothing; the journal makes the resume run no command twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StateSnapshot

from bashgraph.graph.build import Agent, build_graph
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.errors import UnfinishedThreadError
from bashgraph.graph.execution import collect_executors
from bashgraph.graph.store.checkpoints import Location, locate, open_checkpointer, store_errors
from bashgraph.graph.store.journal import AnyJournal, open_journal
from bashgraph.graph.store.locks import thread_lock
from bashgraph.graph.store.saver_guard import guard_saver, read_errors
from bashgraph.graph.store.threads import (
    CheckpointRow,
    ThreadInfo,
    fork,
    history,
    list_threads,
    thread_config,
)


@dataclass
class Session:
    """The agent and everything it persists to, for one database."""

    agent: Agent
    saver: BaseCheckpointSaver[Any]
    journal: AnyJournal
    location: Location

    @property
    def url(self) -> str:
        """The database, as errors and the CLI name it (no password)."""
        return self.location.label

    def lock(self, thread_id: str) -> AbstractContextManager[None]:
        """Hold `thread_id` for a block, or raise ThreadBusyError."""
        return thread_lock(self.location.target, thread_id)

    def run(
        self, inputs: dict[str, Any] | Command[Any] | None, thread_id: str, *,
        config: RunnableConfig | None = None, **stream_kwargs: Any,
    ) -> Iterator[Any]:
        """Stream a run (`inputs`), a resume (`None`) or an answer (`Command(resume=...)`).

        A generator: the thread lock is taken when iteration starts and held until it ends
        or the generator is closed. Yields exactly what `agent.stream` yields.

        Durability defaults to "sync": a step's checkpoint is saved before the next step
        starts. With LangGraph's default ("async") a kill just after the model replied could
        lose the reply while its commands already run; the model, asked again, would pick new
        call ids and the journal could not recognise the commands it already started.
        """
        stream_kwargs.setdefault("durability", "sync")
        run_config = _with_thread(config, thread_id)
        with self.lock(thread_id), store_errors(self.location):
            if isinstance(inputs, dict):
                self._refuse_if_unfinished(thread_id, run_config)
            yield from self.agent.stream(cast(Any, inputs), run_config, **stream_kwargs)

    def _refuse_if_unfinished(self, thread_id: str, run_config: RunnableConfig) -> None:
        """UnfinishedThreadError when the checkpoint the run starts from (the thread's latest,
        or the `checkpoint_id` in `config`) stopped mid-run or waits for an answer."""
        snapshot = self.agent.get_state(run_config)
        # `tasks`, not only `next`: a crash after a step's writes were saved and before its
        # checkpoint leaves tasks whose writes wait to be applied, and `next` empty.
        if snapshot.tasks or snapshot.next or snapshot.interrupts:
            waiting = "waits for an answer" if snapshot.interrupts else "stopped mid-run"
            raise UnfinishedThreadError(
                f"thread {thread_id} {waiting}: continue it with run(None, ...) or answer it "
                "with run(Command(resume=...), ...) before giving it new input")

    def state(self, thread_id: str) -> StateSnapshot:
        """The latest state of a thread (values, next nodes, pending interrupts)."""
        with read_errors(self.location):
            return self.agent.get_state(thread_config(thread_id))

    def threads(self) -> list[ThreadInfo]:
        """Every thread in the database, most recently updated first."""
        with read_errors(self.location):
            return list_threads(self.saver)

    def history(self, thread_id: str) -> list[CheckpointRow]:
        """The checkpoints of a thread, newest first."""
        with read_errors(self.location):
            return history(self.agent, thread_id)

    def fork(self, thread_id: str, checkpoint_id: str, new_thread_id: str | None = None) -> str:
        """A new thread continuing from `checkpoint_id` of `thread_id`; returns its id."""
        with read_errors(self.location):
            return fork(self.agent, thread_id, checkpoint_id, new_thread_id)


def _with_thread(config: RunnableConfig | None, thread_id: str) -> RunnableConfig:
    merged: dict[str, Any] = dict(config or {})
    merged["configurable"] = {**merged.get("configurable", {}), "thread_id": thread_id}
    return merged  # type: ignore[return-value]


@contextmanager
def open_session(
    db: str | None, *, model: BaseChatModel, config: AgentConfig | None = None
) -> Iterator[Session]:
    """Open the database `db` (None: $BASHGRAPH_DB or the default file) and build the agent.

    When the block ends, the agent's Executor is closed (its sandbox's cgroup removed).
    """
    location = locate(db)
    with open_checkpointer(location.target) as saver, open_journal(location.target) as journal:
        guard_saver(saver, location)
        with collect_executors() as executors:
            agent = build_graph(model=model, config=config, checkpointer=saver, journal=journal)
        try:
            yield Session(agent=agent, saver=saver, journal=journal, location=location)
        finally:
            for executor in executors:
                executor.close()
