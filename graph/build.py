"""build_graph: the compiled LangGraph state machine, and a module-level `graph` for Studio."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from bashgraph.graph.approval import ApprovalNode, make_policy
from bashgraph.graph.call_journal import Journal
from bashgraph.graph.checks import Checker
from bashgraph.graph.compact_node import COMPACT_EDGES, CompactNode
from bashgraph.graph.compaction import ContextKeeper
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.execution import Executor
from bashgraph.graph.models.deferred import DeferredChatModel, LazyModel
from bashgraph.graph.nodes import LoopNodes
from bashgraph.graph.open_calls import OpenCalls
from bashgraph.graph.recovery import RecoveryNodes
from bashgraph.graph.routing import (
    AGENT_EDGES,
    ESCALATE_EDGES,
    ROUTE_EDGES,
    TOOLS_EDGES,
    AgentEdgeView,
    HopView,
    inline_forms,
    labelled,
    next_after_agent,
    next_after_route,
    next_after_tools,
)
from bashgraph.graph.state import AgentInput, AgentState, PublicState
from bashgraph.graph.tokens import text_tokens
from bashgraph.tools import make_bash_tool, make_job_tools

#: Input and output are plain dicts to callers (`{"messages": [("user", "task")]}` is valid
#: input: LangGraph coerces message tuples), so they are typed loosely on purpose; the graph
#: declares their schemas (`AgentInput`, `PublicState`) for LangGraph Studio and the server.
Agent = CompiledStateGraph[AgentState, None, Any, Any]
Builder = StateGraph[AgentState, None, AgentInput, PublicState]


def build_graph(
    *,
    model: BaseChatModel | LazyModel | None = None,
    config: AgentConfig | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    journal: Journal | None = None,
) -> Agent:
    """Compile the agent. `journal` makes resumes exactly-once (see `store/journal.py`, `session.py`).

    `model=None`: the model `config` names is made on the first model call (models/deferred.py),
    so a graph that is only inspected, forked or drawn needs none. A `LazyModel` does the same
    and can be shared: graphs built with one make the model once between them.
    """
    config = config or AgentConfig()
    executor = Executor(config, journal)
    checker = Checker(make_policy(config))
    tools = [make_bash_tool(max_timeout=config.execution.max_timeout_s, background=True), *make_job_tools()]
    if model is None or isinstance(model, LazyModel):
        bound: Runnable[Any, Any] = DeferredChatModel(config, tools, model)
    else:
        bound = model.bind_tools(tools)
    keeper = ContextKeeper(config, bound, schema_tokens(tools), executor.jobs,
                           served=model if isinstance(model, BaseChatModel) else None)
    loop = LoopNodes(bound, config, executor, checker, keeper)
    recovery = RecoveryNodes(config, executor)
    # Callers see AgentInput and PublicState (Studio's input form, `invoke`'s result); the nodes
    # read and write all of AgentState, the bookkeeping included.
    builder: Builder = StateGraph(AgentState, input_schema=AgentInput, output_schema=PublicState)
    # Before each model call, every call in the history gets an answer (graph/open_calls.py).
    answers = OpenCalls(config, executor)
    builder.add_node("agent", dual_node(answers.before(loop.agent), answers.abefore(loop.aagent), "agent"))
    builder.add_node("approve", ApprovalNode(config, checker))
    builder.add_node("tools", dual_node(loop.tools, loop.atools, "tools"))
    builder.add_node("route", loop.route)
    builder.add_node("retry", dual_node(recovery.retry, recovery.aretry, "retry"))
    builder.add_node("replan", recovery.replan)
    builder.add_node("escalate", recovery.escalate, destinations=ESCALATE_EDGES)
    compact = CompactNode(keeper, executor)
    builder.add_node("compact", dual_node(compact.compact, compact.acompact, "compact"),
                     destinations=COMPACT_EDGES)
    builder.add_edge(START, "agent")
    # Each routed edge answers with its label (the outcome that takes it), so drawings name them.
    after_agent = functools.partial(next_after_agent, checker=checker)
    after_agent.__name__ = "next_after_agent"  # type: ignore[attr-defined]
    _add_labelled_edges(builder, "agent", after_agent, AGENT_EDGES, AgentEdgeView)
    builder.add_edge("approve", "tools")
    _add_labelled_edges(builder, "tools", next_after_tools, TOOLS_EDGES, HopView)
    builder.add_edge("retry", "route")
    _add_labelled_edges(builder, "route", next_after_route, ROUTE_EDGES, HopView)
    builder.add_edge("replan", "agent")
    return builder.compile(checkpointer=checkpointer, store=store, name="bashgraph")


def schema_tokens(tools: list[Any]) -> int:
    """Estimated tokens of the tool schemas every request carries."""
    import json

    from langchain_core.utils.function_calling import convert_to_openai_tool

    return text_tokens(json.dumps([convert_to_openai_tool(tool) for tool in tools]))


def dual_node(
    func: Callable[..., Any], afunc: Callable[..., Any], name: str, *, trace: bool = False
) -> Runnable[Any, Any]:
    """A node with a sync and an async form (invoke and ainvoke each run their own).

    LangGraph's RunnableCallable (what `create_agent` uses for its nodes) reads the functions'
    signatures once; `RunnableLambda` reads them at every call and opens a nested traced run, a
    measurable share of a step. It is internal to LangGraph, hence the fallback.
    """
    try:
        from langgraph._internal._runnable import RunnableCallable
    except ImportError:  # moved in another LangGraph version
        return RunnableLambda(func, afunc=afunc, name=name)
    return cast(Runnable[Any, Any], RunnableCallable(func, afunc, name=name, trace=trace))


def _add_labelled_edges(
    builder: Builder, source: str, edge: Callable[[Any], str], labels: dict[str, str], view: type[Any]
) -> None:
    """Conditional edges out of `source`, each drawn with the label of the outcomes taking it;
    the router's input is `view`, the only channels LangGraph copies for it."""
    router = inline_router(labelled(edge, labels, view))
    builder.add_conditional_edges(source, router, {label: target for target, label in labels.items()})


def inline_router(choose: Callable[[Any], str]) -> Runnable[Any, Any]:
    """`choose` run where it is called, on the sync and the async path alike, as part of the run
    of the node it follows.

    Given a plain function, LangGraph runs a router in a worker thread on the async path and
    opens a traced run for each decision: two thread hops and two runs per model step, for a
    pure function of a few fields. The decision is visible all the same: in the node's writes
    (`next_hop`), in the next node, and in the drawing's labelled edges.
    """

    return dual_node(*inline_forms(choose), choose.__name__)


def make_graph(config: RunnableConfig | None = None) -> Agent:
    """Graph factory for `langgraph.json`: settings and model from the environment.

    No checkpointer: `langgraph dev` and the LangGraph server bring their own.
    """
    from bashgraph.graph.models.factory import make_chat_model  # deferred: picks and loads a model

    settings = AgentConfig.from_env()
    return build_graph(model=make_chat_model(settings), config=settings)


def __getattr__(name: str) -> Agent:
    # `graph` is built on first access, not at import: building reads the environment.
    if name == "graph":
        return make_graph()
    raise AttributeError(name)
