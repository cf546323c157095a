"""Threads and time travel: list threads, list a thread's checkpoints, fork from one of them.

A fork is a new thread that holds the values of the chosen checkpoint and whose next node is
the same, so resuming it continues from that point (a checkpoint where new input starts a later
run takes two: the thread so far, then the input). Its commands are new commands: journal keys
include the thread id, so nothing recorded for the original is reused, and the original's
background jobs are not the fork's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from bashgraph.graph.errors import BashgraphError, ConfigError
from bashgraph.graph.store.checkpoint_rows import (
    INTERRUPT_CHANNEL,
    TASK_CHARS,
    CheckpointRow,
    ThreadInfo,
    compaction_text,
    outcome_text,
)
from bashgraph.graph.store.journal_rows import note_source_jobs
from bashgraph.tools import CommandResult, clip

__all__ = [
    "CheckpointRow", "ThreadInfo", "ahistory", "fork", "history", "list_threads", "outcome_text", "thread_config",
]
#: The node to update a fork "as", so that the graph's own edges pick the source's next node.
_WRITER_OF_NEXT: dict[tuple[str, ...], str] = {
    ("agent",): "replan",  # replan -> agent is unconditional
    ("approve",): "agent",  # next_after_agent: the last reply has tool calls
    ("tools",): "approve",  # approve -> tools is unconditional (whether or not it was skipped)
    ("route",): "tools",
    ("retry",): "route",  # next_after_route follows the `next_hop` copied with the values
    ("replan",): "route",
    ("escalate",): "route",
    ("compact",): "agent",  # next_after_agent: `compact_due`, copied with the values
    (): "agent",  # a finished thread: its final status makes next_after_agent end it
}


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


#: (thread id, id of its first checkpoint) of every thread, straight from LangGraph's tables.
_THREAD_IDS = (
    "SELECT thread_id, MIN(checkpoint_id) AS first_id FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id"
)


# -- threads --------------------------------------------------------------------------------
def list_threads(saver: BaseCheckpointSaver[Any]) -> list[ThreadInfo]:
    """Every thread in the database, most recently updated first."""
    return _newest_first(
        (thread_id, saver.get_tuple(thread_config(thread_id)),
         saver.get_tuple(thread_config(thread_id, first_id)))
        for thread_id, first_id in thread_ids(saver)
    )


async def alist_threads(saver: BaseCheckpointSaver[Any]) -> list[ThreadInfo]:
    """`list_threads` for an async saver (AsyncSqliteSaver, AsyncPostgresSaver), on its loop."""
    found = []
    for thread_id, first_id in await athread_ids(saver):
        latest = await saver.aget_tuple(thread_config(thread_id))
        found.append((thread_id, latest, await saver.aget_tuple(thread_config(thread_id, first_id))))
    return _newest_first(found)


def _newest_first(
    found: Iterable[tuple[str, CheckpointTuple | None, CheckpointTuple | None]],
) -> list[ThreadInfo]:
    infos = [_thread_info(thread_id, latest, first) for thread_id, latest, first in found if latest is not None]
    return sorted(infos, key=lambda info: info.updated_at, reverse=True)


def thread_ids(saver: BaseCheckpointSaver[Any]) -> list[tuple[str, str]]:
    """(thread id, id of its first checkpoint) for every thread, straight from the tables."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            return [(str(t), str(f)) for t, f in cur.execute(_THREAD_IDS).fetchall()]
    if isinstance(saver, PostgresSaver) and _has_private_cursor(saver):
        with saver._cursor() as pg:  # the saver's own connection and lock
            rows = pg.execute(_THREAD_IDS).fetchall()
        return [(str(row["thread_id"]), str(row["first_id"])) for row in rows]
    return _thread_ids_by_listing(saver.list(None))


