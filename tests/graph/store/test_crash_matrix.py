"""The crash-window matrix: `bashgraph run` dies (os._exit) just before and just after each of
its durable writes — every checkpoint put / put_writes and every journal start / finish — on
SQLite and PostgreSQL. After each death:

* `run --thread T "new task"` is refused (the thread has not finished), never run on top of it;
* `bashgraph resume T` continues the thread to `done` (never "already finished" while it is not);
* no command ran twice (each appends to its own counter file).

The run: two commands, one per model turn, then the final answer: 17 writes, 33 windows per
backend. Each window is three forks of a process that has done its imports (crash_server.py),
about 0.4 s; the whole matrix takes about a minute on both backends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashgraph.graph.session import open_session
from tests.graph.cli.conftest import REPO, ForkServer, Result, Running
from tests.graph.store.conftest import POSTGRES_ENV, _delete_threads
from tests.graph.store.crash_server import CRASH_COMMANDS, CRASH_EXIT

#: Writes of one clean run (checked against a recorded run in `test_the_matrix_covers_...`).
EXPECTED_WRITES = 17
WINDOWS = [(n, when) for n in range(1, EXPECTED_WRITES + 1) for when in ("before", "after")
           if (n, when) != (EXPECTED_WRITES, "after")]  # dying after the last write: no crash


class CrashServer(ForkServer):
    """tests/graph/store/crash_server.py instead of the CLI tests' fork server."""

    def __init__(self) -> None:  # (the parent's reader thread and protocol, another script)
        import queue
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.graph.store.crash_server"], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.replies: queue.Queue[dict[str, int] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def bashgraph(self, home: Path, env: dict[str, str], *argv: str) -> Result:
        number = len(list(home.glob(".out-*")))
        out, err = home / f".out-{number}", home / f".err-{number}"
        self.send({"argv": list(argv), "env": env, "cwd": str(home), "stdout": str(out),
                   "stderr": str(err), "tty": None})
        return Running(self, self.receive(30)["pid"], out, err).finish(60)


@pytest.fixture(scope="module")
def crash_server() -> Iterator[CrashServer]:
    server = CrashServer()
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(database, thread id): a fresh SQLite file, or a fresh thread on the test server."""
    thread = f"crash-{uuid.uuid4().hex[:10]}"
    if request.param == "sqlite":
        yield str(tmp_path / "db" / "crash.sqlite"), thread
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    yield url, thread
    _delete_threads(url, thread)


def environment(tmp_path: Path, db: str, **extra: str) -> tuple[Path, dict[str, str]]:
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    workdir.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "BASHGRAPH_", "LANGSMITH_", "LANGCHAIN_"))}
    return home, {
        **keep, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
        "BASHGRAPH_DB": db, "BASHGRAPH_WORKDIR": str(workdir), "BASHGRAPH_MODEL": "scripted",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x",
        "BASHGRAPH_ON_ENVIRONMENT_ERROR": "model", **extra,
    }


def counts(workdir: Path) -> list[int]:
    files = [workdir / f"count-{n}" for n in range(1, CRASH_COMMANDS + 1)]
    return [len(f.read_text().splitlines()) if f.exists() else 0 for f in files]


def saved(db: str, thread: str) -> bool:
    with open_session(db) as session:
        return session.state(thread).created_at is not None


def test_the_matrix_covers_every_write_of_a_clean_run(
    crash_server: CrashServer, backend: tuple[str, str], tmp_path: Path
) -> None:
    """The windows below are those of a real run: EXPECTED_WRITES writes of all four kinds."""
    db, thread = backend
    log = tmp_path / "writes"
    home, env = environment(tmp_path, db, CRASH_LOG=str(log))
    done = crash_server.bashgraph(home, env, "run", "count", "--thread", thread, "--json")
    assert done.code == 0, done.err
    kinds = [line.split()[0] for line in log.read_text().splitlines()]
    assert len(kinds) == EXPECTED_WRITES, kinds
    assert set(kinds) == {"put", "put_writes", "journal_start", "journal_finish"}
    assert counts(tmp_path / "work") == [1] * CRASH_COMMANDS


@pytest.mark.parametrize("window", [pytest.param(w, id=f"{w[1]}-{w[0]}") for w in WINDOWS])
def test_a_run_killed_at_any_write_resumes_to_the_end_running_nothing_twice(
    crash_server: CrashServer, backend: tuple[str, str], tmp_path: Path, window: tuple[int, str],
) -> None:
    db, thread = backend
    number, when = window
    log = tmp_path / "writes"
    home, env = environment(tmp_path, db, CRASH_LOG=str(log), CRASH_AT=f"{number}:{when}")
    crashed = crash_server.bashgraph(home, env, "run", "count", "--thread", thread, "--json")
    kind = log.read_text().splitlines()[number - 1]
    assert crashed.code == CRASH_EXIT, f"did not die at {when} {kind}: {crashed.err[-2000:]}"
    env.pop("CRASH_AT")
    if not saved(db, thread):  # died before the first checkpoint: there is no thread
        resumed = crash_server.bashgraph(home, env, "resume", thread)
        assert resumed.code == 2, resumed.err
        assert f"no thread {thread}" in resumed.err
        assert counts(tmp_path / "work") == [0] * CRASH_COMMANDS
        return

    refused = crash_server.bashgraph(home, env, "run", "another task", "--thread", thread)
    assert refused.code == 2, f"{when} {kind}: {refused.out}{refused.err}"
    assert "has not finished" in refused.err

    resumed = crash_server.bashgraph(home, env, "resume", thread, "--json")
    end = resumed.events[-1]
    assert "already finished" not in resumed.out, f"{when} {kind}: {resumed.out}"
    assert (resumed.code, end["status"]) == (0, "done"), f"{when} {kind}: {resumed.out}{resumed.err}"
    assert max(counts(tmp_path / "work")) <= 1, f"{when} {kind}: a command ran twice"


def test_resume_after_death_between_a_steps_writes_and_its_checkpoint_continues(
    crash_server: CrashServer, backend: tuple[str, str], tmp_path: Path
) -> None:
    """Death just before the checkpoint of step 4 (its writes are saved, `next` reads empty):
    `resume` continues instead of saying "already finished" with status `running`."""
    db, thread = backend
    log = tmp_path / "writes"
    home, env = environment(tmp_path, db, CRASH_LOG=str(log), CRASH_AT="15:before")
    crashed = crash_server.bashgraph(home, env, "run", "count", "--thread", thread)
    assert crashed.code == CRASH_EXIT, crashed.err
    assert log.read_text().splitlines()[14] == "put 4"
    del env["CRASH_AT"]
    resumed = crash_server.bashgraph(home, env, "resume", thread)
    assert "already finished" not in resumed.out
    assert resumed.code == 0, resumed.out
    assert counts(tmp_path / "work") == [1] * CRASH_COMMANDS
