"""`bashgraph threads` and `history` on SQLite, read straight from LangGraph's tables.

Importing LangGraph and LangChain takes most of a second; listing threads needs neither. This
module reads the `checkpoints` and `writes` tables of `SqliteSaver` with `sqlite3` and decodes
their msgpack values with `ormsgpack` (what LangGraph's serializer uses underneath). Stored
LangChain objects (messages) are not rebuilt: they stay `Stored(module, name, args)` records,
enough to find a human message's text or a tool message's artifact.

The rows are the same as the full stack's (`threads.list_threads`, `threads.history`);
tests/graph/store/test_checkpoint_rows.py compares the two on real databases. PostgreSQL keeps
its blobs in another layout: the CLI reads it through LangGraph (slower to start, same rows).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bashgraph.graph.store.checkpoints import BUSY_TIMEOUT_S, locate, sqlite_errors
from bashgraph.graph.store.saver_guard import read_errors
from bashgraph.tools import CommandResult, Outcome, clip

TASK_CHARS = 200
INTERRUPT_CHANNEL = "__interrupt__"
#: Writes that record how a task went rather than what it wrote (LangGraph's control writes),
#: and new input (`update_state(..., as_node="__input__")` records it on the checkpoint before
#: the input's own: no node of that checkpoint made it).
_CONTROL_CHANNELS = frozenset({"__error__", "__error_source_node__", INTERRUPT_CHANNEL, "__resume__", "__start__"})
#: Writes given to a step from outside (update_state), not by one of its tasks.
_NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
_TRIGGER_PREFIX = "branch:to:"
_START = "__start__"
_HUMAN_ROLES = frozenset({"human", "user"})
#: The id of a RemoveMessage that removes every message (LangGraph's REMOVE_ALL_MESSAGES; this
#: reader imports no LangGraph).
_REMOVE_ALL = "__remove_all__"


@dataclass(frozen=True)
class ThreadInfo:
    """One line of `bashgraph threads`."""

    thread_id: str
    task: str
    """The first request of a person in the thread (clipped)."""
    status: str
    """"paused" when waiting for a person, else the state's `status` ("running", "done", ...).
    A thread whose worker died mid-run stays "running" until it is resumed."""
    updated_at: str
    """ISO time of its latest checkpoint."""
    forked_from: str | None = None
    """"THREAD@CHECKPOINT" when the thread was made by `fork`."""


@dataclass(frozen=True)
class CheckpointRow:
    """One line of `bashgraph history THREAD`."""

    checkpoint_id: str
    step: int
    node: str
    """The node whose writes made this checkpoint ("input" for a new run, "fork" for a fork)."""
    outcomes: str
    """How the commands answered in this step ended, e.g. "ok `ls`; exit_error(2) `cat x`"."""
    created_at: str
    next: tuple[str, ...] = ()


def outcome_text(result: CommandResult) -> str:
    """`ok `ls``, `exit_error(2) `cat x``, `spawn_error(timeout) `sleep 9``."""
    code = {
        Outcome.EXIT_ERROR: str(result.exit_code),
        Outcome.SPAWN_ERROR: str(result.spawn_error) if result.spawn_error else "",
    }.get(result.outcome, "")
    label = f"{result.outcome.value}({code})" if code else result.outcome.value
    return f"{label} `{clip(result.command, 60)}`"


def compaction_text(record: Any) -> str | None:
    """`compacted 17,677 → 4,299 tokens (overflow, window 16,384): 6 outputs cleared, 13
    messages summarised`, from the `context` record a `compact` step wrote; None for others."""
    last = record.get("last") if isinstance(record, Mapping) else None
    if not isinstance(last, Mapping):
        return None
    return (f"compacted {int(last.get('tokens_before') or 0):,} → {int(last.get('tokens_after') or 0):,} tokens "
            f"({last.get('trigger')}, window {int(last.get('window') or 0):,}): "
            f"{int(last.get('cleared') or 0)} outputs cleared, {int(last.get('summarised') or 0)} messages summarised")


# -- decoding -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stored:
    """An object LangGraph's serializer stored by class (a message, a snapshot of a channel)."""

    module: str
    name: str
    args: Any


def _ext(code: int, data: bytes) -> Any:
    import ormsgpack

    value = ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)
    if isinstance(value, list) and len(value) >= 3 and all(isinstance(v, str) for v in value[:2]):
        return Stored(value[0], value[1], value[2])
    return Stored("", f"ext{code}", value)  # a channel snapshot: its value is inside


def decode(kind: str | None, blob: bytes | None) -> Any:
    """A stored value, by the serializer's type tag; None for what this reader does not know."""
    if blob is None or kind in (None, "null", "empty"):
        return None
    if kind == "msgpack":
        import ormsgpack

        return ormsgpack.unpackb(blob, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)
    if kind == "json":
        return json.loads(blob)
    return None


