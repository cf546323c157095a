"""Replies as particular servers send them, for FakeOpenAIServer: cut off, with reasoning, with
odd streaming deltas, or refused by a server that wants its reasoning back.

    shaped(tool_call("bash", {"command": "rm -rf ./build/cache"}), keep=24)  # cut by `length`
    shaped(text("hi"), reasoning="The user greets me.")                      # DeepSeek's field
    shaped(tool_call(...), deltas="no_index")                                # no `index` in deltas
    shaped(text("done"), needs_reasoning=True)                               # 400 without it

Each shape is built from the OpenAI one (openai_script.py) and changed where the server differs.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from tests.support.openai_script import (
    CHUNK_CHARS,
    Answer,
    Custom,
    Exchange,
    RecordedRequest,
    TextReply,
    ToolCall,
    ToolCallsReply,
    completion_body,
    error_body,
    stream_chunks,
)

Deltas = Literal["openai", "no_index", "repeat_id_name", "one_index"]
#: DeepSeek's answer (thinking mode, tool loop) when an assistant message lacks its reasoning.
MISSING_REASONING = ("Missing `{field}` field in the assistant message at message index "
                     "{index}. For more information, please refer to the thinking mode guide.")
_OPENAI = object()  # the finish_reason OpenAI would send for the reply


@dataclass(frozen=True)
class Shaped(Custom):
    """`reply`, changed: see `shaped`."""

    reply: TextReply | ToolCallsReply
    keep: int | None = None
    finish: object = _OPENAI
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    deltas: Deltas = "openai"
    needs_reasoning: bool = False

    def answer(self, request: RecordedRequest, ex: Exchange) -> Answer:
        if self.needs_reasoning and (index := _missing_reasoning(request, self.reasoning_field)) is not None:
            return Answer(400, error_body(MISSING_REASONING.format(field=self.reasoning_field, index=index),
                                          "invalid_request_error", "invalid_request_error"))
        reply = _cut(self.reply, self.keep) if self.keep is not None else self.reply
        if ex.stream:
            return Answer(events=(*tuple(json.dumps(chunk) for chunk in self._chunks(reply, ex)), "[DONE]"))
        body = completion_body(reply, ex)
        choice = body["choices"][0]
        if self.finish is not _OPENAI:
            choice["finish_reason"] = self.finish
        if self.reasoning is not None:
            choice["message"][self.reasoning_field] = self.reasoning
        return Answer(body=body)

    def _chunks(self, reply: TextReply | ToolCallsReply, ex: Exchange) -> list[dict[str, Any]]:
        chunks = list(stream_chunks(reply, ex))
        first = chunks[0]
        thinking = [_with_delta(first, {"role": "assistant", "content": None, self.reasoning_field: piece})
                    for piece in _pieces(self.reasoning or "")]
        chunks = thinking + chunks
        calls = reply.calls if isinstance(reply, ToolCallsReply) else ()
        shaped: list[dict[str, Any]] = []
        for chunk in chunks:
            choices = chunk["choices"]
            if choices and choices[0]["finish_reason"] is not None and self.finish is not _OPENAI:
                if self.finish is None:
                    continue  # the stream ends without saying why
                choices[0]["finish_reason"] = self.finish
            for piece in (choices[0]["delta"].get("tool_calls") or []) if choices else []:
                _reshape(piece, self.deltas, calls, ex)
            shaped.append(chunk)
        return shaped


def shaped(reply: TextReply | ToolCallsReply, *, keep: int | None = None,
           finish: object = _OPENAI, reasoning: str | None = None,
           reasoning_field: str = "reasoning_content", deltas: Deltas = "openai",
           needs_reasoning: bool = False) -> Shaped:
    """`reply` as a server sends it when:

    * `keep`: its output ran out after `keep` characters of the last call's arguments (or of the
      text): `finish_reason` becomes "length" unless `finish` says otherwise;
    * `finish`: the finish_reason sent (None: none at all — a stream that just ends);
    * `reasoning`: it thought first, sent in `reasoning_field` (DeepSeek and llama.cpp:
      `reasoning_content`; vLLM's newer releases, Ollama and OpenRouter: `reasoning`);
    * `deltas`: streamed tool-call pieces carry no `index`, repeat `id` and `name` each time, or
      all say `index` 0 (each call told apart by its `id`);
    * `needs_reasoning`: HTTP 400 unless every assistant message with tool calls in the request
      carries its thinking in `reasoning_field` (DeepSeek's thinking mode in a tool loop).
    """
    if keep is not None and finish is _OPENAI:
        finish = "length"
    return Shaped(reply, keep, finish, reasoning, reasoning_field, deltas, needs_reasoning)


def _cut(reply: TextReply | ToolCallsReply, keep: int) -> TextReply | ToolCallsReply:
    if isinstance(reply, TextReply):
        return TextReply(reply.content[:keep])
    *whole, last = reply.calls
    return replace(reply, calls=(*whole, ToolCall(last.name, last.arguments()[:keep], last.id)))


def _reshape(piece: dict[str, Any], deltas: Deltas, calls: tuple[ToolCall, ...], ex: Exchange) -> None:
    index = piece["index"]
    if deltas == "no_index":
        del piece["index"]
    elif deltas == "one_index":
        piece["index"] = 0
    elif deltas == "repeat_id_name":
        piece["id"] = ex.call_id(calls[index], index)
        piece["type"] = "function"
        piece["function"]["name"] = calls[index].name


def _with_delta(chunk: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    fresh = copy.deepcopy(chunk)
    fresh["choices"][0].update(delta=delta, finish_reason=None)
    return fresh


def _pieces(value: str) -> list[str]:
    return [value[i:i + CHUNK_CHARS] for i in range(0, len(value), CHUNK_CHARS)]


def _missing_reasoning(request: RecordedRequest, field: str) -> int | None:
    """The index of the first assistant message with tool calls and no `field`."""
    for index, message in enumerate(request.messages):
        if message.get("role") == "assistant" and message.get("tool_calls") and not message.get(field):
            return index
    return None
