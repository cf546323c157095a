"""One worker at a time sets a PostgreSQL database up.

Workers that open a fresh database at the same moment (a first deployment, replicas starting
together) would otherwise race on its tables, types and LangGraph's migrations table: duplicate
keys, a deadlock. `open_checkpointer` and the journal hold this lock around their set-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from bashgraph.tools.runner import twin

if TYPE_CHECKING:
    import psycopg

#: The advisory lock held while a database is set up. A thread lock's key (a hash) never
#: equals it.
SETUP_LOCK_KEY = 3308944296653154149
#: How long a worker waits for another to finish setting the database up.
SETUP_WAIT_S = 60.0
_TRY_SETUP = "SELECT pg_try_advisory_lock(%s) AS ok"
_END_SETUP = "SELECT pg_advisory_unlock(%s)"


@contextmanager
def setting_up(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Hold the database's set-up lock for the block (one worker sets up at a time).

    Waited for by polling, never by a blocking `pg_advisory_lock`: LangGraph's migrations run
    `CREATE INDEX CONCURRENTLY`, which waits for every transaction already running to end; a
    worker blocked in `pg_advisory_lock` is such a transaction, and the server then reports a
    deadlock. Short tries end at once."""
    twin.run(_taking(conn))
    try:
        yield
    finally:
        twin.run(_releasing(conn))


@asynccontextmanager
async def asetting_up(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """`setting_up` for an async connection."""
    await twin.arun(_taking(conn))
    try:
        yield
    finally:
        await twin.arun(_releasing(conn))


def holding_setup_lock(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], step: twin.Step[Any]
) -> twin.Steps[Any]:
    """Both forms of `with setting_up(conn): step`: a shared body's step, the lock held."""
    yield from _taking(conn)
    try:
        return (yield step)
    finally:
        yield from _releasing(conn)


def _taking(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> twin.Steps[None]:
    """Both forms of taking the lock: a try every 50 ms, until the deadline."""
    deadline = time.monotonic() + SETUP_WAIT_S
    while True:
        cursor = yield twin.same(conn.execute, _TRY_SETUP, (SETUP_LOCK_KEY,))
        if _took((yield twin.same(cursor.fetchone))):
            return
        _still_waiting_for_setup(deadline)
        yield twin.call(time.sleep, asyncio.sleep, 0.05)


def _releasing(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> twin.Steps[None]:
    """Both forms of giving the lock back.

    A connection that broke inside the block has lost the lock with its session: the error
    that broke it is the one to report, not this release's (and a cancellation that closed the
    connection stays a cancellation)."""
    import psycopg

    if not conn.closed:
        with contextlib.suppress(psycopg.Error):
            yield twin.same(conn.execute, _END_SETUP, (SETUP_LOCK_KEY,))


def _took(row: Any) -> bool:
    return bool(row and row["ok"])


def _still_waiting_for_setup(deadline: float) -> None:
    import psycopg

    if time.monotonic() > deadline:  # a psycopg error: `postgres_errors` names the database
        raise psycopg.OperationalError(f"another worker has been setting the database up for "
                                       f"{SETUP_WAIT_S:.0f} s and has not finished")
