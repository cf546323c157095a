"""One `bash` tool call, from the model's arguments to its answer: the call runner.

`CallRunner` is the one way a call runs, in the agent graph and in the LangChain tool alike:

1. `check` validates the arguments, never raising: anything wrong (missing, wrong type, empty,
   too long, NUL bytes, unknown keys) is an `args_error` CommandResult whose detail says, in
   one line, what is wrong and what is expected — the model reads it and tries again;
2. `run` / `arun` run the command (`run_command`) with the runner's `RunOptions`;
3. with a `Redactor`, what the command printed is redacted — its live output as it arrives,
   and its result — before anyone holds the text.

`tool_message` is the ToolMessage that answers a call: the capped text the model reads
(`render_for_model`), `status="error"` for every outcome but `ok`, and the result as artifact
(routing reads the artifact, never the text). The graph journals each call around `run` and
routes on the result; `bash_tool.make_bash_tool` wraps the runner for LangChain.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from pydantic import BaseModel, ConfigDict, Field

from bashgraph.tools.results import CommandResult, args_error, clip, render_for_model
from bashgraph.tools.runner.live import OutputCallback
from bashgraph.tools.runner.options import DEFAULT_OPTIONS, PathArg, RunOptionFields, RunOptions
from bashgraph.tools.runner.process import arun_command, run_command
from bashgraph.tools.safety.redact import Redactor
from bashgraph.tools.text import MAX_COMMAND_BYTES, command_size_problem

BASH_TOOL_NAME = "bash"
DEFAULT_MAX_TIMEOUT = 600.0
#: Linux cannot pass a longer `bash -c` script (see `runner.options`); the approval rules never read one.
DEFAULT_MAX_COMMAND_BYTES = MAX_COMMAND_BYTES
#: The arguments, as the model should send them; quoted in every args_error.
BASH_TOOL_SCHEMA_TEXT = '{"command": "<shell command>", "timeout": <optional seconds>}'
#: The same, where background jobs are offered (the agent graph).
BASH_JOB_SCHEMA_TEXT = ('{"command": "<shell command>", "timeout": <optional seconds>, '
                        '"background": <optional true>}')
#: Stream text kept in a ToolMessage's artifact. The rendered content already carries the
#: capped output; the artifact is for routing and evidence, and the graph stores it in every
#: checkpoint, so it stays small (the full output is in the journal and spill files).
ARTIFACT_STREAM_CHARS = 2_000

_ALLOWED_KEYS = ("command", "timeout")
_JOB_KEYS = ("command", "timeout", "background")


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


class CallRunner:
    """Validates, runs and redacts the model's `bash` calls; one per tool or agent.

    `options`: how every command runs (a call's own `timeout` replaces theirs). `redactor`:
    redacts live output and results (None: the text is kept as printed). `background`: the
    `background` argument is offered (its caller runs such a call as a job: `run` does not).
    """

    def __init__(
        self,
        options: RunOptions = DEFAULT_OPTIONS,
        *,
        redactor: Redactor | None = None,
        max_timeout: float = DEFAULT_MAX_TIMEOUT,
        max_command_bytes: int = DEFAULT_MAX_COMMAND_BYTES,
        background: bool = False,
    ) -> None:
        self.options = options
        self.redactor = redactor
        self.max_timeout = max_timeout
        self.max_command_bytes = max_command_bytes
        self.background = background

    def check(self, raw: object) -> BashArgs | CommandResult:
        """The call's arguments, or the args_error that answers it. Never raises."""
        args = validate_bash_args(raw, max_timeout=self.max_timeout, max_command_bytes=self.max_command_bytes,
                                  background=self.background)
        if isinstance(args, BashArgs) and args.background and args.timeout is not None:
            return args_error("'timeout' does not apply to a background job: it runs until it "
                              "exits, bash_kill stops it, or the run ends", args.command)
        return args

    def run(self, args: BashArgs, *, options: RunOptions | None = None, cwd: PathArg | None = None,
            env: Mapping[str, str] | None = None, on_output: OutputCallback | None = None) -> CommandResult:
        """Run a checked call in the foreground and return its result, redacted. `options`
        replaces the runner's for this call, `env` their `env`; `on_output` gets the live
        output, redacted."""
        result = run_command(args.command, cwd=cwd, on_output=self.live(on_output),
                             options=self.options if options is None else options, **_overrides(args, env))
        return self.redact(result)

    async def arun(self, args: BashArgs, *, options: RunOptions | None = None, cwd: PathArg | None = None,
                   env: Mapping[str, str] | None = None, on_output: OutputCallback | None = None) -> CommandResult:
        """`run` for asyncio (`arun_command`: no blocking call on the event loop)."""
        result = await arun_command(args.command, cwd=cwd, on_output=self.live(on_output),
                                    options=self.options if options is None else options, **_overrides(args, env))
        return self.redact(result)

    def call(self, raw: object, *, cwd: PathArg | None = None) -> CommandResult:
        """Check and run one call: its result, or the args_error that answers it."""
        args = self.check(raw)
        return args if isinstance(args, CommandResult) else self.run(args, cwd=cwd)

    async def acall(self, raw: object, *, cwd: PathArg | None = None) -> CommandResult:
        """`call` for asyncio."""
        args = self.check(raw)
        return args if isinstance(args, CommandResult) else await self.arun(args, cwd=cwd)

    def redact(self, result: CommandResult) -> CommandResult:
        """`result` with its secrets replaced, before the journal, a checkpoint or the model holds it."""
        return result if self.redactor is None else self.redactor.redact_result(result)

    def redact_text(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.redact(text)

    def live(self, on_output: OutputCallback | None) -> OutputCallback | None:
        """`on_output` behind the redactor, when there is one."""
        if on_output is not None and self.redactor is not None:
            return functools.partial(_redacted, self.redactor, on_output)
        return on_output


def _overrides(args: BashArgs, env: Mapping[str, str] | None) -> RunOptionFields:
    """The fields a call replaces in its runner's options: no copy of them when it replaces none."""
    overrides: RunOptionFields = {}
    if args.timeout is not None:
        overrides["timeout"] = args.timeout
    if env is not None:
        overrides["env"] = env
    return overrides


def _redacted(redactor: Redactor, callback: OutputCallback, stream: str, text: str) -> None:
    callback(stream, redactor.redact(text))


def tool_message(call: ToolCall, result: CommandResult, max_chars: int | None, *, id: str | None = None) -> ToolMessage:
    """The model-facing answer to `call`: capped text, error status, and the (slim) result as
    artifact; `id` is the message's own id."""
    artifact = result.to_dict()
    artifact["stdout"] = clip(result.stdout, ARTIFACT_STREAM_CHARS)
    artifact["stderr"] = clip(result.stderr, ARTIFACT_STREAM_CHARS)
    return ToolMessage(
        content=render_for_model(result, max_chars), tool_call_id=call.get("id") or "", name=call["name"],
        status=result.status, artifact=artifact, id=id,
    )
