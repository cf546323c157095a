"""Every tool call in the history is answered before the model is called again, whatever input
continues a thread whose run stopped between a reply and its answers.

A real cut-off: an async run is cancelled while its command runs (the command is killed, its
journal row keeps a start and no result) right after another call of the same reply finished
(its row has its result, but its answer never reached the state). The thread then goes on with
a new message, with `{}` or with `None`, through plain LangGraph (no session: it would refuse
new input), sync or async, on SQLite (the session's journal) or in memory (the journal in a
LangGraph store, as under the server). The model is the real `ChatOpenAI` against a scripted
server that answers HTTP 400 to an unanswered call, as real servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.build import Agent
from bashgraph.graph.models.factory import make_chat_model
from bashgraph.graph.open_calls import has_open_calls, with_answers
from bashgraph.graph.store.checkpoints import aopen_checkpointer, open_checkpointer
from bashgraph.graph.store.journal import open_journal
from bashgraph.graph.store.store_journal import StoreJournal
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_calls

WAIT_S = 30
QUICK = "echo once >> log; echo quick-done"
SLOW = "echo x >> counter; sleep 30"
INPUTS: dict[str, Any] = {
    "message": {"messages": [HumanMessage("what happened?", id="user-2")]},
    "empty": {},
    "none": None,
}


class Backend:
    """Where the thread lives: a SQLite file (checkpoints and the session's journal), or memory
    (InMemorySaver, and the journal in an InMemoryStore, as under the LangGraph server)."""

    def __init__(self, kind: str, tmp_path: Path, server: FakeOpenAIServer, **settings: Any) -> None:
        self.kind, self.db = kind, str(tmp_path / "checkpoints.sqlite")
        self.saver, self.store = InMemorySaver(), InMemoryStore()
        self.config = AgentConfig(model=server.model, base_url=server.base_url, workdir=str(tmp_path),
                                  model_max_retries=0, on_environment_error="model", **settings)

    def agent_on(self, saver: Any, journal: Any) -> Agent:
        model = make_chat_model(self.config, environ={})
        if journal is None:
            return build_graph(model=model, config=self.config, checkpointer=saver, store=self.store)
        return build_graph(model=model, config=self.config, checkpointer=saver, journal=journal)

    @contextlib.contextmanager
    def sync_agent(self) -> Iterator[Agent]:
        if self.kind == "memory":
            yield self.agent_on(self.saver, None)
            return
        with open_checkpointer(self.db) as saver, open_journal(self.db) as journal:
            yield self.agent_on(saver, journal)

    @contextlib.asynccontextmanager
    async def async_agent(self) -> AsyncIterator[Agent]:
        if self.kind == "memory":
            yield self.agent_on(self.saver, None)
            return
        async with aopen_checkpointer(self.db) as saver:
            with open_journal(self.db) as journal:
                yield self.agent_on(saver, journal)

    def finished(self, thread: str, key: str) -> bool:
        """The journal holds the result of the call with this key."""
        if self.kind == "memory":
            entry = StoreJournal(self.store).lookup(thread, key, 0)
        else:
            with open_journal(self.db) as journal:
                entry = journal.lookup(thread, key, 0)
        return entry is not None and entry.result is not None


def thread_config(thread: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


async def wait_for(check: Any, what: str) -> None:
    for _ in range(WAIT_S * 50):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def cut_off(backend: Backend, work: Path) -> None:
    """Start a run whose reply asks for QUICK and SLOW; cancel it once QUICK's result is
    journaled and SLOW runs."""
    async with backend.async_agent() as agent:
        config = thread_config()
        run = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("count once")]}, config))
        await wait_for(lambda: lines(work / "counter") == 1, "the slow command to start")

        reply = (await agent.aget_state(config)).values["messages"][-1]
        await wait_for(lambda: backend.finished("t1", f"{reply.id}/quick"), "the quick command's result")
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


def cut_off_and_continue(backend: Backend, work: Path, mode: str, inputs: Any) -> dict[str, Any]:
    """`cut_off`, then the thread goes on with `inputs`; its state after."""
    return go_on_after(backend, mode, inputs, cut_off(backend, work))


def go_on_after(backend: Backend, mode: str, inputs: Any, cut: Coroutine[Any, Any, Any]) -> dict[str, Any]:
    """Run `cut` (a run stopped half-way), then the thread goes on with `inputs`, sync or async;
    its state after. (The async form runs in the same event loop: langchain-openai shares one
    async HTTP client per process.)"""

    async def main() -> dict[str, Any]:
        await cut
        if mode == "sync":
            return {}
        async with backend.async_agent() as agent:
            await agent.ainvoke(inputs, thread_config())
            return dict((await agent.aget_state(thread_config())).values)

    state = asyncio.run(main())
    if mode == "async":
        return state
    with backend.sync_agent() as agent:
        agent.invoke(inputs, thread_config())
        return dict(agent.get_state(thread_config()).values)


def answers_of(messages: list[Any], reply_index: int) -> list[dict[str, Any]]:
    """The artifacts of the tool messages directly after the reply at `reply_index`."""
    found = []
    for message in messages[reply_index + 1:]:
        if not isinstance(message, ToolMessage):
            break
        found.append({"call": message.tool_call_id, **message.artifact})
    return found


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_cut_off_reply_is_answered_from_the_journal_whatever_continues_the_thread(
    kind: str, mode: str, inputs: str, tmp_path: Path
) -> None:
    """The finished call is answered with its journaled result, the cut-off one `interrupted`;
    the answers sit right after the reply; nothing runs twice; the server took every request."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": QUICK}, id="quick"),
                              ToolCall("bash", {"command": SLOW}, id="slow")), text("all told"))
        backend = Backend(kind, tmp_path, server)
        state = cut_off_and_continue(backend, tmp_path, mode, INPUTS[inputs])
        server.assert_done()  # no 400: every request carried an answer for every call
        last_request = server.chat_requests[-1].messages
    assert (lines(tmp_path / "counter"), lines(tmp_path / "log")) == (1, 1), "a command ran twice"
    messages = state["messages"]
    reply = next(i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls)
    quick, slow = answers_of(messages, reply)
    assert (quick["call"], quick["outcome"], quick["stdout"]) == ("quick", "ok", "quick-done\n")
    assert (slow["call"], slow["outcome"], slow["spawn_error"]) == ("slow", "spawn_error", "interrupted")
    assert messages[-1].content == "all told"
    told = [m for m in last_request if m["role"] == "tool"]
    assert len(told) == 2
    assert "interrupted" in told[1]["content"]
    if inputs == "message":
        assert [m["role"] for m in last_request[-2:]] == ["tool", "user"]


