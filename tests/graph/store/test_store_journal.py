"""The command journal in a LangGraph store (what the LangGraph server gives every run).

Real stores: an in-memory one (what `langgraph dev` keeps), a SQLite file, and PostgreSQL
(what a production server keeps) when BASHGRAPH_TEST_POSTGRES is set.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.errors import StoreError
from bashgraph.graph.store.store_journal import NAMESPACE, StoreJournal
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from bashgraph.tools.results import CommandResult, Outcome

POSTGRES_ENV = "BASHGRAPH_TEST_POSTGRES"
RESULT = CommandResult(outcome=Outcome.OK, command="echo hi", cwd="/tmp", stdout="hi\n",
                       stdout_bytes=3, duration_s=0.01, final_cwd="/tmp")


@contextmanager
def _sqlite_store(path: Path) -> Iterator[BaseStore]:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(path)) as store:
        store.setup()
        yield store


@contextmanager
def _postgres_store(url: str) -> Iterator[BaseStore]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        yield store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens the same store again on each call (a new connection for SQLite and PostgreSQL)."""
    if request.param == "memory":
        shared = InMemoryStore()

        @contextmanager
        def memory() -> Iterator[BaseStore]:
            yield shared

        return memory
    if request.param == "sqlite":
        return lambda: _sqlite_store(tmp_path / "store.sqlite")
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return lambda: _postgres_store(url)


@pytest.fixture
def thread() -> str:
    # A "." in the id: store namespace labels may not hold one, the journal must cope.
    return f"t.{uuid.uuid4().hex[:10]}"


def test_a_start_is_visible_at_once_from_another_connection(store_factory: Any, thread: str) -> None:
    with store_factory() as writer, store_factory() as reader:
        StoreJournal(writer).start(thread, "reply/call_1", 0, "echo hi")
        entry = StoreJournal(reader).lookup(thread, "reply/call_1", 0)
    assert entry is not None
    assert (entry.command, entry.result) == ("echo hi", None)


def test_a_finished_call_gives_back_the_same_result(store_factory: Any, thread: str) -> None:
    with store_factory() as store:
        journal = StoreJournal(store)
        journal.start(thread, "reply/call_1", 0, RESULT.command)
        journal.finish(thread, "reply/call_1", 0, RESULT)
    with store_factory() as store:
        entry = StoreJournal(store).lookup(thread, "reply/call_1", 0)
    assert entry is not None
    assert entry.result == RESULT


def test_a_second_start_of_one_call_is_refused(store_factory: Any, thread: str) -> None:
    with store_factory() as store:
        journal = StoreJournal(store)
        journal.start(thread, "reply/call_1", 0, "echo hi")
        with pytest.raises(StoreError, match="refusing to run it twice"):
            journal.start(thread, "reply/call_1", 0, "echo hi")
        journal.start(thread, "reply/call_1", 1, "echo hi")  # a retry is another attempt


def test_a_cancelled_command_in_a_graph_with_a_store_is_not_run_again(tmp_path: Path) -> None:
    """The server's situation, in one process: no session journal, a store, and a run cancelled
    while its command runs (what `runs.cancel` does). Continuing the thread reports the command
    `interrupted`; it is not started again."""
    store = InMemoryStore()
    counter = tmp_path / "counter"
    model = ScriptedChatModel([calls_reply(f"echo x >> {counter}; sleep 60"), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), on_environment_error="model"),
                        checkpointer=InMemorySaver(), store=store)
    config: Any = {"configurable": {"thread_id": "server-thread"}}

    async def cancel_then_continue() -> dict[str, Any]:
        first = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("count")]}, config))
        while not counter.exists():
            await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await agent.ainvoke(None, config)

    state = asyncio.run(cancel_then_continue())

    assert counter.read_text() == "x\n", "the cancelled command ran again"
    tool = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool.artifact["spawn_error"] == "interrupted"
    rows = store.search((NAMESPACE, "server-thread"), limit=10)
    assert len(rows) == 1
    assert rows[0].value["result"] is None


def test_a_graph_with_a_store_records_each_command_once(tmp_path: Path) -> None:
    store = InMemoryStore()
    model = ScriptedChatModel([calls_reply("echo one"), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)),
                        checkpointer=InMemorySaver(), store=store)
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t2"}})
    rows = store.search((NAMESPACE,), limit=10)
    assert len(rows) == 1
    assert rows[0].value["result"]["stdout"] == "one\n"