# -- the tables -----------------------------------------------------------------------------
@dataclass
class _Checkpoint:
    checkpoint_id: str
    values: Mapping[str, Any]
    metadata: Mapping[str, Any]
    created_at: str
    tasks: dict[str, _Task] = field(default_factory=dict)
    """The tasks run from this checkpoint, by task id, in the order they first wrote."""


@dataclass
class _Task:
    node: str
    writes: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return any(channel not in _CONTROL_CHANNELS for channel, _ in self.writes)


def _connect(path: str) -> sqlite3.Connection | None:
    """The database read-only, or None when it does not exist yet (nothing to list)."""
    if not os.path.exists(path):
        return None
    with sqlite_errors(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'writes'").fetchone():
            conn.close()
            return None  # never set up by a saver: no threads
    return conn


def _checkpoint(row: tuple[Any, ...]) -> _Checkpoint:
    checkpoint_id, kind, blob, metadata = row
    checkpoint = decode(kind, blob) or {}
    return _Checkpoint(
        checkpoint_id=str(checkpoint_id), values=checkpoint.get("channel_values") or {},
        metadata=json.loads(metadata) if metadata else {}, created_at=str(checkpoint.get("ts", "")),
    )


_CHECKPOINT_COLUMNS = "checkpoint_id, type, checkpoint, metadata"


def _one(conn: sqlite3.Connection, thread_id: str, checkpoint_id: str) -> _Checkpoint:
    row = conn.execute(
        f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
        "AND checkpoint_id = ?", (thread_id, checkpoint_id)).fetchone()
    return _checkpoint(row)


def _add_writes(conn: sqlite3.Connection, thread_id: str, checkpoints: Mapping[str, _Checkpoint]) -> None:
    """Attach each write to the task (and the checkpoint) it was made from."""
    rows = conn.execute("SELECT checkpoint_id, task_id, task_path, channel, type, value FROM writes "
                        "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY rowid", (thread_id,))
    for checkpoint_id, task_id, task_path, channel, kind, value in rows:
        checkpoint = checkpoints.get(checkpoint_id)
        if checkpoint is None or task_id == _NULL_TASK_ID:
            continue
        task = checkpoint.tasks.setdefault(task_id, _Task(_node_of(task_path)))
        wanted = channel in ("messages", "context", INTERRUPT_CHANNEL)  # the only values rows show
        task.writes.append((channel, decode(kind, value) if wanted else None))


def _node_of(task_path: str) -> str:
    """`~__pregel_pull, tools` -> `tools`."""
    return task_path.rsplit(", ", maxsplit=1)[-1] if task_path else ""


# -- threads --------------------------------------------------------------------------------
def read_threads(path: str) -> list[ThreadInfo]:
    """Every thread of the SQLite database at `path`, most recently updated first.

    A database or a row that cannot be read raises one StoreError line (`read_errors`).
    """
    with read_errors(locate(path)):
        return _read_threads(path)


def _read_threads(path: str) -> list[ThreadInfo]:
    conn = _connect(path)
    if conn is None:
        return []
    with sqlite_errors(path):
        try:
            infos = [_thread(conn, *row) for row in conn.execute(
                "SELECT thread_id, MIN(checkpoint_id), MAX(checkpoint_id) FROM checkpoints "
                "WHERE checkpoint_ns = '' GROUP BY thread_id").fetchall()]
        finally:
            conn.close()
    return sorted(infos, key=lambda info: info.updated_at, reverse=True)


def _thread(conn: sqlite3.Connection, thread_id: str, first_id: str, latest_id: str) -> ThreadInfo:
    latest = _one(conn, thread_id, latest_id)
    first = latest if first_id == latest_id else _one(conn, thread_id, first_id)
    paused = conn.execute(
        "SELECT 1 FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ? "
        "AND channel = ? LIMIT 1", (thread_id, latest_id, INTERRUPT_CHANNEL)).fetchone()
    forked = first.metadata.get("forked_from")
    return ThreadInfo(
        thread_id=str(thread_id), task=first_task(first.values),
        status="paused" if paused else str(latest.values.get("status") or "running"),
        updated_at=latest.created_at, forked_from=str(forked) if forked else None,
    )


def first_task(values: Mapping[str, Any]) -> str:
    """The first human message of a thread, from its first checkpoint (input or fork copy)."""
    run_input = values.get(_START)
    if isinstance(run_input, Mapping) and run_input.get("messages"):
        return _human_text(run_input["messages"])
    return _human_text(values.get("messages"))


def _human_text(messages: Any) -> str:
    for message in _messages(messages):
        text = _human_content(message)
        if text is not None:
            return clip(text, TASK_CHARS)
    return ""


def _messages(value: Any) -> Iterator[Any]:
    """The messages in a stored value: a list, one message, or a channel snapshot of them."""
    if isinstance(value, Stored) and value.name.startswith("ext"):
        yield from _messages(value.args)
    elif isinstance(value, list) and not _is_pair(value):
        yield from value
    elif value:
        yield value


def _is_pair(value: list[Any]) -> bool:
    return len(value) == 2 and all(isinstance(v, str) for v in value)


def _human_content(message: Any) -> str | None:
    """The text of a human message in any form LangChain accepts as input; None for others."""
    if isinstance(message, Stored):
        kwargs = message.args if isinstance(message.args, Mapping) else {}
        return str(kwargs.get("content", "")) if message.name in ("HumanMessage", "HumanMessageChunk") else None
    if isinstance(message, str):
        return message
    if isinstance(message, list) and _is_pair(message):
        return message[1] if message[0] in _HUMAN_ROLES else None
    if isinstance(message, Mapping):
        role = message.get("role", message.get("type"))
        return str(message.get("content", "")) if role in _HUMAN_ROLES else None
    return None


# -- history --------------------------------------------------------------------------------
def read_history(path: str, thread_id: str) -> list[CheckpointRow] | None:
    """The checkpoints of a thread, newest first; None when the thread does not exist.

    A database or a row that cannot be read raises one StoreError line (`read_errors`).
    """
    with read_errors(locate(path)):
        return _read_history(path, thread_id)


def _read_history(path: str, thread_id: str) -> list[CheckpointRow] | None:
    conn = _connect(path)
    if conn is None:
        return None
    with sqlite_errors(path):
        try:
            checkpoints = [_checkpoint(row) for row in conn.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = ? "
                "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC", (thread_id,))]
            _add_writes(conn, thread_id, {c.checkpoint_id: c for c in checkpoints})
        finally:
            conn.close()
    if not checkpoints:
        return None
    parents: list[_Checkpoint | None] = [*checkpoints[1:], None]
    # Oldest first: `held` gathers the answers each step wrote, for the steps after it.
    held: dict[Any, Any] = {}
    pairs = list(zip(checkpoints, parents, strict=True))
    return [_row(checkpoint, parent, held) for checkpoint, parent in reversed(pairs)][::-1]


