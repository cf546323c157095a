"""The command journal: a durable row per command, written before it starts, completed after.

It lives in the checkpoint database (table `bashgraph_journal`), keyed by (thread, call key,
attempt); `Executor`'s call key is "<model reply id>/<tool-call id>". `Executor` looks a call up
before running it: a recorded result is reused, a start without a result becomes
`spawn_error/interrupted`. So a resume never runs a command twice; a fork (another thread id)
never reuses the original's rows.

Each start row also holds the command's run marker (an environment variable every process it
starts inherits, see tools/runner/reaper.py) and this host's name: after a crash, the resume kills
whatever of the command still runs on this host before it reports the call `interrupted`.

`start` is durable before it returns (SQLite: its own connection, synchronous=FULL for the commit
of a start so the WAL is fsynced, and rows written at the same moment by several threads share
one commit, see group_commit.py; PostgreSQL: autocommit). Any failure to
record raises StoreError, so a command never runs unrecorded. Both classes are thread-safe
(parallel calls run in threads).

Why only the start is fsynced on SQLite: the start is what stops a second run. A result lost to a
power cut turns into `interrupted` on resume, never into a second run; and it survives a killed
process either way (a commit is in the OS cache). The fsync of a start also makes every earlier
commit durable, checkpoints included: they share the database's one WAL file.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.checkpoints import (
    connect_postgres,
    connect_sqlite,
    locate,
    postgres_errors,
    sqlite_errors,
)
from bashgraph.graph.store.group_commit import GroupCommit, discard_unfinished
from bashgraph.graph.store.journal_rows import JobRow, JournalEntry
from bashgraph.graph.store.setup_lock import setting_up
from bashgraph.tools import CommandResult

if TYPE_CHECKING:
    import psycopg

TABLE = "bashgraph_journal"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    thread_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    command TEXT NOT NULL,
    started_at {{real}} NOT NULL,
    finished_at {{real}},
    result_json TEXT,
    marker TEXT,
    host TEXT,
    PRIMARY KEY (thread_id, call_id, attempt)
)"""
#: Columns added after the first release: a journal created before gets them on open.
_ADDED_COLUMNS = ("marker", "host")
_LOOKUP = (
    f"SELECT command, started_at, result_json, marker, host FROM {TABLE} "
    "WHERE thread_id = ? AND call_id = ? AND attempt = ?"
)
_START = (
    f"INSERT INTO {TABLE} (thread_id, call_id, attempt, command, started_at, marker, host) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_FINISH = f"UPDATE {TABLE} SET finished_at = ?, result_json = ? WHERE thread_id = ? AND call_id = ? AND attempt = ?"
_ENTRIES = (
    f"SELECT call_id, attempt, command, started_at, result_json FROM {TABLE} "
    "WHERE thread_id = ? ORDER BY started_at"
)
_DELETE = f"DELETE FROM {TABLE} WHERE thread_id = ?"

#: Background jobs (graph/jobs.py): a row before the job's spawn, its end when it is known.
JOBS_TABLE = "bashgraph_jobs"
_JOBS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {JOBS_TABLE} (
    thread_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    command TEXT NOT NULL,
    marker TEXT NOT NULL,
    owner TEXT NOT NULL,
    started_at {{real}} NOT NULL,
    ended TEXT,
    PRIMARY KEY (thread_id, job_id)
)"""
_JOB_START = (f"INSERT INTO {JOBS_TABLE} (thread_id, job_id, command, marker, owner, started_at) "
              "VALUES (?, ?, ?, ?, ?, ?)")
_JOB_END = f"UPDATE {JOBS_TABLE} SET ended = ? WHERE thread_id = ? AND job_id = ? AND ended IS NULL"
_JOB_ROWS = (f"SELECT job_id, command, marker, owner, ended FROM {JOBS_TABLE} WHERE thread_id = ? "
             "ORDER BY started_at")
_JOBS_DELETE = f"DELETE FROM {JOBS_TABLE} WHERE thread_id = ?"
#: Ended rows a fork inherits (`jobs_inherited`); a second copy of the same ids changes nothing.
_JOB_INHERITED = (f"INSERT INTO {JOBS_TABLE} (thread_id, job_id, command, marker, owner, started_at, ended) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")


def _entry(store: str, command: str, started_at: float, result_json: str | None, *,
           marker: str | None = None, host: str | None = None) -> JournalEntry:
    try:
        result = CommandResult.from_dict(json.loads(result_json)) if result_json else None
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(
            f"cannot read the thread store {store}: the command journal's row of `{command}` "
            f"is damaged ({type(exc).__name__}: {exc}); restore the database from a backup"
        ) from None
    return JournalEntry(command=command, started_at=float(started_at), result=result,
                        marker=marker, host=host)


def _already_started(thread_id: str, call_id: str, attempt: int) -> StoreError:
    return StoreError(
        f"command journal: call {call_id!r} (attempt {attempt}) of thread {thread_id!r} was "
        "already started; refusing to run it twice"
    )


class SqliteJournal:
    """The journal in a SQLite file (normally the checkpoint database itself)."""

    def __init__(self, path: str, *, busy_timeout_s: float | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = connect_sqlite(path, autocommit=True, busy_timeout_s=busy_timeout_s)
        with self._guard():
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_SCHEMA.format(real="REAL"))
            have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}
            for column in _ADDED_COLUMNS:
                if column not in have:
                    self._conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {column} TEXT")
            self._conn.execute(_JOBS_SCHEMA.format(real="REAL"))
        # Starts and finishes of commands running at once share commits (graph/store/group_commit.py).
        self._group = GroupCommit(self._conn, self._lock)

    @contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        with self._lock, sqlite_errors(self.path):
            discard_unfinished(self._conn)  # never read a group an interrupt left half-done
            yield self._conn

    def lookup(self, thread_id: str, call_id: str, attempt: int) -> JournalEntry | None:
        with self._guard() as conn:
            row = conn.execute(_LOOKUP, (thread_id, call_id, attempt)).fetchone()
        if row is None:
            return None
        command, started_at, result_json, marker, host = row
        return _entry(self.path, command, started_at, result_json, marker=marker, host=host)

    def start(self, thread_id: str, call_id: str, attempt: int, command: str,
              marker: str | None = None) -> None:
        values = (thread_id, call_id, attempt, command, time.time(), marker, socket.gethostname())
        with sqlite_errors(self.path):
            try:
                self._group.write(_START, values, durable=True)  # fsynced before it returns
            except sqlite3.IntegrityError:
                raise _already_started(thread_id, call_id, attempt) from None

    def finish(self, thread_id: str, call_id: str, attempt: int, result: CommandResult) -> None:
        payload = json.dumps(result.to_dict())
        with sqlite_errors(self.path):
            self._group.write(_FINISH, (time.time(), payload, thread_id, call_id, attempt), durable=False)

    def entries(self, thread_id: str) -> list[tuple[str, int, JournalEntry]]:
        """(call key, attempt, entry) of every command of `thread_id`, oldest first."""
        with self._guard() as conn:
            rows = conn.execute(_ENTRIES, (thread_id,)).fetchall()
        return [(call, attempt, _entry(self.path, *rest)) for call, attempt, *rest in rows]

    def job_started(self, thread_id: str, row: JobRow) -> None:
        """Record a job before it is spawned (durable, like a command's start)."""
        values = (thread_id, row.job_id, row.command, row.marker, row.owner, time.time())
        with self._guard() as conn:
            conn.execute("PRAGMA synchronous=FULL")
            try:
                conn.execute(_JOB_START, values)
            finally:
                conn.execute("PRAGMA synchronous=NORMAL")

    def job_ended(self, thread_id: str, job_id: str, why: str) -> None:
        with self._guard() as conn:
            conn.execute(_JOB_END, (why, thread_id, job_id))

    def job_rows(self, thread_id: str) -> list[JobRow]:
        with self._guard() as conn:
            rows = conn.execute(_JOB_ROWS, (thread_id,)).fetchall()
        return [JobRow(*row) for row in rows]

    def jobs_inherited(self, thread_id: str, rows: list[JobRow]) -> None:
        """Record ended jobs `thread_id` holds no process of, all or none (one transaction)."""
        values = [_inherited_values(thread_id, row) for row in rows]
        with self._guard() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_JOB_INHERITED, values)
            conn.execute("COMMIT")

    def delete_thread(self, thread_id: str) -> None:
        """Forget every command of `thread_id` (with its checkpoints, when a thread is deleted)."""
        with self._guard() as conn:
            conn.execute(_DELETE, (thread_id,))
            conn.execute(_JOBS_DELETE, (thread_id,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresJournal:
    """The journal in a PostgreSQL database (normally the checkpoint database itself)."""

    def __init__(self, conninfo: str) -> None:
        self.label = locate(conninfo).label
        self._lock = threading.Lock()
        self._conn = connect_postgres(conninfo)
        with self._guard() as conn, setting_up(conn):
            _create_table(conn)

    @contextmanager
    def _guard(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock, postgres_errors(self.label):
            yield self._conn

    @staticmethod
    def _sql(query: str) -> str:
        return query.replace("?", "%s")

    def lookup(self, thread_id: str, call_id: str, attempt: int) -> JournalEntry | None:
        with self._guard() as conn:
            row = conn.execute(self._sql(_LOOKUP), (thread_id, call_id, attempt)).fetchone()
        if row is None:
            return None
        return _entry(self.label, row["command"], row["started_at"], row["result_json"],
                      marker=row["marker"], host=row["host"])

    def start(self, thread_id: str, call_id: str, attempt: int, command: str,
              marker: str | None = None) -> None:
        import psycopg

        # autocommit: the row is committed (and by default fsynced) when execute returns.
        with self._guard() as conn:
            try:
                conn.execute(self._sql(_START), (thread_id, call_id, attempt, command, time.time(),
                                                 marker, socket.gethostname()))
            except psycopg.errors.UniqueViolation:
                raise _already_started(thread_id, call_id, attempt) from None

    def finish(self, thread_id: str, call_id: str, attempt: int, result: CommandResult) -> None:
        payload = json.dumps(result.to_dict())
        with self._guard() as conn:
            conn.execute(self._sql(_FINISH), (time.time(), payload, thread_id, call_id, attempt))

    def entries(self, thread_id: str) -> list[tuple[str, int, JournalEntry]]:
        """(call key, attempt, entry) of every command of `thread_id`, oldest first."""
        with self._guard() as conn:
            rows = conn.execute(self._sql(_ENTRIES), (thread_id,)).fetchall()
        return [
            (row["call_id"], row["attempt"],
             _entry(self.label, row["command"], row["started_at"], row["result_json"]))
            for row in rows
        ]

    def job_started(self, thread_id: str, row: JobRow) -> None:
        """Record a job before it is spawned (autocommit: durable when execute returns)."""
        values = (thread_id, row.job_id, row.command, row.marker, row.owner, time.time())
        with self._guard() as conn:
            conn.execute(self._sql(_JOB_START), values)

    def job_ended(self, thread_id: str, job_id: str, why: str) -> None:
        with self._guard() as conn:
            conn.execute(self._sql(_JOB_END), (why, thread_id, job_id))

    def job_rows(self, thread_id: str) -> list[JobRow]:
        with self._guard() as conn:
            rows = conn.execute(self._sql(_JOB_ROWS), (thread_id,)).fetchall()
        return [JobRow(row["job_id"], row["command"], row["marker"], row["owner"], row["ended"])
                for row in rows]

    def jobs_inherited(self, thread_id: str, rows: list[JobRow]) -> None:
        """Record ended jobs `thread_id` holds no process of, all or none (one transaction)."""
        values = [_inherited_values(thread_id, row) for row in rows]
        with self._guard() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(self._sql(_JOB_INHERITED), values)

    def delete_thread(self, thread_id: str) -> None:
        """Forget every command of `thread_id` (with its checkpoints, when a thread is deleted)."""
        with self._guard() as conn:
            conn.execute(self._sql(_DELETE), (thread_id,))
            conn.execute(self._sql(_JOBS_DELETE), (thread_id,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _create_table(conn: psycopg.Connection[Any]) -> None:
    import psycopg

    # Two workers creating it at the same moment: PostgreSQL's IF NOT EXISTS is not atomic (the
    # loser trips over the winner's row type); the table exists then, which is all we need.
    with suppress(psycopg.errors.UniqueViolation):
        conn.execute(_SCHEMA.format(real="DOUBLE PRECISION"))
    have = {row["column_name"] for row in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
        "AND table_schema = current_schema()", (TABLE,))}
    # Only when missing: ALTER TABLE takes the table's strongest lock even when it has nothing
    # to do. (Same race as above: the loser finds the column there.)
    for column in (c for c in _ADDED_COLUMNS if c not in have):
        with suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateColumn):
            conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {column} TEXT")
    for schema in (_SCHEMA, _JOBS_SCHEMA):
        with suppress(psycopg.errors.UniqueViolation):
            conn.execute(schema.format(real="DOUBLE PRECISION"))


AnyJournal = SqliteJournal | PostgresJournal


@contextmanager
def open_journal(url: str | None = None) -> Iterator[AnyJournal]:
    """The journal of the database `url` names (same rules as `open_checkpointer`)."""
    location = locate(url)
    journal: AnyJournal = (
        SqliteJournal(location.target) if location.kind == "sqlite"
        else PostgresJournal(location.target)
    )
    try:
        yield journal
    finally:
        journal.close()


def _inherited_values(thread_id: str, row: JobRow) -> tuple[Any, ...]:
    return (thread_id, row.job_id, row.command, row.marker, row.owner, time.time(), row.ended)