# -- calls that never started -------------------------------------------------------------------
def _asking_agent(server: FakeOpenAIServer, tmp_path: Path) -> Agent:
    """An agent (in memory) whose every command needs a person; the model asks for one."""
    server.add(tool_calls(ToolCall("bash", {"command": "echo ran >> asked"}, id="asked")))
    backend = Backend("memory", tmp_path, server, approval="always")
    return backend.agent_on(backend.saver, None)


@pytest.mark.parametrize("inputs", ["message", "empty"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_new_input_instead_of_an_approval_answer_tells_the_model_the_call_was_not_run(
    mode: str, inputs: str, tmp_path: Path
) -> None:
    """The question LangGraph drops with the stopped step is not answered away in silence: the
    call is answered `not_run`, saying it waited for a person; it never runs."""
    with FakeOpenAIServer() as server:
        agent = _asking_agent(server, tmp_path)
        agent.invoke({"messages": [HumanMessage("go")]}, thread_config())
        assert agent.get_state(thread_config()).next == ("approve",)
        server.add(text("understood"))
        if mode == "sync":
            agent.invoke(INPUTS[inputs], thread_config())
        else:
            asyncio.run(agent.ainvoke(INPUTS[inputs], thread_config()))
        server.assert_done()
    messages = agent.get_state(thread_config()).values["messages"]
    [answer] = answers_of(messages, 1)
    assert (answer["outcome"], answer["spawn_error"]) == ("spawn_error", "not_run")
    assert "needed a person's approval" in answer["detail"]
    assert messages[-1].content == "understood"
    assert not (tmp_path / "asked").exists()


def test_none_asks_a_pending_question_again_and_calls_no_model(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        agent = _asking_agent(server, tmp_path)
        agent.invoke({"messages": [HumanMessage("go")]}, thread_config())
        result = agent.invoke(None, thread_config())
        server.assert_done()
        assert len(server.chat_requests) == 1
    assert result["__interrupt__"][0].value["kind"] == "approval"
    assert agent.get_state(thread_config()).next == ("approve",)


@pytest.mark.parametrize("journal", [True, False])
def test_a_call_stopped_before_it_started_is_answered_not_run_or_unknown_without_a_journal(
    journal: bool, tmp_path: Path
) -> None:
    """Stopped before `tools`: with a journal the call is `not_run`; with none, nothing can say
    whether it started, so it is `interrupted` and the model is told it may have run."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": "echo ran >> file"}, id="c1")), text("ok"))
        backend = Backend("memory", tmp_path, server)
        model = make_chat_model(backend.config, environ={})
        agent = (backend.agent_on(backend.saver, None) if journal
                 else build_graph(model=model, config=backend.config, checkpointer=InMemorySaver()))
        agent.invoke({"messages": [HumanMessage("go")]}, thread_config(), interrupt_before=["tools"])
        agent.invoke(INPUTS["message"], thread_config())
        server.assert_done()
    [answer] = answers_of(agent.get_state(thread_config()).values["messages"], 1)
    kind = "not_run" if journal else "interrupted"
    assert (answer["outcome"], answer["spawn_error"]) == ("spawn_error", kind)
    words = "the run stopped before it started" if journal else "no command journal records whether it started"
    assert words in answer["detail"]
    assert not (tmp_path / "file").exists()


def test_none_that_resumes_at_agent_answers_the_open_call_first(tmp_path: Path) -> None:
    """A thread whose next step is `agent` with a call still open (what an update_state, or the
    old code after new input, leaves): `None` resumes it, and the model still gets every answer."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": "echo ran >> file"}, id="c1")), text("ok"))
        backend = Backend("memory", tmp_path, server)
        agent = backend.agent_on(backend.saver, None)
        agent.invoke({"messages": [HumanMessage("go")]}, thread_config(), interrupt_before=["tools"])
        agent.update_state(thread_config(), {"messages": [HumanMessage("new", id="h2")]}, as_node="replan")
        assert agent.get_state(thread_config()).next == ("agent",)
        agent.invoke(None, thread_config())
        server.assert_done()
    messages = agent.get_state(thread_config()).values["messages"]
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage",
                                                    "AIMessage"]
    assert messages[2].artifact["spawn_error"] == "not_run"
    assert not (tmp_path / "file").exists()


