"""The tool-call rules OpenAI's chat-completions API enforces on a request's history.

Every assistant message with `tool_calls` must be followed directly by one `tool` message per
call; a `tool` message must answer a call of the assistant message before it. Real
OpenAI-compatible servers answer HTTP 400 otherwise (the texts below are OpenAI's), so the
scripted server does too: a client that sends an unanswered call fails in tests as it would
against a real server.
"""

from __future__ import annotations

from typing import Any


def history_problem(messages: list[Any]) -> str | None:
    """Why a real server would refuse this history, or None when it would accept it."""
    waiting: set[str] = set()
    answering = False  # inside the tool messages that follow an assistant message's calls
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not answering or call_id not in waiting:
                return (f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        f"message with 'tool_calls' (messages.[{index}], tool_call_id {call_id!r}).")
            waiting.discard(call_id)
            continue
        if waiting:
            return _unanswered(waiting)
        calls = message.get("tool_calls") if role == "assistant" else None
        waiting = {str(call.get("id")) for call in calls or []}
        answering = bool(waiting)
    return _unanswered(waiting) if waiting else None


def _unanswered(waiting: set[str]) -> str:
    return ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
            f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(sorted(waiting))}")
