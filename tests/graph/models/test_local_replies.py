"""How the bundled model's raw text becomes a reply (no model loaded): a command line becomes
one tool call, an answer plain content, anything else an explaining answer; after a success the
answer is the command's real output."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bashgraph.graph.models.local import LocalChatModel
from bashgraph.graph.models.local_prompt import grounded_answer, parse_reply
from tests.graph.models.test_local_model import bash, call


def test_reply_with_a_command_becomes_a_tool_call() -> None:
    """A JSON bash call is parsed into a LangChain tool call with a fresh call id."""
    reply = parse_reply('bash$ echo "it\'s" > a\\b.txt ', ["bash"])
    assert reply.content == ""
    [tool_call] = reply.tool_calls
    assert tool_call["name"] == "bash"
    assert tool_call["args"] == {"command": 'echo "it\'s" > a\\b.txt'}
    assert str(tool_call["id"]).startswith("call_")
    assert len(str(tool_call["id"])) > 10


def test_reply_with_an_answer_becomes_plain_content() -> None:
    """A final answer has no tool calls, so the graph ends the run."""
    reply = parse_reply("answer: There are 3 files.\n", ["bash"])
    assert reply.content == "There are 3 files."
    assert not reply.tool_calls


@pytest.mark.parametrize("text", [
    "", "ls -la", "bash$ ", "bash$   ", "python$ x", "bash$ ls\nrm -rf x", '{"answer": "x"}', "answer: ",
    "answer: two\nlines",
])
def test_unusable_reply_becomes_an_explaining_answer(text: str) -> None:
    """Anything but one valid call or answer ends as an answer saying the reply was unusable."""
    reply = parse_reply(text, ["bash"])
    assert not reply.tool_calls
    assert str(reply.content).startswith("The local model produced an unusable reply")


def test_answer_cut_by_the_token_cap_is_kept() -> None:
    """An answer stopped by the cap is still shown (marked); a cut command never runs."""
    answer = parse_reply("answer: The files are a, b", ["bash"], cut=True)
    assert answer.content == "The files are a, b [cut at the token cap]"
    command = parse_reply("bash$ rm -rf /tmp/x", ["bash"], cut=True)
    assert not command.tool_calls
    assert "unusable" in str(command.content)


def test_after_a_success_the_answer_is_the_real_output() -> None:
    """The final answer quotes the command and its output verbatim: nothing made up."""
    messages: list[BaseMessage] = [HumanMessage("how many lines in a.txt"), call("wc -l a.txt"),
                                   ToolMessage("7 a.txt", tool_call_id="call_1", status="success")]
    assert grounded_answer(messages) == "Ran `wc -l a.txt`. Its output:\n7 a.txt"
    quiet = [*messages[:2], ToolMessage("(no output)", tool_call_id="call_1", status="success")]
    assert grounded_answer(quiet) == "Ran `wc -l a.txt`: it succeeded and printed nothing."
    long = [*messages[:2], ToolMessage("a\n" + "x" * 5000 + "\nz", tool_call_id="call_1")]
    answer = grounded_answer(long, max_chars=500) or ""
    assert len(answer) < 600
    assert "characters omitted" in answer
    assert answer.endswith("z")


def test_after_a_failure_or_before_any_command_there_is_no_grounded_answer() -> None:
    failed = [HumanMessage("t"), call("cnt x"),
              ToolMessage("[exit code 127] command not found", tool_call_id="call_1", status="error")]
    assert grounded_answer(failed) is None
    assert grounded_answer([HumanMessage("t")]) is None


def test_the_answer_after_a_success_needs_no_model_call() -> None:
    """After a success the reply is built from the output, so no model is loaded (the path does
    not exist: loading it would fail)."""
    model = LocalChatModel(model_path="/nonexistent.gguf").bind_tools([bash])
    reply = model.invoke([HumanMessage("list the files"), call("ls"),
                          ToolMessage("a.txt\nb.txt", tool_call_id="call_1", status="success")])
    assert isinstance(reply, AIMessage)
    assert not reply.tool_calls
    assert reply.content == "Ran `ls`. Its output:\na.txt\nb.txt"