# -- the history, message by message --------------------------------------------------------------
def _reply(*ids: str, reply_id: str) -> AIMessage:
    calls = [{"name": "bash", "args": {"command": "true"}, "id": i, "type": "tool_call"} for i in ids]
    return AIMessage("", tool_calls=calls, id=reply_id)


def _answer(call_id: str, text: str = "old") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, id=f"answer-{call_id}-{text}")


def test_answers_go_right_after_their_reply_in_call_order() -> None:
    history: list[AnyMessage] = [HumanMessage("go", id="h1"), _reply("a", "b", reply_id="r1"), _answer("b"),
               HumanMessage("next", id="h2")]
    assert has_open_calls(history)
    fixed = with_answers(history, lambda reply, call: _answer(call["id"] or "", "made"))
    assert [m.id for m in fixed] == ["h1", "r1", "answer-a-made", "answer-b-old", "h2"]
    assert not has_open_calls(fixed)


def test_a_call_id_reused_by_a_later_reply_needs_an_answer_of_its_own() -> None:
    """Some servers number calls call_0 in every reply: an earlier reply's answer is not one."""
    history: list[AnyMessage] = [_reply("call_0", reply_id="r1"), _answer("call_0"), _reply("call_0", reply_id="r2"),
               HumanMessage("next", id="h2")]
    assert has_open_calls(history)
    fixed = with_answers(history, lambda reply, call: _answer(call["id"] or "", reply.id or ""))
    assert [m.id for m in fixed] == ["r1", "answer-call_0-old", "r2", "answer-call_0-r2", "h2"]
