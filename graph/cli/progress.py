"""Progress of a run: stream chunks turned into events, and renderers that show them.

`chunk_events` turns what `astream(stream_mode=["updates", "custom"])` yields (plus "messages"
on a terminal, for the model's words as they stream) into plain event dicts. The same events drive every renderer:

* `JsonRenderer` — one JSON object per line (the schema is in docs/cli.md);
* `PlainRenderer` — one readable line per event, for pipes and log files;
* `TerminalRenderer` (graph/cli/terminal.py) — rich: spinners, live output tail, colours.

Events keep the model's text exactly (a JSON consumer gets the real command), except `reason`,
which is one line. Renderers for people pass every piece of text through `visible`/`one_line`
(`bashgraph.tools.safety.visible`) as they print it: no control character reaches the terminal, and a
line stays one line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TextIO

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from bashgraph.graph.cli import questions
from bashgraph.graph.cli.status import ERROR_STATUSES, ResumeHint, Stop
from bashgraph.graph.cli.words import SPAWN_WORDS, STATUS_WORDS
from bashgraph.tools.safety import one_line


class Renderer(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...

    def pause(self) -> None:
        """Clear what is drawn live (a signal's message is printed next)."""

    def close(self) -> None: ...


# ----------------------------------------------------------------------------- events


def chunk_events(chunk: Any, thread_id: str) -> list[dict[str, Any]]:
    """The events of one `(mode, data)` stream chunk."""
    mode, data = chunk
    if mode == "custom":
        events = [dict(data) if isinstance(data, Mapping) and "event" in data
                  else {"event": "custom", "data": data}]
    elif mode == "updates":
        events = [e for node, update in data.items() for e in node_events(node, update)]
    elif mode == "messages":
        events = token_events(*data)
    else:
        events = []
    return [{**event, "thread_id": thread_id} for event in events]


def node_events(node: str, update: Any) -> list[dict[str, Any]]:
    """A `model_reply` for the model's answer, then one `node` event per node that ran."""
    if node == "__interrupt__":
        return []  # reported once, with what to answer, by the `paused` event at the stop
    values = update if isinstance(update, Mapping) else {}
    events = [model_reply(values)] if node == "agent" and _reply(values) else []
    events.append({
        "event": "node", "node": node, "status": values.get("status"),
        "reason": _one_line_or_none(values.get("reason")), "next": _next_hop(node, values),
        "attempt": values.get("spawn_retries") if node == "retry" else None,
    })
    return events


def _next_hop(node: str, values: Mapping[str, Any]) -> str | None:
    """Where the run goes next: after `tools`, the model or `route` (a clean batch writes no
    hop when the last one was already `agent`); `route`'s decision; or what an escalation that
    did not end the run chose (a retry writes no message; going back to the model writes one)."""
    if node == "escalate" and not values.get("status"):
        return "agent" if values.get("messages") else "retry"
    if node == "tools":
        return str(values.get("next_hop") or "agent")
    return values.get("next_hop") if node == "route" else None


def model_reply(values: Mapping[str, Any]) -> dict[str, Any]:
    reply = _reply(values)
    assert reply is not None
    calls = [{"call_id": call.get("id"), "command": _command_of(call.get("args"))}
             for call in reply.tool_calls]
    calls += [{"call_id": bad.get("id"), "command": None} for bad in reply.invalid_tool_calls]
    return {"event": "model_reply", "step": values.get("steps"), "text": _text(reply),
            "tool_calls": calls}


def token_events(message: BaseMessage, metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Pieces of the model's text while it streams (terminal only; JSON never asks for them)."""
    if metadata.get("langgraph_node") != "agent" or not isinstance(message, AIMessageChunk):
        return []
    piece = _text(message)
    return [{"event": "model_token", "text": piece}] if piece else []


def _reply(values: Mapping[str, Any]) -> AIMessage | None:
    messages = values.get("messages") or []
    batch = messages if isinstance(messages, list) else [messages]
    replies = [m for m in batch if isinstance(m, AIMessage)]
    return replies[-1] if replies else None


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def _command_of(args: Any) -> str | None:
    command = args.get("command") if isinstance(args, Mapping) else None
    return command if isinstance(command, str) else None


def stop_events(stop: Stop, thread_id: str, hint: ResumeHint) -> list[dict[str, Any]]:
    """`paused` (when a person must answer), then `end` with the exit status."""
    resume = hint.command(thread_id) if stop.resumable else None
    events: list[dict[str, Any]] = []
    if stop.status == "paused":
        forms = questions.answer_forms(stop.pending[0]) if stop.pending else "TEXT"
        events.append({"event": "paused", "thread_id": thread_id, "questions": stop.pending,
                       "answer_with": hint.command(thread_id, f"--answer {forms}")})
    events.append({"event": "end", "thread_id": thread_id, "status": stop.status,
                   "reason": _one_line_or_none(stop.reason), "exit_code": int(stop.exit_status),
                   "resume": resume})
    return events


def _one_line_or_none(reason: Any) -> str | None:
    """A reason as one line (a multi-line command inside it shows `⏎`), None kept."""
    return None if reason is None else one_line(str(reason))


# ----------------------------------------------------------------------------- words


#: Widths of the columns of a finished command's line, so that the lines of a run line up:
#: the badge (the longest, "permission denied", fits) and the duration ("12m 05s").
BADGE_WIDTH = 17
DURATION_WIDTH = 8


def badge(event: Mapping[str, Any]) -> str:
    """How a command ended, in a word or two: ok / exit N / timeout / not found / ... / denied."""
    outcome = event.get("outcome")
    if outcome == "ok":
        return "ok"
    if outcome == "exit_error":
        return f"exit {event.get('exit_code')}"
    if outcome == "spawn_error":
        kind = str(event.get("spawn_error") or "unknown")
        return SPAWN_WORDS.get(kind, kind.replace("_", " "))
    if outcome == "args_error":
        return "bad arguments"
    return str(outcome)


def step_line(event: Mapping[str, Any], last_reason: str | None) -> str | None:
    """The words for a retry, re-plan or escalation; None for the other nodes and decisions."""
    node = event["node"]
    if node == "route" and event.get("next") == "retry":
        # Said when decided: the `retry` node's own event comes after the command ran again.
        return "The command failed for a reason that usually passes; running it again."
    if node == "replan":
        return f"Re-planning: {last_reason or 'repeated failures'}; the model is asked for a new plan."
    if node == "escalate":
        if event.get("status"):
            return None  # the run ends here: its status line says why, once
        if event.get("next") == "retry":
            return "Running the command again, as answered."
        return "The model is told what happened, and the run goes on."
    return None


def duration(event: Mapping[str, Any]) -> str:
    """`0.01s`, `12.3s`, `2m 05s`, `1h 02m`: short enough for the duration column."""
    seconds = event.get("duration_s")
    if not isinstance(seconds, int | float):
        return ""
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds) // 60}m {int(seconds) % 60:02d}s"
    return f"{int(seconds) // 3600}h {int(seconds) % 3600 // 60:02d}m"


def status_line(status: str, reason: str | None) -> str:
    """`status: done`, `status: failed: step limit reached (1)`; a reason that starts with the
    status's own words (`environment fault: ...`) is not preceded by them again."""
    words = STATUS_WORDS.get(status, status.replace("_", " "))
    if status == "paused" or not reason:
        return f"status: {words}"
    if reason.lower().startswith(words):
        return f"status: {reason}"
    return f"status: {words}: {reason}"


# ----------------------------------------------------------------------------- renderers


class JsonRenderer:
    """One JSON object per line; every line parses on its own."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def emit(self, event: dict[str, Any]) -> None:
        if event["event"] == "model_token":
            return
        self.out.write(json.dumps(event, default=str) + "\n")
        self.out.flush()

    def pause(self) -> None:
        """Nothing is drawn live."""

    def close(self) -> None:
        self.out.flush()


class PlainRenderer:
    """Readable lines without colours or cursor movement (stdout is not a terminal).

    Each line is passed through `one_line` as it is written: a multi-line command shows `⏎`,
    an escape sequence shows `␛`. Only the final answer spans lines: its later lines are
    indented, so every line that starts a new event starts in the first column.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._last_reason: str | None = None

    def emit(self, event: dict[str, Any]) -> None:
        if event["event"] == "end" and event["status"] in ERROR_STATUSES:
            print(f"bashgraph: error: {one_line(str(event['reason']))}", file=sys.stderr)
            return
        for line in self.lines(event):
            self.out.write(one_line(line) + "\n")
        self.out.flush()

    def lines(self, event: Mapping[str, Any]) -> Iterable[str]:
        kind = event["event"]
        if kind == "start":
            yield f"thread {event['thread_id']}"
        elif kind == "model_reply":
            yield from self._model_lines(event)
        elif kind == "command_start":
            yield f"$ {event.get('command')}"
        elif kind == "command_end":
            yield (f"  {'[' + badge(event) + ']':<{BADGE_WIDTH + 2}} {duration(event):>{DURATION_WIDTH}}"
                   f"  $ {event.get('command')}")
            yield from preview_lines(event)
        elif kind in ("job_start", "job_end", "job_held"):
            yield job_line(event)
        elif kind == "compaction":
            yield compaction_line(event)
        elif kind == "node":
            yield from self._node_lines(event)
        elif kind == "answer":
            yield f"answer given: {questions.answer_words(event['answer'])}"
        elif kind == "paused":
            for question in event["questions"]:
                yield from questions.lines(question)
            yield f"answer with: {event['answer_with']}"
        elif kind == "end":
            yield from end_lines(event)

    def _model_lines(self, event: Mapping[str, Any]) -> Iterable[str]:
        text = str(event.get("text") or "").strip()
        if event.get("tool_calls"):
            if text:
                yield f"model (step {event.get('step')}): {text}"
            return
        first, *rest = text.split("\n")
        yield f"final answer: {first}"
        for line in rest:
            yield f"  {line}"

    def _node_lines(self, event: Mapping[str, Any]) -> Iterable[str]:
        if event["node"] == "route" and event.get("reason"):
            self._last_reason = str(event["reason"])
        line = step_line(event, self._last_reason)
        if line:
            yield line

    def pause(self) -> None:
        """Nothing is drawn live."""

    def close(self) -> None:
        self.out.flush()


#: Marks of a command's output lines under its line: stdout, stderr (as in the live tail).
PREVIEW_MARKS = {"stdout": "    │ ", "stderr": "    ! "}


def preview_lines(event: Mapping[str, Any]) -> list[str]:
    """A finished command's output as people see it: the head and tail lines of each stream
    (the event's previews), then where all of it is when it went over the cap."""
    lines = [mark + str(line) for stream, mark in PREVIEW_MARKS.items()
             for line in event.get(f"{stream}_preview") or ()]
    if event.get("output_file"):
        lines.append(f"    (all of the output: {event['output_file']})")
    return lines


def job_line(event: Mapping[str, Any]) -> str:
    """A background job started (its pid and command), ended, or runs in another process (its
    state)."""
    if event["event"] == "job_start":
        return f"  job {event.get('job_id')} started (pid {event.get('pid')}): `{event.get('command')}`"
    return f"  job {event.get('job_id')}: {event.get('state')}"


def compaction_line(event: Mapping[str, Any]) -> str:
    """`context compacted: 17,677 → 4,299 tokens (window 16,384, the server refused …)`."""
    why = "the server refused the request as too long" if event.get("trigger") == "overflow" else "over budget"
    done = [f"{event.get('cleared') or 0} old outputs cleared"]
    if event.get("summarised"):
        done.append(f"{event['summarised']} messages summarised" + ("" if event.get("model_summary") else
                                                                     " (without the model's summary)"))
    return (f"context compacted: {int(event.get('tokens_before') or 0):,} → {int(event.get('tokens_after') or 0):,} "
            f"tokens (window {int(event.get('window') or 0):,}, {why}); {', '.join(done)}")


def end_lines(event: Mapping[str, Any]) -> Iterable[str]:
    yield status_line(str(event["status"]), event.get("reason"))
    if event.get("resume"):
        yield f"continue with: {event['resume']}"
