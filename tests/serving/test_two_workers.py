"""bashgraph under langhost with two workers (uvicorn processes) on one PostgreSQL and Redis.

* kill -9 of the worker that runs a command: after the run's heartbeat expires
  (LG_BG_JOB_HEARTBEAT, 5 s here) the run is taken up again; the command is not started again,
  what is left of it on this host is stopped, and the model is told it was interrupted;
* runs of many threads at once over both workers: each command runs once, and each `runs.wait`
  answers its thread's final state, also when the other worker ran it (runtime-pg's own answer
  can be the state before the last step; graph/server_app.py answers from the thread, see
  docs/serving.md).
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.serving.command_model import task
from tests.serving.conftest import (
    Backing,
    assert_told_interrupted,
    lines,
    marked_processes,
    start_deployment,
    wait_for,
)
from tests.serving.test_one_worker import GRAPH, Served

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # a server starts in the first test
CONCURRENT_THREADS = 12
STEPS = 3  # commands a thread runs: more steps, more chances for an answer to end early


@pytest.fixture(scope="module")
def served(backing: Backing, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("two-workers")
    server, model = start_deployment(backing, folder, workers=2)
    try:
        yield Served(server, model, folder / "work")
    finally:
        server.stop()
        model.close()


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _worker_running(pid: int, workers: list[int]) -> int | None:
    """The worker among `workers` that `pid` descends from."""
    while pid > 1:
        if pid in workers:
            return pid
        pid = _parent(pid)
    return None


def test_kill_9_of_the_worker_running_a_command_leaves_it_run_once(served: Served) -> None:
    client = served.client()
    counter = served.work / f"counter-{uuid.uuid4().hex[:8]}"
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, GRAPH, input=task(f"echo x >> {counter.name}; sleep 120"))
    wait_for(lambda: lines(counter) == 1 and marked_processes(served.work), "the command to start")
    workers = served.server.worker_pids()
    running = {_worker_running(pid, workers) for pid in marked_processes(served.work)}
    assert len(running) == 1, (running, workers)
    worker = running.pop()
    assert worker is not None, workers

    os.kill(worker, signal.SIGKILL)
    # A new client: the old one's kept-alive connections may have gone to the killed worker.
    wait_for(lambda: _status(served, thread_id, run["run_id"]) == "success", "the run to be finished", 90)

    assert lines(counter) == 1, "the command ran again after its worker was killed"
    wait_for(lambda: not marked_processes(served.work), "no process of the command to be left", 20)
    assert_told_interrupted(served.client().threads.get_state(thread_id)["values"])


def _status(served: Served, thread_id: str, run_id: str) -> str | None:
    """The run's status, or None while the server does not answer (a worker is restarting)."""
    import httpx

    try:
        return str(served.client().runs.get(thread_id, run_id)["status"])
    except httpx.TransportError:
        return None


def test_many_threads_over_two_workers_each_run_their_command_once(served: Served) -> None:
    batch = uuid.uuid4().hex[:8]

    def one(index: int) -> tuple[Path, Any, Any]:
        client = served.client()
        counter = served.work / f"counter-{batch}-{index}"
        thread_id = client.threads.create()["thread_id"]
        answered = client.runs.wait(thread_id, GRAPH, input=task(f"echo {index} >> {counter.name}", STEPS))
        return counter, answered, client.threads.get_state(thread_id)["values"]

    with ThreadPoolExecutor(CONCURRENT_THREADS) as pool:
        finished = list(pool.map(one, range(CONCURRENT_THREADS)))

    for counter, answered, state in finished:
        assert lines(counter) == STEPS, counter
        assert state["status"] == "done", state
        assert state["messages"][-1]["content"] == "done: (no output)", state["messages"]
        # The wait's own answer is that final state (the graph's output), not an earlier step's.
        assert answered == {k: v for k, v in state.items() if k in answered}, answered.get("messages")
        assert answered["status"] == "done"
        assert answered["messages"] == state["messages"]
