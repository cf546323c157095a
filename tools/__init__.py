"""bashgraph.tools: run shell commands and say exactly how each one ended.

No LangGraph import here: this layer is usable on its own. Every public name is imported on
first use (module `__getattr__`): the LangChain tool (`bash`, `make_bash_tool`, ...) needs
langchain-core, which takes over a second to import, and `run_command` needs asyncio; the
`bashgraph` command's quick paths (`--help`, `threads`) import this package and need neither.
"""

from typing import TYPE_CHECKING

from bashgraph.tools.lazy_exports import lazy_exports

__all__ = [
    "BASH_TOOL_NAME",
    "BASH_TOOL_SCHEMA_TEXT",
    "DEFAULT_GRACE",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT",
    "JOB_TOOL_NAMES",
    "KILL_TOOL_NAME",
    "KINDS",
    "NO_OUTPUT",
    "OUTPUT_TOOL_NAME",
    "TRANSIENT_KINDS",
    "BashArgs",
    "CallRunner",
    "CommandResult",
    "Outcome",
    "RunOptionFields",
    "RunOptions",
    "SpawnErrorKind",
    "args_error",
    "arun_command",
    "bash",
    "checkable_command",
    "clip",
    "is_secret_name",
    "make_bash_tool",
    "make_job_tools",
    "preview_fields",
    "render_for_model",
    "run_command",
    "scrub_env",
    "spawn_failure",
    "tool_message",
    "unknown_job",
    "validate_bash_args",
    "validate_job_args",
]

if TYPE_CHECKING:
    from bashgraph.tools.failures import KINDS
    from bashgraph.tools.model_tools.bash_tool import bash, make_bash_tool
    from bashgraph.tools.model_tools.calls import (
        BASH_TOOL_NAME,
        BASH_TOOL_SCHEMA_TEXT,
        BashArgs,
        CallRunner,
        checkable_command,
        tool_message,
        validate_bash_args,
    )
    from bashgraph.tools.model_tools.job_tools import (
        JOB_TOOL_NAMES,
        KILL_TOOL_NAME,
        OUTPUT_TOOL_NAME,
        make_job_tools,
        unknown_job,
        validate_job_args,
    )
    from bashgraph.tools.results import (
        NO_OUTPUT,
        TRANSIENT_KINDS,
        CommandResult,
        Outcome,
        SpawnErrorKind,
        args_error,
        clip,
        preview_fields,
        render_for_model,
        spawn_failure,
    )
    from bashgraph.tools.runner.options import (
        DEFAULT_GRACE,
        DEFAULT_MAX_OUTPUT_CHARS,
        DEFAULT_TIMEOUT,
        RunOptionFields,
        RunOptions,
        scrub_env,
    )
    from bashgraph.tools.runner.process import arun_command, run_command
    from bashgraph.tools.safety.secret_names import is_secret_name

#: Where each public name lives.
_HOMES = {
    **dict.fromkeys(("BASH_TOOL_NAME", "BASH_TOOL_SCHEMA_TEXT", "BashArgs", "CallRunner", "checkable_command",
                     "tool_message", "validate_bash_args"), "model_tools.calls"),
    **dict.fromkeys(("bash", "make_bash_tool"), "model_tools.bash_tool"),
    "scrub_env": "runner.options",
    "is_secret_name": "safety.secret_names",
    **dict.fromkeys(("DEFAULT_GRACE", "DEFAULT_MAX_OUTPUT_CHARS", "DEFAULT_TIMEOUT", "RunOptionFields",
                     "RunOptions"), "runner.options"),
    **dict.fromkeys(("arun_command", "run_command"), "runner.process"),
    **dict.fromkeys(("NO_OUTPUT", "TRANSIENT_KINDS", "CommandResult", "Outcome", "SpawnErrorKind", "args_error",
                     "clip", "preview_fields", "render_for_model", "spawn_failure"), "results"),
    **dict.fromkeys(("JOB_TOOL_NAMES", "KILL_TOOL_NAME", "OUTPUT_TOOL_NAME", "make_job_tools", "unknown_job",
                     "validate_job_args"), "model_tools.job_tools"),
    "KINDS": "failures",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__, globals())
