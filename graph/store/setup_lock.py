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
    import psycopg

    deadline = time.monotonic() + SETUP_WAIT_S
    while not _took(conn.execute(_TRY_SETUP, (SETUP_LOCK_KEY,)).fetchone()):
        _still_waiting_for_setup(deadline)
        time.sleep(0.05)
    try:
        yield
    finally:
        # A connection that broke inside the block has lost the lock with its session: the
        # error that broke it is the one to report, not this release's.
        if not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.execute(_END_SETUP, (SETUP_LOCK_KEY,))


@asynccontextmanager
async def asetting_up(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """`setting_up` for an async connection."""
    import psycopg

    deadline = time.monotonic() + SETUP_WAIT_S
    while not _took(await (await conn.execute(_TRY_SETUP, (SETUP_LOCK_KEY,))).fetchone()):
        _still_waiting_for_setup(deadline)
        await asyncio.sleep(0.05)
    try:
        yield
    finally:
        # As in `setting_up`; a cancellation that closed the connection stays a cancellation.
        if not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.execute(_END_SETUP, (SETUP_LOCK_KEY,))


def _took(row: Any) -> bool:
    return bool(row and row["ok"])


def _still_waiting_for_setup(deadline: float) -> None:
    import psycopg

    if time.monotonic() > deadline:  # a psycopg error: `postgres_errors` names the database
        raise psycopg.OperationalError(f"another worker has been setting the database up for "
                                       f"{SETUP_WAIT_S:.0f} s and has not finished")
