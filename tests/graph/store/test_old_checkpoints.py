"""Threads checkpointed before the graph declared its input and output schemas load and resume.

Such a graph had one schema for state, input and output; its checkpoints carry the same channels
(names and types) as today's. Here it is rebuilt from `OldAgentState`, a verbatim copy of that
schema, so a channel renamed, dropped or retyped in graph/state.py fails these tests. Real bash,
a real SQLite file and, with BASHGRAPH_TEST_POSTGRES, PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

import bashgraph.graph.build as graph_build
from bashgraph.graph import AgentConfig, Session, open_session
from bashgraph.graph.checks import PolicyChecks
from bashgraph.graph.state import Failure, NextHop, RunStatus, merge_message_batches
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

#: Killed by a signal twice (a transient spawn error), then prints "fine".
FLAKY = 'n=$(cat tries 2>/dev/null || echo 0); echo $((n+1)) > tries; [ "$n" -ge 2 ] && echo fine || kill -9 $$'


class OldAgentState(TypedDict, total=False):
    """The graph's one schema before input and output were declared (copied, not imported)."""

    messages: Annotated[list[AnyMessage], DeltaChannel(merge_message_batches)]
    cwd: str | None
    steps: int
    exit_streak: int
    args_errors: int
    spawn_retries: int
    replans: int
    failures: list[Failure]
    attempt_serial: int
    environment_told: str | None
    routed_reply: str | None
    route_base: dict[str, Any] | None
    next_hop: NextHop
    policy_checks: PolicyChecks | None
    status: RunStatus
    reason: str | None


def config(workdir: Path) -> AgentConfig:
    return AgentConfig(workdir=str(workdir), on_environment_error="ask", max_spawn_retries=1,
                       retry_backoff_s=0.01, retry_backoff_max_s=0.02)


@contextmanager
def old_session(db_url: str, model: ScriptedChatModel, workdir: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    """A session whose graph is compiled the old way: `StateGraph(OldAgentState)`, nothing else."""
    with monkeypatch.context() as patch:
        patch.setattr(graph_build, "StateGraph", lambda *_args, **_kwargs: StateGraph(OldAgentState))
        with open_session(db_url, model=model, config=config(workdir)) as session:
            # It really is the old layout: every channel is input.
            assert "route_base" in session.agent.get_input_jsonschema()["properties"]
            yield session


def drain(chunks: Iterator[Any]) -> None:
    for _ in chunks:
        pass




def test_a_thread_paused_by_the_old_graph_resumes_on_its_bookkeeping(
    db_url: str, thread_prefix: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old graph retried once, escalated and paused; today's graph reads the same values
    (bookkeeping included), takes the answer `retry` and numbers the re-run after the old one."""
    thread = f"{thread_prefix}-paused"
    with old_session(db_url, ScriptedChatModel([calls_reply(FLAKY)]), workdir, monkeypatch) as old:
        drain(old.run({"messages": [HumanMessage("run it")]}, thread))
        stored = old.state(thread)
    assert stored.interrupts
    assert stored.values["next_hop"] == "escalate"
    assert (stored.values["attempt_serial"], stored.values["routed_reply"]) == (1, stored.values["messages"][1].id)
    assert stored.values["policy_checks"] is not None

    model = ScriptedChatModel([answer("it printed fine")])
    with open_session(db_url, model=model, config=config(workdir)) as new:
        assert new.state(thread).values == stored.values
        assert new.state(thread).next == ("escalate",)
        drain(new.run(Command(resume="retry"), thread))
        values = new.state(thread).values
    model.assert_done()
    assert (values["status"], values["attempt_serial"]) == ("done", 2)
    assert (workdir / "tries").read_text() == "3\n"
    answers = [m for m in model.received[0] if isinstance(m, ToolMessage)]
    assert [m.content for m in answers] == ["fine"]


def test_a_thread_finished_by_the_old_graph_takes_new_input(
    db_url: str, thread_prefix: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished old thread gets a follow-up: a new run (counters reset) on the old conversation."""
    thread = f"{thread_prefix}-done"
    steps = [calls_reply("mkdir sub && cd sub"), answer("made sub")]
    with old_session(db_url, ScriptedChatModel(steps), workdir, monkeypatch) as old:
        drain(old.run({"messages": [HumanMessage("make sub")]}, thread))
        stored = old.state(thread).values
    assert (stored["status"], stored["steps"], stored["cwd"]) == ("done", 2, str(workdir / "sub"))

    model = ScriptedChatModel([calls_reply("pwd"), answer("in sub")])
    with open_session(db_url, model=model, config=config(workdir)) as new:
        drain(new.run({"messages": [HumanMessage("where are you?")]}, thread))
        values = new.state(thread).values
    model.assert_done()
    assert (values["status"], values["steps"]) == ("done", 2)
    assert values["messages"][: len(stored["messages"])] == stored["messages"]
    assert values["messages"][-2].content == str(workdir / "sub")
