"""`CompatibleChatOpenAI`: the OpenAI client, with two request details strict servers need.

OpenAI's own API is lenient where some OpenAI-compatible servers are not (see docs/servers.md):

* llama-cpp-python's server (`chatml-function-calling`) treats a missing `tool_choice` as "none"
  and never calls a tool. This client sends `"auto"` whenever tools are bound: what OpenAI
  assumes anyway when tools are present, so OpenAI's behaviour does not change.
* langchain-openai sends an assistant message that carries tool calls with `"content": null`.
  Servers that validate messages as strings (llama-cpp-python's) answer the next request with
  HTTP 500 ("7 validation errors"). This client sends `""` instead; OpenAI accepts both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI that sends `tool_choice: "auto"` with bound tools and `""` for empty content."""

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

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload
