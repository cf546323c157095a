"""What a stopped run leaves besides unanswered calls, when the thread goes on with new input:
the shell's directory its finished calls moved to, and a retry that started and never finished.

The `None` path (`tools`, `retry`) already keeps both; new input makes LangGraph drop the
stopped step, so `agent` (behind `OpenCalls`) must make the same of them. The runs are real:
an async run on SQLite cancelled while a command runs, then the thread goes on through plain
LangGraph against the scripted OpenAI server.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.graph.test_open_calls import INPUTS, SLOW, Backend, go_on_after, lines, thread_config, wait_for
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_calls

#: Kills its own shell the first time (spawn_error/signal: `retry` runs it again), then writes
#: a line and sleeps: the retry is cut off while it runs.
FLAKY = "if [ -e marker ]; then echo x >> counter; sleep 30; else touch marker; kill -9 $$; fi"


async def _cancel_when(backend: Backend, started: Any, finished: str | None = None) -> None:
    """Run the thread; cancel it once `started()` holds and the call `finished` has its result
    in the journal (its answer is lost with the step)."""
    async with backend.async_agent() as agent:
        run = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("go")]}, thread_config()))
        await wait_for(started, "the command to run")
        if finished is not None:
            reply = (await agent.aget_state(thread_config())).values["messages"][-1]
            await wait_for(lambda: backend.finished("t1", f"{reply.id}/{finished}"), "its result")
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


def _cut_off_and_go_on(backend: Backend, mode: str, inputs: Any, started: Any,
                       finished: str | None = None) -> dict[str, Any]:
    """`_cancel_when`, then the thread goes on with `inputs`; its state after."""
    return go_on_after(backend, mode, inputs, _cancel_when(backend, started, finished))


@pytest.mark.parametrize("inputs", ["message", "empty", "none"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_finished_cd_of_a_stopped_run_moves_the_shell_whatever_continues_the_thread(
    mode: str, inputs: str, tmp_path: Path
) -> None:
    """The model is told `cd sub` finished, so the next command runs in sub, as `tools` would
    have left it: a command meant for sub (`rm -rf *`) must not run in its parent."""
    (tmp_path / "sub").mkdir()
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": "cd sub; echo moved"}, id="cd"),
                              ToolCall("bash", {"command": SLOW}, id="slow")),
                   tool_calls(ToolCall("bash", {"command": "pwd"}, id="pwd")), text("done"))
        backend = Backend("sqlite", tmp_path, server)
        state = _cut_off_and_go_on(backend, mode, INPUTS[inputs], lambda: lines(tmp_path / "counter") == 1, "cd")
        server.assert_done()
    pwd = next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "pwd")
    assert pwd.artifact["stdout"] == f"{tmp_path / 'sub'}\n"
    assert state["cwd"] == str(tmp_path / "sub")


@pytest.mark.parametrize("inputs", ["message", "empty", "none"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_retry_cut_off_is_answered_interrupted_whatever_continues_the_thread(
    mode: str, inputs: str, tmp_path: Path
) -> None:
    """The call's stored answer is its first attempt's fault; the retry started and never
    finished. The model is told `interrupted` (it may have had side effects), not the fault
    it could cure by asking again, and the retry is not run again."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": FLAKY}, id="flaky")), text("all told"))
        backend = Backend("sqlite", tmp_path, server, retry_backoff_s=0.01, retry_backoff_max_s=0.02)
        state = _cut_off_and_go_on(backend, mode, INPUTS[inputs], lambda: lines(tmp_path / "counter") == 1)
        server.assert_done()
        told = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]
    assert lines(tmp_path / "counter") == 1, "the retry ran twice"
    [answer] = told
    assert "interrupted" in answer
    assert "SIGKILL" not in answer
    assert state["attempt_serial"] == 1


#: A background job that notes the TERM `bash_kill` sends and outlives it: the kill waits the
#: grace period, and the run is cut off meanwhile.
STUBBORN_JOB = "trap 'echo term >> termed' TERM; while :; do sleep 0.1; done"


