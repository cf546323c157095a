"""How the compiled graph runs its routers: on the event loop (no thread per routing decision),
inside the run of the node they follow (no traced run of their own), reading only the channels
they need, on the sync and the async path alike."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, get_type_hints
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

ROUTERS = {"next_after_agent", "next_after_tools"}


class ChainNames(BaseCallbackHandler):
    """Names of the traced runs (chains) a run opens."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       **kwargs: Any) -> None:
        self.names.append(str(kwargs.get("name") or (serialized or {}).get("name")))


def agent_for(tmp_path: Path) -> Any:
    model = ScriptedChatModel([calls_reply("true"), calls_reply("true"), answer("done")])
    return build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)))


def test_routers_run_on_the_event_loop(tmp_path: Path) -> None:
    """A clean run on the async path hands nothing to a worker thread: LangGraph would run a
    router given as a plain function in one, twice per model step."""
    handed_over: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        real = loop.run_in_executor

        def spy(executor: Any, func: Any, *args: Any) -> Any:
            handed_over.append(func)
            return real(executor, func, *args)

        loop.run_in_executor = spy  # type: ignore[method-assign,assignment]
        state = await agent_for(tmp_path).ainvoke({"messages": [HumanMessage("task")]})
        assert state["status"] == "done"

    asyncio.run(main())
    assert handed_over == []


def test_routing_opens_no_run_of_its_own_on_either_path(tmp_path: Path) -> None:
    """The traced runs are the nodes' (and the model's), the same with `invoke` and `ainvoke`;
    a routing decision adds none."""
    sync, async_ = ChainNames(), ChainNames()
    agent_for(tmp_path).invoke({"messages": [HumanMessage("task")]}, {"callbacks": [sync]})
    asyncio.run(agent_for(tmp_path).ainvoke({"messages": [HumanMessage("task")]}, {"callbacks": [async_]}))
    assert sync.names == async_.names
    assert sync.names.count("agent") == 3
    assert sync.names.count("tools") == 2
    assert not set(sync.names) & ROUTERS


def test_each_router_reads_only_the_channels_it_needs(tmp_path: Path) -> None:
    """LangGraph builds a router's input from the channels its input type names: not the whole
    state, whose conversation grows with every step."""
    branches = agent_for(tmp_path).builder.branches
    read = {source: set(get_type_hints(spec.input_schema)) for source, specs in branches.items()
            for spec in specs.values() if spec.input_schema is not None}
    assert read == {
        "agent": {"messages", "status", "cwd", "policy_checks", "compact_due"},
        "tools": {"next_hop"},
        "route": {"next_hop"},
    }


def test_an_edited_reply_is_routed_again(tmp_path: Path) -> None:
    """Paused at approve, the reply edited through `update_state` to a command the rules allow:
    the edge after `agent` decides again, and the run goes on to `tools` without asking."""
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from bashgraph.graph.testing import call

    model = ScriptedChatModel([calls_reply("echo hi"), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), rules=("ask:echo *",)),
                        checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("task")]}, config)
    paused = agent.get_state(config)
    assert paused.next == ("approve",)
    reply = [m for m in paused.values["messages"] if isinstance(m, AIMessage)][-1]
    edited = AIMessage("", id=reply.id, tool_calls=[call("true", id=reply.tool_calls[0]["id"])])
    agent.update_state(config, {"messages": [edited]})
    assert agent.get_state(config).next == ("tools",)


def test_edits_after_tools_and_route_are_routed_again(tmp_path: Path) -> None:
    """The edges after `tools` and `route` read the hop in state: an edit written as either
    node, with another hop, sends the run where the edited hop says."""
    from langgraph.checkpoint.memory import InMemorySaver

    agent = build_graph(model=ScriptedChatModel([calls_reply("exit 3"), answer("done")]),
                        config=AgentConfig(workdir=str(tmp_path)), checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("task")]}, config)
    history = list(agent.get_state_history(config))
    after_tools = next(s for s in history if s.next == ("route",))
    after_route = history[history.index(after_tools) - 1]  # newest first: the next checkpoint
    assert (after_route.next, after_route.values["next_hop"]) == (("agent",), "agent")
    assert agent.update_state(after_tools.config, {"next_hop": "agent"}, as_node="tools")
    assert agent.get_state(config).next == ("agent",)
    assert agent.update_state(after_route.config, {"next_hop": "replan"}, as_node="route")
    assert agent.get_state(config).next == ("replan",)
