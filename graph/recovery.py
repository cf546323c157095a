"""The failure branches: `retry` (transient spawn errors), `replan`, `escalate`.

An environment fault is never "solved" by looping: `retry` spends a budget, `escalate` asks a
person (LangGraph `interrupt`), stops the run, or hands the fault to the model once. The nodes
here do the work (re-running calls, writing the re-plan message, asking); where each one goes
next is decided in `routing.py`.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from langchain_core.messages import HumanMessage, ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import Command, StreamWriter, interrupt

from bashgraph.graph.call_journal import CallContext
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import Executor
from bashgraph.graph.models import prompts
from bashgraph.graph.nodes import (
    end_event,
    end_jobs_if_final,
    next_cwd,
    output_events,
    start_event,
    thread_of,
    tool_messages,
)
from bashgraph.graph.routing import ESCALATION_CHOICES, decide_escalation, decide_on_answer
from bashgraph.graph.state import AgentState, last_ai_message, latest_results
from bashgraph.tools import CommandResult
from bashgraph.tools.runner import twin


def backoff_delay(attempt: int, config: AgentConfig, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, capped."""
    ceiling = min(config.budgets.retry_backoff_s * 2.0 ** max(attempt - 1, 0), config.budgets.retry_backoff_max_s)
    jitter: float = (rng or random).uniform(0, ceiling / 2)
    return ceiling / 2 + jitter


def calls_to_rerun(state: AgentState) -> list[tuple[ToolCall, str | None]]:
    """The calls of the newest batch that ended in an environment fault (a re-run may cure it;
    a refused call stays refused), each with the directory it first started in (not where the
    rest of the batch left the shell)."""
    failed = {
        message.tool_call_id: result.cwd
        for message, result in latest_results(state.get("messages", []))
        if result.environment_fault
    }
    ai = last_ai_message(state.get("messages", []))
    return [(call, failed[call.get("id") or ""]) for call in (ai.tool_calls if ai else []) if call.get("id") in failed]


class RecoveryNodes:
    """`retry`, `replan` and `escalate`, bound to one config and executor."""

    def __init__(self, config: AgentConfig, executor: Executor) -> None:
        self.config = config
        self.executor = executor

    # -- retry ------------------------------------------------------------------------------
    def retry(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return twin.run(self._retry_steps(state, config))

    async def aretry(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await twin.arun(self._retry_steps(state, config))

    def _retry_steps(self, state: AgentState, config: RunnableConfig) -> twin.Steps[dict[str, Any]]:
        reruns, ctx, delay = self._retry_plan(state, config)
        emit = get_stream_writer()
        yield twin.call(time.sleep, asyncio.sleep, delay)
        results: list[CommandResult] = yield twin.call(self._rerun, self._arerun, reruns, ctx, emit)
        return self._retry_update(state, [call for call, _ in reruns], results, ctx)

    def _rerun(self, reruns: list[tuple[ToolCall, str | None]], ctx: CallContext,
               emit: StreamWriter) -> list[CommandResult]:
        """The calls one after the other, each with its start and end events."""
        results = []
        for call, cwd in reruns:
            emit(start_event(call, cwd))
            results.append(self.executor.run(call, cwd, ctx, output_events(call, emit), emit))
            emit(end_event(call, results[-1]))
        return results

    async def _arerun(self, reruns: list[tuple[ToolCall, str | None]], ctx: CallContext,
                      emit: StreamWriter) -> list[CommandResult]:
        """The calls together: every start event, then every end event."""
        for call, cwd in reruns:
            emit(start_event(call, cwd))
        results = await asyncio.gather(*(
            self.executor.arun(call, cwd, ctx, output_events(call, emit), emit) for call, cwd in reruns
        ))
        for (call, _), result in zip(reruns, results, strict=True):
            emit(end_event(call, result))
        return list(results)

    def _retry_plan(
        self, state: AgentState, config: RunnableConfig
    ) -> tuple[list[tuple[ToolCall, str | None]], CallContext, float]:
        # Each retry gets a new attempt number so the journal keeps every run apart.
        serial = state.get("attempt_serial", 0) + 1
        delay = backoff_delay(state.get("spawn_retries", 0) + 1, self.config)
        ai = last_ai_message(state.get("messages", []))
        ctx = CallContext(thread_of(config), message_id=(ai.id or "") if ai else "", attempt=serial)
        return calls_to_rerun(state), ctx, delay

    def _retry_update(
        self, state: AgentState, calls: list[ToolCall], results: list[CommandResult],
        ctx: CallContext,
    ) -> dict[str, Any]:
        return {
            # Same message ids as the failed answers: add_messages replaces them in place.
            "messages": tool_messages(calls, results, self.config.execution.options.max_output_chars, ctx),
            "spawn_retries": state.get("spawn_retries", 0) + 1,
            "attempt_serial": state.get("attempt_serial", 0) + 1,
            "cwd": next_cwd(results, state.get("cwd")),
        }

    # -- replan -----------------------------------------------------------------------------
    def replan(self, state: AgentState) -> dict[str, Any]:
        attempts = [
            f"`{f['command']}` -> {f['outcome']} ({f['code']}): {f['evidence']}"
            for f in state.get("failures", [])
        ]
        text = prompts.replan_message(attempts, state.get("reason") or "repeated failures")
        return {
            "messages": [HumanMessage(text)], "replans": state.get("replans", 0) + 1,
            "exit_streak": 0, "reason": None,
        }

    # -- escalate ---------------------------------------------------------------------------
    def escalate(self, state: AgentState, config: RunnableConfig) -> Command[str]:
        command = self._escalate(state)
        if command.goto == "__end__":
            end_jobs_if_final(self.executor, command.update or {}, config)
        return command

    def _escalate(self, state: AgentState) -> Command[str]:
        faults = environment_faults(state)
        summary = "; ".join(f"`{r.command}`: {r.spawn_error} ({r.detail})" for r in faults)
        decision = decide_escalation(state, self.config, summary)
        if decision is None:
            answer = interrupt({
                "kind": "environment_error", "summary": summary,
                "faults": [fault_evidence(r) for r in faults],
                "choices": list(ESCALATION_CHOICES),
                "note": "answer retry, skip or abort; any other text is passed to the model as a hint",
            })
            decision = decide_on_answer(answer, summary)
        return Command(goto=decision.hop, update=decision.update)


def environment_faults(state: AgentState) -> list[CommandResult]:
    """The results of the newest batch that `escalate` is about."""
    return [result for _, result in latest_results(state.get("messages", [])) if result.environment_fault]


def fault_evidence(result: CommandResult) -> dict[str, Any]:
    """What a person is shown for one fault (plain values: it goes into the checkpoint)."""
    return {
        "command": result.command, "kind": result.spawn_error.value if result.spawn_error else None,
        "detail": result.detail, "errno": result.errno, "signal": result.signal,
        "stdout_tail": result.stdout[-500:], "stderr_tail": result.stderr[-500:],
    }
