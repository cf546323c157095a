"""A strict scripted chat model, for tests, examples and benchmarks (no network, no weights).

It replays replies in order and fails loudly when called past its script; `assert_done()` fails
when steps are left over. A step may be a callable that looks at the messages it was sent.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, PrivateAttr

Step = AIMessage | Callable[[list[BaseMessage]], AIMessage]
_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The model was called more times than its script has steps."""


def call(command: str, *, timeout: float | None = None, id: str | None = None) -> ToolCall:
    """One `bash` tool call with a unique id."""
    args: dict[str, Any] = {"command": command}
    if timeout is not None:
        args["timeout"] = timeout
    return ToolCall(name="bash", args=args, id=id or f"call_{next(_ids)}", type="tool_call")


def calls_reply(*commands: str) -> AIMessage:
    """A model reply that runs `commands` (in parallel when there are several)."""
    return AIMessage(content="", tool_calls=[call(c) for c in commands])


def run(*commands: str) -> AIMessage:
    """The old name of `calls_reply` (it builds a reply; it runs nothing), kept for one release."""
    warnings.warn("bashgraph.graph.testing.run is now calls_reply", DeprecationWarning, stacklevel=2)
    return calls_reply(*commands)


def answer(text: str) -> AIMessage:
    """A final answer: no tool calls."""
    return AIMessage(content=text)


class ScriptedChatModel(BaseChatModel):
    """Replays `steps`; thread-safe; records what it was sent in `.received`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    steps: list[Any]
    _position: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _received: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _tools: list[Any] = PrivateAttr(default_factory=list)

    def __init__(self, steps: Sequence[Step], **kwargs: Any) -> None:
        super().__init__(steps=list(steps), **kwargs)  # type: ignore[call-arg]  # pydantic field

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def received(self) -> list[list[BaseMessage]]:
        return self._received

    @property
    def bound_tools(self) -> list[Any]:
        return self._tools

    @property
    def remaining(self) -> int:
        return len(self.steps) - self._position

    def assert_done(self) -> None:
        if self.remaining:
            raise AssertionError(f"{self.remaining} scripted step(s) were never used")

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        self._tools = list(tools)
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            if self._position >= len(self.steps):
                raise ScriptExhausted(f"called a {self._position + 1}th time; the script has {len(self.steps)} steps")
            step = self.steps[self._position]
            self._position += 1
            self._received.append(list(messages))
        reply = step(messages) if callable(step) else step
        # A fresh copy with a fresh id: the same scripted step may be replayed by a resume.
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(update={"id": None}))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        # Native async, like real chat clients: LangChain's fallback runs _generate in the
        # default executor (6 threads here), which would throttle many concurrent runs.
        return self._generate(messages, stop, **kwargs)