async def athread_ids(saver: BaseCheckpointSaver[Any]) -> list[tuple[str, str]]:
    """`thread_ids` for an async saver: the same query, on its own connection and lock."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(saver, AsyncSqliteSaver):
        async with saver.lock, saver.conn.execute(_THREAD_IDS) as cur:
            return [(str(t), str(f)) for t, f in await cur.fetchall()]
    if isinstance(saver, AsyncPostgresSaver) and _has_private_cursor(saver):
        async with saver._cursor() as pg:  # the saver's own connection and lock
            await pg.execute(_THREAD_IDS)
            rows = await pg.fetchall()
        return [(str(row["thread_id"]), str(row["first_id"])) for row in rows]
    return _thread_ids_by_listing([item async for item in saver.alist(None)])


def _has_private_cursor(saver: object) -> bool:
    """The PostgreSQL savers' `_cursor` (their connection and lock) is private: a LangGraph
    without it gets the listing instead of an AttributeError (which reads as damaged data)."""
    return hasattr(saver, "_cursor")


def _thread_ids_by_listing(tuples: Iterable[CheckpointTuple]) -> list[tuple[str, str]]:
    """Any other saver: walk every checkpoint (fine for the in-memory saver of tests)."""
    first: dict[str, str] = {}
    for item in tuples:
        configurable = item.config["configurable"]
        if configurable.get("checkpoint_ns", ""):
            continue
        thread, checkpoint = configurable["thread_id"], configurable["checkpoint_id"]
        first[thread] = min(checkpoint, first.get(thread, checkpoint))
    return list(first.items())


def _thread_info(thread_id: str, latest: CheckpointTuple, first: CheckpointTuple | None) -> ThreadInfo:
    values = latest.checkpoint["channel_values"]
    paused = any(write[1] == INTERRUPT_CHANNEL for write in latest.pending_writes or [])
    status = "paused" if paused else str(values.get("status") or "running")
    forked = first.metadata.get("forked_from") if first else None
    return ThreadInfo(
        thread_id=thread_id, task=first_task(first) if first else "", status=status,
        updated_at=latest.checkpoint["ts"],
        forked_from=str(forked) if forked else None,
    )


def first_task(first: CheckpointTuple) -> str:
    """The first human message of a thread, from its first checkpoint (input or fork copy)."""
    values = first.checkpoint["channel_values"]
    run_input = values.get("__start__")
    if isinstance(run_input, dict) and run_input.get("messages"):
        return _human_text(run_input["messages"])
    stored = values.get("messages")
    return _human_text(getattr(stored, "value", stored))  # a DeltaChannel snapshot wraps it


def _human_text(messages: Any) -> str:
    if not messages:
        return ""
    batch = messages if isinstance(messages, list) else [messages]
    for message in convert_to_messages(batch):
        if isinstance(message, HumanMessage):
            return clip(str(message.content), TASK_CHARS)
    return ""


# -- history --------------------------------------------------------------------------------
def history(agent: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> list[CheckpointRow]:
    """The checkpoints of a thread, newest first, each with what made it and what comes next."""
    return history_rows(list(agent.get_state_history(thread_config(thread_id))))


async def ahistory(agent: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> list[CheckpointRow]:
    """Async form of `history`."""
    return history_rows([snapshot async for snapshot in agent.aget_state_history(thread_config(thread_id))])


def history_rows(snapshots: Sequence[StateSnapshot]) -> list[CheckpointRow]:
    """One row per snapshot of a thread's history (newest first); none for an unknown thread."""
    if not snapshots:
        return []
    parents: Sequence[StateSnapshot | None] = [*snapshots[1:], None]
    return [_row(snapshot, parent) for snapshot, parent in zip(snapshots, parents, strict=True)]


def _row(snapshot: StateSnapshot, parent: StateSnapshot | None) -> CheckpointRow:
    # The tasks of the parent checkpoint that finished are the ones whose writes made this one.
    made_by = [task for task in parent.tasks if task.result is not None] if parent else []
    metadata = snapshot.metadata or {}
    if made_by:
        node = ", ".join(task.name for task in made_by)
    elif metadata.get("forked_from"):
        node = "fork"
    else:
        node = str(metadata.get("source", ""))
    results = [task.result for task in made_by]
    held = _answers_held(parent.values) if parent else {}
    return CheckpointRow(
        checkpoint_id=str(snapshot.config["configurable"]["checkpoint_id"]),
        step=int(metadata.get("step", -1)),
        node=node,
        outcomes="; ".join(_outcome_lines(results, held)),
        created_at=snapshot.created_at or "",
        next=tuple(snapshot.next),
    )


def _answers_held(values: Any) -> dict[str | None, ToolMessage]:
    """The answers a checkpoint's conversation already holds, by message id."""
    messages = values.get("messages", []) if isinstance(values, dict) else []
    return {message.id: message for message in messages if isinstance(message, ToolMessage)}


