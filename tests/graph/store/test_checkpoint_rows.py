"""The quick reader of `threads` and `history` (graph/store/checkpoint_rows.py) gives exactly the rows
the full LangGraph stack gives, on real SQLite files, for every kind of thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from bashgraph.graph import AgentConfig, StoreError
from bashgraph.graph.session import Session, open_session
from bashgraph.graph.store.checkpoint_rows import read_history, read_threads
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply


def drain(session: Session, inputs: Any, thread: str) -> None:
    for _ in session.run(inputs, thread):
        pass


def timed_out() -> AIMessage:
    return AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.2)])


def make_threads(db: str, tmp_path: Path) -> Session:
    """done, paused, aborted, failed-command, tuple-input and forked threads in one database
    (forks of a thread's first input, of a later input and of a step in between)."""
    steps = [
        calls_reply("echo one", "exit 3"), answer("finished"),  # done, with outcomes
        timed_out(),  # paused at an escalation
        timed_out(),  # aborted by the answer below
        answer("from a tuple"),  # input given as ("user", text)
        answer("fork done"),  # the fork of the first thread, resumed
        answer("again"),  # new input to the finished first thread
    ]
    config = AgentConfig(workdir=str(tmp_path))
    with open_session(db, model=ScriptedChatModel(steps), config=config) as session:
        drain(session, {"messages": [HumanMessage("the first task")]}, "done")
        drain(session, {"messages": [HumanMessage("wait a while")]}, "paused")
        drain(session, {"messages": [HumanMessage("wait and give up")]}, "aborted")
        drain(session, Command(resume="abort"), "aborted")
        drain(session, {"messages": [("user", "a tuple task")]}, "tuple")
        before_tools = next(row for row in session.history("done") if row.next == ("tools",))
        session.fork("done", before_tools.checkpoint_id, "forked")
        first = session.history("done")[-1]
        session.fork("done", first.checkpoint_id, "forked-input")
        drain(session, None, "forked")
        drain(session, {"messages": [HumanMessage("once more")]}, "done")
        second_start = next(row for row in session.history("done") if row.next == ("__start__",) and row.step > 0)
        session.fork("done", second_start.checkpoint_id, "forked-second-input")
        return session


def test_threads_and_history_equal_the_full_stacks(tmp_path: Path) -> None:
    db = str(tmp_path / "rows.sqlite")
    make_threads(db, tmp_path)
    with open_session(db, model=ScriptedChatModel([]), config=AgentConfig()) as session:
        full_threads = session.threads()
        full_history = {info.thread_id: session.history(info.thread_id) for info in full_threads}
    assert {info.status for info in full_threads} >= {"done", "paused", "aborted"}
    assert read_threads(db) == full_threads
    for thread_id, rows in full_history.items():
        assert read_history(db, thread_id) == rows, thread_id
    tasks = {info.thread_id: info.task for info in full_threads}
    assert tasks["tuple"] == "a tuple task"
    assert tasks["forked"] == tasks["forked-input"] == tasks["forked-second-input"] == "the first task"
    outcomes = [row.outcomes for row in full_history["done"] if row.outcomes]
    assert outcomes == ["ok `echo one`; exit_error(3) `exit 3`"]


def test_a_missing_database_lists_nothing_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "nowhere" / "none.sqlite"
    assert read_threads(str(db)) == []
    assert read_history(str(db), "t") is None
    assert not db.parent.exists()


def test_a_damaged_database_is_one_store_error(tmp_path: Path) -> None:
    db = tmp_path / "garbage.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        read_threads(str(db))
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        read_history(str(db), "t")


def test_an_unknown_thread_has_no_history(tmp_path: Path) -> None:
    db = str(tmp_path / "rows.sqlite")
    make_threads(db, tmp_path)
    assert read_history(db, "no-such-thread") is None


def test_reading_writes_nothing(tmp_path: Path) -> None:
    """`threads` and `history` only read: the database file is byte for byte the same, and the
    write-ahead log SQLite opens beside it (as for any reader of a WAL database) stays empty."""
    db = tmp_path / "rows.sqlite"
    make_threads(str(db), tmp_path)
    assert not Path(f"{db}-wal").exists()  # the saver's last close checkpointed it away
    before = db.read_bytes()
    read_threads(str(db))
    read_history(str(db), "done")
    assert db.read_bytes() == before
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
