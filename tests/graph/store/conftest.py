"""Fixtures: every persistence test runs on a real SQLite file and, when
BASHGRAPH_TEST_POSTGRES is set (e.g. postgresql://postgres@127.0.0.1:5432/test), on PostgreSQL.

Postgres tests share one database: each test's threads carry a unique prefix and are deleted
(checkpoints and journal rows) when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_ENV = "BASHGRAPH_TEST_POSTGRES"
_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints", "bashgraph_journal",
           "bashgraph_jobs")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A checkpoint database: a fresh SQLite file, or the test PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "state" / "checkpoints.sqlite")
    return postgres_or_skip()


@pytest.fixture
def postgres_url() -> str:
    """The test PostgreSQL server, for tests of PostgreSQL alone."""
    return postgres_or_skip()


def postgres_or_skip() -> str:
    """The server's URL. Without one (a checkout with no server) the test is skipped; `.ci/run`
    always sets it, so CI runs every PostgreSQL test."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return url


@pytest.fixture
def thread_prefix(db_url: str) -> Iterator[str]:
    """A prefix unique to this test; threads named with it are deleted afterwards (Postgres)."""
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    yield prefix
    if db_url.startswith("postgres"):
        _delete_threads(db_url, prefix)


def _delete_threads(url: str, prefix: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in _TABLES:
            exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
            if exists and exists[0]:
                conn.execute(f"DELETE FROM {table} WHERE thread_id LIKE %s", (prefix + "%",))


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The commands' folder. A command a killed worker left running is killed at the end: the
    process group whose id it wrote to `pid`, the process whose id it wrote to `escaped`."""
    folder = tmp_path / "work"
    folder.mkdir()
    yield folder
    for name, kill_one in (("pid", os.killpg), ("escaped", os.kill)):
        path = folder / name
        if path.exists() and path.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                kill_one(int(path.read_text()), signal.SIGKILL)
