"""One thread, one worker: the thread lock on SQLite (flock) and PostgreSQL (advisory lock)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph.errors import ThreadBusyError
from bashgraph.graph.store.locks import lock_key, lock_path, thread_lock
from tests.support.loop_ticks import ticking
from tests.support.silent_proxy import server_of, silent_proxy, url_through

HOLD = (
    "import sys, time\n"
    "from bashgraph.graph.store.locks import thread_lock\n"
    "with thread_lock(sys.argv[1], sys.argv[2]):\n"
    "    print('locked', flush=True)\n"
    "    time.sleep(60)\n"
)


def test_a_second_holder_gets_thread_busy_naming_the_first(db_url: str, thread_prefix: str) -> None:
    """While a thread is held, taking it again fails at once with who holds it."""
    thread = f"{thread_prefix}-x"
    with thread_lock(db_url, thread), pytest.raises(ThreadBusyError) as busy, thread_lock(db_url, thread):
        pytest.fail("the lock was taken twice")
    assert str(busy.value).startswith(f"thread {thread} is busy: another worker is running it")
    assert f"pid {os.getpid()}" in str(busy.value)


def test_other_threads_are_not_blocked_and_release_frees_the_thread(
    db_url: str, thread_prefix: str
) -> None:
    """Locks are per thread, and leaving the block lets the next worker in."""
    with thread_lock(db_url, f"{thread_prefix}-a"), thread_lock(db_url, f"{thread_prefix}-b"):
        pass
    with thread_lock(db_url, f"{thread_prefix}-a"):
        pass


def test_a_released_thread_can_be_taken_again_at_once(db_url: str, thread_prefix: str) -> None:
    """Leaving the block releases the thread before the block returns: the next worker, even
    on another connection a microsecond later, gets it. (Closing a PostgreSQL connection
    releases its advisory locks only when the server gets round to ending that session.)"""
    thread = f"{thread_prefix}-again"
    for _ in range(300):
        with thread_lock(db_url, thread):
            pass
        with thread_lock(db_url, thread):
            pass


def test_the_lock_dies_with_a_killed_holder(db_url: str, thread_prefix: str) -> None:
    """A worker killed by SIGKILL leaves no stale lock: the thread can be resumed at once."""
    thread = f"{thread_prefix}-k"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, db_url, thread],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ThreadBusyError, match=f"pid {holder.pid} on host"), \
                thread_lock(db_url, thread):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    with thread_lock(db_url, thread):
        pass


def test_sqlite_lock_files_sit_next_to_the_database_and_are_removed(tmp_path: Path) -> None:
    """`<db>.locks/<hash>.lock` exists while held, holds the pid, and is gone afterwards."""
    db = str(tmp_path / "db.sqlite")
    path = lock_path(db, "any / thread : id")
    with thread_lock(db, "any / thread : id"):
        assert path.parent == Path(db + ".locks")
        assert path.read_text() == f"pid {os.getpid()} on host {os.uname().nodename}"
    assert not path.exists()


def test_advisory_lock_keys_are_stable_signed_64_bit_integers() -> None:
    """The same thread id always maps to the same key, within PostgreSQL's bigint range."""
    keys = {lock_key(f"thread-{n}") for n in range(1000)}
    assert len(keys) == 1000
    assert all(-(2**63) <= key < 2**63 for key in keys)
    assert lock_key("t1") == lock_key("t1")


def test_a_session_lock_block_does_not_let_another_thread_in(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """`Session.lock` held in one OS thread: `run` of the same thread on the same session from
    another OS thread gets ThreadBusyError and runs nothing."""
    from bashgraph.graph import AgentConfig, open_session
    from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

    thread = f"{thread_prefix}-own"
    model = ScriptedChatModel([calls_reply("echo other >> log"), answer("ran")])
    with open_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            with session.lock(thread):
                held.set()
                release.wait(30)

        worker = threading.Thread(target=holder)
        worker.start()
        try:
            assert held.wait(30)
            with pytest.raises(ThreadBusyError):
                list(session.run({"messages": [("user", "run it")]}, thread))
        finally:
            release.set()
            worker.join()
    assert not (tmp_path / "log").exists()


def _hold_on_another_connection(url: str, thread: str) -> Any:
    """The thread's advisory lock, held by another connection of this process until it closes."""
    from bashgraph.graph.store.checkpoints import connect_postgres

    conn = connect_postgres(url)
    conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(thread),))
    return conn


