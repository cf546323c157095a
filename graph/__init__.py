"""bashgraph.graph: the LangGraph state machine that routes on how commands failed."""

from bashgraph.graph.build import build_graph, make_graph
from bashgraph.graph.checkpoints import open_checkpointer
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
from bashgraph.graph.session import Session, open_session
from bashgraph.graph.state import AgentState

__all__ = [
    "AgentConfig",
    "AgentState",
    "BashgraphError",
    "ConfigError",
    "ModelError",
    "Session",
    "StoreError",
    "ThreadBusyError",
    "UnfinishedThreadError",
    "build_graph",
    "draw",
    "make_graph",
    "open_checkpointer",
    "open_session",
]