def _row(checkpoint: _Checkpoint, parent: _Checkpoint | None, held: dict[Any, Any]) -> CheckpointRow:
    # The tasks of the parent checkpoint that finished are the ones whose writes made this one.
    made_by = [task for task in parent.tasks.values() if task.finished] if parent else []
    metadata = checkpoint.metadata
    if made_by:
        node = ", ".join(task.node for task in made_by)
    elif metadata.get("forked_from"):
        node = "fork"
    else:
        node = str(metadata.get("source", ""))
    return CheckpointRow(
        checkpoint_id=checkpoint.checkpoint_id, step=int(metadata.get("step", -1)), node=node,
        outcomes="; ".join(_outcome_lines(made_by, held)), created_at=checkpoint.created_at,
        next=_next_nodes(checkpoint.values),
    )


def _next_nodes(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The nodes a checkpoint triggers: the `branch:to:NODE` channels it holds (or the input)."""
    nodes = [name.removeprefix(_TRIGGER_PREFIX) for name in values if name.startswith(_TRIGGER_PREFIX)]
    return (_START, *nodes) if _START in values else tuple(nodes)


def _outcome_lines(tasks: Iterable[_Task], held: dict[Any, Any]) -> Iterator[str]:
    """The outcomes of the answers the tasks wrote. In a write that stores the whole
    conversation again (a removal of all messages first: graph/open_calls.py), one an earlier
    step wrote unchanged is that step's. (The `messages` channel keeps only each step's writes:
    `held` has the answers written so far.)"""
    for task in tasks:
        for channel, value in task.writes:
            if channel == "context" and (line := compaction_text(value)):
                yield line
            if channel != "messages":
                continue
            batch = value if isinstance(value, list) else [value]
            rewrite = any(_removes_all(message) for message in batch)
            for message in batch:
                artifact = _tool_artifact(message)
                if artifact is None:
                    continue
                answer_id = message.args.get("id")
                if not rewrite or held.get(answer_id) != message.args:
                    yield outcome_text(CommandResult.from_dict(artifact))
                held[answer_id] = message.args


def _removes_all(message: Any) -> bool:
    return (isinstance(message, Stored) and message.name == "RemoveMessage"
            and isinstance(message.args, Mapping) and message.args.get("id") == _REMOVE_ALL)


def _tool_artifact(message: Any) -> dict[str, Any] | None:
    if isinstance(message, Stored) and message.name in ("ToolMessage", "ToolMessageChunk"):
        artifact = message.args.get("artifact") if isinstance(message.args, Mapping) else None
        return artifact if isinstance(artifact, dict) else None
    return None
