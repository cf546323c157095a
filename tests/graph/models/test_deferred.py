"""A graph built without a model (`build_graph(model=None)`, `open_session(db)`) makes the one its
settings name at the first model call, and only then: looking at threads, forking and drawing
need no model at all, and a run with none configured fails with the factory's one-line error."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bashgraph.graph import AgentConfig, ConfigError, aopen_session, build_graph, draw, open_session
from bashgraph.graph.models import factory
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from tests.support.openai_server import (
    FakeOpenAIServer,
    openai_server_fixture,  # noqa: F401 (registers the `openai_server` fixture)
    text,
    tool_call,
)

NO_MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BASHGRAPH_MODEL")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[AgentConfig]:
    """The settings of every model the factory makes (it still makes them)."""
    for name in NO_MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    configs: list[AgentConfig] = []
    original = factory.make_chat_model

    def counted(config: AgentConfig, **kwargs: Any) -> Any:
        configs.append(config)
        return original(config, **kwargs)

    monkeypatch.setattr(factory, "make_chat_model", counted)
    return configs


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_model_is_made_at_the_first_call_and_kept(
    openai_server: FakeOpenAIServer, made: list[AgentConfig], tmp_path: Path, mode: str
) -> None:
    """Nothing is made by building the graph; the first call makes the configured model, which
    serves every later call of the run."""
    openai_server.add(tool_call("bash", {"command": "echo hi"}), text("said hi"))
    config = AgentConfig(model="served", base_url=openai_server.base_url, workdir=str(tmp_path))
    agent = build_graph(model=None, config=config)
    assert made == []
    inputs: Any = {"messages": [HumanMessage("say hi")]}
    state = agent.invoke(inputs) if mode == "invoke" else asyncio.run(agent.ainvoke(inputs))
    assert (state["status"], state["messages"][-1].content) == ("done", "said hi")
    assert made == [config]
    assert [request.model for request in openai_server.chat_requests] == ["served", "served"]


def test_a_run_with_no_model_configured_fails_with_the_one_line_error(
    made: list[AgentConfig], tmp_path: Path
) -> None:
    """A remote model named with no key and no URL: the run raises the factory's ConfigError,
    word for word what `bashgraph run` prints."""
    config = AgentConfig(model="gpt-x", workdir=str(tmp_path))
    with pytest.raises(ConfigError) as direct:
        factory.make_chat_model(config, environ={})
    agent = build_graph(model=None, config=config, checkpointer=InMemorySaver())
    with pytest.raises(ConfigError) as raised:
        agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    assert str(raised.value) == str(direct.value)
    assert "needs OPENAI_API_KEY" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_inspecting_forking_and_drawing_make_no_model(
    made: list[AgentConfig], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A session opened without a model, sync or async, reads state, history and threads and
    forks a thread; the graph draws. No model is made (none could be: none is configured)."""
    db = str(tmp_path / "runs.sqlite")
    config = AgentConfig(workdir=str(tmp_path))
    with open_session(db, model=ScriptedChatModel([calls_reply("echo hi"), answer("done")]), config=config) as session:
        for _ in session.run({"messages": [HumanMessage("say hi")]}, "t1"):
            pass
    monkeypatch.setenv("BASHGRAPH_MODEL", "gpt-x")  # a model made now would raise ConfigError

    with open_session(db) as session:
        assert session.state("t1").values["status"] == "done"
        assert [info.thread_id for info in session.threads()] == ["t1"]
        before_tools = next(row for row in session.history("t1") if row.next == ("tools",))
        assert session.fork("t1", before_tools.checkpoint_id, "t2") == "t2"
        assert session.state("t2").next == ("tools",)

    async def the_same_async() -> None:
        async with aopen_session(db) as session:
            assert (await session.astate("t1")).values["status"] == "done"
            assert [info.thread_id for info in await session.athreads()] == ["t2", "t1"]
            before = next(row for row in await session.ahistory("t1") if row.next == ("tools",))
            assert await session.afork("t1", before.checkpoint_id, "t3") == "t3"
            assert (await session.astate("t3")).next == ("tools",)

    asyncio.run(the_same_async())
    assert "agent" in str(draw(build_graph(), "mermaid"))
    assert made == []


def test_a_session_and_its_copies_make_the_model_once(
    openai_server: FakeOpenAIServer, made: list[AgentConfig], tmp_path: Path
) -> None:
    """`with_config` rebuilds the agent (the CLI does, once a person answers); when the new
    settings name the same model, the model made for the session serves it: no second client,
    no second load of local weights. Settings that name another model get their own."""
    openai_server.add(text("one"), text("two"), text("three"), text("four"))
    config = AgentConfig(model="served", base_url=openai_server.base_url, workdir=str(tmp_path))
    with open_session(str(tmp_path / "runs.sqlite"), config=config) as session:
        asking_budgets = dataclasses.replace(config.budgets, on_environment_error="ask")
        asking = session.with_config(dataclasses.replace(config, budgets=asking_budgets))
        other = session.with_config(dataclasses.replace(config, chat=dataclasses.replace(config.chat, model="other")))
        for runner, thread in ((session, "a"), (asking, "b"), (asking, "c"), (other, "d")):
            for _ in runner.run({"messages": [HumanMessage("hi")]}, thread):
                pass
    assert [c.chat.model for c in made] == ["served", "other"]
    assert [request.model for request in openai_server.chat_requests] == ["served", "served", "served", "other"]
