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
* no journal to ask (or a job tool, never journaled): `spawn_error/interrupted`, saying it
  may have run.

The stopped step's other writes are made as well: `cwd`, where the newest reply's finished calls
left the shell (as `tools` keeps it), and a `retry` the journal shows started and never answered
(its answer is still the fault it retried) answered like any cut-off call.

A history with every call answered and no fault in its newest batch costs one pass over the
messages and nothing else; a fault there costs a journal read per faulted call.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from bashgraph.graph.call_journal import CallContext, not_run_result
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import Executor
from bashgraph.graph.models.replies import with_distinct_call_ids
from bashgraph.graph.nodes import end_event, invalid_call_result, next_cwd, pending_calls, thread_of, to_tool_message
from bashgraph.graph.state import AgentState, latest_results
from bashgraph.tools import CommandResult
from bashgraph.tools.runner import in_thread

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
            if with_distinct_call_ids(message) is not message:
                return True  # a call without an id of its own (a reply given as input) has no answer
            waiting = {call["id"] for call in message.tool_calls}
            waiting.update(bad.get("id") or "" for bad in message.invalid_tool_calls)
    return bool(waiting)


def with_answers(
    messages: list[AnyMessage], answer: Callable[[AIMessage, ToolCall], ToolMessage]
) -> list[AnyMessage]:
    """The history with each reply's answers directly after it, in the order of its calls;
    `answer` makes the missing ones. Other messages keep their order, after those answers. A
    reply whose calls do not each have an id of their own (one given as input: the model's
    get theirs in `agent`) gets them first, so that each can be answered."""
    result: list[AnyMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not isinstance(message, AIMessage) or not (message.tool_calls or message.invalid_tool_calls):
            result.append(message)
            continue
        message = with_distinct_call_ids(message)
        result.append(message)
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


@dataclass(frozen=True)
class Settled:
    """The history with every call answered, and the other channels the stopped step would
    have written: `cwd` (where its finished calls left the shell, as `tools` keeps it) and
    `attempt_serial` (a cut-off retry's attempt is spent, as `retry` counts it)."""

    messages: list[AnyMessage]
    values: dict[str, Any]
    ended: list[tuple[ToolCall, CommandResult]]
    """The answers made, each reported as a `command_end` event, as `tools` reports its own."""

    def report(self) -> None:
        """The `command_end` events of the answers made (on the node's own thread)."""
        emit = get_stream_writer()
        for call, result in self.ended:
            emit(end_event(call, result))

    def state(self, state: AgentState) -> AgentState:
        """What `agent` reads: `state` as the stopped step would have left it."""
        return cast(AgentState, {**state, **self.values, "messages": self.messages})

    def stored(self, update: dict[str, Any]) -> dict[str, Any]:
        """`update` with the answered history written in place of the stored one (answers go in
        the middle, where appending cannot put them), followed by what the node itself wrote."""
        written = update.get("messages", [])
        history = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages, *written]
        return {**self.values, **update, "messages": history}


def may_be_unsettled(messages: list[AnyMessage]) -> bool:
    """A call is open, or the newest reply has an environment fault whose retry may have been
    cut off (the journal says). One pass, and no journal read, for a whole history."""
    return has_open_calls(messages) or any(result.environment_fault for _, result in latest_results(messages))


class OpenCalls:
    """Answers the history's open calls from the journal before `agent` calls the model."""

    def __init__(self, config: AgentConfig, executor: Executor) -> None:
        self.config = config
        self.executor = executor

    def before(self, node: Node) -> Node:
        """`node` (sync) behind the answers: it reads the answered history, which it stores."""

        def answered_first(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            settled = self.settled(state, config) if may_be_unsettled(state.get("messages", [])) else None
            if settled is None:
                return node(state, config)
            settled.report()
            return settled.stored(node(settled.state(state), config))

        return answered_first

    def abefore(self, node: AsyncNode) -> AsyncNode:
        """`before` for asyncio: the journal is read (and a sweep waits) in a thread."""

        async def answered_first(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            if not may_be_unsettled(state.get("messages", [])):
                return await node(state, config)
            # The run's context (its store, where the server keeps the journal) goes along.
            work = functools.partial(contextvars.copy_context().run, self.settled, state, config)
            settled = await in_thread(asyncio.get_running_loop(), work)
            if settled is None:
                return await node(state, config)
            settled.report()
            return settled.stored(await node(settled.state(state), config))

        return answered_first

    def settled(self, state: AgentState, config: RunnableConfig) -> Settled | None:
        """The history with every call answered, or None when it needs nothing (blocking:
        journal reads, sweeps)."""
        messages = state.get("messages", [])
        newest = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        # The newest reply's results the stopped step would have had, by call id: for `cwd`.
        made: dict[str, CommandResult] = {}
        ended: list[tuple[ToolCall, CommandResult]] = []
        retried = self._retried(state, config, newest, made, ended) if newest is not None else {}
        if not retried and not has_open_calls(messages):
            return None
        asked = _asked_of(state) if newest is not None else set()

        def answer(reply: AIMessage, call: ToolCall) -> ToolMessage:
            is_newest = newest is not None and reply.id == newest.id  # (a copy, when it got call ids)
            result = self._result(reply, call, state, config, is_newest and call.get("id") in asked)
            if is_newest:
                made[call.get("id") or ""] = result
            ended.append((call, result))
            return to_tool_message(call, result, self.config.execution.options.max_output_chars, reply.id or "")

        history = with_answers([retried.get(m.id or "", m) for m in messages], answer)
        values: dict[str, Any] = {}
        if newest is not None and made:
            calls = pending_calls(with_distinct_call_ids(newest))
            batch = [made[key] for call in calls if (key := call.get("id") or "") in made]
            values["cwd"] = next_cwd(batch, state.get("cwd"))
        if retried:
            values["attempt_serial"] = state.get("attempt_serial", 0) + 1
        return Settled(history, values, ended)

    def _retried(
        self, state: AgentState, config: RunnableConfig, newest: AIMessage, made: dict[str, CommandResult],
        ended: list[tuple[ToolCall, CommandResult]],
    ) -> dict[str, ToolMessage]:
        """New answers for the newest reply's environment faults whose retry the journal shows
        started (the thread went on with input instead of the stopped `retry`), by the id of
        the answer each replaces; their results go into `made` and `ended`."""
        ctx = CallContext(thread_of(config), message_id=newest.id or "", attempt=state.get("attempt_serial", 0) + 1)
        calls = {call.get("id"): call for call in newest.tool_calls}
        found: dict[str, ToolMessage] = {}
        for tool, result in latest_results(state.get("messages", [])):
            call = calls.get(tool.tool_call_id)
            if call is None or tool.id is None or not result.environment_fault:
                continue
            retry = self.executor.settle_retry(call, result.cwd, ctx)
            if retry is not None:
                made[call.get("id") or ""] = retry
                ended.append((call, retry))
                cap = self.config.execution.options.max_output_chars
                found[tool.id] = to_tool_message(call, retry, cap, newest.id or "")
        return found

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
