"""The command journal on SQLite and PostgreSQL: durable starts, results, no double start."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolCall

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.call_journal import CallContext
from bashgraph.graph.errors import StoreError
from bashgraph.graph.execution import Executor
from bashgraph.graph.store.checkpoints import open_checkpointer
from bashgraph.graph.store.journal import PostgresJournal, SqliteJournal, open_journal
from bashgraph.graph.testing import ScriptedChatModel, calls_reply
from bashgraph.tools.results import CommandResult, Outcome, SpawnErrorKind

RESULT = CommandResult(
    outcome=Outcome.SPAWN_ERROR, command="sleep 9", cwd="/tmp", spawn_error=SpawnErrorKind.TIMEOUT,
    stdout="partial\n", stderr="warn", stdout_bytes=8, stderr_bytes=4, truncated=True,
    duration_s=1.5, detail="timeout after 1s", stdout_file="/tmp/spill", final_cwd="/tmp",
)


def test_a_start_is_visible_at_once_from_another_connection(db_url: str, thread_prefix: str) -> None:
    """start() has committed when it returns: a second journal (another connection) sees it."""
    thread = f"{thread_prefix}-a"
    with open_journal(db_url) as writer, open_journal(db_url) as reader:
        before = time.time()
        writer.start(thread, "call_1", 0, "echo hi")
        entry = reader.lookup(thread, "call_1", 0)
    assert entry is not None
    assert (entry.command, entry.result) == ("echo hi", None)
    assert before - 1 <= entry.started_at <= time.time() + 1


def test_a_finished_call_gives_back_the_same_result(db_url: str, thread_prefix: str) -> None:
    """finish() stores the CommandResult as JSON; lookup rebuilds it field for field."""
    thread = f"{thread_prefix}-b"
    with open_journal(db_url) as journal:
        journal.start(thread, "call_1", 0, RESULT.command)
        journal.finish(thread, "call_1", 0, RESULT)
    with open_journal(db_url) as journal:
        entry = journal.lookup(thread, "call_1", 0)
    assert entry is not None
    assert entry.result == RESULT


def test_keys_keep_threads_calls_and_attempts_apart(db_url: str, thread_prefix: str) -> None:
    """(thread, call id, attempt) is the key: a fork's thread or a retry never sees another's row."""
    thread = f"{thread_prefix}-c"
    with open_journal(db_url) as journal:
        journal.start(thread, "call_1", 0, "first")
        assert journal.lookup(f"{thread_prefix}-other", "call_1", 0) is None
        assert journal.lookup(thread, "call_1", 1) is None
        assert journal.lookup(thread, "call_2", 0) is None


def test_starting_the_same_call_twice_is_refused(db_url: str, thread_prefix: str) -> None:
    """A second start of one key raises instead of letting a command run twice."""
    thread = f"{thread_prefix}-d"
    with open_journal(db_url) as journal:
        journal.start(thread, "call_1", 0, "rm -rf build")
        with pytest.raises(StoreError, match="refusing to run it twice"):
            journal.start(thread, "call_1", 0, "rm -rf build")


def test_parallel_calls_from_threads_are_all_recorded(db_url: str, thread_prefix: str) -> None:
    """The tools node runs a batch in threads: concurrent starts and finishes are all kept."""
    thread = f"{thread_prefix}-e"

    def one(index: int) -> None:
        journal.start(thread, f"call_{index}", 0, f"echo {index}")
        journal.finish(thread, f"call_{index}", 0, CommandResult(Outcome.OK, f"echo {index}"))

    with open_journal(db_url) as journal:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(24)))
        entries = [journal.lookup(thread, f"call_{index}", 0) for index in range(24)]
        listed = journal.entries(thread)
    assert [e.result.command if e and e.result else None for e in entries] == [
        f"echo {index}" for index in range(24)]
    assert sorted(key for key, _, _ in listed) == sorted(f"call_{index}" for index in range(24))


def test_the_journal_lives_in_the_checkpoint_database(tmp_path: Path) -> None:
    """SQLite: one file holds the checkpoint tables and bashgraph_journal."""
    path = str(tmp_path / "db.sqlite")
    with open_checkpointer(path), open_journal(path) as journal:
        assert isinstance(journal, SqliteJournal)
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert {"checkpoints", "writes", "bashgraph_journal"} <= tables


def test_open_journal_picks_the_class_from_the_url(db_url: str) -> None:
    """A path gives SqliteJournal, a postgresql:// URL gives PostgresJournal."""
    with open_journal(db_url) as journal:
        assert isinstance(journal, PostgresJournal if "://" in db_url else SqliteJournal)


def test_a_journal_that_cannot_record_stops_the_command_before_it_runs(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The journal fails on start: StoreError, and the command never ran (no marker file)."""
    marker = tmp_path / "ran"
    with open_journal(db_url) as journal:
        agent = build_graph(model=ScriptedChatModel([calls_reply(f"touch {marker}")]),
                            config=AgentConfig(workdir=str(tmp_path)), journal=journal)
        journal.close()  # every later write fails
        with pytest.raises(StoreError, match="checkpoint database"):
            agent.invoke({"messages": [HumanMessage("t")]},
                         {"configurable": {"thread_id": f"{thread_prefix}-f"}})
    assert not marker.exists()


def test_a_call_edited_after_it_was_journaled_runs_the_new_command(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Same thread, reply, call id and attempt, another command (a state edit, a replay): the
    journaled result belongs to the old command, so the new one runs — once."""
    log = tmp_path / "log"

    def call(word: str) -> ToolCall:
        return ToolCall(name="bash", args={"command": f"echo {word} >> {log}; cat {log}"},
                        id="call_0", type="tool_call")

    ctx = CallContext(thread_id=f"{thread_prefix}-edit", message_id="reply-1")
    with open_journal(db_url) as journal:
        executor = Executor(AgentConfig(workdir=str(tmp_path)), journal)
        first = executor.run(call("one"), None, ctx)
        edited = executor.run(call("two"), None, ctx)
        assert executor.run(call("one"), None, ctx) == first  # from the journal: not run again
        assert executor.run(call("two"), None, ctx) == edited
    assert (first.stdout, edited.stdout) == ("one\n", "one\ntwo\n")
    assert log.read_text() == "one\ntwo\n"
