"""Every tool call in the history has an answer before the model is called again.

OpenAI-compatible APIs reject (HTTP 400) a conversation where a reply's tool call has no answer
directly after it. A run's own nodes always answer every call, but a run can stop between the
reply and its answers (a cancelled run, a crashed worker), and LangGraph drops the stopped step
when the thread goes on with input (a new message, or even `{}`): the calls would stay
unanswered, and a model asked again may well ask for the same command again.

So before each model call, `agent` runs behind `OpenCalls` (graph/build.py): when some call has
no answer, the answers are made from the command journal, run nothing, and are stored in the
state, each right after the reply that asked for it, so the model is told what became of them:

* the journal holds its result (it finished; only the answer was lost): that result;
* it started and never finished: `spawn_error/interrupted`, once what is left of it on this
  host is stopped (as any resume does);
* it never started: `spawn_error/not_run`, saying why (a question to a person that new input
  replaced says so);
* no journal to ask: `spawn_error/interrupted`, saying it may have run.

A history with every call answered costs one pass over the messages and nothing else.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from bashgraph.graph.call_journal import CallContext, not_run_result
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import Executor
from bashgraph.graph.nodes import invalid_call_result, pending_calls, thread_of, to_tool_message
from bashgraph.graph.state import AgentState
from bashgraph.tools.results import CommandResult
from bashgraph.tools.runner.drive import in_thread

Node = Callable[[AgentState, RunnableConfig], dict[str, Any]]
AsyncNode = Callable[[AgentState, RunnableConfig], Awaitable[dict[str, Any]]]

#: Why a call that never started was not run, for the model.
STOPPED_BEFORE = ("the run stopped before it started, and the thread went on with new input; "
                  "ask for it again if it is still needed")
QUESTION_REPLACED = ("it needed a person's approval, and the thread went on with new input before "
                     "it started (instead of an answer, or before the approved call could run); ask "
                     "for it again if it is still needed, and the person is asked again")


def has_open_calls(messages: list[AnyMessage]) -> bool:
    """Some reply's call is not answered by the tool messages that directly follow it (one pass)."""
    waiting: set[str | None] = set()
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id in waiting:
            waiting.discard(message.tool_call_id)
            continue
        if waiting:
            return True
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            # The ids `pending_calls` gives (an invalid call without one is answered as "").
            waiting = {call["id"] for call in message.tool_calls}
            waiting.update(bad.get("id") or "" for bad in message.invalid_tool_calls)
    return bool(waiting)


def with_answers(
    messages: list[AnyMessage], answer: Callable[[AIMessage, ToolCall], ToolMessage]
) -> list[AnyMessage]:
    """The history with each reply's answers directly after it, in the order of its calls;
    `answer` makes the missing ones. Other messages keep their order, after those answers."""
    result: list[AnyMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        result.append(message)
        if not isinstance(message, AIMessage) or not (message.tool_calls or message.invalid_tool_calls):
            continue
        end = _segment_end(messages, index)  # the reply's answers are before its next reply
        calls = pending_calls(message)
        ids = {call.get("id") for call in calls}
        found = {m.tool_call_id: m for m in messages[index:end] if isinstance(m, ToolMessage) and m.tool_call_id in ids}
        result.extend(found.get(call.get("id") or "") or answer(message, call) for call in calls)
        result.extend(m for m in messages[index:end] if not (isinstance(m, ToolMessage) and m.tool_call_id in ids))
        index = end
    return result


def _segment_end(messages: list[AnyMessage], start: int) -> int:
    for index in range(start, len(messages)):
        if isinstance(messages[index], AIMessage):
            return index
    return len(messages)


class OpenCalls:
    """Answers the history's open calls from the journal before `agent` calls the model."""

    def __init__(self, config: AgentConfig, executor: Executor) -> None:
        self.config = config
        self.executor = executor

    def before(self, node: Node) -> Node:
        """`node` (sync) behind the answers: it reads the answered history, which it stores."""

        def answered_first(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            if not has_open_calls(state.get("messages", [])):
                return node(state, config)
            history = self.answered(state, config)
            return _stored(history, node({**state, "messages": history}, config))

        return answered_first

    def abefore(self, node: AsyncNode) -> AsyncNode:
        """`before` for asyncio: the journal is read (and a sweep waits) in a thread."""

        async def answered_first(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            if not has_open_calls(state.get("messages", [])):
                return await node(state, config)
            # The run's context (its store, where the server keeps the journal) goes along.
            work = functools.partial(contextvars.copy_context().run, self.answered, state, config)
            history = await in_thread(asyncio.get_running_loop(), work)
            return _stored(history, await node({**state, "messages": history}, config))

        return answered_first

    def answered(self, state: AgentState, config: RunnableConfig) -> list[AnyMessage]:
        """The history with every call answered (blocking: journal reads, sweeps)."""
        messages = state.get("messages", [])
        newest = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        asked = _asked_of(state) if newest is not None else set()

        def answer(reply: AIMessage, call: ToolCall) -> ToolMessage:
            result = self._result(reply, call, state, config, reply is newest and call.get("id") in asked)
            return to_tool_message(call, result, self.config.max_output_chars, reply.id or "")

        return with_answers(messages, answer)

    def _result(
        self, reply: AIMessage, call: ToolCall, state: AgentState, config: RunnableConfig, asked: bool
    ) -> CommandResult:
        cwd = state.get("cwd")
        if "__invalid__" in call["args"]:
            return invalid_call_result(call)
        ctx = CallContext(thread_of(config), message_id=reply.id or "")
        settled = self.executor.settle(call, cwd, ctx)
        if settled is not None:
            return settled
        command = call["args"].get("command") if isinstance(call["args"], dict) else None
        return not_run_result(str(command or call["name"]), QUESTION_REPLACED if asked else STOPPED_BEFORE, cwd)


def _asked_of(state: AgentState) -> set[str]:
    """Calls of the newest reply the rules put to a person (its stored policy checks)."""
    checks = state.get("policy_checks")
    if checks is None:
        return set()
    return {call_id for call_id, check in checks["calls"].items() if check["action"] == "ask"}


def _stored(history: list[AnyMessage], update: dict[str, Any]) -> dict[str, Any]:
    """`update` with the answered history written in place of the stored one (answers go in the
    middle, where appending cannot put them), followed by what the node itself wrote."""
    written = update.get("messages", [])
    return {**update, "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history, *written]}
