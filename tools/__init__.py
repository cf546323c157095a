"""bashgraph.tools: run shell commands and say exactly how each one ended.

No LangGraph import here: this layer is usable on its own. The LangChain tool (`bash`,
`make_bash_tool`, ...) is imported on first use: langchain-core takes over a second to import,
and `run_command` alone needs none of it.
"""

import importlib
from typing import TYPE_CHECKING, Any

from bashgraph.tools.environment import is_secret_name, scrub_env
from bashgraph.tools.process import (
    DEFAULT_GRACE,
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT,
    arun_command,
    run_command,
)
from bashgraph.tools.results import (
    NO_OUTPUT,
    TRANSIENT_KINDS,
    CommandResult,
    Outcome,
    SpawnErrorKind,
    render_for_model,
)

__all__ = [
    "BASH_TOOL_NAME",
    "BASH_TOOL_SCHEMA_TEXT",
    "DEFAULT_GRACE",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT",
    "NO_OUTPUT",
    "TRANSIENT_KINDS",
    "BashArgs",
    "CommandResult",
    "Outcome",
    "SpawnErrorKind",
    "arun_command",
    "bash",
    "is_secret_name",
    "make_bash_tool",
    "render_for_model",
    "run_command",
    "scrub_env",
    "validate_bash_args",
]

if TYPE_CHECKING:
    from bashgraph.tools.bash_tool import (
        BASH_TOOL_NAME,
        BASH_TOOL_SCHEMA_TEXT,
        BashArgs,
        bash,
        make_bash_tool,
        validate_bash_args,
    )

_FROM_BASH_TOOL = frozenset(
    {"BASH_TOOL_NAME", "BASH_TOOL_SCHEMA_TEXT", "BashArgs", "bash", "make_bash_tool",
     "validate_bash_args"}
)


def __getattr__(name: str) -> Any:
    """The LangChain tool's names, imported from `bashgraph.tools.bash_tool` when first asked for."""
    if name not in _FROM_BASH_TOOL:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("bashgraph.tools.bash_tool"), name)
    globals()[name] = value
    return value