def _outcome_lines(results: Iterable[Any], held: dict[str | None, ToolMessage]) -> Iterator[str]:
    """The outcomes of the answers the step wrote. One it wrote again unchanged (a step that
    stores the whole conversation again, graph/open_calls.py) is an earlier step's."""
    for result in results:
        if isinstance(result, dict) and (line := compaction_text(result.get("context"))):
            yield line
        messages = result.get("messages", []) if isinstance(result, dict) else []
        for message in messages if isinstance(messages, list) else [messages]:
            is_answer = isinstance(message, ToolMessage) and isinstance(message.artifact, dict)
            if is_answer and held.get(message.id) != message:
                yield outcome_text(CommandResult.from_dict(message.artifact))


# -- fork -----------------------------------------------------------------------------------
def fork(
    agent: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, checkpoint_id: str,
    new_thread_id: str | None = None, journal: object = None,
) -> str:
    """Copy checkpoint `checkpoint_id` of `thread_id` into a new thread; return its id.

    With the command `journal`, the new thread also learns the source's job ids, as jobs it
    does not own (`note_source_jobs`).
    """
    source = agent.get_state(thread_config(thread_id, checkpoint_id))
    if source.created_at is None:
        raise ConfigError(f"thread {thread_id} has no checkpoint {checkpoint_id}")
    new_thread_id = new_thread_id or fork_id(thread_id)
    if agent.get_state(thread_config(new_thread_id)).created_at is not None:
        raise ConfigError(f"thread {new_thread_id} already exists; choose another name")
    target: RunnableConfig = {
        "configurable": {"thread_id": new_thread_id},
        # Kept in the fork's first checkpoint's metadata; `threads` and `history` show it.
        "metadata": {"forked_from": f"{thread_id}@{checkpoint_id}"},
    }
    try:
        # Before the checkpoints: a crash in between leaves job rows of no thread, never a fork
        # whose own jobs would take the ids of its source's.
        note_source_jobs(journal, thread_id, new_thread_id)
        # A fork of new input writes twice (the thread so far, then the input): cut off between
        # the two (an error, Ctrl-C), the copy would look finished with the input lost.
        for values, as_node in _fork_updates(source):
            agent.update_state(target, values, as_node=as_node)
        landed = agent.get_state(thread_config(new_thread_id)).next
    except BaseException:
        _delete_fork(agent, journal, new_thread_id)
        raise
    if tuple(landed) != tuple(source.next):
        # Refused whole: a half-made thread would resume somewhere the source never went.
        _delete_fork(agent, journal, new_thread_id)
        raise BashgraphError(
            f"cannot fork {thread_id}@{checkpoint_id}: the copy would continue at {landed} instead "
            f"of {source.next} (this process routes it differently, or the source was given new "
            "input while it waited at a question); nothing was created"
        )
    return new_thread_id


def _delete_fork(agent: CompiledStateGraph[Any, Any, Any, Any], journal: object, new_thread_id: str) -> None:
    """Remove what a fork that did not complete wrote: its checkpoints and its journal rows."""
    if agent.checkpointer is not None and not isinstance(agent.checkpointer, bool):
        agent.checkpointer.delete_thread(new_thread_id)
    if hasattr(journal, "delete_thread"):
        journal.delete_thread(new_thread_id)


def fork_id(thread_id: str) -> str:
    """A fresh id for a fork of `thread_id`."""
    return f"{thread_id}-fork-{uuid.uuid4().hex[:8]}"


def _fork_updates(source: StateSnapshot) -> list[tuple[dict[str, Any], str]]:
    """The values to write into the fork, each with the node to write them as, in order."""
    if tuple(source.next) == ("__start__",):
        # A run's input, not applied yet: replay it, on top of the thread so far when this is
        # new input to a thread that had run (the copy of its end, written as a finished one).
        start = next(task for task in source.tasks if task.name == "__start__")
        had_run = source.parent_config is not None  # the first checkpoint of a thread has none
        so_far = [(dict(source.values), _WRITER_OF_NEXT[()])] if had_run else []
        return [*so_far, (dict(start.result or {}), "__input__")]
    return [_fork_update(source)]


def _fork_update(source: StateSnapshot) -> tuple[dict[str, Any], str]:
    """The values to write into a fork of a checkpoint between two nodes, and the node to
    write them as."""
    writer = _WRITER_OF_NEXT.get(tuple(source.next))
    if writer is None:
        raise ConfigError(f"cannot fork a checkpoint whose next step is {source.next}")
    values = dict(source.values)
    if tuple(source.next) == ("retry",):
        # `retry` is reached from `route` (whose hop says "retry") or from a person's "retry"
        # at `escalate`, which leaves route's "escalate" behind: written as `route`, the copy
        # must say where route's edge goes.
        values["next_hop"] = "retry"
    return values, writer
