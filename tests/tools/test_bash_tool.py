"""The `bash` LangChain tool: argument validation that never raises, content and artifact."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from bashgraph.tools import (
    BASH_TOOL_NAME,
    BASH_TOOL_SCHEMA_TEXT,
    BashArgs,
    CommandResult,
    Outcome,
    bash,
    make_bash_tool,
    validate_bash_args,
)
from bashgraph.tools.runner.options import DEFAULT_OPTIONS, RunOptions


def problem_of(raw: object) -> str:
    """The args_error problem for `raw` (fails the test if `raw` was valid)."""
    result = validate_bash_args(raw)
    assert isinstance(result, CommandResult)
    assert result.outcome is Outcome.ARGS_ERROR
    detail = result.detail or ""
    suffix = f". Expected {BASH_TOOL_SCHEMA_TEXT}"
    assert detail.endswith(suffix)
    return detail.removesuffix(suffix)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({}, "'command' is required"),
        ({"timeout": 5}, "'command' is required"),
        ({"command": 123}, "'command' must be a string, got int"),
        ({"command": None}, "'command' must be a string, got null"),
        ({"command": ["ls"]}, "'command' must be a string, got array"),
        ({"command": ""}, "'command' is empty"),
        ({"command": "  \n"}, "'command' is empty"),
        ({"command": "ls\0"}, "'command' contains NUL bytes"),
        ({"command": "x" * 130_049},
         "'command' is 130049 bytes in UTF-8, the limit is 130048 (Linux refuses a longer "
         "argument to bash -c)"),
        ({"command": "ls", "timeout": 0},
         "'timeout' must be a positive number of seconds <= 600, got 0"),
        ({"command": "ls", "timeout": 601},
         "'timeout' must be a positive number of seconds <= 600, got 601"),
        ({"command": "ls", "timeout": "30"},
         "'timeout' must be a positive number of seconds <= 600, got '30'"),
        ({"command": "ls", "timeout": True},
         "'timeout' must be a positive number of seconds <= 600, got True"),
        ({"command": "ls", "timeout": float("nan")},
         "'timeout' must be a positive number of seconds <= 600, got nan"),
        ({"cmd": "ls"}, "unknown argument 'cmd' (allowed: command, timeout)"),
        ({"command": "ls", "shell": "zsh"}, "unknown argument 'shell' (allowed: command, timeout)"),
        ("ls", "arguments must be an object, got str"),
        (None, "arguments must be an object, got null"),
        ({"command": "\ud800"},
         "'command' contains characters that are not valid Unicode (lone surrogates)"),
    ],
)
def test_invalid_arguments_have_a_clear_one_line_problem(raw: object, problem: str) -> None:
    """Each kind of invalid argument gets its own message naming the argument."""
    assert problem_of(raw) == problem


def test_valid_arguments_become_bash_args() -> None:
    """Valid arguments are returned typed; an int timeout becomes a float."""
    assert validate_bash_args({"command": "ls", "timeout": 5}) == BashArgs(command="ls", timeout=5.0)
    assert validate_bash_args({"command": "ls"}) == BashArgs(command="ls", timeout=None)


def test_limits_are_configurable() -> None:
    """max_timeout and max_command_bytes change the bounds and the messages."""
    raw = {"command": "echo hello", "timeout": 20}
    result = validate_bash_args(raw, max_timeout=10, max_command_bytes=5)
    assert isinstance(result, CommandResult)
    assert (result.detail or "").startswith("'command' is 10 bytes in UTF-8, the limit is 5")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
tool_args = st.dictionaries(
    st.sampled_from(["command", "timeout", "extra", ""]) | st.text(max_size=8),
    json_values,
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(raw=json_values | tool_args)
def test_no_json_value_makes_validation_raise(raw: object) -> None:
    """Any JSON-like value gives BashArgs or an args_error, never an exception."""
    result = validate_bash_args(raw)
    if isinstance(result, CommandResult):
        assert result.outcome is Outcome.ARGS_ERROR
        assert "\n" not in (result.detail or "")
    else:
        assert isinstance(result, BashArgs)


@settings(max_examples=60, deadline=None)
@given(args=tool_args.filter(lambda args: not isinstance(args.get("command"), str)))
def test_no_invalid_tool_call_makes_the_tool_raise(args: dict[str, Any]) -> None:
    """A tool call with arbitrary (invalid) arguments answers with an error ToolMessage."""
    message = bash.invoke({"type": "tool_call", "id": "c1", "name": "bash", "args": args})
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert message.artifact["outcome"] == "args_error"
    assert str(message.content).startswith("[args error] ")


def call(tool: Any, args: dict[str, Any]) -> ToolMessage:
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": "bash", "args": args})
    assert isinstance(message, ToolMessage)
    return message


def test_tool_call_answers_with_rendered_content_and_result_artifact() -> None:
    """Content is the rendered text; the artifact is the result as a plain dict."""
    message = call(bash, {"command": "echo hi; echo warn >&2; exit 3"})
    assert message.content == "[exit code 3]\n[stdout] hi\n[stderr] warn"
    assert message.status == "error"
    assert message.tool_call_id == "call-1"
    result = CommandResult.from_dict(message.artifact)
    assert (result.outcome, result.exit_code, result.stdout) == (Outcome.EXIT_ERROR, 3, "hi\n")


def test_successful_call_has_success_status() -> None:
    """An ok command gives a ToolMessage with status success."""
    message = call(bash, {"command": "echo ok"})
    assert (message.content, message.status) == ("ok", "success")


def test_timeout_argument_is_honoured() -> None:
    """The model's timeout applies to that call."""
    message = call(bash, {"command": "sleep 30", "timeout": 0.3})
    assert message.artifact["spawn_error"] == "timeout"
    assert str(message.content).startswith("[spawn error: timeout after 0.3s")


