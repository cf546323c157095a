"""`CompatibleChatOpenAI`: the OpenAI client, reading and sending what real servers need.

OpenAI's own API is lenient where some OpenAI-compatible servers are not, and those servers send
things OpenAI does not (see docs/servers.md):

* llama-cpp-python's server (`chatml-function-calling`) treats a missing `tool_choice` as "none"
  and never calls a tool. This client sends `"auto"` whenever tools are bound: what OpenAI
  assumes anyway when tools are present, so OpenAI's behaviour does not change.
* langchain-openai sends an assistant message that carries tool calls with `"content": null`.
  Servers that validate messages as strings (llama-cpp-python's) answer the next request with
  HTTP 500 ("7 validation errors"). This client sends `""` instead; OpenAI accepts both.
* Reasoning models send their thinking in `reasoning_content` or `reasoning`; it is kept on the
  reply and sent back on the replies that called tools (graph/models/reasoning.py).
* Streamed tool calls are put back together as the model sent them, whatever shape the deltas
  have, and a call that did not arrive whole is marked so it never runs
  (graph/models/stream_calls.py).
* `Retry-After` is honoured up to `retry_after_max_s` (graph/models/retry_after.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Self

import openai
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from pydantic import model_validator

from bashgraph.graph.models.reasoning import FIELD_KEY, REASONING_KEY, reasoning_of, reasoning_to_send
from bashgraph.graph.models.retry_after import DEFAULT_RETRY_AFTER_MAX_S, with_ceiling
from bashgraph.graph.models.stream_calls import StreamedCalls


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI for any OpenAI-compatible server: see the module's docstring for each change."""

    retry_after_max_s: float = DEFAULT_RETRY_AFTER_MAX_S
    """Longest `Retry-After` waited for; a longer one fails the request at once."""

    @model_validator(mode="after")
    def _honour_retry_after(self) -> Self:
        for name in ("root_client", "root_async_client"):
            client = getattr(self, name, None)
            if client is not None:
                with_ceiling(client, self.retry_after_max_s)
        return self

    def bind_tools(  # the same call as ChatOpenAI.bind_tools, one default filled in
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: dict[str, Any] | str | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        if tools and tool_choice is None:
            tool_choice = "auto"
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    # -- requests ---------------------------------------------------------------------------
    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        wire = payload.get("messages") or []
        sources = self._convert_input(input_).to_messages()
        for message, source in zip(wire, sources if len(sources) == len(wire) else [], strict=False):
            if message.get("role") != "assistant":
                continue
            if message.get("content") is None:
                message["content"] = ""
            if message.get("tool_calls") and self._sends_reasoning():
                kept = reasoning_to_send(source)
                if kept is not None:
                    message[kept[0]] = kept[1]
        return payload

    def _sends_reasoning(self) -> bool:
        """Only to another server: OpenAI's API rejects a message field it does not know."""
        return bool(self.openai_api_base)

    # -- replies ----------------------------------------------------------------------------
    def _create_chat_result(self, response: dict[str, Any] | openai.BaseModel,
                            generation_info: dict[str, Any] | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        for generation, message in zip(result.generations, _reply_messages(response), strict=False):
            found = reasoning_of(message)
            if found is not None:
                generation.message.additional_kwargs.update({FIELD_KEY: found[0], REASONING_KEY: found[1]})
        return result

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict[str, Any], default_chunk_class: type, base_generation_info: dict[str, Any] | None
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        choices = chunk.get("choices") or []
        if generation is not None and choices and isinstance(choices[0], dict):
            found = reasoning_of(choices[0].get("delta"))
            if found is not None and found[1]:
                # The field's name is told by the stream wrapper, once: strings merge by joining.
                generation.message.additional_kwargs[REASONING_KEY] = found[1]
                generation.message.response_metadata[_DELTA_FIELD] = found[0]
        return generation

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        fixed = _FixedStream(self._calls_of_stream(kwargs))
        for chunk in super()._stream(*args, **kwargs):
            yield fixed.chunk(chunk)
        yield from fixed.tail()

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        fixed = _FixedStream(self._calls_of_stream(kwargs))
        async for chunk in super()._astream(*args, **kwargs):
            yield fixed.chunk(chunk)
        for last in fixed.tail():
            yield last

    def _calls_of_stream(self, kwargs: dict[str, Any]) -> StreamedCalls | None:
        """What reassembles the calls of a chat-completions stream (the Responses API streams
        whole items, with no finish_reason)."""
        return None if self._use_responses_api({**kwargs, **self.model_kwargs}) else StreamedCalls()


def _reply_messages(response: dict[str, Any] | openai.BaseModel) -> list[dict[str, Any] | None]:
    """The `message` of each choice, as far as the reasoning fields go: the openai client keeps
    the fields OpenAI does not have in `model_extra` (no second dump of the whole reply)."""
    if isinstance(response, dict):
        return [c.get("message") if isinstance(c, dict) else None for c in response.get("choices") or []]
    return [getattr(getattr(c, "message", None), "model_extra", None) for c in getattr(response, "choices", None) or []]


#: response_metadata key of a delta's reasoning field, until `_FieldOnce` moves it.
_DELTA_FIELD = "bashgraph_reasoning_field"


class _FixedStream:
    """What both forms of the stream do to its chunks: the calls reassembled (a chat-completions
    stream), the reasoning field named once."""

    def __init__(self, calls: StreamedCalls | None) -> None:
        self.calls, self.field = calls, _FieldOnce()

    def chunk(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        return self.field.tell(self.calls.fix(chunk) if self.calls else chunk)

    def tail(self) -> list[ChatGenerationChunk]:
        """After the last chunk: what the reassembled calls still hold, if anything."""
        if self.calls and (last := self.calls.last_chunk()) is not None:
            return [last]
        return []


class _FieldOnce:
    """Names the reasoning field of a stream once, on its first chunk of thinking: a string in
    additional_kwargs repeated on every chunk would be joined into `reasoning_contentreasoning_…`."""

    def __init__(self) -> None:
        self.told = False

    def tell(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        field = chunk.message.response_metadata.pop(_DELTA_FIELD, None)
        if field is not None and not self.told:
            chunk.message.additional_kwargs[FIELD_KEY] = field
            self.told = True
        return chunk
