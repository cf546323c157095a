"""Insert-if-absent for one row of a LangGraph store: what makes a journal start atomic there.

A `BaseStore` offers get and put (an upsert) but no "insert only if absent", so two runs of one
thread that both read "no row" would both start the command. Where the store's backend can do
better, `claim` does:

* PostgreSQL (`PostgresStore`, `AsyncPostgresStore`: the self-hosted server's store and the
  Platform's) — one `INSERT ... ON CONFLICT (prefix, key) DO NOTHING` into the store's own
  table; of two starts of one call, in any processes on any hosts, exactly one inserts.
* any other store — a lock held in this process across the get and the put: atomic for the
  stores that live in one process (`InMemoryStore`, which `langgraph dev` serves), and for
  several threads of one process on a shared file (SQLite). Two processes sharing another kind
  of store rely on the server keeping one run per thread (docs/serving.md says which do).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

#: The table `PostgresStore` and `AsyncPostgresStore` keep their items in (langgraph's schema).
_INSERT_IF_ABSENT = """
INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)
ON CONFLICT (prefix, key) DO NOTHING
"""

_in_process = threading.Lock()


def claim(store: Any, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
    """Write `value` under `namespace`/`key` unless a row is there: True when this call wrote it,
    False when one was already there (whoever wrote it, whenever)."""
    kind = _postgres_kind(store)
    if kind == "async":
        return _claim_async_postgres(store, _prefix(namespace), key, value)
    if kind == "sync":
        return _claim_sync_postgres(store, _prefix(namespace), key, value)
    with _in_process:
        if store.get(namespace, key) is not None:
            return False
        store.put(namespace, key, value, index=False)
        return True


def _postgres_kind(store: Any) -> str | None:
    """"async" / "sync" for langgraph's PostgreSQL stores (subclasses included), else None.
    Looked up by class name so that a process without PostgreSQL never imports its store."""
    for cls in type(store).__mro__:
        if cls.__module__ == "langgraph.store.postgres.aio" and cls.__name__ == "AsyncPostgresStore":
            return "async"
        if cls.__module__ == "langgraph.store.postgres.base" and cls.__name__ == "PostgresStore":
            return "sync"
    return None


def _prefix(namespace: tuple[str, ...]) -> str:
    # How langgraph's PostgreSQL store spells a namespace in its `prefix` column.
    return ".".join(namespace)


def _claim_sync_postgres(store: Any, prefix: str, key: str, value: dict[str, Any]) -> bool:
    from psycopg import Connection
    from psycopg.types.json import Jsonb

    params = (prefix, key, Jsonb(value))
    if isinstance(store.conn, Connection):
        with store.lock, store.conn.transaction(), store.conn.cursor() as cur:
            cur.execute(_INSERT_IF_ABSENT, params)
            return cur.rowcount == 1
    with store.conn.connection() as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(_INSERT_IF_ABSENT, params)
        return bool(cur.rowcount == 1)


def _claim_async_postgres(store: Any, prefix: str, key: str, value: dict[str, Any]) -> bool:
    """Runs the insert on the store's own event loop (its connections belong to it); from any
    other thread, as the journal always calls (graph/execution.py runs it off the loop)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is store.loop:
        raise RuntimeError("the command journal may not write the server's store from its event loop")
    future = asyncio.run_coroutine_threadsafe(_ainsert(store, prefix, key, value), store.loop)
    return future.result()


async def _ainsert(store: Any, prefix: str, key: str, value: dict[str, Any]) -> bool:
    from psycopg import AsyncConnection
    from psycopg.types.json import Jsonb

    params = (prefix, key, Jsonb(value))
    if isinstance(store.conn, AsyncConnection):
        async with store.lock, store.conn.transaction(), store.conn.cursor() as cur:
            await cur.execute(_INSERT_IF_ABSENT, params)
            return cur.rowcount == 1
    async with store.conn.connection() as conn, conn.transaction(), conn.cursor() as cur:
        await cur.execute(_INSERT_IF_ABSENT, params)
        return bool(cur.rowcount == 1)
