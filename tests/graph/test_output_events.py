"""Live output through the real graph: `command_output` custom stream events while a command runs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

#: Ten lines over ~0.5 s.
TICKING = "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.05; done"
LINES = "".join(f"line{i}\n" for i in range(1, 11))
FAST = {"retry_backoff_s": 0.01, "retry_backoff_max_s": 0.02}


def make(steps: list[Any], tmp_path: Path, **settings: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(steps)
    config = AgentConfig(workdir=str(tmp_path), approval="never", **{**FAST, **settings})
    return build_graph(model=model, config=config), model


def stream_custom(agent: Any, mode: str) -> list[dict[str, Any]]:
    task = {"messages": [HumanMessage("go")]}
    if mode == "sync":
        return list(agent.stream(task, stream_mode="custom"))

    async def collect() -> list[dict[str, Any]]:
        return [chunk async for chunk in agent.astream(task, stream_mode="custom")]

    return asyncio.run(collect())


def of_call(events: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("call_id") == call_id]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_several_output_events_come_before_the_end_and_match_the_output(
    tmp_path: Path, mode: str
) -> None:
    """A command printing lines over ~0.5 s: several command_output events, then command_end."""
    reply = calls_reply(TICKING)
    agent, model = make([reply, answer("ok")], tmp_path)
    events = of_call(stream_custom(agent, mode), reply.tool_calls[0]["id"] or "")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "command_start"
    assert kinds[-1] == "command_end"
    outputs = [e for e in events if e["event"] == "command_output"]
    assert len(outputs) >= 3
    assert {e["stream"] for e in outputs} == {"stdout"}
    assert "".join(e["text"] for e in outputs) == LINES
    model.assert_done()


def test_parallel_calls_each_get_their_own_events(tmp_path: Path) -> None:
    """The sync node runs calls in threads; each call's output carries its own call_id."""
    reply = calls_reply("echo alpha; sleep 0.2; echo beta", "echo gamma >&2; sleep 0.2; echo delta >&2")
    agent, _ = make([reply, answer("ok")], tmp_path)
    events = stream_custom(agent, "sync")
    first, second = (of_call(events, call["id"] or "") for call in reply.tool_calls)

    def text(events: list[dict[str, Any]], stream: str) -> str:
        return "".join(e["text"] for e in events
                       if e["event"] == "command_output" and e["stream"] == stream)

    assert (text(first, "stdout"), text(first, "stderr")) == ("alpha\nbeta\n", "")
    assert (text(second, "stdout"), text(second, "stderr")) == ("", "gamma\ndelta\n")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_retry_node_streams_output_too(tmp_path: Path, mode: str) -> None:
    """A transient spawn error (the shell killed by a signal) re-runs with live output again."""
    reply = calls_reply("echo before-the-signal; kill -KILL $$")
    agent, _ = make([reply, answer("gave up")], tmp_path, max_spawn_retries=1,
                    on_environment_error="model")
    events = of_call(stream_custom(agent, mode), reply.tool_calls[0]["id"] or "")
    outputs = [e["text"] for e in events if e["event"] == "command_output"]
    ends = [e for e in events if e["event"] == "command_end"]
    assert outputs == ["before-the-signal\n", "before-the-signal\n"]  # tools, then retry
    assert [e["spawn_error"] for e in ends] == ["signal", "signal"]


def test_live_output_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret the command prints is redacted in the events, as in the stored result."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", "opensesame-4242")
    reply = calls_reply("echo token=$MY_SERVICE_TOKEN")
    agent, _ = make([reply, answer("ok")], tmp_path, pass_env=("MY_SERVICE_TOKEN",))
    events = stream_custom(agent, "sync")
    text = "".join(e["text"] for e in events if e["event"] == "command_output")
    assert text == "token=[REDACTED:MY_SERVICE_TOKEN]\n"


#: Passes the output cap (10,000 characters) at once, so the rest of the run is handed to a
#: thread; output printed after that must still be streamed.
PAST_THE_CAP = "seq 1 4000; sleep 0.5; echo tail"
#: Ends by its timeout; the kill runs in a thread, and what the command prints when it gets
#: SIGTERM is read there.
TIMED_OUT = "trap 'echo tail; exit 1' TERM; echo start; sleep 5 & wait"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("command", [PAST_THE_CAP, TIMED_OUT], ids=["past-the-cap", "timeout"])
def test_output_after_the_run_moved_to_a_thread_is_still_streamed(
    tmp_path: Path, mode: str, command: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Big output or a timeout moves the rest of the run to a thread; its output comes back
    as command_output events in the run's context (the stream writer needs the run's config),
    and no callback fails."""
    reply = calls_reply(command)
    agent, _ = make([reply, answer("ok")], tmp_path, spill_dir=str(tmp_path), timeout_s=1.0,
                    on_environment_error="model")
    with caplog.at_level(logging.WARNING, logger="bashgraph.tools.runner.live"):
        events = of_call(stream_custom(agent, mode), reply.tool_calls[0]["id"] or "")
    text = "".join(e["text"] for e in events if e["event"] == "command_output")
    assert text.endswith("tail\n"), text[-200:]
    assert [e["event"] for e in events][-1] == "command_end"
    assert not [r for r in caplog.records if "live output callback failed" in r.message]
