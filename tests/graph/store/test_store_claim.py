"""Two starts of one call raced against the store itself: exactly one may win, whatever the server.

Each race makes both starters read "no row" before either writes (a barrier inside `get`), which
is what two runs of one thread on a server that enforces no multitask strategy can do. A journal
that reads and then writes lets both start the command; an insert-if-absent refuses one.
PostgreSQL (sync and the server's async store) is raced from two threads and from two processes;
the in-memory store from two threads of its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.store_journal import StoreJournal

POSTGRES_ENV = "BASHGRAPH_TEST_POSTGRES"
BARRIER_WAIT_S = 2.0


def _postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return url


class _Gate:
    """Holds each `get` until both racers have read (or the wait ran out: a lock held across
    the read lets only one read at a time, and that one must go on)."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2)

    def wait(self) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait(BARRIER_WAIT_S)


def _race(journals: list[StoreJournal], thread_id: str) -> list[str]:
    """Start one call from two threads at once; what each got ("started" or the refusal)."""
    def start(journal: StoreJournal) -> str:
        try:
            journal.start(thread_id, "reply/call_1", 0, "echo x >> counter")
        except StoreError as refused:
            return str(refused)
        return "started"

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(start, journals))


def _assert_one_won(outcomes: list[str]) -> None:
    assert outcomes.count("started") == 1, outcomes
    assert "refusing to run it twice" in next(o for o in outcomes if o != "started")


def test_memory_store_lets_one_of_two_threads_start_a_call() -> None:
    gate = _Gate()

    class GatedStore(InMemoryStore):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            found = super().get(*args, **kwargs)
            gate.wait()
            return found

    store = GatedStore()
    _assert_one_won(_race([StoreJournal(store), StoreJournal(store)], "t-memory"))


@pytest.fixture
def gated_postgres_store() -> Iterator[tuple[Any, _Gate]]:
    from langgraph.store.postgres import PostgresStore

    gate = _Gate()

    class GatedPostgresStore(PostgresStore):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            found = super().get(*args, **kwargs)
            gate.wait()
            return found

    with GatedPostgresStore.from_conn_string(_postgres_url()) as store:
        store.setup()
        yield store, gate


def test_postgres_store_lets_one_of_two_threads_start_a_call(gated_postgres_store: Any) -> None:
    store, _gate = gated_postgres_store
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    _assert_one_won(_race([StoreJournal(store), StoreJournal(store)], thread_id))
    store.delete(("bashgraph_journal", thread_id), "0/reply/call_1")


def test_the_servers_async_postgres_store_lets_one_start_a_call() -> None:
    """The self-hosted server's store: `AsyncPostgresStore` on an autocommit pool, its loop in
    one thread, the journal called from worker threads (as graph/execution.py does)."""
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    url, thread_id = _postgres_url(), f"t-{uuid.uuid4().hex[:10]}"
    gate = _Gate()

    class GatedAsyncStore(AsyncPostgresStore):
        async def aget(self, *args: Any, **kwargs: Any) -> Any:
            found = await super().aget(*args, **kwargs)
            await asyncio.get_running_loop().run_in_executor(None, gate.wait)
            return found

    async def serve() -> list[str]:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(url, min_size=2, max_size=4, open=False, kwargs=kwargs) as pool:
            store = GatedAsyncStore(pool)  # type: ignore[arg-type]
            await store.setup()
            outcomes = await asyncio.to_thread(_race, [StoreJournal(store), StoreJournal(store)], thread_id)
            await store.adelete(("bashgraph_journal", thread_id), "0/reply/call_1")
            return outcomes

    _assert_one_won(asyncio.run(serve()))


def _start_in_process(url: str, thread_id: str, go: Any, outcomes: Any) -> None:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(url) as store:
        journal = StoreJournal(store)
        go.wait(30)  # both connected: start together
        try:
            journal.start(thread_id, "reply/call_1", 0, "echo x >> counter")
            outcomes.put("started")
        except StoreError:
            outcomes.put("refused")


def test_two_processes_racing_on_postgres_start_each_call_once() -> None:
    """Two processes, each with its own connection, start the same calls at the same moment."""
    from langgraph.store.postgres import PostgresStore

    url = _postgres_url()
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
    context = multiprocessing.get_context("spawn")
    for _ in range(5):
        thread_id = f"t-{uuid.uuid4().hex[:10]}"
        go, outcomes = context.Barrier(3), context.Queue()
        racers = [context.Process(target=_start_in_process, args=(url, thread_id, go, outcomes))
                  for _ in range(2)]
        for racer in racers:
            racer.start()
        go.wait(30)
        for racer in racers:
            racer.join(60)
        assert sorted(outcomes.get(timeout=5) for _ in racers) == ["refused", "started"]
        with PostgresStore.from_conn_string(url) as store:
            store.delete(("bashgraph_journal", thread_id), "0/reply/call_1")


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """A database of its own (dropped afterwards), for tables no other test may see."""
    import psycopg

    url = _postgres_url()
    name = f"bashgraph_scratch_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_deleting_a_servers_thread_deletes_its_journal_rows(scratch_database: str) -> None:
    """A database with the self-hosted server's `threads` table: the rows of a deleted thread go
    with it, whoever deletes it; another thread's rows stay."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    gone, kept = str(uuid.uuid4()), str(uuid.uuid4())
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE threads (thread_id uuid PRIMARY KEY, status text)")
        conn.execute("INSERT INTO threads VALUES (%s, 'idle'), (%s, 'idle')", (gone, kept))
    with PostgresStore.from_conn_string(scratch_database) as store:
        store.setup()
        journal = StoreJournal(store)
        for thread_id in (gone, kept):
            journal.start(thread_id, "reply/call_1", 0, "seq 1 100000")
        with psycopg.connect(scratch_database, autocommit=True) as conn:
            conn.execute("DELETE FROM threads WHERE thread_id = %s", (gone,))
        assert journal.lookup(gone, "reply/call_1", 0) is None
        assert journal.lookup(kept, "reply/call_1", 0) is not None
