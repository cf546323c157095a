"""Requests that strict OpenAI-compatible servers accept (the real client, a scripted server).

llama-cpp-python's server calls no tool unless the request carries `tool_choice`, rejects an
assistant message whose `content` is null, and cannot stream a reply that may call a tool.
tests/graph/models/test_llama_cpp_server.py runs the same round trip against that real server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.factory import make_chat_model
from tests.support.openai_server import (
    FakeOpenAIServer,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    text,
    tool_call,
)


def agent_for(server: FakeOpenAIServer, tmp_path: Path, **settings: Any) -> Any:
    config = AgentConfig(model=server.model, base_url=server.base_url, workdir=str(tmp_path),
                         model_max_retries=0, **settings)
    return build_graph(model=make_chat_model(config, environ={}), config=config)


def test_tool_choice_auto_and_empty_string_content_are_sent(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Every request with tools says tool_choice "auto"; the call's message has content ""."""
    openai_server.add(tool_call("bash", {"command": "echo hi"}), text("it said hi"))
    state = agent_for(openai_server, tmp_path).invoke({"messages": [HumanMessage("say hi")]})
    assert (state["status"], state["messages"][-1].content) == ("done", "it said hi")
    first, second = openai_server.chat_requests
    assert [first.body["tool_choice"], second.body["tool_choice"]] == ["auto", "auto"]
    assistant = second.messages[2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"]["name"] == "bash"


def test_without_tools_no_tool_choice_is_sent(openai_server: FakeOpenAIServer) -> None:
    """A plain chat request is what langchain-openai sends: no tool_choice, no tools."""
    openai_server.add(text("hello"))
    config = AgentConfig(model=openai_server.model, base_url=openai_server.base_url)
    make_chat_model(config, environ={}).invoke("hi")
    assert "tool_choice" not in openai_server.chat_requests[0].body
    assert "tools" not in openai_server.chat_requests[0].body


def streamed_request(server: FakeOpenAIServer, tmp_path: Path, **settings: Any) -> bool:
    """Run a task with token streaming on (stream_mode="messages"); was the request streamed?"""
    server.add(text("done"))
    agent = agent_for(server, tmp_path, **settings)
    list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode="messages"))
    return server.chat_requests[-1].stream


def test_model_streaming_off_asks_for_whole_replies(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """model_streaming=False: even with tokens streamed, the request has no `stream: true`."""
    assert streamed_request(openai_server, tmp_path) is True
    assert streamed_request(openai_server, tmp_path, model_streaming=False) is False


def test_model_streaming_is_read_from_the_environment() -> None:
    """BASHGRAPH_MODEL_STREAMING=false turns it off."""
    assert AgentConfig.from_env({"BASHGRAPH_MODEL_STREAMING": "false"}).chat.streaming is False
    assert AgentConfig.from_env({}).chat.streaming is True
