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
from bashgraph.graph.session import open_session
from bashgraph.graph.store.checkpoint_rows import CheckpointRow, read_history
from bashgraph.graph.store.checkpoints import open_checkpointer
from bashgraph.graph.store.journal import open_journal
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


def test_a_step_replayed_from_an_earlier_checkpoint_keeps_its_outcome(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Time travel in the same thread: `tools` run again from the checkpoint before it answers
    from the journal with the same answer. It is that step's outcome in both readers: only a
    step that writes the whole conversation again repeats earlier answers."""
    thread = f"{thread_prefix}-replay"
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    model = ScriptedChatModel([calls_reply("echo one"), answer("done"), answer("done again")])
    settings = AgentConfig(workdir=str(tmp_path))
    with open_checkpointer(db_url) as saver, open_journal(db_url) as journal:
        agent = build_graph(model=model, config=settings, checkpointer=saver, journal=journal)
        agent.invoke({"messages": [HumanMessage("one")]}, config)
        before_tools = next(s for s in agent.get_state_history(config) if s.next == ("tools",))
        agent.invoke(None, before_tools.config)
    expected = [("tools", "ok `echo one`"), ("tools", "ok `echo one`")]
    with open_session(db_url, model=ScriptedChatModel([]), config=settings) as session:
        assert outcomes(session.history(thread)) == expected
    if not db_url.startswith("postgres"):
        assert outcomes(read_history(db_url, thread) or []) == expected
