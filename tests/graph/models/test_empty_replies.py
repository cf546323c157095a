"""An empty reply is not an answer: the model is asked once more, then the run fails with a
reason (the real client, a scripted server, streamed and whole).

Before, a reply with no text and no call (or only thinking, cut by the output limit) ended the
run as `done` with an empty answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.support.agent_runs import run_task
from tests.support.openai_server import (
    FakeOpenAIServer,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    text,
)
from tests.support.openai_shapes import shaped

NOTE = "Your last reply was empty: no answer text and no tool call"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_an_empty_reply_is_asked_for_once_more(openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool) -> None:
    """The second request carries a short note; the answer to it ends the run as usual."""
    openai_server.add(text(""), text("Here is the answer."))
    state = run_task(openai_server, tmp_path, "answer me", stream=stream)
    assert (state["status"], state["messages"][-1].content) == ("done", "Here is the answer.")
    assert state["steps"] == 2
    note = openai_server.chat_requests[1].messages[-1]
    assert note["role"] == "user"
    assert note["content"].startswith(NOTE)
    # The empty reply itself is not kept: some servers reject an assistant message with nothing.
    assert [type(m) for m in state["messages"]] == [HumanMessage, HumanMessage, AIMessage]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_two_empty_replies_fail_the_run(openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool) -> None:
    openai_server.add(text(""), text("   "))
    state = run_task(openai_server, tmp_path, "answer me", stream=stream)
    assert state["status"] == "failed"
    assert state["reason"] == "the model sent an empty reply twice (no answer text and no tool call)"
    openai_server.assert_done()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_thinking_cut_by_the_output_limit_is_an_empty_reply(
    openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool
) -> None:
    """Only reasoning, cut by `length` (and only a `<think>` block that never closed): empty."""
    openai_server.add(shaped(text(""), reasoning="Let me think about this at great length", finish="length"),
                      shaped(text("<think>Still thinking about"), finish="length"))
    state = run_task(openai_server, tmp_path, "answer me", stream=stream)
    assert state["status"] == "failed"
    assert state["reason"] == ("the model sent an empty reply twice (no answer text and no tool call; "
                               "the server cut it (finish_reason: length))")
    assert "(finish_reason: length)" in openai_server.chat_requests[1].messages[-1]["content"]


def test_no_room_left_for_asking_again_fails_at_once(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """At the step limit the model is not asked again: the run fails on the first empty reply."""
    openai_server.add(text(""))
    state = run_task(openai_server, tmp_path, "answer me", stream=False, max_steps=1)
    assert (state["status"], state["reason"]) == (
        "failed", "the model sent an empty reply at the step limit (no answer text and no tool call)")
