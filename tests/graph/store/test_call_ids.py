"""Calls of one reply under one id, or none: each still runs once and gets its own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolCall, ToolMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer


@pytest.mark.parametrize("ids", [["call_0", "call_0"], [None, None], ["", "call_0"]])
def test_every_call_gets_its_own_id_its_own_run_and_its_own_answer(ids: list[str | None], tmp_path: Path) -> None:
    commands = [f"echo A >> {tmp_path}/A; echo A", f"echo B >> {tmp_path}/B; echo B"]
    reply = AIMessage(content="", tool_calls=[
        ToolCall(name="bash", args={"command": c}, id=i, type="tool_call") for c, i in zip(commands, ids, strict=True)])
    model = ScriptedChatModel([reply, answer("done")])
    with open_session(str(tmp_path / "db.sqlite"), model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run({"messages": [("user", "go")]}, "t"):
            pass
        messages = session.state("t").values["messages"]
    asked = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    call_ids = [call["id"] or "" for call in asked.tool_calls]
    assert len(set(call_ids)) == 2
    assert all(call_ids)
    assert sorted(m.tool_call_id for m in answers) == sorted(call_ids)
    assert sorted(m.content for m in answers) == ["A", "B"]
    assert [(tmp_path / name).read_text() for name in "AB"] == ["A\n", "B\n"]
