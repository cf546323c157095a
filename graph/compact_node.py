"""The `compact` node: brings the model's view of a thread back under its budget, before the call.

`agent` sends the run here when the next request would pass the budget's high mark, or when the
server refused the last one as too long (graph/compaction.py decides what to clear and what to
summarise). The node writes only the thread's `context` record, never `messages`, emits a
`compaction` event, and goes back to `agent`; a thread whose requests still do not fit after
`MAX_OVERFLOWS` refusals in a row ends as `failed`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import Command

from bashgraph.graph.compaction import ContextKeeper, Plan
from bashgraph.graph.execution import Executor
from bashgraph.graph.models.window import overflow_of
from bashgraph.graph.nodes import aend_jobs_if_final, end_jobs_if_final, thread_of
from bashgraph.graph.state import FINAL_STATUSES, AgentState
from bashgraph.tools.runner import twin

#: Where `compact` goes, with the label each edge is drawn with.
COMPACT_EDGES = {"agent": "compacted", "__end__": "still too long"}


class CompactNode:
    """`compact`, sync and async, bound to a keeper (the budget), the model and the executor."""

    def __init__(self, keeper: ContextKeeper, executor: Executor) -> None:
        self.keeper = keeper
        self.executor = executor
        self.summarizer: Runnable[Any, Any] = keeper.summarizer

    def compact(self, state: AgentState, config: RunnableConfig) -> Command[str]:
        return twin.run(self._compact_steps(state, config))

    async def acompact(self, state: AgentState, config: RunnableConfig) -> Command[str]:
        return await twin.arun(self._compact_steps(state, config))

    def _compact_steps(self, state: AgentState, config: RunnableConfig) -> twin.Steps[Command[str]]:
        plan = self.keeper.plan(state, thread_of(config))
        reply = None
        if plan.request is not None:
            try:
                reply = yield twin.call(self.summarizer.invoke, self.summarizer.ainvoke, plan.request, config)
            except Exception as exc:
                if overflow_of(exc) is None:
                    raise  # not about length: the model's failure, as at any call
        update = self._update(plan, reply)
        update = yield twin.call(end_jobs_if_final, aend_jobs_if_final, self.executor, update, config)
        return self._command(update)

    def _update(self, plan: Plan, reply: Any) -> dict[str, Any]:
        """The node's writes; the summary request refused for length leaves the ledger alone."""
        update = self.keeper.finish(plan, reply)
        get_stream_writer()(compaction_event(update))
        return update

    @staticmethod
    def _command(update: dict[str, Any]) -> Command[str]:
        final = update.get("status") in FINAL_STATUSES
        return Command(goto="__end__" if final else "agent", update=update)


def compaction_event(update: dict[str, Any]) -> dict[str, Any]:
    """The custom stream event of one compaction (docs/cli.md): what was cleared or summarised."""
    record = update.get("context") or {}
    last = dict(record.get("last") or {})
    return {"event": "compaction", **last, "compactions": record.get("compactions"),
            "status": update.get("status"), "reason": update.get("reason")}
