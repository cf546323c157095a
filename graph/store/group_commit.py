"""Group commit for the SQLite journal: rows written at the same moment by several threads share
one transaction, and one fsync when any of them must be durable.

Every command writes a journal row before it starts (fsynced) and another when it ends. Many
commands at once (a batch of parallel calls, or many runs on one event loop, whose journal
writes run in worker threads) would each wait for a commit and an fsync of their own, one after
another, on the database's single write lock, which the checkpointer needs too. Here a writer
queues its row and takes the connection: if another writer's commit already carried the row, it
returns at once; if not, it commits every queued row in one transaction. A row is never reported
written before the commit that holds it returned, so a start is still durable before its
command runs.

Each row succeeds or fails alone. A constraint error (a second start of the same call) aborts
only that statement: SQLite keeps the rest of the transaction. Any other error rolls the whole
group back and every writer in it gets that error: nothing of the group was written.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class _Row:
    sql: str
    params: Sequence[Any]
    durable: bool
    done: bool = False
    error: BaseException | None = None


class GroupCommit:
    """Queued writes on one connection, committed by whichever writer gets the connection first.

    `connection_lock` is the lock every other use of the connection takes, so reads never see
    a group half-written.
    """

    def __init__(self, conn: sqlite3.Connection, connection_lock: threading.Lock) -> None:
        self._conn = conn
        self._connection_lock = connection_lock
        self._queue_lock = threading.Lock()
        self._queue: list[_Row] = []

    def write(self, sql: str, params: Sequence[Any], *, durable: bool) -> None:
        """Execute `sql` in the next group commit; return once it is committed (and fsynced when
        `durable`). Raises the row's own sqlite3.Error (IntegrityError for a duplicate key), or
        the group's."""
        row = _Row(sql, params, durable)
        with self._queue_lock:
            self._queue.append(row)
        with self._connection_lock:
            if not row.done:
                self._commit_queued()
        if row.error is not None:
            raise row.error

    def _commit_queued(self) -> None:
        with self._queue_lock:
            group, self._queue = self._queue, []
        durable = any(row.durable for row in group)
        conn = self._conn
        try:
            if durable:
                conn.execute("PRAGMA synchronous=FULL")  # this group's commit fsyncs the WAL
            conn.execute("BEGIN IMMEDIATE")
            for row in group:
                try:
                    conn.execute(row.sql, row.params)
                except sqlite3.IntegrityError as exc:
                    row.error = exc  # this statement alone is undone; the group goes on
            conn.execute("COMMIT")
        except BaseException as exc:  # a failed commit, or an interrupt: nothing of it is kept
            _roll_back(conn)
            for row in group:
                row.error = exc
        finally:
            if durable:
                _quietly(conn, "PRAGMA synchronous=NORMAL")
            for row in group:
                row.done = True


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        _quietly(conn, "ROLLBACK")


def _quietly(conn: sqlite3.Connection, sql: str) -> None:
    try:
        conn.execute(sql)
    except sqlite3.Error:
        return  # the connection is failing already; the writers get its first error
