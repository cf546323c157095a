"""The main loop's nodes: `agent` (model call), `tools` (run a batch of calls), `route`
(error routing: only a batch with a failure goes there).

Each node has a sync and an async form, one body driven two ways (tools/runner/twin.py): its blocking
calls run inline, or awaited / in a thread. So one compiled graph serves invoke, stream, ainvoke
and astream.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.config import get_stream_writer
from langgraph.types import StreamWriter

from bashgraph.graph.call_journal import CallContext
from bashgraph.graph.checks import Checker, checks_are_cheap, denial_of
from bashgraph.graph.compaction import ContextKeeper
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import Executor
from bashgraph.graph.models.cutoff import (
    CUT_CALL,
    empty_reply_failure,
    empty_reply_note,
    is_empty,
    refuse_incomplete,
)
from bashgraph.graph.models.reasoning import without_think
from bashgraph.graph.models.replies import UNENCODABLE_ARGS, encodable_reply, with_distinct_call_ids
from bashgraph.graph.routing import after_clean_batch, batch_is_clean, decide_after_tools, routing_view
from bashgraph.graph.state import FINAL_STATUSES, AgentState, last_ai_message, latest_results, tool_message_id
from bashgraph.tools import BASH_TOOL_NAME, CommandResult, args_error, preview_fields, tool_message
from bashgraph.tools.runner import in_thread, twin


def pending_calls(message: AIMessage) -> list[ToolCall]:
    """Every call the model made, including ones whose arguments were not valid JSON.

    Providers reject a conversation where a tool call has no answer, so malformed calls are
    answered too (with an args error) instead of being dropped.
    """
    calls = list(message.tool_calls)
    for bad in message.invalid_tool_calls:
        calls.append(ToolCall(
            name=bad.get("name") or BASH_TOOL_NAME,
            args={"__invalid__": bad.get("error") or "arguments are not valid JSON"},
            id=bad.get("id") or "", type="tool_call",
        ))
    return calls


def to_tool_message(
    call: ToolCall, result: CommandResult, max_chars: int, message_id: str
) -> ToolMessage:
    """The tools' answer to `call` (`tool_message`), with the id the graph gives it in the
    reply `message_id` (a retry replaces it by that id)."""
    return tool_message(call, result, max_chars, id=tool_message_id(message_id, call.get("id") or ""))


def thread_of(config: RunnableConfig) -> str | None:
    thread = config.get("configurable", {}).get("thread_id")
    return str(thread) if thread is not None else None


class LoopNodes:
    """`agent`, `tools` and `route`, bound to one model, config and executor."""

    def __init__(
        self, model: Runnable[Any, Any], config: AgentConfig, executor: Executor,
        checker: Checker | None = None, context: ContextKeeper | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.executor = executor
        self.checker = checker
        self.context = context or ContextKeeper(config, model, 0, executor.jobs)

    # -- agent ------------------------------------------------------------------------------
    def agent(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return twin.run(self._agent_steps(state, config))

    async def aagent(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await twin.arun(self._agent_steps(state, config))

    def _agent_steps(self, state: AgentState, config: RunnableConfig) -> twin.Steps[dict[str, Any]]:
        thread = thread_of(config)
        if self.executor.jobs.needs_recovery(thread):  # jobs a dead worker left (graph/jobs.py)
            yield twin.blocking(self.executor.jobs.recover, thread)
        fresh = new_run_reset(state)
        state = {**state, **fresh}  # type: ignore[typeddict-item]
        limit = self._step_limit(state)
        update = fresh | (limit or (yield from self._call_steps(state, config)))
        return (yield from _end_jobs_steps(self.executor, update, config))

    def _call_steps(self, state: AgentState, config: RunnableConfig) -> twin.Steps[dict[str, Any]]:
        """The model's reply to the thread's view (graph/context.py), asked once more after an
        empty one; or the way to `compact` when the view would not fit, or did not (a
        context-length refusal)."""
        prepared: tuple[list[AnyMessage], dict[str, Any] | None]
        prepared = yield twin.call(self.context.prepare, self.context.aprepare, state)
        view, compact_first = prepared
        if compact_first:
            return compact_first
        try:
            first = self._clean((yield twin.call(self.model.invoke, self.model.ainvoke, view, config)))
            replies: list[AIMessage | HumanMessage] = [first]
            if self._ask_again(state, first):
                note = empty_reply_note(first)
                again = yield twin.call(self.model.invoke, self.model.ainvoke, [*view, note], config)
                replies += [note, self._clean(again)]
        except Exception as exc:
            return self.context.overflowed(exc, state)  # raises what is not a refusal for length
        after = functools.partial(self._after_reply, state, replies)
        # The policy's checks are linear but not free (a 100 KB line: ~0.1-0.4 s): off the
        # event loop when they may take over a millisecond, so no other run waits on them.
        cheap = self.checker is None or checks_are_cheap(getattr(replies[-1], "tool_calls", None))
        if cheap:
            return after()
        update: dict[str, Any] = yield twin.blocking(after)
        return update

    def _step_limit(self, state: AgentState) -> dict[str, Any] | None:
        if state.get("steps", 0) < self.config.budgets.max_steps:
            return None
        return {"status": "failed", "reason": f"step limit reached ({self.config.budgets.max_steps})"}

    def _clean(self, reply: Any) -> AIMessage:
        """The reply as it is kept: valid Unicode, only whole calls, one id per call, the
        thinking apart from the text."""
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=str(getattr(reply, "content", reply)))
        reply = encodable_reply(reply)  # else the next request (and the checkpoint) cannot encode it
        reply = refuse_incomplete(reply)  # a call cut short never runs (graph/models/cutoff.py)
        reply = with_distinct_call_ids(reply)  # one id per call: its journal row, its answer
        return reply if self.config.chat.keep_think else without_think(reply)

    def _ask_again(self, state: AgentState, reply: AIMessage) -> bool:
        """An empty reply is asked for once more, if the step limit leaves room for it."""
        return is_empty(reply) and state.get("steps", 0) + 1 < self.config.budgets.max_steps

    def _after_reply(self, state: AgentState, replies: list[AIMessage | HumanMessage]) -> dict[str, Any]:
        reply = replies[-1]
        assert isinstance(reply, AIMessage)
        # An empty reply is not kept (some servers reject an assistant message with nothing in
        # it); the note asking again is, so the history shows why the model was asked twice.
        kept = [message for message in replies if not (isinstance(message, AIMessage) and is_empty(message))]
        steps = state.get("steps", 0) + sum(isinstance(message, AIMessage) for message in replies)
        update: dict[str, Any] = {"messages": kept, "steps": steps}
        if is_empty(reply):
            return update | {"status": "failed",
                             "reason": empty_reply_failure(reply, asked_again=len(replies) > 1)}
        if not pending_calls(reply):
            update |= {"status": "done", "reason": None}
            return update
        if state.get("status") != "running":  # an unchanged channel is not written: less to save
            update["status"] = "running"
        if self.checker is not None:
            # Checked once here; the edge after `agent` and `approve` read these checks.
            update["policy_checks"] = self.checker.check_calls(reply.tool_calls, state.get("cwd"))
        return update

    # -- tools ------------------------------------------------------------------------------
    def tools(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        calls, ctx = self._batch(state, config)
        cwd, emit = state.get("cwd"), get_stream_writer()
        denied = self._denied_by_changed_rules(state, calls)
        if len(calls) <= 1:
            results = [self._run_one(call, cwd, ctx, emit, denied) for call in calls]
        else:
            # The context is copied into each thread: LangGraph's stream writer reads the run's
            # config from a context variable every time it writes an event.
            with ContextThreadPoolExecutor(max_workers=min(len(calls), 16)) as pool:
                results = list(pool.map(lambda call: self._run_one(call, cwd, ctx, emit, denied), calls))
        return self._batch_update(state, calls, results, ctx, cwd)

    async def atools(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        calls, ctx = self._batch(state, config)
        cwd = state.get("cwd")
        emit = get_stream_writer()
        denied: dict[str, CommandResult] = {}
        if self._rules_changed(state):  # rarely: the checks' cost matters only then
            check = functools.partial(self._denied_by_changed_rules, state, calls)
            denied = check() if checks_are_cheap(calls) else await in_thread(asyncio.get_running_loop(), check)
        results = await asyncio.gather(*(self._arun_one(call, cwd, ctx, emit, denied) for call in calls))
        return self._batch_update(state, calls, list(results), ctx, cwd)

    def _denied_by_changed_rules(self, state: AgentState, calls: Sequence[ToolCall]) -> dict[str, CommandResult]:
        """Calls the rules deny now, when they changed since `agent` checked them (a resume with
        another policy lands here once the step's routing was saved): refused, whatever the
        old rules or a person allowed. Deny beats every allow; what the new rules would only
        ask about is not asked again past `approve`."""
        if not self._rules_changed(state):
            return {}
        assert self.checker is not None
        checks = state.get("policy_checks")
        cwd = state.get("cwd")
        denials = {call.get("id") or "": denial_of(call, self.checker.check_of(call, cwd, checks)) for call in calls}
        return {call_id: denial for call_id, denial in denials.items() if denial is not None}

    def _rules_changed(self, state: AgentState) -> bool:
        """The rules differ from those `agent` checked this batch's calls with."""
        checks = state.get("policy_checks")
        return self.checker is not None and (checks is None or checks["policy"] != self.checker.fingerprint)

    def _batch(self, state: AgentState, config: RunnableConfig) -> tuple[list[ToolCall], CallContext]:
        messages = state.get("messages", [])
        message = last_ai_message(messages)
        # Calls `approve` already answered (denied or rejected) never run.
        answered = {tool.tool_call_id for tool, _ in latest_results(messages)}
        calls = [c for c in pending_calls(message) if c.get("id") not in answered] if message else []
        return calls, CallContext(thread_of(config), message_id=(message.id or "") if message else "")

    def _run_one(
        self, call: ToolCall, cwd: str | None, ctx: CallContext, emit: StreamWriter,
        denied: dict[str, CommandResult],
    ) -> CommandResult:
        return twin.run(self._one_steps(call, cwd, ctx, emit, denied))

    async def _arun_one(
        self, call: ToolCall, cwd: str | None, ctx: CallContext, emit: StreamWriter,
        denied: dict[str, CommandResult],
    ) -> CommandResult:
        return await twin.arun(self._one_steps(call, cwd, ctx, emit, denied))

    def _one_steps(
        self, call: ToolCall, cwd: str | None, ctx: CallContext, emit: StreamWriter,
        denied: dict[str, CommandResult],
    ) -> twin.Steps[CommandResult]:
        emit(start_event(call, cwd))
        live = output_events(call, emit)
        result = denied.get(call.get("id") or "")
        if result is None:
            run = twin.call(self.executor.run, self.executor.arun, call, cwd, ctx, live, emit)
            result = (yield run) if _is_valid(call) else invalid_call_result(call)
        emit(end_event(call, result))
        return result

    def _batch_update(
        self, state: AgentState, calls: Sequence[ToolCall], results: list[CommandResult],
        ctx: CallContext, cwd: str | None,
    ) -> dict[str, Any]:
        cap = self.config.execution.options.max_output_chars
        update: dict[str, Any] = {"messages": tool_messages(calls, results, cap, ctx)}
        moved_to = next_cwd(results, cwd)
        if moved_to != cwd:
            update["cwd"] = moved_to
        if all(result.ok for result in results) and batch_is_clean(state):
            # Nothing to route: the model reads the results next (two supersteps per step).
            return update | after_clean_batch(state)
        return update | {"next_hop": "route"}

    # -- route ------------------------------------------------------------------------------
    def route(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        messages = state.get("messages", [])
        reply = last_ai_message(messages)
        reply_id = (reply.id or "") if reply is not None else ""
        view, base = routing_view(state, reply_id)
        decision = decide_after_tools([result for _, result in latest_results(messages)], view, self.config)
        update = {
            "next_hop": decision.hop, **asdict(decision.counters), "failures": decision.failures,
            "status": decision.status, "reason": decision.reason, "routed_reply": reply_id,
            "route_base": base,
        }
        return end_jobs_if_final(self.executor, update, config)


def end_jobs_if_final(executor: Executor, update: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """When `update` ends the run (a final status), stop the run's background jobs first."""
    return twin.run(_end_jobs_steps(executor, update, config))


async def aend_jobs_if_final(
    executor: Executor, update: dict[str, Any], config: RunnableConfig
) -> dict[str, Any]:
    """`end_jobs_if_final` for asyncio: the stopping (which waits) runs in a thread."""
    return await twin.arun(_end_jobs_steps(executor, update, config))


def _end_jobs_steps(executor: Executor, update: dict[str, Any], config: RunnableConfig) -> twin.Steps[dict[str, Any]]:
    if update.get("status") in FINAL_STATUSES:
        emit = get_stream_writer()
        for event in (yield twin.blocking(executor.jobs.end_run, thread_of(config))):
            emit(event)
    return update


def tool_messages(
    calls: Sequence[ToolCall], results: list[CommandResult], max_chars: int, ctx: CallContext
) -> list[ToolMessage]:
    """One answer per call, in the calls' order."""
    return [
        to_tool_message(call, result, max_chars, ctx.message_id)
        for call, result in zip(calls, results, strict=True)
    ]


def new_run_reset(state: AgentState) -> dict[str, Any]:
    """Counters to clear when new input arrives on a finished thread: limits are per run.

    `cwd` and `attempt_serial` are kept (the shell's place, and unique journal keys).
    """
    if state.get("status", "running") not in FINAL_STATUSES:
        return {}
    return {
        "steps": 0, "replans": 0, "exit_streak": 0, "args_errors": 0, "spawn_retries": 0,
        "failures": [], "environment_told": None, "routed_reply": None, "route_base": None, "rejected": None,
        "status": "running", "reason": None,
    }


def next_cwd(results: list[CommandResult], cwd: str | None) -> str | None:
    """Where the next command starts: the last directory a shell in this batch ended in."""
    for result in reversed(results):
        if result.final_cwd:
            return result.final_cwd
    return cwd


def _is_valid(call: ToolCall) -> bool:
    return "__invalid__" not in call["args"]


def invalid_call_result(call: ToolCall) -> CommandResult:
    """The args error answering a call whose arguments did not parse: it never runs."""
    reason = str(call["args"]["__invalid__"])
    if reason.startswith((UNENCODABLE_ARGS[:30], CUT_CALL[:30])):  # already whole sentences
        return args_error(reason)
    return args_error(f"the tool call's arguments are not valid JSON ({reason})")


def start_event(call: ToolCall, cwd: str | None) -> dict[str, Any]:
    """Custom stream event: a command is about to run (shown live by the CLI)."""
    return {
        "event": "command_start", "call_id": call.get("id"),
        "command": call["args"].get("command") if isinstance(call["args"], dict) else None,
        "cwd": cwd,
    }


def output_events(call: ToolCall, emit: StreamWriter) -> Callable[[str, str], None]:
    """Live output of `call` as custom stream events (a few per second at most, see
    `bashgraph.tools.runner.live`): `{"event": "command_output", "call_id", "stream", "text"}`."""
    call_id = call.get("id")

    def on_output(stream: str, text: str) -> None:
        emit({"event": "command_output", "call_id": call_id, "stream": stream, "text": text})

    return on_output


def end_event(call: ToolCall, result: CommandResult) -> dict[str, Any]:
    """Custom stream event: how a command ended, with a preview of its output for people."""
    return {
        "event": "command_end", "call_id": call.get("id"), "command": result.command,
        "outcome": result.outcome.value, "exit_code": result.exit_code,
        "spawn_error": result.spawn_error.value if result.spawn_error else None,
        "duration_s": round(result.duration_s, 3), **preview_fields(result),
    }