def test_a_job_tool_cut_off_is_not_said_to_have_never_run(tmp_path: Path) -> None:
    """`bash_kill` had already sent TERM when the run was cancelled: the model must not be
    told it was not run (it would believe the job untouched); job tools are not journaled, so
    it is told the call may have run."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": STUBBORN_JOB, "background": True}, id="bg")),
                   tool_calls(ToolCall("bash_kill", {"job_id": "job-1"}, id="kill")), text("told"))
        backend = Backend("memory", tmp_path, server, grace_s=3)
        state = _cut_off_and_go_on(backend, "async", INPUTS["message"], (tmp_path / "termed").exists)
        server.assert_done()
    kill = next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "kill")
    assert (kill.artifact["outcome"], kill.artifact["spawn_error"]) == ("spawn_error", "interrupted")
    assert "it may have run" in kill.artifact["detail"]
    assert kill.artifact["command"] == "bash_kill job-1"


# -- replies given as input ---------------------------------------------------------------------
def _injected(*ids: str | None) -> AIMessage:
    """A reply a client put in the input (Studio, the server's API): `agent` never gave its
    calls their ids."""
    calls = [{"name": "bash", "args": {"command": "echo ran >> injected"}, "id": i, "type": "tool_call"}
             for i in ids]
    return AIMessage("", tool_calls=calls, id="injected")


@pytest.mark.parametrize("ids", [(None,), ("x", "x")], ids=["no-id", "one-id-twice"])
def test_a_reply_given_as_input_gets_call_ids_and_answers_before_the_model(
    ids: tuple[str | None, ...], tmp_path: Path
) -> None:
    """A call with no id (or one id for two calls) can never be answered: every later request
    was refused (HTTP 400) and the thread was stuck. Each call gets an id and a `not_run` answer
    and the request is valid; nothing runs."""
    with FakeOpenAIServer() as server:
        server.add(text("one"), text("two"))
        backend = Backend("memory", tmp_path, server)
        agent = backend.agent_on(backend.saver, None)
        agent.invoke({"messages": [HumanMessage("go"), _injected(*ids)]}, thread_config())
        agent.invoke({"messages": [HumanMessage("again")]}, thread_config())
        server.assert_done()
    messages = agent.get_state(thread_config()).values["messages"]
    reply = messages[1]
    answers = messages[2:2 + len(ids)]
    assert [answer.tool_call_id for answer in answers] == [call["id"] for call in reply.tool_calls]
    assert len({call["id"] for call in reply.tool_calls}) == len(ids)
    assert all(answer.artifact["spawn_error"] == "not_run" for answer in answers)
    assert [m.content for m in messages[-3:]] == ["one", "again", "two"]
    assert not (tmp_path / "injected").exists()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_answers_made_from_the_journal_are_reported_as_command_end_events(mode: str, tmp_path: Path) -> None:
    """A UI that showed the stopped run's `command_start` learns how each command ended, as
    after a resume (docs/cli.md: `command_end`, also for a result replayed from the journal)."""
    with FakeOpenAIServer() as server:
        server.add(tool_calls(ToolCall("bash", {"command": "echo quick"}, id="quick"),
                              ToolCall("bash", {"command": SLOW}, id="slow")), text("told"))
        backend = Backend("sqlite", tmp_path, server)

        async def main() -> list[Any]:
            await _cancel_when(backend, lambda: lines(tmp_path / "counter") == 1, "quick")
            if mode == "sync":
                return []
            async with backend.async_agent() as agent:
                return [e async for e in agent.astream(INPUTS["message"], thread_config(), stream_mode="custom")]

        events = asyncio.run(main())
        if mode == "sync":
            with backend.sync_agent() as agent:
                events = list(agent.stream(INPUTS["message"], thread_config(), stream_mode="custom"))
        server.assert_done()
    ended = [(e["call_id"], e["outcome"], e["spawn_error"]) for e in events if e.get("event") == "command_end"]
    assert ended == [("quick", "ok", None), ("slow", "spawn_error", "interrupted")]
