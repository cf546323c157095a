"""Streamed tool calls put back together as the model sent them, and checked for being whole.

langchain-core merges the pieces (`tool_call_chunks`) of a streamed reply by their `index`, and
concatenates every string it finds twice. Servers people run stream calls in shapes that break
this (docs/servers.md):

* pieces without an `index`: each piece became a call of its own (ten pieces, ten args errors);
* pieces that repeat the call's `id` and `name` every time: the name became `bashbash…`;
* one `index` (0) for every call, each with an `id` of its own: the calls ran into each other.

`StreamedCalls` sees each chunk of one stream in order and rewrites its pieces: each gets the
index of the call it belongs to, and an `id` or `name` already known is not sent again.

It also keeps each call's raw arguments. langchain-core parses them with a partial-JSON parser
that completes what was cut: `{"command": "rm -rf ./build` becomes a valid call to
`rm -rf ./build`. At the end of the stream, a call whose arguments are not one whole JSON object,
or any call of a stream that was cut (`finish_reason: length`) or that ended without a
`finish_reason`, is listed in the reply's `response_metadata[INCOMPLETE_CALLS]` with its raw
arguments; the agent never runs it (graph/models/cutoff.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk

INCOMPLETE_CALLS = "bashgraph_incomplete_calls"
"""`response_metadata` key: {call id: raw arguments} of the calls that did not arrive whole."""

#: finish_reason values that mean the reply stopped before the model finished it.
CUT_REASONS = frozenset({"length", "max_tokens", "content_filter"})


@dataclass
class _Call:
    index: int
    id: str | None = None
    name: str = ""
    args: list[str] = field(default_factory=list)


class StreamedCalls:
    """The calls of one streamed reply; `fix` each chunk in order, then `last_chunk`."""

    def __init__(self) -> None:
        self._calls: list[_Call] = []
        self._by_server_index: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}
        self.finish_reason: str | None = None

    def fix(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        """`chunk` with its tool-call pieces reassigned (changed in place and returned)."""
        reason = (chunk.generation_info or {}).get("finish_reason")
        if reason:
            self.finish_reason = str(reason)
        message = chunk.message
        if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
            for piece in message.tool_call_chunks:  # fresh dicts of this chunk: changed in place
                self._piece(cast(dict[str, Any], piece))
        return chunk

    def last_chunk(self) -> ChatGenerationChunk | None:
        """An empty chunk naming the calls that did not arrive whole; None when all did."""
        incomplete = {call_key(call.id, call.index): "".join(call.args) for call in self._calls
                      if self._cut() or not _is_object("".join(call.args))}
        if not incomplete:
            return None
        return ChatGenerationChunk(message=AIMessageChunk(
            content="", response_metadata={INCOMPLETE_CALLS: incomplete}))

    def _cut(self) -> bool:
        return self.finish_reason is None or self.finish_reason in CUT_REASONS

    def _piece(self, piece: dict[str, Any]) -> dict[str, Any]:
        call = self._call_of(piece.get("index"), piece.get("id") or None, piece.get("name") or None)
        piece["index"] = call.index
        piece["id"] = None if piece.get("id") in (None, "", call.id) else piece["id"]
        if piece["id"]:
            call.id = piece["id"]
            self._by_id.setdefault(call.id, call)
        name = piece.get("name") or ""
        if name and name == call.name:
            name = ""  # the whole name again, not a further piece of it
        call.name += name
        piece["name"] = name or None
        if piece.get("args"):
            call.args.append(str(piece["args"]))
        return piece

    def _call_of(self, server_index: Any, call_id: str | None, name: str | None) -> _Call:
        """The call a piece belongs to: by the server's index unless its id says it is another
        call; without an index, by id; without either, the call being streamed."""
        current = self._calls[-1] if self._calls else None
        if isinstance(server_index, int):
            known = self._by_server_index.get(server_index)
            if known is not None and (call_id is None or known.id in (None, call_id)):
                return known
            call = self._new()
            self._by_server_index[server_index] = call
            return call
        if call_id is not None:
            return self._by_id.get(call_id) or self._new()  # a dict: a stream of many calls stays linear
        if current is None or (name is not None and current.args):
            return self._new()  # a name after arguments: the next call begins
        return current

    def _new(self) -> _Call:
        call = _Call(len(self._calls))
        self._calls.append(call)
        return call


def call_key(call_id: str | None, index: int) -> str:
    """How INCOMPLETE_CALLS names a call: its id, else `#<place in the stream>`."""
    return call_id or f"#{index}"


def _is_object(text: str) -> bool:
    """`text` is one whole JSON object (what a tool call's arguments must be)."""
    try:
        return isinstance(json.loads(text or "{}"), dict)
    except ValueError:
        return False
