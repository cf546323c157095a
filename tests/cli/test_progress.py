"""Renderers fed with events directly: the stream chunk mapping, plain lines, the terminal view."""

from __future__ import annotations

import io
import json

from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.types import Interrupt
from rich.console import Console

from bashgraph.graph.cli_terminal import TerminalRenderer
from bashgraph.graph.progress import JsonRenderer, PlainRenderer, chunk_events

START = {"event": "command_start", "call_id": "c1", "command": "make", "cwd": None}
END = {"event": "command_end", "call_id": "c1", "command": "make", "outcome": "spawn_error",
       "exit_code": None, "spawn_error": "timeout", "duration_s": 1.5}


def test_updates_become_a_model_reply_and_node_events() -> None:
    """An `agent` update gives the reply (text, calls) and a node event; interrupts give none."""
    reply = AIMessage(content="let me look", tool_calls=[
        {"name": "bash", "args": {"command": "ls"}, "id": "c1", "type": "tool_call"}])
    chunk = ("updates", {"agent": {"messages": [reply], "steps": 1, "status": "running"}})
    assert chunk_events(chunk, "t") == [
        {"event": "model_reply", "step": 1, "text": "let me look",
         "tool_calls": [{"call_id": "c1", "command": "ls"}], "thread_id": "t"},
        {"event": "node", "node": "agent", "status": "running", "reason": None, "next": None,
         "attempt": None, "thread_id": "t"},
    ]
    assert chunk_events(("updates", {"__interrupt__": (Interrupt(value={}),)}), "t") == []
    retry = chunk_events(("updates", {"retry": {"spawn_retries": 2}}), "t")
    assert (retry[0]["node"], retry[0]["attempt"]) == ("retry", 2)


def test_custom_events_pass_through_and_tokens_come_from_the_agent_only() -> None:
    """command_* events keep every field; model tokens are taken from the `agent` node only."""
    assert chunk_events(("custom", START), "t") == [{**START, "thread_id": "t"}]
    assert chunk_events(("custom", "odd"), "t") == [{"event": "custom", "data": "odd", "thread_id": "t"}]
    token = ("messages", (AIMessageChunk(content="hel"), {"langgraph_node": "agent"}))
    assert chunk_events(token, "t") == [{"event": "model_token", "text": "hel", "thread_id": "t"}]
    assert chunk_events(("messages", (AIMessageChunk(content="x"), {"langgraph_node": "tools"})), "t") == []


def test_plain_and_json_renderers_show_badges_and_skip_unknown_events() -> None:
    """Plain lines carry the badge and duration; unknown events (e.g. command_output) are quiet."""
    plain, as_json = io.StringIO(), io.StringIO()
    for renderer in (PlainRenderer(plain), JsonRenderer(as_json)):
        for event in (START, {"event": "command_output", "call_id": "c1", "stream": "stdout", "text": "x\n"},
                      END, {"event": "something_new"}):
            renderer.emit({**event, "thread_id": "t"})
    assert plain.getvalue() == "$ make\n  [spawn error timeout] 1.50s `make`\n"
    assert [json.loads(line)["event"] for line in as_json.getvalue().splitlines()] == [
        "command_start", "command_output", "command_end", "something_new"]


def test_terminal_shows_the_live_tail_of_a_running_command() -> None:
    """command_output lines appear under the running command (last few, stderr marked)."""
    screen = io.StringIO()
    terminal = TerminalRenderer(Console(file=screen, force_terminal=True, width=100))
    try:
        terminal.emit({**START, "thread_id": "t"})
        for number in range(1, 7):
            terminal.emit({"event": "command_output", "call_id": "c1", "stream": "stdout",
                           "text": f"line {number}\n", "thread_id": "t"})
        terminal.emit({"event": "command_output", "call_id": "c1", "stream": "stderr",
                       "text": "warn\npartial", "thread_id": "t"})
        view = Console(file=io.StringIO(), width=100)
        with view.capture() as captured:
            view.print(terminal.view())
        shown = captured.get()
    finally:
        terminal.close()
    assert "$ make" in shown
    assert "line 1" not in shown
    assert "line 4" in shown
    assert "line 6" in shown
    assert "! warn" in shown
    assert "partial" not in shown  # an unfinished line waits for its end
