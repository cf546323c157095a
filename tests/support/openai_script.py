"""Script steps of FakeOpenAIServer and the OpenAI wire shapes it answers with.

Shapes follow the OpenAI chat-completions API as the `openai` client and `langchain-openai` parse
them: `chat.completion` objects, `chat.completion.chunk` deltas (tool calls by index, arguments in
pieces), `usage` when `stream_options.include_usage` is asked, errors as `{"error": {...}}`.
"""

from __future__ import annotations

import abc
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

CHUNK_CHARS = 8  # small pieces, so clients must merge deltas (and tool-call arguments) correctly


# ----------------------------------------------------------------------------- script steps


@dataclass(frozen=True)
class ToolCall:
    """One tool call in a reply; `args` as a string is sent verbatim (malformed JSON allowed)."""

    name: str
    args: Mapping[str, Any] | str
    id: str | None = None

    def arguments(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(dict(self.args))


@dataclass(frozen=True)
class TextReply:
    content: str


@dataclass(frozen=True)
class ToolCallsReply:
    calls: tuple[ToolCall, ...]
    content: str | None = None


@dataclass(frozen=True)
class ErrorReply:
    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MalformedReply:
    """A 200 whose body is not JSON (as an SSE event when the request streams)."""

    body: str
    content_type: str


@dataclass(frozen=True)
class Hang:
    """Wait `seconds` (cut short when the server closes), then answer with `then`."""

    seconds: float
    then: Step


@dataclass(frozen=True)
class DropConnection:
    """Read the request, then close the socket without answering."""


@dataclass(frozen=True)
class Answer:
    """What a `Custom` step sends: a JSON body, or SSE events (each `data:` payload as text)."""

    status: int = 200
    body: Mapping[str, Any] | None = None
    events: tuple[str, ...] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class Custom(abc.ABC):
    """A step that builds its own answer from the request: the shapes of particular servers
    (tests/support/openai_shapes.py) — cut replies, reasoning fields, odd streaming deltas."""

    @abc.abstractmethod
    def answer(self, request: RecordedRequest, ex: Exchange) -> Answer:
        """The answer to `request`, the `ex`-th exchange."""


Step = TextReply | ToolCallsReply | ErrorReply | MalformedReply | Hang | DropConnection | Custom


def text(content: str) -> TextReply:
    return TextReply(content)


def tool_call(name: str, args: Mapping[str, Any] | str, *, id: str | None = None) -> ToolCallsReply:
    return ToolCallsReply((ToolCall(name, args, id),))


def tool_calls(*calls: ToolCall, content: str | None = None) -> ToolCallsReply:
    return ToolCallsReply(tuple(calls), content)


def http_error(status: int, message: str, *, error_type: str = "invalid_request_error",
               code: str | None = None, retry_after: float | None = None) -> ErrorReply:
    """An error in OpenAI's JSON shape; `retry_after` seconds also go out as `retry-after-ms`."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        # The openai client prefers retry-after-ms and ignores a zero delay (it falls back to its
        # own 0.5 s backoff), so a few milliseconds is what keeps retry tests fast.
        headers = {"retry-after": str(math.ceil(retry_after)),
                   "retry-after-ms": str(round(retry_after * 1000))}
    return ErrorReply(status, error_body(message, error_type, code), headers)


def rate_limited(retry_after: float | None = 0.01) -> ErrorReply:
    return http_error(429, "Rate limit reached for requests. Please try again later.",
                      error_type="requests", code="rate_limit_exceeded", retry_after=retry_after)


def server_error(status: int = 500, *, retry_after: float | None = None) -> ErrorReply:
    return http_error(status, "The server had an error while processing your request. Sorry "
                      "about that!", error_type="server_error", retry_after=retry_after)


def unauthorized() -> ErrorReply:
    return http_error(401, "Incorrect API key provided: sk-test. You can find your API key at "
                      "https://platform.openai.com/account/api-keys.", code="invalid_api_key")


def model_not_found(model: str) -> ErrorReply:
    return http_error(404, f"The model `{model}` does not exist or you do not have access to it.",
                      code="model_not_found")


def malformed(body: str = '{"id": "chatcmpl-cut", "choices": [',
              content_type: str = "application/json") -> MalformedReply:
    return MalformedReply(body, content_type)


def hang(seconds: float, then: Step | None = None) -> Hang:
    return Hang(seconds, then if then is not None else TextReply("late reply"))


def drop_connection() -> DropConnection:
    return DropConnection()


def error_body(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


# ----------------------------------------------------------------------------- wire shapes


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: `body` is the parsed JSON (None when there was no valid JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools", [])) if isinstance(self.body, dict) else []

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


@dataclass(frozen=True)
class Exchange:
    """What every chunk or completion of one answer shares."""

    step_no: int
    model: str
    prompt_tokens: int
    stream: bool
    include_usage: bool
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def id(self) -> str:
        return f"chatcmpl-fake{self.step_no}"

    def call_id(self, call: ToolCall, index: int) -> str:
        return call.id or f"call_{self.step_no}_{index}"

    def usage(self, completion_text: str) -> dict[str, Any]:
        completion = max(1, len(completion_text) // 4)
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "total_tokens": self.prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}


def _reply_text(reply: TextReply | ToolCallsReply) -> str:
    if isinstance(reply, TextReply):
        return reply.content
    return (reply.content or "") + "".join(c.name + c.arguments() for c in reply.calls)


def completion_body(reply: TextReply | ToolCallsReply, ex: Exchange) -> dict[str, Any]:
    """A `chat.completion` object as the OpenAI API returns it without streaming."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None,
                               "refusal": None, "annotations": []}
    finish = "stop"
    if isinstance(reply, ToolCallsReply):
        finish = "tool_calls"
        message["tool_calls"] = [
            {"id": ex.call_id(call, i), "type": "function",
             "function": {"name": call.name, "arguments": call.arguments()}}
            for i, call in enumerate(reply.calls)
        ]
    return {"id": ex.id, "object": "chat.completion", "created": ex.created, "model": ex.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": ex.usage(_reply_text(reply)), "service_tier": "default",
            "system_fingerprint": "fp_fake"}


