"""Where checkpoints live: open LangGraph's SQLite or PostgreSQL saver from a path or URL.

`open_checkpointer(url)` picks the backend from the string and runs `setup()`:

* `None` → `$BASHGRAPH_DB` if set, else `default_db_path()` (a SQLite file in the user state dir);
* a path, or `sqlite:///relative/path` / `sqlite:////absolute/path` → `SqliteSaver` (WAL mode);
* `postgresql://…` or `postgres://…` → `PostgresSaver`.

Every way the database can be unusable (corrupt file, not a database, read-only file or folder,
locked, unreachable server, bad URL) becomes one `StoreError` line naming the database.

This module imports neither LangChain nor LangGraph at import time: `locate` and the error
helpers serve the CLI's quick commands (`threads`, `history`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.setup_lock import holding_setup_lock
from bashgraph.tools.runner import twin

if TYPE_CHECKING:
    import psycopg
    from langgraph.checkpoint.base import BaseCheckpointSaver

DB_ENV = "BASHGRAPH_DB"
#: How long a SQLite statement waits for another writer before failing as "locked".
BUSY_TIMEOUT_S = 10.0
#: Checkpoint commits are not fsynced one by one: a killed process loses nothing committed (it
#: is in the OS cache), and the journal fsyncs the shared WAL before every command starts, which
#: makes every earlier checkpoint durable against power loss too (see graph/store/journal.py).
SAVER_SYNCHRONOUS = "NORMAL"
#: How long connecting to PostgreSQL may take, unless the URL sets `connect_timeout`.
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class Location:
    """A checkpoint database: a SQLite file (`target` is its path) or a PostgreSQL conninfo."""

    kind: Literal["sqlite", "postgres"]
    target: str

    @property
    def label(self) -> str:
        """How errors name the database (a PostgreSQL password is never shown)."""
        return self.target if self.kind == "sqlite" else _hide_password(self.target)


def default_db_path() -> Path:
    """`$XDG_STATE_HOME/bashgraph/checkpoints.sqlite`, else `~/.local/state/bashgraph/...`."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    return Path(state_home).expanduser() / "bashgraph" / "checkpoints.sqlite"


def locate(url: str | None) -> Location:
    """Read a `--db` value: None (then `$BASHGRAPH_DB`, then the default file), a path or a URL."""
    url = url or os.environ.get(DB_ENV) or str(default_db_path())
    if url.startswith(("postgresql://", "postgres://")):
        return Location("postgres", url)
    if url.startswith("sqlite://"):
        # SQLAlchemy's convention: three slashes then a relative path, four for an absolute one.
        url = url.removeprefix("sqlite://").removeprefix("/")
    if not url or url == ":memory:" or "://" in url:
        raise StoreError(
            f"checkpoint database {url or '(empty)'!r}: expected a file path, sqlite:///PATH or "
            "postgresql://… (an in-memory database cannot be shared with the command journal)"
        )
    return Location("sqlite", str(Path(url).expanduser().absolute()))


# -- SQLite ---------------------------------------------------------------------------------
def connect_sqlite(
    path: str, *, autocommit: bool = False, busy_timeout_s: float | None = None
) -> sqlite3.Connection:
    """A checked, writable WAL connection usable from several threads (callers add a lock).

    `autocommit=False` keeps Python's implicit transactions (SqliteSaver relies on them to
    write a step's rows in one commit); the journal wants each statement committed on its own.
    """
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"checkpoint database {path}: cannot create its folder ({exc.strerror})") from None
    conn: sqlite3.Connection | None = None
    try:
        timeout = BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s
        conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        _probe_write(conn)
        if not autocommit:
            conn.isolation_level = "DEFERRED"
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        raise StoreError(f"checkpoint database {path}: {explain_sqlite(path, exc)}") from None
    return conn


def _probe_write(conn: sqlite3.Connection) -> None:
    """Write the header's user_version back unchanged, then roll back: a read-only file or
    folder fails here rather than in the middle of a run (SQLite opens such a file read-only
    without a word, and even BEGIN IMMEDIATE succeeds on it)."""
    conn.execute("BEGIN IMMEDIATE")
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("ROLLBACK")


def explain_sqlite(path: str, exc: sqlite3.Error) -> str:
    """One line on why SQLite refused `path`, naming the usual causes instead of error codes."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    folder = os.path.dirname(path) or "."
    if "not a database" in text or "malformed" in text:
        return f"not a usable SQLite database ({text}); move it away or pass another --db"
    if "locked" in text or "busy" in text:
        return f"locked by another process ({text})"
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is read-only; SQLite needs to write files next to it ({text})"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"the file is read-only ({text})"
    return text


@contextmanager
def sqlite_errors(label: str) -> Iterator[None]:
    """Turn a SQLite failure inside the block into a StoreError naming the database."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"checkpoint database {label}: {explain_sqlite(label, exc)}") from None


