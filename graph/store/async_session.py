"""The async twin of `open_session` / `Session.run`, which `run` and `resume` stream through.

Why async: with the "custom" stream mode LangGraph's sync `stream` runs each node in a worker
thread, so a Ctrl-C (KeyboardInterrupt in the main thread) cannot reach the command; LangGraph
then waits for the worker, i.e. for the command to end by itself. With `astream` a Ctrl-C
cancels the run's task; cancelling `arun_command` kills the command's process tree and leaves
its journal entry without a result, so a resume reports it as `spawn_error/interrupted`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StateSnapshot

from bashgraph.graph.build import Agent, build_graph
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import collect_executors
from bashgraph.graph.store.checkpoints import aopen_checkpointer, locate, store_errors
from bashgraph.graph.store.journal import open_journal
from bashgraph.graph.store.saver_guard import guard_saver, read_errors
from bashgraph.graph.store.session import Session
from bashgraph.graph.store.threads import thread_config
from bashgraph.graph.testing import ScriptedChatModel
from bashgraph.tools.runner.drive import in_thread

ESCALATE_NODE = "escalate"


@asynccontextmanager
async def aopen_session(
    db: str | None, *, model: BaseChatModel, config: AgentConfig
) -> AsyncIterator[Session]:
    """`open_session` with LangGraph's async saver (same database rules, same journal).

    When the block ends — also by Ctrl-C or an error — the Executors built for it are closed:
    their background jobs are stopped (in a thread: it waits for the processes to go).
    """
    location = locate(db)
    async with aopen_checkpointer(location.target) as saver:
        with open_journal(location.target) as journal:
            guard_saver(saver, location)
            with collect_executors() as executors:
                agent = build_graph(model=model, config=config, checkpointer=saver, journal=journal)
            try:
                yield Session(agent=agent, saver=saver, journal=journal, location=location)
            finally:
                for executor in executors:
                    await asyncio.shield(in_thread(asyncio.get_running_loop(), executor.close))


async def astream(
    session: Session, inputs: dict[str, Any] | Command[Any] | None, thread_id: str, *,
    checkpoint_id: str | None = None, locked: bool = False, **stream_kwargs: Any,
) -> AsyncIterator[Any]:
    """`Session.run` for asyncio: holds the thread's lock while it streams (ThreadBusyError).

    `checkpoint_id` continues from an earlier checkpoint of the thread instead of its latest.
    `locked`: the caller holds the lock already (it is not re-entrant).
    """
    stream_kwargs.setdefault("durability", "sync")  # see Session.run
    config: RunnableConfig = thread_config(thread_id, checkpoint_id)
    lock = nullcontext() if locked else session.lock(thread_id)
    with lock, store_errors(session.location):
        async for chunk in session.agent.astream(inputs, config, **stream_kwargs):
            yield chunk


async def latest_state(session: Session, thread_id: str) -> StateSnapshot:
    with read_errors(session.location):
        return await session.agent.aget_state(thread_config(thread_id))


async def before_last_escalation(session: Session, thread_id: str) -> str | None:
    """The checkpoint about to run `escalate` that ended the thread, if it ended there.

    A thread stopped as `environment_fault` is finished; resuming it re-runs its last
    escalation from this checkpoint, so a person can answer retry / skip / abort / a hint.
    """
    with read_errors(session.location):
        async for snapshot in session.agent.aget_state_history(thread_config(thread_id)):
            if tuple(snapshot.next) == (ESCALATE_NODE,):
                return str(snapshot.config["configurable"]["checkpoint_id"])
    return None


def inspection_agent(config: AgentConfig | None = None, **build: Any) -> Agent:
    """The graph for `threads`, `history`, `fork` and `graph`, which never call a model.

    Its model has an empty script: it fails loudly if anything does call it.
    """
    return build_graph(model=inspection_model(), config=config or AgentConfig(), **build)


def inspection_model() -> BaseChatModel:
    return ScriptedChatModel([])
