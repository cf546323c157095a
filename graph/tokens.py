"""Counting a request's tokens before it is sent, and the budget a context window leaves.

The count is the server's own when it has one: the `usage` of the newest reply made on the
current view (its prompt and its reply), plus an estimate of what was added since. Otherwise the
whole view is estimated. The estimate is 1 token per 3 characters (and per digit) plus 15 per
message: conservative for English and shell output with the tokenizers of current models
(which average 3.5-4.5 characters per token); its error is measured in docs/benchmarks.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage

from bashgraph.graph.models.reasoning import reasoning_to_send

CHARS_PER_TOKEN = 3
#: What a message costs beyond its text: role markers, the tool-call id, separators.
MESSAGE_OVERHEAD_TOKENS = 15
#: The window assumed when neither the settings nor the server name one: smaller than every
#: current hosted model's, and what most self-hosted servers are started with or above.
DEFAULT_WINDOW = 32_768


_DIGITS = str.maketrans("", "", "0123456789")


def text_tokens(text: str) -> int:
    """3 characters a token, and a token for each digit: some tokenizers (Qwen's, SmolLM2's)
    read every digit alone, and shell output is full of numbers."""
    digits = len(text) - len(text.translate(_DIGITS))
    return -(-(len(text) - digits) // CHARS_PER_TOKEN) + digits


def message_tokens(message: AnyMessage) -> int:
    """The estimated tokens of one message as a chat-completions request carries it."""
    content = message.content
    tokens = text_tokens(content if isinstance(content, str) else json.dumps(content, default=str))
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            tokens += text_tokens(call["name"] + json.dumps(call["args"], ensure_ascii=False)) + 10
        for bad in message.invalid_tool_calls:
            tokens += text_tokens(str(bad.get("args") or "")) + 10
        if message.tool_calls and (thinking := reasoning_to_send(message)) is not None:
            # A reply that called tools carries its thinking back with it (graph/models/
            # reasoning.py): it fills the window as the text does.
            tokens += text_tokens(thinking[1])
    return tokens + MESSAGE_OVERHEAD_TOKENS


def estimate(messages: Sequence[AnyMessage]) -> int:
    return sum(message_tokens(m) for m in messages)


def request_tokens(view: Sequence[AnyMessage], fixed_tokens: int, since: int) -> int:
    """Tokens of a request carrying `view` (and `fixed_tokens` of tool schemas).

    The server's count of the newest reply's request is used when that reply is in the view
    past `since` (the view's first message that was not there before the last compaction),
    so it was made on this same prefix: its prompt and reply tokens, plus an estimate of
    what came after it. Else the whole view is estimated."""
    for index in range(len(view) - 1, since - 1, -1):
        message = view[index]
        if not isinstance(message, AIMessage):
            continue
        used = server_count(message)
        if used is not None:
            return used + estimate(view[index + 1:])
        break
    return fixed_tokens + estimate(view)


def server_count(reply: AIMessage) -> int | None:
    usage: Any = reply.usage_metadata
    if not usage or not usage.get("input_tokens"):
        return None
    return int(usage["input_tokens"]) + int(usage.get("output_tokens") or 0)


@dataclass(frozen=True)
class Budget:
    """What a window leaves for the conversation, and the marks compaction works to.

    Compaction starts when a request would pass `high` and brings the view down to `target`,
    well under it, so the next compaction is many steps away (few compactions: servers'
    prefix caches stay warm in between). The marks are low on purpose: a recent, small view
    costs fewer tokens per request (docs/benchmarks.md, bench_context)."""

    window: int
    harder: bool = False
    """After a context-length error: lower marks, so the retried request surely fits."""
    fixed: int = 0
    """Tokens every request carries whatever compaction does (system prompt, tool schemas): the
    marks share out only the rest, or a small window would compact at nearly every step."""

    @property
    def reply(self) -> int:
        """Tokens kept free for the model's reply."""
        return min(self.window // 8, 4_096)

    @property
    def usable(self) -> int:
        return self.window - self.reply

    @property
    def room(self) -> int:
        """What the conversation itself may take: the usable window less the fixed part."""
        return max(self.usable - self.fixed, 0)

    @property
    def high(self) -> int:
        return self.fixed + int(self.room * 0.45)

    @property
    def target(self) -> int:
        return self.fixed + int(self.room * (0.15 if self.harder else 0.18))

    @property
    def recent(self) -> int:
        """Tokens of the newest turns kept whole by a compaction."""
        return int(self.room * (0.08 if self.harder else 0.1))

    @property
    def turn_cap(self) -> int:
        """Most tokens the outputs of one reply may take in the view."""
        return int(self.room * 0.3)