# -- PostgreSQL -----------------------------------------------------------------------------
def connect_postgres(conninfo: str, **options: Any) -> psycopg.Connection[Any]:
    """An autocommit connection set up as PostgresSaver requires (dict rows, no prepares),
    that neither the server nor the network ends for being idle (see `_connect_defaults`)."""
    import psycopg

    conn: psycopg.Connection[Any] = twin.run(_connecting(psycopg.Connection.connect, conninfo, options))
    return conn


async def aconnect_postgres(conninfo: str) -> psycopg.AsyncConnection[Any]:
    """Async form of `connect_postgres`."""
    import psycopg

    conn: psycopg.AsyncConnection[Any] = await twin.arun(_connecting(psycopg.AsyncConnection.connect, conninfo, {}))
    return conn


def _connecting(connect: Callable[..., Any], conninfo: str, options: dict[str, Any]) -> twin.Steps[Any]:
    """Both forms of `connect_postgres`: `connect` is the sync or the async connection's."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        conn = yield twin.same(connect, conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                               **_connect_defaults(conninfo), **options)
        with contextlib.suppress(psycopg.errors.UndefinedObject):  # a server before 14 has none
            yield twin.same(conn.execute, _NEVER_IDLE_OUT)
        return conn
    except psycopg.Error as exc:
        raise StoreError(f"checkpoint database {_hide_password(conninfo)}: {first_line(exc)}") from None


#: A run's connections wait while its commands run, for as long as a command takes: the
#: server's `idle_session_timeout` (PostgreSQL 14 and later) would end them mid-run.
_NEVER_IDLE_OUT = "SET idle_session_timeout = 0"
#: TCP keepalives every minute, unless the URL sets its own: a NAT or load balancer that drops
#: idle connections (often after five minutes) would otherwise end them while a command runs.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 60, "keepalives_interval": 10, "keepalives_count": 6}


def _connect_defaults(conninfo: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(conninfo)
    except Exception:
        return {}  # psycopg's own connect reports the bad URL in its words
    defaults: dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT_S}
    if not any(name.startswith("keepalives") for name in given):
        defaults |= _KEEPALIVES
    return defaults


@contextmanager
def postgres_errors(label: str) -> Iterator[None]:
    """Turn a PostgreSQL failure inside the block into a StoreError naming the database."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(f"checkpoint database {label}: {first_line(exc)}") from None


def _hide_password(conninfo: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(conninfo)
    except Exception:
        return conninfo.rsplit("@", maxsplit=1)[-1] if "@" in conninfo else conninfo
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def store_errors(location: Location) -> Iterator[None]:
    """Turn any failure of `location`'s backend inside the block into a StoreError."""
    guard = sqlite_errors if location.kind == "sqlite" else postgres_errors
    with guard(location.label):
        yield


# -- the savers -----------------------------------------------------------------------------
@contextmanager
def open_checkpointer(url: str | None = None) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's saver for `url` (see the module docstring), set up and ready; closed after."""
    location = locate(url)
    if location.kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = connect_sqlite(location.target)
        try:
            saver = SqliteSaver(conn)
            twin.run(_set_up(conn, saver, location))
            yield saver
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with connect_postgres(location.target) as pg:
            postgres = PostgresSaver(pg)
            twin.run(_set_up(pg, postgres, location))
            yield postgres


@asynccontextmanager
async def aopen_checkpointer(url: str | None = None) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Async form of `open_checkpointer`: AsyncSqliteSaver or AsyncPostgresSaver."""
    location = locate(url)
    if location.kind == "sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        connect_sqlite(location.target).close()  # same checks and messages as the sync form
        async with aiosqlite.connect(location.target, timeout=BUSY_TIMEOUT_S) as conn:
            saver = AsyncSqliteSaver(conn)
            await twin.arun(_set_up(conn, saver, location))
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with await aconnect_postgres(location.target) as pg:
            postgres = AsyncPostgresSaver(pg)
            await twin.arun(_set_up(pg, postgres, location))
            yield postgres


def _set_up(conn: Any, saver: Any, location: Location) -> twin.Steps[None]:
    """Both forms of a saver's set-up, on its connection (sqlite3's, aiosqlite's or psycopg's):
    SQLite's durability; on PostgreSQL, one worker at a time (setup_lock.py)."""
    if location.kind == "sqlite":
        yield twin.same(conn.execute, f"PRAGMA synchronous={SAVER_SYNCHRONOUS}")
        with sqlite_errors(location.label):
            yield twin.same(saver.setup)
    else:
        with postgres_errors(location.label):
            yield from holding_setup_lock(conn, twin.same(saver.setup))
