"""A thread's lock lost while the run holds it (its PostgreSQL connection ended, its SQLite lock
file removed): another worker could take the thread, so the run starts no further command."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph import AgentConfig
from bashgraph.graph.errors import StoreError
from bashgraph.graph.session import open_session
from bashgraph.graph.store.locks import lock_path
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


def lose_the_lock(db_url: str, thread: str) -> None:
    """What an administrator, an idle-connection killer or a clean-up script does."""
    if db_url.startswith("postgres"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as conn:
            # The lock's own connection only: the backend of this process holding an advisory lock.
            conn.execute("SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
                         "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                         "AND a.application_name LIKE %s", (f"bashgraph pid {os.getpid()} %",))
    else:
        shutil.rmtree(lock_path(db_url, thread).parent)


def test_a_lost_lock_stops_the_run_before_its_next_command(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    thread = f"{thread_prefix}-lost"
    second = tmp_path / "second"

    def after_losing_it(_messages: Any) -> Any:
        lose_the_lock(db_url, thread)
        return calls_reply(f"touch {second}")

    model = ScriptedChatModel([calls_reply("echo first"), after_losing_it, answer("done")])
    with (open_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session,
          pytest.raises(StoreError, match=f"lost the lock of thread {thread}: ") as lost):
        for _ in session.run({"messages": [("user", "go")]}, thread):
            pass
    assert "no further command is started" in str(lost.value)
    assert not second.exists()
