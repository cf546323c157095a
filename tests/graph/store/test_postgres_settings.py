"""PostgreSQL as servers are really set up: a fresh database that several workers open at the
same moment, a server that ends idle sessions, advisory locks of other databases. Each test
makes a database of its own on the test server and drops it afterwards."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.errors import ThreadBusyError
from bashgraph.graph.session import open_session
from bashgraph.graph.store.checkpoints import connect_postgres
from bashgraph.graph.store.locks import _advisory_holder, lock_key, thread_lock
from bashgraph.graph.store.setup_lock import setting_up
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

OPEN_AT = """
import asyncio, sys, time
from bashgraph.graph.session import aopen_session, open_session
url, at, form = sys.argv[1], float(sys.argv[2]), sys.argv[3]

async def aopen():
    async with aopen_session(url) as session:
        await session.athreads()

time.sleep(max(0.0, at - time.time()))
if form == "async":
    asyncio.run(aopen())
else:
    with open_session(url) as session:
        session.threads()
print("opened")
"""


@contextmanager
def scratch_database(server_url: str, *settings: str) -> Iterator[str]:
    """A new database on the test server (with `ALTER DATABASE … SET` `settings`), its URL."""
    import psycopg

    name = f"bashgraph_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        for setting in settings:
            admin.execute(f"ALTER DATABASE {name} SET {setting}")
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_workers_opening_a_fresh_database_at_the_same_moment_all_open_it(postgres_url: str) -> None:
    """First deployment, replicas starting together: each sets the database up (LangGraph's
    migrations, the journal's tables) and none trips over another's."""
    for _ in range(2):
        with scratch_database(postgres_url) as url:
            at = str(time.time() + 3)  # after every interpreter has imported what it needs
            workers = [subprocess.Popen([sys.executable, "-c", OPEN_AT, url, at, form], text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                       for form in ("sync", "async", "sync", "async")]
            reports = [worker.communicate(timeout=60) for worker in workers]
            assert [out.strip() for out, _ in reports] == ["opened"] * 4, [err[-500:] for _, err in reports]


def test_a_server_that_ends_idle_sessions_does_not_end_a_thread_lock(postgres_url: str) -> None:
    """The lock's connection only waits while the run works on its other connections; with
    `idle_session_timeout` set, the server must not end it (and the lock with it)."""
    with scratch_database(postgres_url, "idle_session_timeout = 500") as url, thread_lock(url, "held"):
        time.sleep(1.5)
        with pytest.raises(ThreadBusyError, match="thread held is busy"), thread_lock(url, "held"):
            pass


def test_a_server_that_ends_idle_sessions_does_not_end_a_run(postgres_url: str, tmp_path: Path) -> None:
    """While a command runs longer than `idle_session_timeout`, the run's saver and journal
    connections wait too; the server must not end them."""
    model = ScriptedChatModel([calls_reply("sleep 1.5"), answer("slept")])
    with scratch_database(postgres_url, "idle_session_timeout = 500") as url, \
            open_session(url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run({"messages": [HumanMessage("sleep")]}, "idle"):
            pass
        assert session.state("idle").values["status"] == "done"


def test_a_connection_broken_while_setting_up_reports_what_broke_it(postgres_url: str) -> None:
    """Not the set-up lock's release on the dead connection ("the connection is closed")."""
    import psycopg

    def broken_inside(conn: psycopg.Connection[Any], url: str) -> None:
        backend = conn.info.backend_pid
        with setting_up(conn):
            with connect_postgres(url) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            conn.execute("SELECT 1")

    with scratch_database(postgres_url) as url, connect_postgres(url) as conn, \
            pytest.raises(psycopg.errors.AdminShutdown):
        broken_inside(conn, url)


def test_the_holder_named_is_one_of_this_database(postgres_url: str) -> None:
    """Advisory locks are per database: the same key held in another database of the server
    is not this thread's holder."""
    with scratch_database(postgres_url) as other:
        elsewhere = connect_postgres(other)
        try:
            elsewhere.execute("SELECT pg_advisory_lock(%s)", (lock_key("shared-name"),))
            with connect_postgres(postgres_url) as here:
                assert _advisory_holder(here, lock_key("shared-name")) is None
        finally:
            elsewhere.close()
