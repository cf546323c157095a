"""A thread store that cannot be read — a damaged SQLite file, a damaged PostgreSQL row — gives
every command (`threads`, `history`, `fork`, `resume`, `run`) one line naming the database and
what to do, exit status 2: never a traceback."""

from __future__ import annotations

import os
import random
import sqlite3
import uuid
from collections.abc import Iterator

import pytest

from bashgraph.graph.store.checkpoints import locate
from tests.graph.cli.conftest import Cli, Result
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_calls

POSTGRES_ENV = "BASHGRAPH_TEST_POSTGRES"
#: A msgpack string whose bytes are not UTF-8: what a flipped bit in a stored value looks like.
GARBAGE = b"\xa5\xff\xfe\xfd\xfc\xfb"


def make_thread(cli: Cli, server: FakeOpenAIServer, thread: str, **env: str) -> str:
    """A finished thread with one command; returns the id of one of its checkpoints."""
    server.add(tool_calls(ToolCall("bash", {"command": "echo hi"})), text("done"))
    made = cli.start("run", "say hi", "--thread", thread, **env).finish()
    assert made.code == 0, made.err
    history = cli.start("history", thread, "--json", **env).finish()
    assert history.code == 0, history.err
    return str(history.events[-1]["checkpoint_id"])


def every_command(thread: str, checkpoint: str) -> list[tuple[str, ...]]:
    return [("threads",), ("history", thread), ("fork", thread, "--checkpoint", checkpoint),
            ("resume", thread), ("run", "more", "--thread", thread)]


def assert_one_line(result: Result, db_label: str) -> None:
    assert "Traceback" not in result.err + result.out, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"bashgraph: error: cannot read the thread store {db_label}: "), lines
    assert result.code == 2, result.err


def test_a_damaged_sqlite_row_gives_one_line_for_every_command(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    checkpoint = make_thread(cli, openai_server, "d1")
    with sqlite3.connect(cli.db) as conn:
        conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = 'd1'", (GARBAGE,))
    for argv in every_command("d1", checkpoint):
        assert_one_line(cli(*argv), str(cli.db))


def test_random_byte_flips_in_a_sqlite_file_never_give_a_traceback(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """Flip bytes past the header at random (fixed seeds): each command either works or says
    in one line that it cannot read the store."""
    checkpoint = make_thread(cli, openai_server, "d2")
    original = cli.db.read_bytes()
    for seed in range(6):
        rng = random.Random(seed)
        damaged = bytearray(original)
        for _ in range(40):
            damaged[rng.randrange(100, len(damaged))] ^= 1 << rng.randrange(8)
        for argv in every_command("d2", checkpoint)[:3]:
            cli.db.write_bytes(damaged)
            result = cli(*argv)
            assert "Traceback" not in result.err, f"seed {seed} {argv}: {result.err}"
            if result.code != 0:
                assert len(result.err.strip().splitlines()) == 1, f"seed {seed} {argv}: {result.err}"
                assert result.err.startswith("bashgraph: error: "), result.err


@pytest.fixture
def postgres_db() -> Iterator[str]:
    """A database of its own on the test server: a damaged row must not reach other tests."""
    import psycopg

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    name = f"bashgraph_damaged_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_damaged_postgres_row_gives_one_line_for_every_command(
    cli: Cli, openai_server: FakeOpenAIServer, postgres_db: str
) -> None:
    import psycopg

    checkpoint = make_thread(cli, openai_server, "d3", BASHGRAPH_DB=postgres_db)
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = 'd3' "
                     "AND type = 'msgpack'", (GARBAGE,))
    label = locate(postgres_db).label
    for argv in every_command("d3", checkpoint):
        assert_one_line(cli(*argv, BASHGRAPH_DB=postgres_db), label)
