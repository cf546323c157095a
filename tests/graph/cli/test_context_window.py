"""Long runs through the real CLI against a server with a context window (issue: the conversation
never outgrows the model's context).

The FakeOpenAIServer refuses, with HTTP 400 in OpenAI's, vLLM's or llama.cpp's words, every
request whose prompt passes its window, as real servers do. Each command prints ~9,000
characters (about 2,300 of the server's tokens): without compaction a 16k window is full by
the 8th request, and the run stopped as `model_error` for good.
"""

from __future__ import annotations

import pytest

from tests.graph.cli.conftest import Cli
from tests.support.openai_script import RecordedRequest
from tests.support.openai_server import FakeOpenAIServer, Step, server_error, text, tool_call

TASK = "print nine large blocks, one per command, then say done"
SUMMARY = "Printed large blocks of digits; nothing failed; the task is to print more."


def big_command(index: int) -> str:
    """9,000 copies of one letter (not `python3 -c`: the default rules ask for inline code)."""
    return f"printf '%9000s' '' | tr ' ' {chr(97 + index % 26)}"


def big_output(index: int) -> Step:
    return tool_call("bash", {"command": big_command(index)})


def summaries(request: RecordedRequest) -> Step | None:
    """The compaction's summary requests, answered apart from the script."""
    first = request.messages[0] if request.messages else {}
    return text(SUMMARY) if str(first.get("content", "")).startswith("You are compacting") else None


def windowed(server: FakeOpenAIServer, window: int, shape: str = "openai", report: bool = False) -> None:
    server.window, server.overflow_shape, server.report_window = window, shape, report
    server.answer_first = summaries


def assert_task_and_outcomes_survive(server: FakeOpenAIServer, steps: int) -> None:
    last = server.chat_requests[-1].messages
    texts = "\n".join(str(m.get("content")) for m in last)
    assert last[1] == {"role": "user", "content": TASK}  # the task, verbatim, right after the prompt
    for index in range(steps):  # every command of the run, with its outcome, in full or in a stub
        command = big_command(index)
        assert command in texts or any(command in call["function"]["arguments"].replace('\\"', '"')
                                       for m in last for call in m.get("tool_calls") or [])


def test_a_16k_window_task_with_large_outputs_finishes_done(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The issue's task: it stopped as model_error at its 8th request; now every request fits."""
    windowed(openai_server, 16_384)
    openai_server.add(*(big_output(i) for i in range(14)), text("done"))
    result = cli("run", TASK, "--json", "--max-steps", "40", timeout=120)
    assert result.code == 0, result.err
    assert result.events[-1]["status"] == "done"
    compactions = result.of("compaction")
    assert compactions
    assert all(c["tokens_after"] < c["tokens_before"] for c in compactions)
    assert openai_server.refused == []
    assert_task_and_outcomes_survive(openai_server, 14)


@pytest.mark.parametrize("shape", ["openai", "vllm", "llamacpp"])
def test_a_refusal_for_length_teaches_the_window(cli: Cli, openai_server: FakeOpenAIServer, shape: str) -> None:
    """No window set or reported, and a server smaller than the default budget expects: its first
    refusal (in each server's words) names the window; the run compacts harder and goes on, and
    no later request is refused."""
    windowed(openai_server, 8_192, shape)
    openai_server.add(*(big_output(i) for i in range(14)), text("done"))
    result = cli("run", TASK, "--json", "--max-steps", "40", timeout=120)
    assert result.code == 0, result.err
    assert result.events[-1]["status"] == "done"
    compactions = result.of("compaction")
    assert (compactions[0]["trigger"], compactions[0]["window"]) == ("overflow", 8_192)
    assert len(openai_server.refused) == 1
    assert_task_and_outcomes_survive(openai_server, 14)


def test_a_window_that_is_set_is_never_passed(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """With --context-window the request is compacted before it is sent: no refusal at all."""
    windowed(openai_server, 16_384)
    openai_server.add(*(big_output(i) for i in range(14)), text("done"))
    result = cli("run", TASK, "--json", "--max-steps", "40", "--context-window", "16384", timeout=120)
    assert result.code == 0, result.err
    assert openai_server.refused == []
    assert {c["trigger"] for c in result.of("compaction")} == {"budget"}


@pytest.mark.parametrize("shape", ["vllm", "llamacpp"])
def test_a_window_the_server_reports_is_never_passed(cli: Cli, openai_server: FakeOpenAIServer,
                                                     shape: str) -> None:
    """vLLM's max_model_len in /v1/models, llama.cpp's n_ctx in /props: asked once the
    conversation grows, and kept to."""
    windowed(openai_server, 16_384, shape, report=True)
    openai_server.add(*(big_output(i) for i in range(14)), text("done"))
    result = cli("run", TASK, "--json", "--max-steps", "40", timeout=120)
    assert result.code == 0, result.err
    assert openai_server.refused == []
    assert result.of("compaction")[0]["window"] == 16_384


def test_a_thread_stuck_over_the_window_resumes_and_finishes(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The state the old code left: a history already longer than the window, the model's step
    next. Resuming it against the 16k server compacts first and finishes."""
    openai_server.add(*(big_output(i) for i in range(9)), server_error())
    # A window nothing reaches: the history grows as it did before compaction existed.
    stuck = cli("run", TASK, "--json", "--thread", "stuck", "--max-steps", "40", "--context-window", "10000000",
                timeout=120)
    assert (stuck.code, stuck.events[-1]["status"]) == (1, "model_error")
    assert len(openai_server.chat_requests[-1].body["messages"]) > 18  # over 16k by now
    windowed(openai_server, 16_384)
    openai_server.add(text("done"))
    resumed = cli("resume", "stuck", "--json", timeout=120)
    assert resumed.code == 0, resumed.err
    assert resumed.events[-1]["status"] == "done"
    assert resumed.of("compaction")
    history = cli("history", "stuck")
    assert "compacted " in history.out


def test_the_compaction_is_shown_in_plain_lines(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    windowed(openai_server, 16_384)
    openai_server.add(*(big_output(i) for i in range(9)), text("done"))
    result = cli("run", TASK, "--context-window", "16384", timeout=120)
    assert result.code == 0, result.err
    assert "context compacted: " in result.out
    assert "old outputs cleared" in result.out


def test_reasoning_sent_back_counts_toward_the_window(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A reasoning model's thinking goes back with every reply that called a tool, so it fills
    the window as outputs do: small outputs, 9,000 characters of thinking per step. Counting
    only the text, compaction found nothing to do and the run ended refused, as `failed`."""
    from tests.support.openai_shapes import shaped

    windowed(openai_server, 16_384)
    thinking = "I should look at the next file before I decide anything. " * 160
    openai_server.add(*(shaped(tool_call("bash", {"command": f"echo step {i}"}), reasoning=thinking)
                        for i in range(14)), text("done"))
    result = cli("run", TASK, "--json", "--max-steps", "40", "--context-window", "16384", timeout=120)
    assert result.code == 0, result.err
    assert result.events[-1]["status"] == "done"
    assert openai_server.refused == []
