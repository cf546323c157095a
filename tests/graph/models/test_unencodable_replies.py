"""A model reply holding a lone surrogate (JSON `"\\ud800"`) leaves the conversation sendable.

Python decodes such an escape into a `str` that UTF-8 cannot encode; kept as is, the next request
to the model fails with UnicodeEncodeError. The real ChatOpenAI client talks to a scripted server.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import SecretStr

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.replies import encodable_reply, visible_text
from bashgraph.tools import CommandResult, Outcome
from tests.support.openai_server import FakeOpenAIServer, text, tool_call


def run_against(server: FakeOpenAIServer, tmp_path: Path) -> dict[str, Any]:
    """One task through the real client, checkpointed to a real SQLite file."""
    model = ChatOpenAI(model=server.model, base_url=server.base_url, api_key=SecretStr("k"),
                       max_retries=0)
    with sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False) as conn:
        agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)),
                            checkpointer=SqliteSaver(conn))
        state: dict[str, Any] = agent.invoke({"messages": [HumanMessage("go")]},
                                             {"configurable": {"thread_id": "t"}})
    return state


def test_a_call_with_a_lone_surrogate_is_an_args_error_and_the_run_goes_on(tmp_path: Path) -> None:
    """The call does not run; the model reads why; the next request is sent and answered."""
    with FakeOpenAIServer(tool_call("bash", '{"command": "echo \\ud800"}'), text("gave up")) as server:
        state = run_against(server, tmp_path)
        server.assert_done()
    assert (state["status"], state["messages"][-1].content) == ("done", "gave up")
    [tool] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    result = CommandResult.from_dict(tool.artifact)
    assert result.outcome == Outcome.ARGS_ERROR
    assert "not valid Unicode" in str(tool.content)
    assert "\\ud800" in str(tool.content)  # shown, as the escape the model wrote
    sent = server.chat_requests[1].messages
    [call] = sent[2]["tool_calls"]
    assert call["function"]["arguments"] == '{"command": "echo \\ud800"}'
    assert sent[3]["role"] == "tool"
    assert sent[3]["tool_call_id"] == call["id"]


def test_a_lone_surrogate_in_the_answer_is_kept_visibly(tmp_path: Path) -> None:
    """Text content with a lone surrogate is stored with the escape written out."""
    with FakeOpenAIServer(text("odd \ud800 byte")) as server:
        state = run_against(server, tmp_path)
        server.assert_done()
    assert state["messages"][-1].content == "odd \\ud800 byte"
    assert state["status"] == "done"


def test_valid_replies_are_left_untouched() -> None:
    """Only replies that need it are copied; emoji and accents are valid text."""
    reply = AIMessage(content="héllo 🐚", tool_calls=[
        {"name": "bash", "args": {"command": "echo ✓"}, "id": "c1", "type": "tool_call"}])
    assert encodable_reply(reply) is reply
    assert visible_text("a\udcffb") == "a\\udcffb"
