"""The `bash` tool the model calls: argument validation that never raises, and the LangChain tool.

Invalid arguments (missing, wrong type, empty, too long, NUL bytes, unknown keys) come back as an
`args_error` CommandResult whose detail says, in one line, what is wrong and what is expected —
the model reads it and tries again. Nothing the model sends can make the tool raise.

The LangChain tool answers with `response_format="content_and_artifact"`: the content is
`render_for_model(result)`, the artifact is `result.to_dict()` (routing reads the artifact, never
the text), and the ToolMessage's `status` is "error" for every outcome but `ok`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from bashgraph.tools.results import CommandResult, Outcome, args_error, render_for_model
from bashgraph.tools.runner.options import DEFAULT_TIMEOUT, MAX_COMMAND_BYTES, command_size_problem
from bashgraph.tools.runner.process import arun_command, run_command

BASH_TOOL_NAME = "bash"
DEFAULT_MAX_TIMEOUT = 600.0
#: Linux cannot pass a longer `bash -c` script (see `runner.options`); the approval rules never read one.
DEFAULT_MAX_COMMAND_BYTES = MAX_COMMAND_BYTES
#: The rendered text of one tool result is cut (middle out) to this many characters.
DEFAULT_RENDER_CHARS = 20_000
#: The arguments, as the model should send them; quoted in every args_error.
BASH_TOOL_SCHEMA_TEXT = '{"command": "<shell command>", "timeout": <optional seconds>}'
#: The same, where background jobs are offered (the agent graph).
BASH_JOB_SCHEMA_TEXT = ('{"command": "<shell command>", "timeout": <optional seconds>, '
                        '"background": <optional true>}')

_ALLOWED_KEYS = ("command", "timeout")
_JOB_KEYS = ("command", "timeout", "background")
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


class BashArgs(BaseModel):
    """Valid arguments of the `bash` tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(description="The shell command to run.")
    timeout: float | None = Field(
        default=None, description="Seconds before the command is killed (optional)."
    )
    background: bool = Field(default=False, description="Run as a background job (optional).")


def validate_bash_args(
    raw: object,
    *,
    max_timeout: float = DEFAULT_MAX_TIMEOUT,
    max_command_bytes: int = DEFAULT_MAX_COMMAND_BYTES,
    background: bool = False,
) -> BashArgs | CommandResult:
    """`BashArgs` for valid tool arguments, else an args_error CommandResult. Never raises.

    `background`: the `background` argument is allowed (where background jobs are offered).
    """
    keys = _JOB_KEYS if background else _ALLOWED_KEYS
    try:
        problem, command = _problem(raw, max_timeout, max_command_bytes, keys)
    except Exception as exc:  # a safety net: no input may crash the tool
        problem, command = f"arguments could not be read ({type(exc).__name__})", ""
    if problem is not None:
        expected = BASH_JOB_SCHEMA_TEXT if background else BASH_TOOL_SCHEMA_TEXT
        return args_error(f"{problem}. Expected {expected}", command)
    assert isinstance(raw, Mapping)
    timeout = raw.get("timeout")
    return BashArgs(command=command, timeout=None if timeout is None else float(timeout),
                    background=raw.get("background") is True)


def checkable_command(raw: object, max_command_bytes: int = DEFAULT_MAX_COMMAND_BYTES) -> str | None:
    """The command of tool arguments whose command is valid, else None: approval rules read only
    these (an invalid one is answered with an args_error and never runs). Never raises."""
    try:
        command = raw.get("command") if isinstance(raw, Mapping) else None
        if isinstance(command, str) and _command_problem(command, max_command_bytes) is None:
            return command
    except Exception:  # a safety net, as in validate_bash_args
        pass
    return None


def _problem(raw: object, max_timeout: float, max_bytes: int,
             keys: tuple[str, ...] = _ALLOWED_KEYS) -> tuple[str | None, str]:
    """The first thing wrong with `raw` (None if nothing), and the command when it is a string."""
    if not isinstance(raw, Mapping):
        return f"arguments must be an object, got {_type_name(raw)}", ""
    command = raw.get("command")
    text = command if isinstance(command, str) else ""
    unknown = [key for key in raw if key not in keys]
    if unknown:
        return f"unknown argument {_quote(unknown[0])} (allowed: {', '.join(keys)})", text
    if "command" not in raw:
        return "'command' is required", text
    if not isinstance(command, str):
        return f"'command' must be a string, got {_type_name(command)}", text
    background = raw.get("background", False)
    if not isinstance(background, bool):
        return f"'background' must be true or false, got {_type_name(background)}", text
    return _command_problem(command, max_bytes) or _timeout_problem(raw, max_timeout), text


def _command_problem(command: str, max_bytes: int) -> str | None:
    if not command.strip():
        return "'command' is empty"
    if "\0" in command:
        return "'command' contains NUL bytes"
    too_long = command_size_problem(command, max_bytes)
    if too_long is not None:
        return too_long
    try:
        command.encode("utf-8")  # strict: a lone surrogate cannot reach the shell or the journal
    except UnicodeEncodeError:
        return "'command' contains characters that are not valid Unicode (lone surrogates)"
    return None


def _timeout_problem(raw: Mapping[Any, Any], max_timeout: float) -> str | None:
    timeout = raw.get("timeout")
    if timeout is None:
        return None
    valid = (
        isinstance(timeout, int | float)
        and not isinstance(timeout, bool)
        and math.isfinite(timeout)
        and 0 < timeout <= max_timeout
    )
    if valid:
        return None
    return f"'timeout' must be a positive number of seconds <= {max_timeout:g}, got {timeout!r:.40}"


def _type_name(value: object) -> str:
    names = {type(None): "null", bool: "boolean", dict: "object", list: "array"}
    return names.get(type(value), type(value).__name__)


def _quote(key: object) -> str:
    return f"{key!r:.40}"


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
    """A StructuredTool that hands every input to `validate_bash_args` and marks failures."""

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

    def prepare(raw: dict[str, Any]) -> BashArgs | CommandResult:
        value = raw[_RAW_INPUT_KEY] if set(raw) == {_RAW_INPUT_KEY} else raw
        return validate_bash_args(value, max_timeout=max_timeout,
                                  max_command_bytes=max_command_bytes)

    def answer(result: CommandResult) -> tuple[str, dict[str, Any]]:
        return render_for_model(result, render_chars), result.to_dict()

    def run(**raw: Any) -> tuple[str, dict[str, Any]]:
        args = prepare(raw)
        if isinstance(args, CommandResult):
            return answer(args)
        timeout = args.timeout if args.timeout is not None else default_timeout
        return answer(run_command(args.command, timeout=timeout, **run_defaults))

    async def arun(**raw: Any) -> tuple[str, dict[str, Any]]:
        args = prepare(raw)
        if isinstance(args, CommandResult):
            return answer(args)
        timeout = args.timeout if args.timeout is not None else default_timeout
        return answer(await arun_command(args.command, timeout=timeout, **run_defaults))

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


_RUN_KEYWORDS = frozenset(
    {"cwd", "env", "pass_env", "inherit_env", "shell", "max_output_chars", "grace", "spill_dir"}
)


def _check_run_defaults(run_defaults: Mapping[str, Any]) -> None:
    unknown = set(run_defaults) - _RUN_KEYWORDS
    if unknown:
        raise TypeError(f"make_bash_tool() got unknown run_command arguments: {sorted(unknown)}")


bash = make_bash_tool()
