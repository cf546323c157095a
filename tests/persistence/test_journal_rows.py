"""What the journal keeps beyond the result: the run marker and host of each start (for the
sweep after a crash), a journal from before those columns, and a damaged row."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from bashgraph.graph.checkpoints import locate
from bashgraph.graph.errors import StoreError
from bashgraph.graph.journal import TABLE, open_journal


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
