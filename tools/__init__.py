"""bashgraph.tools: run shell commands and say exactly how each one ended.

No LangGraph import here: this layer is usable on its own.
"""

from bashgraph.tools.bash import (
    BASH_TOOL_NAME,
    BASH_TOOL_SCHEMA_TEXT,
    BashArgs,
    bash,
    make_bash_tool,
    validate_bash_args,
)
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
