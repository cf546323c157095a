"""A reasoning model's thinking: kept with its reply, sent back where a server needs it, never
shown as the answer.

Servers send the thinking apart from the answer, under one of two names (docs/servers.md):
`reasoning_content` (DeepSeek, llama.cpp's server, vLLM before 0.10, LM Studio) or `reasoning`
(newer vLLM, Ollama, OpenRouter). langchain-openai's ChatOpenAI drops both. CompatibleChatOpenAI
keeps it as `additional_kwargs["reasoning_content"]` (the key langchain-deepseek uses), outside
the content, so it is never the answer; it sends it back on the replies that called tools,
because DeepSeek's thinking mode answers HTTP 400 to a tool loop without it; it goes back in the
field the server used.

Other servers leave the thinking in the text, as a leading `<think>…</think>` block.
`split_think` takes it out (the agent keeps it as the reply's reasoning), unless
`ChatSettings.keep_think` says to leave the text as the model wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

REASONING_KEY = "reasoning_content"
"""Where a reply keeps its thinking: `AIMessage.additional_kwargs[REASONING_KEY]`."""

FIELD_KEY = "reasoning_field"
"""`additional_kwargs[FIELD_KEY]`: the field the server sent the thinking in, and so the one it
is sent back in (Ollama reportedly stalls on a `reasoning_content` it never sent)."""

#: The fields servers send the thinking in, in a reply or a streamed delta, in order of preference.
REASONING_FIELDS = ("reasoning_content", "reasoning")

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def reasoning_of(message: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(field, thinking) a server sent in `message` (a reply's `message` or a stream's `delta`)."""
    if not message:
        return None
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str):
            return name, value
    return None


def reasoning_to_send(message: Any) -> tuple[str, str] | None:
    """(field, thinking) to send back with `message`: only thinking a server sent, in its field.

    Thinking taken from a `<think>` block has no field: it is not sent back (the text it came
    from is not either)."""
    extra = getattr(message, "additional_kwargs", None) or {}
    field, thinking = extra.get(FIELD_KEY), extra.get(REASONING_KEY)
    if field in REASONING_FIELDS and isinstance(thinking, str):
        return str(field), thinking
    return None


def split_think(text: str) -> tuple[str | None, str]:
    """(thinking, answer) of `text` that opens with a `<think>` block; (None, text) otherwise.

    A block that never closes (the reply was cut while thinking) is all thinking. Linear in
    `len(text)`: one `find` from the opening tag.
    """
    start = len(text) - len(text.lstrip())
    if not text.startswith(THINK_OPEN, start):
        return None, text
    body = start + len(THINK_OPEN)
    end = text.find(THINK_CLOSE, body)
    if end < 0:
        return text[body:].strip(), ""
    return text[body:end].strip(), text[end + len(THINK_CLOSE):].lstrip()


def without_think(reply: AIMessage) -> AIMessage:
    """`reply` with a leading `<think>` block moved out of its text into its reasoning (unless it
    has reasoning already: then the block is only dropped). Unchanged when there is none."""
    if not isinstance(reply.content, str):
        return reply
    thinking, answer = split_think(reply.content)
    if thinking is None:
        return reply
    extra = dict(reply.additional_kwargs)
    if not extra.get(REASONING_KEY):
        extra[REASONING_KEY] = thinking
    return reply.model_copy(update={"content": answer, "additional_kwargs": extra})
