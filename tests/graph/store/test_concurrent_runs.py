"""Many runs on one event loop, sharing one async saver and one command journal."""

from __future__ import annotations

import asyncio
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.store.checkpoints import aopen_checkpointer
from bashgraph.graph.store.journal import SqliteJournal
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

RUNS = 12
STEPS = 3


def test_concurrent_runs_share_an_async_sqlite_saver_and_the_journal(tmp_path: Path) -> None:
    """The journal's writes leave the loop free: the async saver's write lock on the same file is
    released while a journal write waits for it (no "database is locked"), every command of every
    run is journaled once, and every run ends `done`."""
    db = str(tmp_path / "runs.sqlite")

    async def main() -> list[dict[str, object]]:
        async with aopen_checkpointer(db) as saver:
            journal = SqliteJournal(db, busy_timeout_s=2.0)
            try:
                agents = [
                    build_graph(model=ScriptedChatModel([*(calls_reply(f"echo {i}-{s}") for s in range(STEPS)),
                                                         answer("ok")]),
                                config=AgentConfig(workdir=str(tmp_path)), checkpointer=saver, journal=journal)
                    for i in range(RUNS)
                ]
                configs: list[RunnableConfig] = [{"configurable": {"thread_id": f"c-{i}"}} for i in range(RUNS)]
                return list(await asyncio.gather(*(
                    agent.ainvoke({"messages": [HumanMessage("go")]}, config, durability="sync")
                    for agent, config in zip(agents, configs, strict=True)
                )))
            finally:
                journal.close()

    states = asyncio.run(main())
    assert [state["status"] for state in states] == ["done"] * RUNS
    journal = SqliteJournal(db)
    try:
        for i in range(RUNS):
            entries = journal.entries(f"c-{i}")
            assert sorted(entry.command for _, _, entry in entries) == [f"echo {i}-{s}" for s in range(STEPS)]
            assert all(entry.result is not None and entry.result.ok for _, _, entry in entries)
    finally:
        journal.close()
