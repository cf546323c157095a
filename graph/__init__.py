"""bashgraph.graph: the LangGraph state machine that routes on how commands failed."""

from bashgraph.graph.build import build_graph, make_graph
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.draw import draw
from bashgraph.graph.errors import BashgraphError, ConfigError, ModelError, ThreadBusyError
from bashgraph.graph.state import AgentState

__all__ = [
    "AgentConfig",
    "AgentState",
    "BashgraphError",
    "ConfigError",
    "ModelError",
    "ThreadBusyError",
    "build_graph",
    "draw",
    "make_graph",
]
