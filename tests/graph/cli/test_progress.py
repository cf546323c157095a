"""Renderers fed with events directly: the stream chunk mapping, plain lines, the terminal view."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.types import Interrupt
from rich.console import Console

from bashgraph.graph.cli.progress import JsonRenderer, PlainRenderer, chunk_events, stop_events
from bashgraph.graph.cli.status import ResumeHint, Stop
from bashgraph.graph.cli.terminal import TerminalRenderer

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


def test_a_tools_event_says_where_the_batch_goes() -> None:
    """`tools` goes back to the model after a clean batch, whether or not it wrote the hop (it
    writes none when the last batch was clean too), and to `route` after a failure."""
    def next_of(update: dict[str, Any]) -> Any:
        [event] = chunk_events(("updates", {"tools": update}), "t")
        return event["next"]

    assert next_of({"messages": [], "next_hop": "agent"}) == "agent"
    assert next_of({"messages": []}) == "agent"
    assert next_of({"messages": [], "next_hop": "route"}) == "route"


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
    assert plain.getvalue() == "$ make\n  [timeout]              1.50s  $ make\n"
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


#: Window title (OSC 0), clipboard write (OSC 52), clear screen, alternate screen, 8-bit CSI.
HOSTILE = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[?1049h\x9b2J"
RAW = ("\x1b]0;", "\x1b]52;", "\x1b[2J", "\x1b[?1049h", "\x9b")
SHOWN = "␛]0;owned␇␛]52;c;cm0gLXJmIH4=␇␛[2J␛[?1049h\ufffd2J"
APPROVAL: dict[str, Any] = {"kind": "approval", "summary": None, "choices": ["approve", "reject", "edit"],
            "requests": [{"call_id": "c1", "command": "rm -rf important \x1b[2K\x1b[1Gls -la",
                          "reason": "matches ask:rm *", "rule": "ask:rm *"}]}


def hostile_events() -> list[dict[str, Any]]:
    """One event of every kind, each with the hostile text wherever the model (or a thread
    name, an error) can put text."""
    events: list[dict[str, Any]] = [
        {"event": "start", "command": "run", "task": HOSTILE, "model": "m" + HOSTILE, "db": "d"},
        {"event": "model_token", "text": "thinking " + HOSTILE + "\nmore"},
        {"event": "model_reply", "step": 1, "text": "plan " + HOSTILE,
         "tool_calls": [{"call_id": "c1", "command": "ls " + HOSTILE}]},
        {"event": "command_start", "call_id": "c1", "command": "ls " + HOSTILE, "cwd": None},
        {"event": "command_output", "call_id": "c1", "stream": "stderr", "text": "out " + HOSTILE + "\n"},
        {**END, "command": "ls " + HOSTILE},
        {"event": "node", "node": "escalate", "status": "environment_fault", "reason": "why " + HOSTILE,
         "next": None, "attempt": None},
        {"event": "answer", "answer": "hint " + HOSTILE},
        {"event": "model_reply", "step": 2, "text": "final " + HOSTILE, "tool_calls": []},
        {"event": "paused", "questions": [APPROVAL], "answer_with": "bashgraph resume t" + HOSTILE},
        {"event": "end", "status": "paused", "reason": "why " + HOSTILE, "exit_code": 3,
         "resume": "bashgraph resume t" + HOSTILE},
        {"event": "end", "status": "busy", "reason": "thread t" + HOSTILE + " is busy",
         "exit_code": 1, "resume": None},
    ]
    return [{**event, "thread_id": "t" + HOSTILE} for event in events]


def test_plain_lines_show_escape_sequences_as_symbols(capsys: pytest.CaptureFixture[str]) -> None:
    """Pipe mode: no raw control sequence on stdout or stderr; the approval shows `␛`."""
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for event in hostile_events():
        renderer.emit(event)
    printed, errors = out.getvalue(), capsys.readouterr().err
    for raw in RAW:
        assert raw not in printed + errors
    assert f"$ ls {SHOWN}\n" in printed
    assert "Approval needed to run `rm -rf important ␛[2K␛[1Gls -la`\n  why: matches ask:rm *\n" in printed
    assert f"bashgraph: error: thread t{SHOWN} is busy\n" == errors


def test_json_lines_escape_every_control_character() -> None:
    """--json: the command is kept exactly, JSON-escaped; the output has no raw control byte."""
    out = io.StringIO()
    renderer = JsonRenderer(out)
    for event in hostile_events():
        renderer.emit(event)
    printed = out.getvalue()
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", printed)
    starts = [e for e in map(json.loads, printed.splitlines()) if e["event"] == "command_start"]
    assert starts[0]["command"] == "ls " + HOSTILE


def test_multi_line_commands_stay_on_one_line() -> None:
    """A command with line breaks: one `$` line and one badge line in pipe mode (`⏎` between
    its lines); the end event's reason in --json is one line; a multi-line final answer keeps
    its lines, indented, so no line of it can pass for an event."""
    out = io.StringIO()
    renderer = PlainRenderer(out)
    command = "printf 'a\\n'\necho b"
    renderer.emit({**START, "command": command, "thread_id": "t"})
    renderer.emit({**END, "command": command, "thread_id": "t"})
    renderer.emit({"event": "model_reply", "step": 2, "text": "done:\nstatus: done", "tool_calls": [],
                   "thread_id": "t"})
    assert out.getvalue().splitlines() == [
        "$ printf 'a\\n'⏎echo b", "  [timeout]              1.50s  $ printf 'a\\n'⏎echo b",
        "final answer: done:", "  status: done"]
    stop = Stop("paused", f"approval needed for `{command}`")
    end = stop_events(stop, "t", ResumeHint())[-1]
    assert end["reason"] == "approval needed for `printf 'a\\n'⏎echo b`"
    assert "\n" not in json.dumps(end)


def _rendered(console: Console, terminal: TerminalRenderer) -> None:
    """Draw the live area once, as rich's refresh thread would."""
    console.print(terminal.view())


