"""Journal rows written at the same moment share one commit, and each still succeeds or fails
on its own (graph/store/group_commit.py), on a real SQLite file."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.journal import SqliteJournal
from bashgraph.tools.results import CommandResult, Outcome

WRITERS = 10


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(str(tmp_path / "journal.sqlite"), busy_timeout_s=0.2)
    yield opened
    opened.close()  # closing twice is harmless


def statements(journal: SqliteJournal) -> list[str]:
    """Every statement the journal's connection runs from now on."""
    seen: list[str] = []
    journal._conn.set_trace_callback(seen.append)
    return seen


@contextmanager
def writers_queued_behind_a_held_connection(
    journal: SqliteJournal, writes: Sequence[Callable[[], None]],
    before_release: Callable[[], None] | None = None,
) -> Iterator[list[BaseException | None]]:
    """Start one thread per write while the connection is held, so every write is queued
    before any commit runs (`before_release` runs then); the block's end lets them go and waits
    for all of them."""
    outcomes: list[BaseException | None] = [None] * len(writes)

    def write(index: int) -> None:
        try:
            writes[index]()
        except BaseException as exc:  # handed to the test
            outcomes[index] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writes))]
    with journal._lock:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(journal._group._queue) < len(writes):
            assert time.monotonic() < deadline, "the writers never queued their rows"
            time.sleep(0.001)
        if before_release is not None:
            before_release()
    for thread in threads:
        thread.join(timeout=10)
    yield outcomes


def test_starts_written_at_once_share_one_fsynced_commit(journal: SqliteJournal) -> None:
    seen = statements(journal)
    starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
    with writers_queued_behind_a_held_connection(journal, starts) as outcomes:
        pass
    assert outcomes == [None] * WRITERS
    assert [s for s in seen if s in ("BEGIN IMMEDIATE", "COMMIT")] == ["BEGIN IMMEDIATE", "COMMIT"]
    assert seen.index("PRAGMA synchronous=FULL") < seen.index("COMMIT")
    assert sorted(call for call, _, _ in journal.entries("t")) == sorted(f"call-{i}" for i in range(WRITERS))


def test_finishes_alone_are_committed_without_an_fsync(journal: SqliteJournal) -> None:
    for i in range(WRITERS):
        journal.start("t", f"call-{i}", 0, "true")
    seen = statements(journal)
    result = CommandResult(Outcome.OK, "true", exit_code=0)
    finishes = [partial(journal.finish, "t", f"call-{i}", 0, result) for i in range(WRITERS)]
    with writers_queued_behind_a_held_connection(journal, finishes) as outcomes:
        pass
    assert outcomes == [None] * WRITERS
    assert "PRAGMA synchronous=FULL" not in seen
    assert seen.count("COMMIT") == 1
    assert all(entry.result == result for _, _, entry in journal.entries("t"))


def test_a_second_start_of_a_call_fails_alone_in_its_group(journal: SqliteJournal) -> None:
    journal.start("t", "call-0", 0, "echo 0")
    starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
    with writers_queued_behind_a_held_connection(journal, starts) as outcomes:
        pass
    assert isinstance(outcomes[0], StoreError)
    assert "already started; refusing to run it twice" in str(outcomes[0])
    assert outcomes[1:] == [None] * (WRITERS - 1)
    assert len(journal.entries("t")) == WRITERS


