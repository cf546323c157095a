"""Insert-if-absent for one row of a LangGraph store: what makes a journal start atomic there.

A `BaseStore` offers get and put (an upsert) but no "insert only if absent", so two runs of one
thread that both read "no row" would both start the command. Where the store's backend can do
better, `claim` does:

* PostgreSQL (`PostgresStore`, `AsyncPostgresStore`: the self-hosted server's store) — one
  `INSERT ... ON CONFLICT (prefix, key) DO NOTHING` into the store's own table; of two starts of
  one call, in any processes on any hosts, exactly one inserts.
* any other store — a lock held in this process across the get and the put: atomic for the
  stores that live in one process (`InMemoryStore`, which `langgraph dev` serves), and for
  several threads of one process on a shared file (SQLite). Two processes sharing another kind
  of store rely on the server keeping one run per thread (docs/serving.md says which do).

Rows go with their thread: in a PostgreSQL database that also holds the server's `threads` table
(the self-hosted server's schema), the first claim of each process makes sure a trigger deletes a
thread's journal rows when the thread's row is deleted, by `threads.delete` or any other way.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any

from bashgraph.tools.runner import twin

#: The table `PostgresStore` and `AsyncPostgresStore` keep their items in (langgraph's schema).
_INSERT_IF_ABSENT = """
INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)
ON CONFLICT (prefix, key) DO NOTHING
"""

#: Installs (or renews) the trigger that deletes a thread's journal rows with the thread, when
#: the database has the server's `threads` table; an advisory lock keeps two workers from
#: creating it at once. The prefix is the journal's namespace: a server's thread ids are UUIDs,
#: which the journal's namespace label keeps as they are.
_FORGET_WITH_THREADS = """
DO $outer$
BEGIN
  IF to_regclass('threads') IS NOT NULL AND EXISTS (
      SELECT 1 FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'threads' AND column_name = 'thread_id'
  ) THEN
    PERFORM pg_advisory_xact_lock(hashtext('bashgraph_journal_forget_thread'));
    CREATE OR REPLACE FUNCTION bashgraph_journal_forget_thread() RETURNS trigger
    LANGUAGE plpgsql AS $body$
    BEGIN
      DELETE FROM store WHERE prefix = 'bashgraph_journal.' || OLD.thread_id::text;
      RETURN OLD;
    END
    $body$;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'bashgraph_journal_forget_thread'
                   AND tgrelid = 'threads'::regclass) THEN
      CREATE TRIGGER bashgraph_journal_forget_thread AFTER DELETE ON threads
      FOR EACH ROW EXECUTE FUNCTION bashgraph_journal_forget_thread();
    END IF;
  END IF;
END
$outer$;
"""

_in_process = threading.Lock()
_log = logging.getLogger(__name__)
#: The stores whose database was given the trigger (or refused it) in this process.
_trigger_checked: weakref.WeakSet[Any] = weakref.WeakSet()


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

    statements = _statements(store, prefix, key, Jsonb(value))
    if isinstance(store.conn, Connection):
        with store.lock:
            return _execute(store.conn, statements)
    with store.conn.connection() as conn:
        return _execute(conn, statements)


def _statements(store: Any, prefix: str, key: str, value: Any) -> list[tuple[str, tuple[Any, ...] | None]]:
    """The insert, after the trigger's install the first time this process writes `store`."""
    insert = (_INSERT_IF_ABSENT, (prefix, key, value))
    if store in _trigger_checked:
        return [insert]
    _trigger_checked.add(store)
    return [(_FORGET_WITH_THREADS, None), insert]


def _execute(conn: Any, statements: list[tuple[str, tuple[Any, ...] | None]]) -> bool:
    """Each statement in a transaction of its own (a refused trigger must not undo the insert);
    True when the last one wrote a row."""
    return twin.run(_executing(conn, statements))


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

    statements = _statements(store, prefix, key, Jsonb(value))
    if isinstance(store.conn, AsyncConnection):
        async with store.lock:
            return await _aexecute(store.conn, statements)
    async with store.conn.connection() as conn:
        return await _aexecute(conn, statements)


async def _aexecute(conn: Any, statements: list[tuple[str, tuple[Any, ...] | None]]) -> bool:
    """`_execute` on an async connection."""
    return await twin.arun(_executing(conn, statements))


def _executing(conn: Any, statements: list[tuple[str, tuple[Any, ...] | None]]) -> twin.Steps[bool]:
    """Both forms of `_execute`: each statement is a step (`_write` or `_awrite`)."""
    import psycopg

    rowcount = 0
    for sql, params in statements:
        try:
            rowcount = yield twin.call(_write, _awrite, conn, sql, params)
        except psycopg.Error as refused:
            if sql is not _FORGET_WITH_THREADS:
                raise
            _log.warning("bashgraph: journal rows will outlive their threads: %s", refused)
    return rowcount == 1


def _write(conn: Any, sql: str, params: tuple[Any, ...] | None) -> int:
    """One statement in a transaction of its own; the rows it wrote."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql, params)
        return int(cur.rowcount)


async def _awrite(conn: Any, sql: str, params: tuple[Any, ...] | None) -> int:
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(sql, params)
        return int(cur.rowcount)
