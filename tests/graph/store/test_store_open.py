"""Opening the checkpoint database: where it is, which saver, and one clear line when it fails."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from bashgraph.graph.errors import StoreError
from bashgraph.graph.store import checkpoints
from bashgraph.graph.store.checkpoints import aopen_checkpointer, default_db_path, locate, open_checkpointer

EMPTY: RunnableConfig = {"configurable": {"thread_id": "none", "checkpoint_ns": ""}}


def store_error(url: str) -> str:
    with pytest.raises(StoreError) as caught, open_checkpointer(url):
        pass
    message = str(caught.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_default_path_is_in_the_xdg_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$XDG_STATE_HOME/bashgraph/checkpoints.sqlite, else ~/.local/state/bashgraph/..."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "bashgraph" / "checkpoints.sqlite"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local/state/bashgraph/checkpoints.sqlite"


def test_no_url_opens_bashgraph_db_else_the_default_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """url=None: $BASHGRAPH_DB when set, otherwise the default file, created with its folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("BASHGRAPH_DB", raising=False)
    with open_checkpointer(None) as saver:
        assert isinstance(saver, SqliteSaver)
    assert default_db_path().is_file()
    monkeypatch.setenv("BASHGRAPH_DB", str(tmp_path / "chosen.sqlite"))
    with open_checkpointer(None):
        pass
    assert (tmp_path / "chosen.sqlite").is_file()


def test_sqlite_urls_follow_the_three_and_four_slash_convention(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """sqlite:///rel is relative to the current folder, sqlite:////abs is absolute."""
    monkeypatch.chdir(tmp_path)
    assert locate("sqlite:///rel/db.sqlite").target == str(tmp_path / "rel" / "db.sqlite")
    assert locate(f"sqlite:///{tmp_path}/abs.sqlite").target == f"{tmp_path}/abs.sqlite"
    assert locate("postgres://u@h/db").kind == "postgres"


def test_sqlite_file_is_set_up_in_wal_mode(tmp_path: Path) -> None:
    """The saver's tables exist and the file is in WAL mode (readers never block the writer)."""
    path = tmp_path / "a" / "b" / "db.sqlite"
    with open_checkpointer(str(path)) as saver:
        assert saver.get_tuple(EMPTY) is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"checkpoints", "writes"} <= tables


def test_a_file_of_random_bytes_is_a_clear_error(tmp_path: Path) -> None:
    """Not a database: one line naming the file and the cause."""
    path = tmp_path / "junk.sqlite"
    path.write_bytes(os.urandom(8192))
    message = store_error(str(path))
    assert message.startswith(f"checkpoint database {path}: not a usable SQLite database")


def test_a_locked_database_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Another process holding the write lock past the busy timeout: "locked", not a hang."""
    path = tmp_path / "db.sqlite"
    with open_checkpointer(str(path)):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(checkpoints, "BUSY_TIMEOUT_S", 0.2)
    try:
        assert "locked by another process" in store_error(str(path))
    finally:
        holder.close()


@pytest.mark.parametrize(("what", "expected"), [
    ("folder", "is read-only; SQLite needs to write files next to it"),
    ("file", "the file is read-only"),
])
def test_a_read_only_database_is_a_clear_error(tmp_path: Path, what: str, expected: str) -> None:
    """A read-only folder or file (a read-only bind mount: root ignores file modes) fails at open."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is needed to make a read-only mount")
    folder = tmp_path / "ro"
    path = folder / "db.sqlite"
    with open_checkpointer(str(path)):
        pass
    protected = folder if what == "folder" else path
    probe = (
        "from bashgraph.graph.store.checkpoints import open_checkpointer\n"
        "from bashgraph.graph.errors import StoreError\n"
        f"try:\n    open_checkpointer({str(path)!r}).__enter__()\n"
        "except StoreError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        ["bwrap", "--bind", "/", "/", "--ro-bind", str(protected), str(protected),
         "--dev", "/dev", "--proc", "/proc", sys.executable, "-c", probe],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.stderr == ""
    assert done.stdout.startswith(f"checkpoint database {path}: ")
    assert expected in done.stdout


def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    """Nothing listens on the port: one line naming the server; the password is never shown."""
    message = store_error("postgresql://bob:s3cret@127.0.0.1:1/test?connect_timeout=2")
    assert message.startswith("checkpoint database postgresql://bob@127.0.0.1:1/test: ")
    assert "refused" in message
    assert "s3cret" not in message


@pytest.mark.parametrize("url", ["postgresql://[broken", "sqlite://", ":memory:", "mysql://x/y"])
def test_a_malformed_url_is_a_clear_error(url: str) -> None:
    """A URL that names no usable database fails with StoreError before anything runs."""
    assert store_error(url).startswith("checkpoint database ")


def test_the_sync_helper_opens_the_matching_saver(db_url: str) -> None:
    """A path gives SqliteSaver, a postgresql:// URL gives PostgresSaver, both set up."""
    with open_checkpointer(db_url) as saver:
        expected = SqliteSaver if "://" not in db_url else PostgresSaver
        assert isinstance(saver, expected)
        assert saver.get_tuple(EMPTY) is None


def test_the_async_helper_opens_a_working_saver(db_url: str) -> None:
    """aopen_checkpointer gives the async saver of the same backend, set up."""

    async def probe() -> str:
        async with aopen_checkpointer(db_url) as saver:
            assert await saver.aget_tuple(EMPTY) is None
            return type(saver).__name__

    name = asyncio.run(probe())
    assert name == ("AsyncSqliteSaver" if "://" not in db_url else "AsyncPostgresSaver")


def test_the_async_helper_reports_a_corrupt_file_like_the_sync_one(tmp_path: Path) -> None:
    """Same checks, same message, for aopen_checkpointer."""
    path = tmp_path / "junk.sqlite"
    path.write_bytes(os.urandom(4096))

    async def probe() -> None:
        async with aopen_checkpointer(str(path)):
            pass

    with pytest.raises(StoreError, match="not a usable SQLite database"):
        asyncio.run(probe())
