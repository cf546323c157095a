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

import pytest

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.journal import SqliteJournal
from bashgraph.tools.results import CommandResult, Outcome

WRITERS = 10


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    opened = SqliteJournal(str(tmp_path / "journal.sqlite"), busy_timeout_s=0.2)
    yield opened
    opened.close()


def statements(journal: SqliteJournal) -> list[str]:
    """Every statement the journal's connection runs from now on."""
    seen: list[str] = []
    journal._conn.set_trace_callback(seen.append)
    return seen


@contextmanager
def writers_queued_behind_a_held_connection(
    journal: SqliteJournal, writes: Sequence[Callable[[], None]]
) -> Iterator[list[BaseException | None]]:
    """Start one thread per write while the connection is held, so every write is queued
    before any commit runs; the block's end lets them go and waits for all of them."""
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