def test_async_tool_call_works() -> None:
    """ainvoke runs the command through arun_command with the same answer."""
    message = asyncio.run(bash.ainvoke(
        {"type": "tool_call", "id": "c2", "name": "bash", "args": {"command": "echo async"}}
    ))
    assert isinstance(message, ToolMessage)
    assert (message.content, message.artifact["outcome"]) == ("async", "ok")


def test_run_defaults_apply_to_every_call(tmp_path: Path) -> None:
    """make_bash_tool(cwd=...) runs every command in that directory."""
    tool = make_bash_tool(cwd=tmp_path, render_chars=100)
    message = call(tool, {"command": "pwd"})
    assert message.content == str(tmp_path)


def test_render_chars_bounds_the_content(tmp_path: Path) -> None:
    """The tool's content never exceeds render_chars."""
    tool = make_bash_tool(render_chars=300, spill_dir=tmp_path)
    assert len(call(tool, {"command": "seq 1 100000"}).content) <= 300


def test_every_run_option_can_be_a_run_default(tmp_path: Path) -> None:
    """Each `RunOptions` field is a keyword of make_bash_tool: the tool takes what run_command
    does (here each field's default, and `sandbox=None`), with no list of its own to fall behind."""
    for field in dataclasses.fields(RunOptions):
        make_bash_tool(**{field.name: getattr(DEFAULT_OPTIONS, field.name)})
    tool = make_bash_tool(inherit_env=False, env={"GREETING": "hello"}, grace=0.1, cwd=tmp_path)
    assert call(tool, {"command": "echo $GREETING"}).content == "hello"


def test_unknown_run_default_is_a_programming_error() -> None:
    """A typo in make_bash_tool's arguments fails when the tool is built."""
    with pytest.raises(TypeError, match="shel"):
        make_bash_tool(shel="bash")


def test_plain_string_input_is_the_command() -> None:
    """invoke("cmd") runs cmd (LangChain's convention for single-input tools)."""
    assert bash.invoke("echo plain") == "plain"


def test_schema_given_to_the_model() -> None:
    """The model sees a strict object schema with command required and timeout optional."""
    function = convert_to_openai_tool(bash)["function"]
    assert function["name"] == BASH_TOOL_NAME
    parameters = function["parameters"]
    assert parameters["required"] == ["command"]
    assert set(parameters["properties"]) == {"command", "timeout"}
    assert parameters["additionalProperties"] is False
