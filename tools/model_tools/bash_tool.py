"""The `bash` tool the model calls, as a LangChain tool: it wraps the call runner (`calls.py`),
which validates the arguments (never raising: nothing the model sends can make the tool raise)
and runs the command.

The LangChain tool answers with `response_format="content_and_artifact"`: the content is
`render_for_model(result)`, the artifact is `result.to_dict()` (routing reads the artifact, never
the text), and the ToolMessage's `status` is "error" for every outcome but `ok`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from bashgraph.tools.model_tools.calls import (
    BASH_TOOL_NAME,
    DEFAULT_MAX_COMMAND_BYTES,
    DEFAULT_MAX_TIMEOUT,
    CallRunner,
)
from bashgraph.tools.results import CommandResult, Outcome, render_for_model
from bashgraph.tools.runner.options import DEFAULT_TIMEOUT, RunOptions

#: The rendered text of one tool result is cut (middle out) to this many characters.
DEFAULT_RENDER_CHARS = 20_000
#: Carries a tool input that was neither a string nor an object through LangChain to validation.
_RAW_INPUT_KEY = "__bashgraph_raw_input__"

DESCRIPTION = (
    "Run one shell command with `bash -c` and return its output. The shell is non-interactive "
    "(stdin is empty), starts in the working directory, and is killed with its whole process "
    "tree after `timeout` seconds (default {default:g}, at most {limit:g}). stdout is shown "
    "first, then stderr tagged [stderr]; a non-zero exit shows [exit code N]. Long output keeps "
    "its beginning and end; the full text is saved to the file path shown in the marker."
)
BACKGROUND_DESCRIPTION = (
    " Only a command that never ends by itself (a server, a watcher) takes `background: true`: "
    "it then runs as a job and the call returns its job id at once."
)


def json_schema(max_timeout: float = DEFAULT_MAX_TIMEOUT, background: bool = False) -> dict[str, Any]:
    """The arguments' JSON schema, as the model sees it (with `background` where jobs exist)."""
    schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run."},
            "timeout": {
                "type": "number",
                "description": f"Seconds before the command is killed (default "
                f"{DEFAULT_TIMEOUT:g}, at most {max_timeout:g}).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    if background:
        schema["properties"]["background"] = {  # type: ignore[index]
            "type": "boolean",
            "description": "Only for a command that never ends by itself (a server, a watcher): "
                           "run it as a background job. Leave it out otherwise.",
        }
    return schema


class _BashTool(StructuredTool):
    """A StructuredTool that hands every input to the call runner's checks and marks failures."""

    def _parse_input(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> str | dict[str, Any]:
        # LangChain would reject a string for a JSON-schema tool, or anything but an object,
        # by raising; here a string is the command and anything else reaches validation.
        if isinstance(tool_input, str):
            return {"command": tool_input}
        if isinstance(tool_input, dict):
            return tool_input
        return {_RAW_INPUT_KEY: tool_input}

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return _mark_status(super().run(*args, **kwargs))

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        return _mark_status(await super().arun(*args, **kwargs))


def _mark_status(output: Any) -> Any:
    """ToolMessage.status "error" for every non-ok outcome (LangChain only knows exceptions)."""
    if (
        isinstance(output, ToolMessage)
        and isinstance(output.artifact, dict)
        and output.artifact.get("outcome") != Outcome.OK.value
    ):
        output.status = "error"
    return output


def make_bash_tool(
    *,
    name: str = BASH_TOOL_NAME,
    max_timeout: float = DEFAULT_MAX_TIMEOUT,
    max_command_bytes: int = DEFAULT_MAX_COMMAND_BYTES,
    render_chars: int | None = DEFAULT_RENDER_CHARS,
    background: bool = False,
    **run_defaults: Any,
) -> BaseTool:
    """The `bash` tool; `run_defaults` are keyword arguments of `run_command` (cwd, env, ...).

    `background=True` only describes the `background` argument (the agent graph's Executor runs
    such calls as jobs); the tool itself runs commands in the foreground.
    """
    default_timeout = run_defaults.pop("timeout", None)
    _check_run_defaults(run_defaults)
    cwd = run_defaults.pop("cwd", None)
    runner = CallRunner(RunOptions(timeout=default_timeout, **run_defaults), max_timeout=max_timeout,
                        max_command_bytes=max_command_bytes)

    def answer(result: CommandResult) -> tuple[str, dict[str, Any]]:
        return render_for_model(result, render_chars), result.to_dict()

    def run(**raw: Any) -> tuple[str, dict[str, Any]]:
        return answer(runner.call(_unwrapped(raw), cwd=cwd))

    async def arun(**raw: Any) -> tuple[str, dict[str, Any]]:
        return answer(await runner.acall(_unwrapped(raw), cwd=cwd))

    limit = DEFAULT_TIMEOUT if default_timeout is None else default_timeout
    return _BashTool(
        name=name,
        description=DESCRIPTION.format(default=limit, limit=max_timeout)
        + (BACKGROUND_DESCRIPTION if background else ""),
        args_schema=json_schema(max_timeout, background),
        func=run,
        coroutine=arun,
        response_format="content_and_artifact",
    )


def _unwrapped(raw: dict[str, Any]) -> object:
    """The input the model sent (`_BashTool._parse_input` wraps one that was not an object)."""
    return raw[_RAW_INPUT_KEY] if set(raw) == {_RAW_INPUT_KEY} else raw


#: `run_command`'s keywords a tool may fix: `cwd` and every field of `RunOptions` (read off the
#: dataclass, so a new field is accepted without a second list to keep in step).
_RUN_KEYWORDS = frozenset({"cwd", *(field.name for field in dataclasses.fields(RunOptions))})


def _check_run_defaults(run_defaults: Mapping[str, Any]) -> None:
    unknown = set(run_defaults) - _RUN_KEYWORDS
    if unknown:
        raise TypeError(f"make_bash_tool() got unknown run_command arguments: {sorted(unknown)}")


bash = make_bash_tool()
