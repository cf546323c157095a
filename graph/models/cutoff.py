"""Replies that did not arrive whole, and replies with nothing in them.

A tool call runs only if its arguments arrived whole. A reply the server cut
(`finish_reason: length`, or `content_filter`), a streamed reply that ended without any
`finish_reason`, or a streamed call whose arguments are not one whole JSON object
(graph/models/stream_calls.py) may hold arguments that look valid but are not what the model
meant: `{"command": "rm -rf ./build` is `rm -rf ./build/cache` cut short. Such calls become
invalid calls: they never run, and the model reads that its reply was cut, and what to do.

A reply with no text (once a `<think>` block is set aside) and no call is empty: not an answer.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, InvalidToolCall, ToolCall

from bashgraph.graph.models.stream_calls import CUT_REASONS, INCOMPLETE_CALLS, call_key

CUT_CALL = ("not run: your reply was cut off before this call's arguments were complete ({why}), "
            "so nothing ran. Send a shorter command; write a long file in several smaller "
            "commands (for example, appending parts with >>).")
"""The model's answer to a call that did not arrive whole (an args error with this text)."""

EMPTY_REPLY_NOTE = ("Your last reply was empty: no answer text and no tool call{why}. Reply again: "
                    "answer the task in text, or call a tool.")
EMPTY_REPLY_FAILURE = "the model sent an empty reply {times} (no answer text and no tool call{why})"


def why_cut(reply: AIMessage) -> str | None:
    """Why every call of `reply` is incomplete, or None when the reply as a whole finished."""
    meta = reply.response_metadata or {}
    reason = meta.get("finish_reason")
    if reason in CUT_REASONS:
        return f"finish_reason: {reason}"
    if meta.get("status") == "incomplete":  # OpenAI's Responses API: cut by max_output_tokens
        return "status: incomplete"
    if meta.get("model_provider") == "openai" and "finish_reason" not in meta and "status" not in meta:
        # langchain-openai records the finish_reason of every chat-completions JSON reply (null
        # included); a streamed reply has one only if a chunk said it. (Responses API replies
        # carry a `status` instead.)
        return "the stream ended without a finish_reason"
    return None


def refuse_incomplete(reply: AIMessage) -> AIMessage:
    """`reply` unchanged when its calls arrived whole; else a copy whose incomplete calls are
    invalid calls that say so (their arguments as received, when known)."""
    whole_cut = why_cut(reply)
    marked: dict[str, str] = dict((reply.response_metadata or {}).get(INCOMPLETE_CALLS) or {})
    if whole_cut is None and not marked:
        return reply
    keep: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for place, call in enumerate(reply.tool_calls):
        key = _key_of(call.get("id"), place, marked)
        if whole_cut is None and key is None:
            keep.append(call)
            continue
        raw = marked.get(key) if key else None
        invalid.append(_refused(call.get("name"), raw if raw is not None else json.dumps(call["args"]),
                                call.get("id"), whole_cut or "the arguments are not one whole JSON object"))
    for bad in reply.invalid_tool_calls:
        # Not JSON at all (a JSON reply cut short): now said to be cut, when it was.
        why = whole_cut or ("the arguments are not one whole JSON object" if bad.get("id") in marked else None)
        invalid.append(_refused(bad.get("name"), bad.get("args"), bad.get("id"), why) if why else bad)
    return reply.model_copy(update={"tool_calls": keep, "invalid_tool_calls": invalid})


def _key_of(call_id: str | None, place: int, marked: dict[str, str]) -> str | None:
    """The INCOMPLETE_CALLS key of a call if it is listed there ("" for a call without an id
    when some call without one is listed, but not at its place: it is refused all the same)."""
    if call_id:
        return call_id if call_id in marked else None
    if call_key(None, place) in marked:
        return call_key(None, place)
    return "" if any(key.startswith("#") for key in marked) else None


def _refused(name: str | None, args: str | None, call_id: str | None, why: str) -> InvalidToolCall:
    return InvalidToolCall(name=name, args=args, id=call_id, error=CUT_CALL.format(why=why),
                           type="invalid_tool_call")


# ----------------------------------------------------------------------------- empty replies


def reply_text(reply: AIMessage) -> str:
    """The text of a reply, whatever the shape of its content (a string or blocks)."""
    content: Any = reply.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def is_empty(reply: AIMessage) -> bool:
    """No text to show and no call to run or answer."""
    return not (reply.tool_calls or reply.invalid_tool_calls or reply_text(reply).strip())


def _why_empty(reply: AIMessage) -> str:
    reason = (reply.response_metadata or {}).get("finish_reason")
    return f"; the server cut it (finish_reason: {reason})" if reason in CUT_REASONS else ""


def empty_reply_note(reply: AIMessage) -> HumanMessage:
    """What the model is told before it is asked once more."""
    return HumanMessage(EMPTY_REPLY_NOTE.format(why=_why_empty(reply)))


def empty_reply_failure(reply: AIMessage, *, asked_again: bool) -> str:
    """The reason a run ends with when the model answered with nothing (twice, or once when the
    step limit left no room to ask again)."""
    times = "twice" if asked_again else "at the step limit"
    return EMPTY_REPLY_FAILURE.format(times=times, why=_why_empty(reply))
