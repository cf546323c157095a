"""The agent against a FakeOpenAIServer through `make_chat_model`, run whole or streaming tokens.

`stream=True` runs it with `stream_mode="messages"` on, as the CLI on a terminal, LangGraph
Studio and the server's messages stream do: the client then asks the server to stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.factory import make_chat_model
from tests.support.openai_server import FakeOpenAIServer


def agent_for(server: FakeOpenAIServer, tmp_path: Path, **settings: Any) -> Any:
    config = AgentConfig(model=server.model, base_url=server.base_url, workdir=str(tmp_path),
                         model_max_retries=0, **settings)
    return build_graph(model=make_chat_model(config, environ={}), config=config)


def run_task(server: FakeOpenAIServer, tmp_path: Path, task: str, *, stream: bool,
             **settings: Any) -> dict[str, Any]:
    """The final state of one run of `task`; every request streamed when `stream`."""
    agent = agent_for(server, tmp_path, **settings)
    inputs = {"messages": [HumanMessage(task)]}
    if not stream:
        state: dict[str, Any] = agent.invoke(inputs)
        assert not any(request.stream for request in server.chat_requests)
        return state
    values: dict[str, Any] = {}
    for mode, data in agent.stream(inputs, stream_mode=["messages", "values"]):
        if mode == "values":
            values = data
    assert all(request.stream for request in server.chat_requests)
    return values
