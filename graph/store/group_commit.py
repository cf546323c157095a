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

Each row succeeds or fails alone where SQLite allows it: an error in one statement (a second
start of the same call, a value too big) undoes that statement only, and SQLite keeps the rest
of the transaction. An error that ends the transaction (a full disk, a failed commit, a closed
connection) or an interrupt of the writer doing the commit fails every row of the group: none of
it was written, and the transaction is rolled back. A writer returns only for a row that the
commit is known to hold.
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
    done: bool = False  # a commit took the row (whatever came of it)
    committed: bool = False  # ... and the row is in the database: the only way to succeed
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
        the group's: a row not known to be committed is never reported written."""
        row = _Row(sql, params, durable)
        with self._queue_lock:
            self._queue.append(row)
        with self._connection_lock:
            if not row.done:
                self._commit_queued()
        if row.error is not None:
            raise row.error
        if not row.committed:
            raise sqlite3.OperationalError("the journal's commit did not complete")

    def _commit_queued(self) -> None:
        group: list[_Row] = []
        try:
            with self._queue_lock:
                group, self._queue = self._queue, []
            self._write(group)
        except BaseException as exc:
            # Every row of the group gets an error of its own kind; the writer that was
            # committing raises what stopped it (an interrupt included) to its own caller.
            shared = exc if isinstance(exc, sqlite3.Error) else sqlite3.OperationalError(
                f"the journal's commit was cut off ({type(exc).__name__})")
            for row in group:
                if row.error is None:
                    row.error = shared
            if not isinstance(exc, sqlite3.Error):
                raise
        finally:
            for row in group:
                row.done = True

    def _write(self, group: list[_Row]) -> None:
        conn = self._conn
        discard_unfinished(conn)
        durable = any(row.durable for row in group)
        if durable:
            conn.execute("PRAGMA synchronous=FULL")  # this group's commit fsyncs the WAL
        try:
            conn.execute("BEGIN IMMEDIATE")
            for row in group:
                try:
                    conn.execute(row.sql, row.params)
                except sqlite3.Error as exc:
                    if not conn.in_transaction:  # SQLite gave up the whole transaction
                        raise
                    row.error = exc  # this statement alone is undone; the group goes on
            conn.execute("COMMIT")
        except BaseException:
            discard_unfinished(conn)
            raise
        finally:
            if durable:
                _quietly(conn, "PRAGMA synchronous=NORMAL")
        for row in group:
            row.committed = row.error is None


def discard_unfinished(conn: sqlite3.Connection) -> None:
    """Roll back a transaction a cut-off group left open (the journal's connection commits
    every statement by itself otherwise), so nobody reads or extends it."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        return  # a closed or failing connection: its next use reports why


def _quietly(conn: sqlite3.Connection, sql: str) -> None:
    try:
        conn.execute(sql)
    except sqlite3.Error:
        return  # the connection is failing already; the writers get its first error
