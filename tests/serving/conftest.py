"""Fixtures for the deployment tests: one Redis and one fresh PostgreSQL database per session,
migrated by a first start with one worker (two workers on an empty database die in their
migrations), and the helpers every test uses to check a command ran once and nothing of it is
left. Skipped, with the reason, where langhost, langgraph-runtime-pg, redis-server or
BASHGRAPH_TEST_POSTGRES is missing; `.ci/run` installs and sets all four.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.serving.command_model import CommandModel
from tests.serving.deployment import OFFLINE, POSTGRES_ENV, Deployment, Redis, fresh_database, missing
from tests.support.openai_server import FakeOpenAIServer

#: Set in the server's environment: the commands it runs inherit it, so the tests can find
#: them (and only them) in /proc.
MARKER_ENV = "BASHGRAPH_TEST_SERVING"
#: Seconds between a worker's heartbeats for a run; a run whose worker died is taken up again
#: after two of them. Not less: on a loaded machine (load average 18 on 2 cores) a live
#: worker's heartbeat once came later than 2 x 2 s, its run was taken up a second time while it
#: still ran, and the model, asked again, had its command run again.
HEARTBEAT_S = 5


@dataclass(frozen=True)
class Backing:
    redis_url: str
    database_url: str


@pytest.fixture(scope="session")
def backing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backing]:
    reason = missing()
    if reason:
        pytest.skip(f"no self-hosted deployment here: {reason}")
    with Redis() as redis, fresh_database(os.environ[POSTGRES_ENV]) as database:
        backing = Backing(redis.url, database)
        folder = tmp_path_factory.mktemp("migrate")
        with CommandModel() as model:
            first = Deployment(server_env(backing, model, folder), folder / "server.log", workers=1)
            first.start()  # the migrations, with one worker
            first.stop()
        yield backing


def server_env(backing: Backing, model: FakeOpenAIServer, folder: Path) -> dict[str, str]:
    """The server's environment: its database, Redis and model, a workdir in `folder`."""
    for name in ("work", "spill"):
        (folder / name).mkdir(exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))},
        **OFFLINE,
        "DATABASE_URI": backing.database_url, "REDIS_URI": backing.redis_url,
        "LG_BG_JOB_HEARTBEAT": str(HEARTBEAT_S),
        "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "x",
        "BASHGRAPH_WORKDIR": str(folder / "work"), "BASHGRAPH_SPILL_DIR": str(folder / "spill"),
        "BASHGRAPH_MODEL_MAX_RETRIES": "0",
        # An environment fault goes to the model (not to a person): the tests read what it was told.
        "BASHGRAPH_ON_ENVIRONMENT_ERROR": "model",
        MARKER_ENV: str(folder / "work"),
    }


def start_deployment(backing: Backing, folder: Path, workers: int) -> tuple[Deployment, CommandModel]:
    model = CommandModel()
    model.start()
    server = Deployment(server_env(backing, model, folder), folder / "server.log", workers=workers)
    try:
        server.start()
    except BaseException:
        model.close()
        raise
    return server, model


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def lines(path: Path) -> int:
    """How many times a command that appends a line to `path` ran."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def marked_processes(work: Path) -> list[int]:
    """Live processes a command of this deployment started (they carry its marker)."""
    wanted = f"{MARKER_ENV}={work}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if command.endswith((b"sleep", b"bash")) and (entry / "stat").read_text().split()[2] != "Z":
            found.append(int(entry.name))
    return found


def assert_told_interrupted(state: dict[str, Any]) -> None:
    """The thread's one command was answered `interrupted`, and the model read that answer."""
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert len(tools) == 1, state["messages"]
    artifact = tools[0]["artifact"]
    assert (artifact["outcome"], artifact["spawn_error"]) == ("spawn_error", "interrupted"), artifact
    final = state["messages"][-1]
    assert final["type"] == "ai", final
    assert final["content"].startswith("done: [spawn error: interrupted"), final