def test_a_commit_that_fails_fails_every_row_of_its_group(journal: SqliteJournal, tmp_path: Path) -> None:
    blocker = sqlite3.connect(tmp_path / "journal.sqlite", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock past the journal's busy timeout
    try:
        starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
        with writers_queued_behind_a_held_connection(journal, starts) as outcomes:
            pass
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert all(isinstance(outcome, StoreError) and "locked" in str(outcome) for outcome in outcomes)
    assert journal.entries("t") == []
    journal.start("t", "call-0", 0, "echo 0")  # the connection is usable again
    assert [call for call, _, _ in journal.entries("t")] == ["call-0"]


class _FailingCommit:
    """The journal's connection, with its COMMIT replaced by `failure` (a full disk, an interrupt)."""

    def __init__(self, conn: sqlite3.Connection, failure: BaseException) -> None:
        self._conn = conn
        self._failure = failure

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise self._failure
        return self._conn.execute(sql, *args)


@contextmanager
def commits_failing_with(journal: SqliteJournal, failure: BaseException) -> Iterator[None]:
    real = journal._group._conn
    journal._group._conn = _FailingCommit(real, failure)  # type: ignore[assignment]
    try:
        yield
    finally:
        journal._group._conn = real


def assert_nothing_written_and_usable(journal: SqliteJournal, tmp_path: Path) -> None:
    """No row of the group reached the file, no transaction is left open, commits no longer
    fsync, and the journal writes again."""
    other = sqlite3.connect(tmp_path / "journal.sqlite")
    try:
        assert other.execute("SELECT count(*) FROM bashgraph_journal").fetchone() == (0,)
    finally:
        other.close()
    assert not journal._conn.in_transaction
    assert journal._conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    journal.start("t", "after", 0, "true")
    assert [call for call, _, _ in journal.entries("t")] == ["after"]


def test_a_failed_commit_is_rolled_back_and_fails_every_row(journal: SqliteJournal, tmp_path: Path) -> None:
    starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
    with commits_failing_with(journal, sqlite3.OperationalError("disk I/O error")), \
            writers_queued_behind_a_held_connection(journal, starts) as outcomes:
        pass
    assert all(isinstance(outcome, StoreError) and "disk I/O error" in str(outcome) for outcome in outcomes)
    assert_nothing_written_and_usable(journal, tmp_path)


def test_an_interrupted_commit_reports_no_row_written(journal: SqliteJournal, tmp_path: Path) -> None:
    """The writer doing the commit gets the interrupt; every other writer an error, never a
    success: their commands must not run unrecorded."""
    starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
    with commits_failing_with(journal, KeyboardInterrupt()), \
            writers_queued_behind_a_held_connection(journal, starts) as outcomes:
        pass
    assert sum(isinstance(outcome, KeyboardInterrupt) for outcome in outcomes) == 1
    others = [outcome for outcome in outcomes if not isinstance(outcome, KeyboardInterrupt)]
    assert all(isinstance(outcome, StoreError) and "cut off" in str(outcome) for outcome in others)
    assert_nothing_written_and_usable(journal, tmp_path)


def test_a_closed_connection_reports_no_row_written(journal: SqliteJournal) -> None:
    starts = [partial(journal.start, "t", f"call-{i}", 0, f"echo {i}") for i in range(WRITERS)]
    with writers_queued_behind_a_held_connection(journal, starts, before_release=journal._conn.close) as outcomes:
        pass
    assert all(isinstance(outcome, StoreError) and "closed" in str(outcome) for outcome in outcomes)


def test_a_row_too_big_fails_alone_in_its_group(journal: SqliteJournal) -> None:
    for i in range(WRITERS):
        journal.start("t", f"call-{i}", 0, "true")
    journal._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 2_000)
    small = CommandResult(Outcome.OK, "true", exit_code=0)
    big = CommandResult(Outcome.OK, "true", exit_code=0, stdout="x" * 5_000)
    finishes = [partial(journal.finish, "t", f"call-{i}", 0, big if i == 0 else small) for i in range(WRITERS)]
    with writers_queued_behind_a_held_connection(journal, finishes) as outcomes:
        pass
    assert isinstance(outcomes[0], StoreError)
    assert "too big" in str(outcomes[0])
    assert outcomes[1:] == [None] * (WRITERS - 1)
    results = {call: entry.result for call, _, entry in journal.entries("t")}
    assert results["call-0"] is None
    assert all(results[f"call-{i}"] == small for i in range(1, WRITERS))
