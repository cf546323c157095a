"""bashgraph under a real self-hosted server (langhost + langgraph-runtime-pg, PostgreSQL, Redis),
one worker, driven with `langgraph_sdk`: a command cut off by a cancel, by each multitask
strategy, and resumed by two clients at once runs once; nothing of it is left running; the
model is told it was interrupted; and deleting a thread deletes its journal rows.

Each command appends a line to a file of its own (`lines` counts its runs) and then sleeps, so
it is surely running when the test cuts it off.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.serving.command_model import CommandModel, task
from tests.serving.conftest import (
    Backing,
    assert_told_interrupted,
    lines,
    marked_processes,
    start_deployment,
    wait_for,
)
from tests.serving.deployment import Deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # a server starts in the first test
GRAPH = "bashgraph"


@dataclass(frozen=True)
class Served:
    server: Deployment
    model: CommandModel
    work: Path

    def client(self) -> Any:
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.server.url)


@pytest.fixture(scope="module")
def served(backing: Backing, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("one-worker")
    server, model = start_deployment(backing, folder, workers=1)
    try:
        yield Served(server, model, folder / "work")
    finally:
        server.stop()
        model.close()


def _start_long_command(served: Served) -> tuple[Any, str, str, Path]:
    """A thread whose run is inside `echo x >> <counter>; sleep 120` (client, thread, run, counter)."""
    client = served.client()
    counter = served.work / f"counter-{uuid.uuid4().hex[:8]}"
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, GRAPH, input=task(f"echo x >> {counter.name}; sleep 120"))
    wait_for(lambda: lines(counter) == 1, "the command to start")
    return client, thread_id, run["run_id"], counter


def _assert_once_and_nothing_left(served: Served, counter: Path) -> None:
    assert lines(counter) == 1, "the command ran more than once"
    wait_for(lambda: not marked_processes(served.work), "no process of the command to be left", 20)


def test_a_cancelled_command_runs_once(served: Served) -> None:
    client, thread_id, run_id, counter = _start_long_command(served)
    client.runs.cancel(thread_id, run_id, wait=True)

    state = client.runs.wait(thread_id, GRAPH, input=None)

    _assert_once_and_nothing_left(served, counter)
    assert_told_interrupted(state)


@pytest.mark.parametrize("strategy", ["interrupt", "enqueue", "reject"])
def test_a_second_run_with_each_strategy_leaves_the_command_run_once(served: Served, strategy: str) -> None:
    """`interrupt` cancels the running run; `enqueue` waits for it (here: until it is
    cancelled); `reject` refuses the second run (then the first is cancelled and continued)."""
    from langgraph_sdk.errors import ConflictError

    client, thread_id, first, counter = _start_long_command(served)
    if strategy == "reject":
        with pytest.raises(ConflictError):
            client.runs.create(thread_id, GRAPH, input=None, multitask_strategy="reject")
        assert lines(counter) == 1
        assert marked_processes(served.work), "the refusal stopped the first run"
        client.runs.cancel(thread_id, first, wait=True)
        second = client.runs.create(thread_id, GRAPH, input=None)
    else:
        second = client.runs.create(thread_id, GRAPH, input=None, multitask_strategy=strategy)
        if strategy == "enqueue":
            client.runs.cancel(thread_id, first, wait=True)

    client.runs.join(thread_id, second["run_id"])

    _assert_once_and_nothing_left(served, counter)
    assert_told_interrupted(client.threads.get_state(thread_id)["values"])


def test_rollback_stops_the_cut_off_command_runs_it_once_and_tells_the_model(served: Served) -> None:
    """`rollback` cancels the running run and deletes it; the second run starts with its own
    input. langgraph-runtime-pg keeps the rolled-back run's checkpoints, so its call is still in
    the thread without an answer: the second run answers it `interrupted` from the journal before
    the model is called (graph.md), and it is not run again."""
    client, thread_id, _first, counter = _start_long_command(served)
    second = client.runs.create(thread_id, GRAPH, input=task("true", times=0), multitask_strategy="rollback")

    client.runs.join(thread_id, second["run_id"])

    _assert_once_and_nothing_left(served, counter)
    values = client.threads.get_state(thread_id)["values"]
    assert values["status"] == "done", values
    kinds = [m["type"] for m in values["messages"]]
    tools = [m for m in values["messages"] if m["type"] == "tool"]
    assert len(tools) == 1, values["messages"]
    assert tools[0]["artifact"]["spawn_error"] == "interrupted", tools
    # The answer precedes the model's last reply: the model read it.
    assert kinds.index("tool") < len(kinds) - 1
    assert values["messages"][-1]["type"] == "ai"


def test_two_clients_resuming_one_thread_at_once_run_its_command_once(served: Served) -> None:
    client, thread_id, run_id, counter = _start_long_command(served)
    client.runs.cancel(thread_id, run_id, wait=True)
    answers: list[Any] = []

    def resume() -> None:
        answers.append(served.client().runs.wait(thread_id, GRAPH, input=None))

    racers = [threading.Thread(target=resume) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(120)

    assert len(answers) == 2
    _assert_once_and_nothing_left(served, counter)
    assert_told_interrupted(client.threads.get_state(thread_id)["values"])


def test_deleting_a_thread_deletes_its_journal_rows(served: Served, backing: Backing) -> None:
    import psycopg

    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, GRAPH, input=task("seq 1 100000"))

    def rows() -> int:
        with psycopg.connect(backing.database_url) as conn:
            found = conn.execute("SELECT count(*) FROM store WHERE prefix = %s",
                                 (f"bashgraph_journal.{thread_id}",)).fetchone()
        return int(found[0]) if found else 0

    assert rows() == 1
    client.threads.delete(thread_id)
    wait_for(lambda: rows() == 0, "the thread's journal rows to be deleted", 10)
