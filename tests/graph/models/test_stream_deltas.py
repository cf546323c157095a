"""Streamed tool calls merge into exactly the calls the model sent, whatever the deltas' shape.

Servers people run stream tool-call pieces without an `index`, with the call's `id` and `name`
repeated in every piece, or with index 0 for every call. Merged by langchain-core alone, these
became one call per piece (args errors), a tool named `bashbash…`, or calls run into each other.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import SecretStr

from bashgraph.graph.models.openai_compat import CompatibleChatOpenAI
from tests.support.agent_runs import run_task
from tests.support.openai_server import (
    FakeOpenAIServer,
    ToolCall,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    text,
    tool_calls,
)
from tests.support.openai_shapes import Deltas, shaped


@tool
def bash(command: str, timeout: int = 30) -> str:
    """Run a shell command."""
    return command


TWO_CALLS = tool_calls(ToolCall("bash", {"command": "echo one two three four five"}),
                       ToolCall("bash", {"command": "pwd", "timeout": 5}))
SENT = [("call_0_0", "bash", {"command": "echo one two three four five"}),
        ("call_0_1", "bash", {"command": "pwd", "timeout": 5})]
SHAPES: list[Deltas] = ["openai", "no_index", "repeat_id_name", "one_index"]


def streamed_reply(server: FakeOpenAIServer) -> AIMessage:
    model = CompatibleChatOpenAI(model=server.model, base_url=server.base_url,
                                 api_key=SecretStr("k"), max_retries=0).bind_tools([bash])
    chunks: list[Any] = list(model.stream("go"))
    reply = functools.reduce(operator.add, chunks)
    assert isinstance(reply, AIMessage)
    return reply


@pytest.mark.parametrize("deltas", SHAPES)
def test_each_delta_shape_merges_into_the_calls_sent(openai_server: FakeOpenAIServer, deltas: Deltas) -> None:
    """Two calls, arguments in 8-character pieces: the same two calls come out, ids included."""
    openai_server.add(shaped(TWO_CALLS, deltas=deltas))
    reply = streamed_reply(openai_server)
    assert [(c["id"], c["name"], c["args"]) for c in reply.tool_calls] == SENT
    assert reply.invalid_tool_calls == []


@pytest.mark.parametrize("deltas", SHAPES)
def test_a_streamed_run_runs_each_call_once_as_sent(
    openai_server: FakeOpenAIServer, tmp_path: Path, deltas: Deltas
) -> None:
    """Through the graph with tokens streamed: both commands ran, and their answers went back."""
    openai_server.add(shaped(TWO_CALLS, deltas=deltas), text("done"))
    state = run_task(openai_server, tmp_path, "look around", stream=True)
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [(a.tool_call_id, a.artifact["outcome"]) for a in answers] == [("call_0_0", "ok"), ("call_0_1", "ok")]
    assert answers[0].content == "one two three four five"
    sent = openai_server.chat_requests[1].messages[2]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in sent] == [("call_0_0", "bash"), ("call_0_1", "bash")]


@pytest.mark.parametrize("deltas", ["no_index", "repeat_id_name"])
def test_the_async_stream_merges_the_same_way(openai_server: FakeOpenAIServer, deltas: Deltas) -> None:
    """`astream` (the CLI, `langgraph dev`) goes through the same reassembly."""
    openai_server.add(shaped(TWO_CALLS, deltas=deltas))
    model = CompatibleChatOpenAI(model=openai_server.model, base_url=openai_server.base_url,
                                 api_key=SecretStr("k"), max_retries=0).bind_tools([bash])

    async def merged() -> Any:
        chunks = [chunk async for chunk in model.astream("go")]
        return functools.reduce(operator.add, chunks)

    reply = asyncio.run(merged())
    assert [(c["id"], c["name"], c["args"]) for c in reply.tool_calls] == SENT
