"""What the journal keeps beyond the result: the run marker and host of each start (for the
sweep after a crash), a journal from before those columns, and a damaged row."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
from langchain_core.messages import ToolCall

from bashgraph.graph import AgentConfig
from bashgraph.graph.call_journal import CALL_MARKER_VAR, CallContext
from bashgraph.graph.errors import StoreError
from bashgraph.graph.execution import Executor
from bashgraph.graph.store.checkpoints import locate
from bashgraph.graph.store.journal import TABLE, open_journal
from bashgraph.tools.results import SpawnErrorKind


def _damage(db_url: str, thread: str) -> None:
    query = f"UPDATE {TABLE} SET result_json = '{{\"outcome\": ' WHERE thread_id = '{thread}'"
    if db_url.startswith("postgres"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(query.encode())
    else:
        with sqlite3.connect(db_url) as conn:
            conn.execute(query)


def test_a_start_keeps_its_marker_and_host(db_url: str, thread_prefix: str) -> None:
    thread = f"{thread_prefix}-m"
    with open_journal(db_url) as journal:
        journal.start(thread, "call_1", 0, "sleep 1", "f00d")
        entry = journal.lookup(thread, "call_1", 0)
    assert entry is not None
    assert (entry.marker, entry.host) == ("f00d", socket.gethostname())


def test_a_damaged_result_is_one_store_error_naming_the_database(
    db_url: str, thread_prefix: str
) -> None:
    thread = f"{thread_prefix}-d"
    with open_journal(db_url) as journal:
        journal.start(thread, "call_1", 0, "echo hi")
        _damage(db_url, thread)
        with pytest.raises(StoreError, match="journal's row of `echo hi` is damaged") as error:
            journal.lookup(thread, "call_1", 0)
    assert str(error.value).startswith(f"cannot read the thread store {locate(db_url).label}: ")


def test_a_journal_made_before_the_marker_columns_gets_them(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE {TABLE} (thread_id TEXT NOT NULL, call_id TEXT NOT NULL, "
                     "attempt INTEGER NOT NULL, command TEXT NOT NULL, started_at REAL NOT NULL, "
                     "finished_at REAL, result_json TEXT, PRIMARY KEY (thread_id, call_id, attempt))")
        conn.execute(f"INSERT INTO {TABLE} VALUES ('t', 'c', 0, 'ls', 1.0, NULL, NULL)")
    with open_journal(str(db)) as journal:
        old = journal.lookup("t", "c", 0)
        journal.start("t", "c2", 0, "ls", "beef")
        new = journal.lookup("t", "c2", 0)
    assert old is not None
    assert (old.marker, old.host) == (None, None)
    assert new is not None
    assert new.marker == "beef"


def test_a_call_cut_off_on_another_host_is_reported_unchecked(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Its processes cannot be seen from here: `interrupted`, and the detail says why unchecked."""
    thread = f"{thread_prefix}-h"
    ctx = CallContext(thread, message_id="m1")
    call = ToolCall(name="bash", args={"command": "echo hi"}, id="c1", type="tool_call")
    with open_journal(db_url) as journal:
        journal.start(thread, ctx.key("c1"), 0, "echo hi", "cafe")
        _set_host(db_url, thread, "elsewhere")
        result = Executor(AgentConfig(workdir=str(tmp_path)), journal).run(call, None, ctx)
    assert result.spawn_error is SpawnErrorKind.INTERRUPTED
    assert "not checked: it started on host elsewhere, not this one" in (result.detail or "")


def _set_host(db_url: str, thread: str, host: str) -> None:
    query = f"UPDATE {TABLE} SET host = '{host}' WHERE thread_id = '{thread}'"
    if db_url.startswith("postgres"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(query.encode())
    else:
        with sqlite3.connect(db_url) as conn:
            conn.execute(query)


def test_a_cut_off_call_keeps_the_directory_it_started_in(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """A person's "retry" of an `interrupted` call runs it where it first started: the result
    carries that directory, on both paths (it was None, and the retry ran in the workdir)."""
    thread = f"{thread_prefix}-cwd"
    ctx = CallContext(thread, message_id="m1")
    sub = str(tmp_path / "sub")
    calls = [ToolCall(name="bash", args={"command": "sleep 1"}, id=f"c{i}", type="tool_call") for i in (1, 2)]
    with open_journal(db_url) as journal:
        for call in calls:
            journal.start(thread, ctx.key(call["id"] or ""), 0, "sleep 1")
        executor = Executor(AgentConfig(workdir=str(tmp_path)), journal)
        results = [executor.run(calls[0], sub, ctx), asyncio.run(executor.arun(calls[1], sub, ctx))]
    assert [(r.spawn_error, r.cwd) for r in results] == [(SpawnErrorKind.INTERRUPTED, sub)] * 2


def test_an_edited_cut_off_call_stops_what_is_left_of_the_original(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """A call cut off by a crash, then edited through `update_state` before the resume, runs
    its new command under a row of its own; the original's processes still running on this
    host are stopped first, as a resume stops those of any cut-off call."""
    thread = f"{thread_prefix}-edit"
    ctx = CallContext(thread, message_id="m1")
    marker = "feedface" * 4
    original = subprocess.Popen(["sleep", "30"], env={**os.environ, CALL_MARKER_VAR: marker})
    try:
        with open_journal(db_url) as journal:
            journal.start(thread, ctx.key("c1"), 0, "sleep 30", marker)
            edited = ToolCall(name="bash", args={"command": "echo edited"}, id="c1", type="tool_call")
            result = Executor(AgentConfig(workdir=str(tmp_path), grace_s=0.5), journal).run(edited, None, ctx)
        assert result.stdout == "edited\n"
        assert original.wait(timeout=5) is not None
    finally:
        original.kill()
        original.wait()