def test_a_lock_whose_holder_is_ending_is_taken_once_released(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed worker's backend releases its lock a moment after the kill. Refused while it
    still holds it, and with no live holder to name by the time we look, the lock is waited
    for (up to RELEASE_WAIT_S) instead of reported busy."""
    from bashgraph.graph.store import locks

    thread = f"ending-{os.urandom(6).hex()}"
    conn = _hold_on_another_connection(postgres_url, thread)
    monkeypatch.setattr(locks, "_advisory_holder", lambda conn, key: None)  # as while it exits
    threading.Timer(0.2, conn.close).start()  # the holder's session ends: its lock goes
    with thread_lock(postgres_url, thread):
        pass


def test_a_lock_held_past_the_wait_is_still_busy(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from bashgraph.graph.store import locks

    thread = f"stuck-{os.urandom(6).hex()}"
    conn = _hold_on_another_connection(postgres_url, thread)
    try:
        monkeypatch.setattr(locks, "_advisory_holder", lambda conn, key: None)
        monkeypatch.setattr(locks, "RELEASE_WAIT_S", 0.2)
        with pytest.raises(ThreadBusyError, match=f"thread {thread} is busy"), thread_lock(postgres_url, thread):
            pass
    finally:
        conn.close()


def test_a_release_the_server_never_answers_returns_and_the_lock_ends_with_the_session(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network that goes silent while a thread is held: leaving the block still returns,
    after UNLOCK_WAIT_S, not after the kernel's TCP timeout. The server still holds the
    session, so the thread stays busy (honestly, naming its holder) until the server sees the
    session end; then it is free."""
    from bashgraph.graph.store import locks

    monkeypatch.setattr(locks, "UNLOCK_WAIT_S", 0.5)
    thread = f"silent-{os.urandom(6).hex()}"
    with silent_proxy(server_of(postgres_url)) as proxy:
        through_proxy = url_through(proxy, postgres_url)
        left = threading.Event()

        def hold_then_go_silent() -> None:
            with thread_lock(through_proxy, thread):
                proxy.silence()
            left.set()

        started = time.monotonic()
        threading.Thread(target=hold_then_go_silent, daemon=True).start()
        assert left.wait(10), "leaving the block waited for a server that never answers"
        assert time.monotonic() - started < 5
        with pytest.raises(ThreadBusyError, match=f"pid {os.getpid()}"), thread_lock(postgres_url, thread):
            pass
        proxy.cut_upstream()  # what the server's keepalive would do: the session ends
        _take_within(postgres_url, thread, seconds=10)


def _take_within(url: str, thread: str, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with thread_lock(url, thread):
                return
        except ThreadBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_an_async_run_takes_a_postgres_lock_off_the_event_loop(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking the lock waits on the server (here: a connect that gets no answer, until the
    URL's connect_timeout); the other tasks of the loop go on meanwhile."""
    from bashgraph.graph import AgentConfig, StoreError, aopen_session
    from bashgraph.graph.testing import ScriptedChatModel, answer

    with silent_proxy(server_of(postgres_url)) as proxy:
        url = url_through(proxy, postgres_url, query="connect_timeout=2")

        async def main() -> None:
            async with aopen_session(url, model=ScriptedChatModel([answer("hi")]),
                                     config=AgentConfig(workdir=str(tmp_path))) as session:
                proxy.silence()
                with pytest.raises(StoreError):
                    async for _ in session.arun({"messages": [("user", "hi")]}, f"slow-{os.getpid()}"):
                        pass

        _, ticks = asyncio.run(ticking(main()))
    assert ticks > 50  # about 200 in the 2 s the connect waited; none if it blocked the loop

