"""A tool call runs only if its arguments arrived whole (the real client, a scripted server).

The model meant `rm -rf ./build/cache`; the server's output limit cut the reply after
`{"command": "rm -rf ./build`. Streamed, langchain-core's partial-JSON merge completed that
into a valid call, and `rm -rf ./build` ran. Each way a reply can arrive cut is tried here,
streamed and whole: nothing runs, and the model reads that its reply was cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from tests.support.agent_runs import run_task
from tests.support.openai_server import (
    FakeOpenAIServer,
    ToolCall,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    text,
    tool_call,
    tool_calls,
)
from tests.support.openai_shapes import shaped

MEANT = {"command": "rm -rf ./build/cache"}
CUT_AT = len('{"command": "rm -rf ./build')  # what arrived: a command that removes too much


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """A build folder whose `keep` file survives only if `rm -rf ./build` never runs."""
    (tmp_path / "build" / "cache").mkdir(parents=True)
    (tmp_path / "build" / "keep").write_text("precious")
    return tmp_path


def tool_answers(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_a_call_cut_by_length_never_runs(openai_server: FakeOpenAIServer, build: Path, stream: bool) -> None:
    """finish_reason "length": the call is answered as cut, nothing runs, the model goes on."""
    openai_server.add(shaped(tool_call("bash", MEANT), keep=CUT_AT), text("I will use a shorter command"))
    state = run_task(openai_server, build, "clean the cache", stream=stream)
    assert (build / "build" / "keep").read_text() == "precious"
    assert (state["status"], state["messages"][-1].content) == ("done", "I will use a shorter command")
    (answer,) = tool_answers(state)
    assert answer.status == "error"
    assert answer.artifact["outcome"] == "args_error"
    assert str(answer.content).startswith("[args error] not run: your reply was cut off before this call's "
                                     "arguments were complete (finish_reason: length)")
    assert "shorter command" in answer.content
    sent = openai_server.chat_requests[1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": answer.tool_call_id, "content": answer.content}
    # The call goes back as it arrived, not as the completed command.
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"command": "rm -rf ./build'
    openai_server.assert_done()


def test_a_stream_that_ends_without_a_finish_reason_runs_nothing(
    openai_server: FakeOpenAIServer, build: Path
) -> None:
    """A stream that just stops (no finish_reason) may have been cut anywhere: nothing runs."""
    openai_server.add(shaped(tool_call("bash", MEANT), keep=CUT_AT, finish=None), text("retrying"))
    state = run_task(openai_server, build, "clean the cache", stream=True)
    assert (build / "build" / "keep").exists()
    (answer,) = tool_answers(state)
    assert "(the stream ended without a finish_reason)" in answer.content


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_valid_looking_arguments_of_a_cut_reply_never_run(
    openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool
) -> None:
    """Arguments that parse, in a reply cut by length, are still not known to be whole."""
    openai_server.add(shaped(tool_call("bash", {"command": "touch mark"}), finish="length"), text("ok"))
    state = run_task(openai_server, tmp_path, "mark it", stream=stream)
    assert not (tmp_path / "mark").exists()
    assert "(finish_reason: length)" in tool_answers(state)[0].content


def test_a_streamed_call_that_is_not_whole_json_never_runs(
    openai_server: FakeOpenAIServer, build: Path
) -> None:
    """A server that says "tool_calls" over cut arguments: the partial-JSON merge would complete
    them; the raw arguments are checked instead."""
    openai_server.add(shaped(tool_call("bash", MEANT), keep=CUT_AT, finish="tool_calls"), text("ok"))
    state = run_task(openai_server, build, "clean the cache", stream=True)
    assert (build / "build" / "keep").exists()
    assert "(the arguments are not one whole JSON object)" in tool_answers(state)[0].content


def test_only_the_cut_call_of_a_batch_is_refused_when_the_reply_finished(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Two calls, the second not whole JSON under finish_reason "tool_calls": the first runs."""
    openai_server.add(
        shaped(tool_calls(ToolCall("bash", {"command": "touch first"}), ToolCall("bash", MEANT)),
               keep=CUT_AT, finish="tool_calls"),
        text("ok"),
    )
    state = run_task(openai_server, tmp_path, "two things", stream=True)
    assert (tmp_path / "first").exists()
    outcomes = [m.artifact["outcome"] for m in tool_answers(state)]
    assert outcomes == ["ok", "args_error"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_whole_calls_still_run(openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool) -> None:
    """The usual reply (finish_reason "tool_calls") runs as before."""
    openai_server.add(tool_call("bash", {"command": "touch mark"}), text("done"))
    state = run_task(openai_server, tmp_path, "mark it", stream=stream)
    assert (tmp_path / "mark").exists()
    reply = next(m for m in state["messages"] if isinstance(m, AIMessage))
    assert reply.tool_calls[0]["args"] == {"command": "touch mark"}
