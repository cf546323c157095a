"""Reasoning models: the thinking is kept with the reply, sent back where the server needs it,
and never shown as the answer (the real client, a scripted server, streamed and whole).

DeepSeek's thinking mode answers HTTP 400 to a tool loop whose assistant message lacks its
`reasoning_content`; langchain-openai drops the field, so the loop could never finish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.models.reasoning import split_think
from tests.support.agent_runs import run_task
from tests.support.openai_server import (
    FakeOpenAIServer,
    openai_server_fixture,  # noqa: F401 (registers the fixture)
    text,
    tool_call,
    tool_calls,
)
from tests.support.openai_shapes import shaped

THOUGHT = "The user wants a greeting; echo prints it."


def replies(state: dict[str, Any]) -> list[AIMessage]:
    return [m for m in state["messages"] if isinstance(m, AIMessage)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_strict_reasoning_server_completes_a_tool_loop(
    openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool, field: str
) -> None:
    """The thinking of a reply that called a tool goes back with it, so the loop finishes."""
    openai_server.add(
        shaped(tool_call("bash", {"command": "echo hello"}), reasoning=THOUGHT, reasoning_field=field),
        shaped(text("It printed hello."), reasoning="Done.", reasoning_field=field, needs_reasoning=True),
    )
    state = run_task(openai_server, tmp_path, "say hello", stream=stream)
    assert (state["status"], state["messages"][-1].content) == ("done", "It printed hello.")
    first, last = replies(state)
    assert first.additional_kwargs["reasoning_content"] == THOUGHT
    assert last.additional_kwargs["reasoning_content"] == "Done."
    assert THOUGHT not in str(first.content)
    assert "Done." not in str(last.content)
    sent = openai_server.chat_requests[1].messages[2]
    assert (sent["role"], sent[field], sent["content"]) == ("assistant", THOUGHT, "")
    assert set(sent) & {"reasoning", "reasoning_content"} == {field}  # the server's own field only
    openai_server.assert_done()


def test_the_thinking_is_not_sent_to_openai_itself(openai_server: FakeOpenAIServer) -> None:
    """OpenAI's API rejects message fields it does not know: without a base URL nothing is added."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from pydantic import SecretStr

    from bashgraph.graph.models.openai_compat import CompatibleChatOpenAI

    kept = {"reasoning_content": THOUGHT, "reasoning_field": "reasoning_content"}
    history = [HumanMessage("hi"), AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}],
                                             additional_kwargs=kept),
               ToolMessage("ok", tool_call_id="c1")]
    custom = CompatibleChatOpenAI(model="m", base_url=openai_server.base_url, api_key=SecretStr("k"))
    openai = CompatibleChatOpenAI(model="m", api_key=SecretStr("k"))
    assert custom._get_request_payload(history)["messages"][1]["reasoning_content"] == THOUGHT
    assert "reasoning_content" not in openai._get_request_payload(history)["messages"][1]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_a_leading_think_block_is_set_aside(openai_server: FakeOpenAIServer, tmp_path: Path, stream: bool) -> None:
    """`<think>…</think>` in the text: not in the answer, not sent back, kept as reasoning."""
    openai_server.add(tool_calls(tool_call("bash", {"command": "echo hi"}).calls[0],
                                 content="<think>\nI will echo.\n</think>\n"),
                      text("  <think>It worked.</think>\n\nIt said hi."))
    state = run_task(openai_server, tmp_path, "say hi", stream=stream)
    first, last = replies(state)
    assert (first.content, first.additional_kwargs["reasoning_content"]) == ("", "I will echo.")
    assert (last.content, last.additional_kwargs["reasoning_content"]) == ("It said hi.", "It worked.")
    sent = openai_server.chat_requests[1].messages[2]
    assert sent["content"] == ""
    assert "reasoning_content" not in sent  # no server field to send it in


def test_keep_think_leaves_the_text_as_written(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """keep_think=True (BASHGRAPH_KEEP_THINK, --keep-think): the block stays in the answer."""
    openai_server.add(text("<think>hmm</think>The answer."))
    state = run_task(openai_server, tmp_path, "answer", stream=False, keep_think=True)
    assert state["messages"][-1].content == "<think>hmm</think>The answer."
    assert AgentConfig.from_env({"BASHGRAPH_KEEP_THINK": "true"}).chat.keep_think is True


@pytest.mark.parametrize(("text_in", "expected"), [
    ("<think>a</think>b", ("a", "b")),
    ("\n <think>\na\n</think>\n\nb", ("a", "b")),
    ("<think>never closed", ("never closed", "")),
    ("b <think>a</think>", (None, "b <think>a</think>")),  # only a leading block
    ("<think></think>", ("", "")),
    ("<think>a</think>b</think>c", ("a", "b</think>c")),
    ("no think", (None, "no think")),
])
def test_split_think(text_in: str, expected: tuple[str | None, str]) -> None:
    assert split_think(text_in) == expected