def test_terminal_never_prints_a_raw_escape_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    """rich mode: every event, the live area (streamed words, output tail, spinner line) and
    the error line on stderr show the sequences as symbols."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    terminal = TerminalRenderer(console)
    try:
        events = hostile_events()
        terminal.emit(events[0])
        terminal.emit(events[1])
        _rendered(console, terminal)  # the streamed words
        for event in events[2:5]:
            terminal.emit(event)
        _rendered(console, terminal)  # the running command and its output tail
        for event in events[5:]:
            terminal.emit(event)
    finally:
        terminal.close()
    printed, errors = screen.getvalue(), capsys.readouterr().err
    for raw in RAW:
        assert raw not in printed + errors
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed)  # rich's own colours and cursor moves
    assert f"thread t{SHOWN}" in shown
    assert f"$ ls {SHOWN}" in shown
    assert f"! out {SHOWN}" in shown
    assert f"thinking {SHOWN}" in shown
    assert "rm -rf important ␛[2K␛[1Gls -la" in shown
    assert f"thread t{SHOWN} is busy" in errors


def test_the_proposed_command_of_an_edit_is_shown_visibly() -> None:
    """Asked on the terminal: the approval panel and the edit prompt show `␛`; Enter keeps
    the proposed command exactly."""
    screen = io.StringIO()
    terminal = TerminalRenderer(Console(file=screen, force_terminal=True, width=100),
                                answers=io.StringIO("edit\n\n"))
    answer = terminal.ask(APPROVAL)
    assert answer == {"action": "edit", "command": APPROVAL["requests"][0]["command"]}
    shown = screen.getvalue()
    assert "\x1b[1G" not in shown
    assert shown.count("rm -rf important ␛[2K␛[1Gls -la") == 2  # the question, the edit prompt


def test_rich_markup_and_markdown_links_in_model_text_print_literally() -> None:
    """`[bold]`, `[link=…]` print as written; a Markdown link in the final answer shows its
    URL instead of becoming a terminal hyperlink."""
    screen = io.StringIO()
    terminal = TerminalRenderer(Console(file=screen, force_terminal=True, width=200))
    markup = "[bold red]x[/] [link=https://evil.example]click[/link]"
    terminal.emit({"event": "model_reply", "step": 1, "text": markup,
                   "tool_calls": [{"call_id": "c1", "command": markup}], "thread_id": "t"})
    terminal.emit({**START, "command": markup, "thread_id": "t"})
    terminal.emit({**END, "command": markup, "thread_id": "t"})
    terminal.emit({"event": "model_reply", "step": 2, "text": "see [the docs](https://evil.example/x)",
                   "tool_calls": [], "thread_id": "t"})
    terminal.close()
    printed = screen.getvalue()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed)
    assert shown.count(markup) == 2
    assert "https://evil.example/x" in shown
    assert "\x1b]8;" not in printed  # no OSC 8 hyperlink
