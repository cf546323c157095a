"""`CompatibleChatOpenAI`: the OpenAI client, reading and sending what real servers need.

OpenAI's own API is lenient where some OpenAI-compatible servers are not, and those servers send
things OpenAI does not (see docs/servers.md):

* llama-cpp-python's server (`chatml-function-calling`) treats a missing `tool_choice` as "none"
  and never calls a tool. This client sends `"auto"` whenever tools are bound: what OpenAI
  assumes anyway when tools are present, so OpenAI's behaviour does not change.
* langchain-openai sends an assistant message that carries tool calls with `"content": null`.
  Servers that validate messages as strings (llama-cpp-python's) answer the next request with
  HTTP 500 ("7 validation errors"). This client sends `""` instead; OpenAI accepts both.
* Streamed tool calls are put back together as the model sent them, whatever shape the deltas
  have, and a call that did not arrive whole is marked so it never runs
  (graph/models/stream_calls.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI

from bashgraph.graph.models.stream_calls import StreamedCalls


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI for any OpenAI-compatible server: see the module's docstring for each change."""

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
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload

    # -- replies ----------------------------------------------------------------------------
    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        calls = self._calls_of_stream(kwargs)
        for chunk in super()._stream(*args, **kwargs):
            yield calls.fix(chunk) if calls else chunk
        if calls and (last := calls.last_chunk()) is not None:
            yield last

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        calls = self._calls_of_stream(kwargs)
        async for chunk in super()._astream(*args, **kwargs):
            yield calls.fix(chunk) if calls else chunk
        if calls and (last := calls.last_chunk()) is not None:
            yield last

    def _calls_of_stream(self, kwargs: dict[str, Any]) -> StreamedCalls | None:
        """What reassembles the calls of a chat-completions stream (the Responses API streams
        whole items, with no finish_reason)."""
        return None if self._use_responses_api({**kwargs, **self.model_kwargs}) else StreamedCalls()