def stream_chunks(reply: TextReply | ToolCallsReply, ex: Exchange) -> Iterator[dict[str, Any]]:
    """The `chat.completion.chunk` objects of one streamed answer, in OpenAI's order."""
    content = reply.content or ""
    calls = reply.calls if isinstance(reply, ToolCallsReply) else ()
    role = {"role": "assistant", "content": "" if content or not calls else None, "refusal": None}
    if content or not calls:
        yield _chunk(ex, role)
        role = {}
    for piece in _pieces(content):
        yield _chunk(ex, {"content": piece})
    for index, call in enumerate(calls):
        head = {"index": index, "id": ex.call_id(call, index), "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        yield _chunk(ex, {**role, "tool_calls": [head]})
        role = {}
        for piece in _pieces(call.arguments()):
            yield _chunk(ex, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield _chunk(ex, {}, "tool_calls" if calls else "stop")
    if ex.include_usage:
        yield {"id": ex.id, "object": "chat.completion.chunk", "created": ex.created,
               "model": ex.model, "system_fingerprint": "fp_fake", "choices": [],
               "usage": ex.usage(_reply_text(reply))}


def _chunk(ex: Exchange, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": ex.id, "object": "chat.completion.chunk", "created": ex.created, "model": ex.model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if ex.include_usage:
        chunk["usage"] = None  # OpenAI sends null here and the totals in one last chunk
    return chunk


def _pieces(value: str) -> list[str]:
    return [value[i:i + CHUNK_CHARS] for i in range(0, len(value), CHUNK_CHARS)]


def prompt_tokens(request: RecordedRequest) -> int:
    """The server's count of a request's prompt: 4 characters of its JSON messages and tools per
    token (what `usage.prompt_tokens` reports, and what a window is checked against)."""
    return max(1, len(json.dumps(request.messages)) // 4 + len(json.dumps(request.tools)) // 4)


def context_length_error(shape: str, window: int, tokens: int) -> dict[str, Any]:
    """The 400 body a server sends for a prompt longer than its window, in its own words."""
    if shape == "llamacpp":
        return {"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                          "n_ctx": window, "message": f"request ({tokens} tokens) exceeds the available "
                          f"context size ({window} tokens), try increasing it"}}
    if shape == "vllm":
        return {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                "message": f"This model's maximum context length is {window} tokens. However, you "
                f"requested {tokens + 16} tokens ({tokens} in the messages, 16 in the completion). "
                "Please reduce the length of the messages or completion."}
    return error_body(f"This model's maximum context length is {window} tokens. However, your messages "
                      f"resulted in {tokens} tokens. Please reduce the length of the messages.",
                      "invalid_request_error", "context_length_exceeded")


def exchange_for(step_no: int, request: RecordedRequest, default_model: str) -> Exchange:
    options = request.body.get("stream_options") or {}
    return Exchange(step_no=step_no, model=request.model or default_model,
                     prompt_tokens=prompt_tokens(request),
                     stream=request.stream, include_usage=bool(options.get("include_usage")))
