"""bashgraph.graph: the LangGraph state machine that routes on how commands failed.

Every public name is imported on first use (module `__getattr__`): the `bashgraph` command's
quick paths (`--help`, `threads`, `history`) import this package without LangChain or LangGraph,
which take most of a second to import.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "FINAL_STATUSES",
    "AgentConfig",
    "AgentInput",
    "AgentState",
    "AsyncSession",
    "BashgraphError",
    "BudgetSettings",
    "ChatSettings",
    "ConfigError",
    "ExecutionSettings",
    "ModelError",
    "PublicState",
    "SafetySettings",
    "Session",
    "StoreError",
    "ThreadBusyError",
    "UnfinishedThreadError",
    "aopen_session",
    "build_graph",
    "draw",
    "make_graph",
    "make_policy",
    "open_checkpointer",
    "open_session",
]

if TYPE_CHECKING:
    from bashgraph.graph.approval import make_policy
    from bashgraph.graph.build import build_graph, make_graph
    from bashgraph.graph.config import AgentConfig
    from bashgraph.graph.draw import draw
    from bashgraph.graph.errors import (
        BashgraphError,
        ConfigError,
        ModelError,
        StoreError,
        ThreadBusyError,
        UnfinishedThreadError,
    )
    from bashgraph.graph.session import AsyncSession, Session, aopen_session, open_session
    from bashgraph.graph.settings import BudgetSettings, ChatSettings, ExecutionSettings, SafetySettings
    from bashgraph.graph.state import FINAL_STATUSES, AgentInput, AgentState, PublicState
    from bashgraph.graph.store.checkpoints import open_checkpointer

#: Where each public name lives.
_HOMES = {
    "build_graph": "build", "make_graph": "build", "open_checkpointer": "store.checkpoints",
    "AgentConfig": "config", "draw": "draw", "BashgraphError": "errors", "ConfigError": "errors",
    "ModelError": "errors", "StoreError": "errors", "ThreadBusyError": "errors",
    "UnfinishedThreadError": "errors", "make_policy": "approval",
    **dict.fromkeys(("Session", "AsyncSession", "open_session", "aopen_session"), "session"),
    **dict.fromkeys(("ExecutionSettings", "BudgetSettings", "ChatSettings", "SafetySettings"), "settings"),
    **dict.fromkeys(("AgentState", "AgentInput", "PublicState", "FINAL_STATUSES"), "state"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
