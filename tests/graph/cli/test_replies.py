"""Replies as real servers send them, through the `bashgraph` command: cut calls, thinking,
empty replies and long rate limits (tests/support/openai_shapes.py has the shapes)."""

from __future__ import annotations

import pytest

from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_terminal import terminal
from tests.support.openai_server import FakeOpenAIServer, http_error, text, tool_call
from tests.support.openai_shapes import shaped


def test_the_thinking_is_never_the_answer(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A `<think>` block and a reasoning field: the answer shown is the text after them."""
    openai_server.add(shaped(text("<think>private plan</think>The answer is 4."), reasoning="2+2"))
    result = cli("run", "add", "--json")
    assert result.code == 0, result.err
    (reply,) = result.of("model_reply")
    assert reply["text"] == "The answer is 4."
    assert "private plan" not in result.out
    assert "2+2" not in result.out


def test_keep_think_shows_the_block(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """--keep-think: the text as the model wrote it; the resume command repeats the flag."""
    openai_server.add(text("<think>plan</think>The answer."))
    result = cli("run", "add", "--json", "--keep-think")
    assert result.of("model_reply")[0]["text"] == "<think>plan</think>The answer."


def test_a_cut_call_never_runs_on_a_terminal(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """On a terminal the reply streams: the cut `rm -rf ./build` is never run."""
    (cli.workdir / "build" / "cache").mkdir(parents=True)
    (cli.workdir / "build" / "keep").write_text("precious")
    openai_server.add(shaped(tool_call("bash", {"command": "rm -rf ./build/cache"}),
                             keep=len('{"command": "rm -rf ./build')),
                      text("Cut off; I will retry with a shorter command."))
    with terminal() as (screen, tty):
        running = cli.start("run", "clean the cache", "--thread", "cut1", tty=tty, TERM="xterm-256color")
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    assert (cli.workdir / "build" / "keep").read_text() == "precious"
    assert [request.stream for request in openai_server.chat_requests] == [True, True]
    assert "bad arguments" in screen.screen
    told = openai_server.chat_requests[1].messages[-1]["content"]
    assert "cut off before this call's arguments were complete" in told


def test_two_empty_replies_fail_with_a_reason(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """Not `done` with an empty answer: status failed, exit 1, and why."""
    openai_server.add(text(""), text(""))
    result = cli("run", "answer me", "--json")
    assert result.code == 1, result.err
    end = result.events[-1]
    assert (end["status"], end["reason"]) == (
        "failed", "the model sent an empty reply twice (no answer text and no tool call)")


@pytest.mark.parametrize("ceiling", [(), ("--retry-after-max", "30")], ids=["default", "flag"])
def test_a_long_retry_after_stops_with_when_to_resume(
    cli: Cli, openai_server: FakeOpenAIServer, ceiling: tuple[str, ...]
) -> None:
    """Retry-After 300 over the ceiling: no retry, none claimed, and when to come back."""
    openai_server.add(http_error(429, "Rate limit reached.", retry_after=300))
    result = cli("run", "say hello", "--thread", "rl1", "--model-retries", "2", *ceiling)
    assert result.code == 1, result.err
    status, resume = result.out.splitlines()[-2:]
    assert "is rate limiting (HTTP 429): Rate limit reached." in status
    assert "after 2 retries" not in status
    limit = "30" if ceiling else "60"
    assert f"the server asks to wait 300 s, more than the {limit} s bashgraph waits" in status
    assert "; try again after " in status
    again = " --retry-after-max 30.0" if ceiling else ""
    assert resume == f"continue with: bashgraph resume rl1 --model-retries 2{again}"
    assert len(openai_server.chat_requests) == 1


def test_a_cut_call_never_runs_without_streaming(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """--json asks for whole replies: the cut call is refused the same way."""
    (cli.workdir / "mark").write_text("keep")
    openai_server.add(shaped(tool_call("bash", {"command": "rm -f mark"}), finish="length"), text("ok"))
    result = cli("run", "remove the mark", "--json")
    assert result.code == 0, result.err
    assert (cli.workdir / "mark").exists()
    (end,) = result.of("command_end")
    assert end["outcome"] == "args_error"
    assert not any(request.stream for request in openai_server.chat_requests)


def test_a_strict_reasoning_server_completes_a_tool_loop_on_a_terminal(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """Streamed on a terminal, DeepSeek-style: the thinking goes back, the loop ends done."""
    openai_server.add(shaped(tool_call("bash", {"command": "echo hello"}), reasoning="I will echo."),
                      shaped(text("It printed hello."), needs_reasoning=True))
    with terminal() as (screen, tty):
        running = cli.start("run", "say hello", "--thread", "ds1", tty=tty, TERM="xterm-256color")
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    assert "It printed hello." in screen.screen
    assert [request.stream for request in openai_server.chat_requests] == [True, True]
    assert openai_server.chat_requests[1].messages[2]["reasoning_content"] == "I will echo."
