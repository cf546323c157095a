"""The async graph checks long commands off the event loop: a decision that takes a while (up to
~0.4 s for a hostile line at the size limit) must not stall every other run on the loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.checks import CHEAP_CHECK_CHARS, checks_are_cheap
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from bashgraph.tools.safety.policy import Policy


def record_loops(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """For each command the policy decides: was an event loop running in that thread?"""
    on_loop: dict[str, bool] = {}
    decide = Policy.decide

    def recording(self: Policy, command: str, cwd: str | None = None) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop[command] = True
        except RuntimeError:
            on_loop[command] = False
        return decide(self, command, cwd)

    monkeypatch.setattr(Policy, "decide", recording)
    return on_loop


def test_a_long_command_is_checked_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop = record_loops(monkeypatch)
    long = "echo " + "x" * (CHEAP_CHECK_CHARS + 1)
    model = ScriptedChatModel([calls_reply(long), calls_reply("echo hi"), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)))
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("task")]}))
    model.assert_done()
    assert on_loop == {long: False, "echo hi": True}


def test_checks_are_cheap_counts_every_command_of_a_reply() -> None:
    half = "x" * (CHEAP_CHECK_CHARS // 2 + 1)
    assert checks_are_cheap([{"args": {"command": half}}])
    assert not checks_are_cheap([{"args": {"command": half}}, {"args": {"command": half}}])
    assert checks_are_cheap(None)
    assert checks_are_cheap([{"args": "not a dict"}])
