"""`history` after a step that wrote the whole conversation again (graph/open_calls.py: a
stopped run's calls answered in the middle of it, before new input): the step's outcomes are
the answers it made, not every answer the thread ever had. Both readers (the quick SQLite one
and LangGraph's own, which PostgreSQL uses), on real databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.store.checkpoint_rows import CheckpointRow, read_history
from bashgraph.graph.store.checkpoints import open_checkpointer
from bashgraph.graph.store.journal import open_journal
from bashgraph.graph.store.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


def outcomes(rows: list[CheckpointRow]) -> list[tuple[str, str]]:
    return [(row.node, row.outcomes) for row in rows if row.outcomes]


def test_a_rewriting_step_lists_only_the_answers_it_made(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """A finished run (`echo one`), then a run stopped before its command ran, then new input:
    `agent` answers `echo two` not_run and stores the whole conversation again."""
    thread = f"{thread_prefix}-rewrite"
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    model = ScriptedChatModel([calls_reply("echo one"), answer("first done"), calls_reply("echo two"), answer("ok")])
    settings = AgentConfig(workdir=str(tmp_path))
    inputs: list[tuple[Any, list[str]]] = [
        ({"messages": [HumanMessage("one")]}, []),
        ({"messages": [HumanMessage("two")]}, ["tools"]),
        ({"messages": [HumanMessage("three")]}, []),
    ]
    with open_checkpointer(db_url) as saver, open_journal(db_url) as journal:
        agent = build_graph(model=model, config=settings, checkpointer=saver, journal=journal)
        for given, stop_before in inputs:
            agent.invoke(given, config, interrupt_before=stop_before)
        messages = agent.get_state(config).values["messages"]
    assert messages[-3].artifact["spawn_error"] == "not_run"  # the answer made in the middle
    expected = [("agent", "spawn_error(not_run) `echo two`"), ("tools", "ok `echo one`")]
    with open_session(db_url, model=ScriptedChatModel([]), config=settings) as session:
        assert outcomes(session.history(thread)) == expected
    if not db_url.startswith("postgres"):
        assert outcomes(read_history(db_url, thread) or []) == expected
