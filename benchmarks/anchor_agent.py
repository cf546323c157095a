"""What the benchmarks compare against: `create_agent`'s tools as most agents write them, and
the scripted replies both agents get (one command per model step, then an answer)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from bashgraph.graph.testing import answer, calls_reply


@tool("bash")
def bash(command: str) -> str:
    """Run a shell command (the anchor's tool: a plain subprocess, like most agents use)."""
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


@tool("bash")
async def abash(command: str) -> str:
    """Run a shell command without blocking the event loop (the anchor's best async case)."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return (out + err).decode()


def script(steps: int, command: str) -> list[AIMessage]:
    """`steps` replies that each run `command`, then the final answer."""
    return [*(calls_reply(command) for _ in range(steps)), answer("done")]


class CommandsThenAnswer(BaseChatModel):
    """Runs `command` `steps` times, then answers: a pure function of the conversation it is
    sent, like a real model, so one instance serves any number of concurrent runs (as a
    deployment's chat client does). A model made per run would also cost each run LangChain's
    one-off description of the model (`BaseChatModel._serialized`, ~2.5 ms here)."""

    steps: int
    command: str

    @property
    def _llm_type(self) -> str:
        return "commands-then-answer"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        ran = sum(1 for message in messages if isinstance(message, ToolMessage))
        reply = calls_reply(self.command) if ran < self.steps else answer("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        return self._generate(messages, stop, **kwargs)
