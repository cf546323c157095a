"""bashgraph.tools: run shell commands and say exactly how each one ended.

No LangGraph import here: this layer is usable on its own.
"""

from bashgraph.tools.results import (
    NO_OUTPUT,
    TRANSIENT_KINDS,
    CommandResult,
    Outcome,
    SpawnErrorKind,
    render_for_model,
)

__all__ = [
    "NO_OUTPUT",
    "TRANSIENT_KINDS",
    "CommandResult",
    "Outcome",
    "SpawnErrorKind",
    "render_for_model",
]
