"""Model replies made safe to keep: every string in them valid Unicode.

A JSON reply may carry an escaped lone surrogate (`"\\ud800"`). Python decodes it into a `str`
that cannot be encoded as UTF-8, so the conversation could no longer be sent (the next request
fails with UnicodeEncodeError) or checkpointed. Such text is rewritten with the escape shown
literally (`\\ud800`), and a tool call whose arguments held it is turned into an invalid call:
it never runs, and the model is told why in its args error.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall

from bashgraph.tools import clip

UNENCODABLE_ARGS = ("the tool call's arguments contain text that is not valid Unicode (a lone "
                    "surrogate, shown escaped: {args})")


def is_encodable(text: str) -> bool:
    """True when `text` can be encoded as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def visible_text(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`), so it stays visible."""
    return text if is_encodable(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def visible_value(value: Any) -> Any:
    """`value` (JSON-like: str, list, dict) with every string, key included, made visible."""
    if isinstance(value, str):
        return visible_text(value)
    if isinstance(value, list | tuple):
        return type(value)(visible_value(item) for item in value)
    if isinstance(value, dict):
        return {visible_value(key): visible_value(item) for key, item in value.items()}
    return value


def encodable_reply(reply: AIMessage) -> AIMessage:
    """`reply` unchanged if all its text is valid Unicode; otherwise a copy where it is."""
    if _all_encodable(reply):
        return reply
    calls: list[ToolCall] = []
    invalid = [_visible_invalid(bad) for bad in reply.invalid_tool_calls]
    for call in reply.tool_calls:
        if _all_encodable(call["args"]) and is_encodable(call["name"]):
            calls.append(call)
        else:
            invalid.append(_unencodable_call(call))
    return reply.model_copy(update={
        "content": visible_value(reply.content), "tool_calls": calls,
        "invalid_tool_calls": invalid,
        "additional_kwargs": visible_value(reply.additional_kwargs),
        "response_metadata": visible_value(reply.response_metadata),
    })


def _unencodable_call(call: ToolCall) -> InvalidToolCall:
    shown = json.dumps(call["args"])  # ASCII: each surrogate becomes the text \ud800
    return InvalidToolCall(name=visible_text(call["name"]), args=shown, id=call.get("id"),
                           error=UNENCODABLE_ARGS.format(args=clip(shown, 300)),
                           type="invalid_tool_call")


def _visible_invalid(bad: InvalidToolCall) -> InvalidToolCall:
    name, args, error = bad.get("name"), bad.get("args"), bad.get("error")
    return InvalidToolCall(
        name=None if name is None else visible_text(name),
        args=None if args is None else visible_text(args), id=bad.get("id"),
        error=None if error is None else visible_text(error), type="invalid_tool_call",
    )


def _all_encodable(value: Any) -> bool:
    if isinstance(value, AIMessage):
        parts = [value.content, list(value.tool_calls), list(value.invalid_tool_calls),
                 value.additional_kwargs, value.response_metadata]
        return all(_all_encodable(part) for part in parts)
    if isinstance(value, str):
        return is_encodable(value)
    if isinstance(value, list | tuple):
        return all(_all_encodable(item) for item in value)
    if isinstance(value, dict):
        return all(_all_encodable(key) and _all_encodable(item) for key, item in value.items())
    return True


def with_distinct_call_ids(reply: AIMessage) -> AIMessage:
    """`reply` unchanged when every call has an id of its own; otherwise a copy where each has.

    A call is known by its id everywhere after the reply: its journal row, its answer's message
    id, the provider's pairing of call and answer. Two calls under one id (or none) lost one
    result, and ran into each other's journal row. A missing id becomes `call_<n>` (its place
    in the reply), a repeated one `<id>_<n>`, never taking an id another call has.
    """
    calls = [*reply.tool_calls, *reply.invalid_tool_calls]
    ids = [call.get("id") or "" for call in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return reply
    taken, fresh = set(ids), []
    seen: set[str] = set()
    for place, given in enumerate(ids):
        chosen = given if given and given not in seen else ""
        suffix = place
        while not chosen or chosen in seen or (chosen != given and chosen in taken):
            chosen = f"{given or 'call'}_{suffix}"
            suffix += len(ids)
        seen.add(chosen)
        fresh.append(chosen)
    valid = len(reply.tool_calls)
    return reply.model_copy(update={
        "tool_calls": [{**call, "id": new} for call, new in zip(reply.tool_calls, fresh[:valid], strict=True)],
        "invalid_tool_calls": [{**bad, "id": new} for bad, new in
                               zip(reply.invalid_tool_calls, fresh[valid:], strict=True)],
    })
