"""The call runner: one `bash` call checked, run and redacted, the same way for the graph and the tool."""

from __future__ import annotations

import asyncio
from pathlib import Path

from langchain_core.messages import ToolCall

from bashgraph.tools import CallRunner, CommandResult, Outcome, RunOptions, bash, tool_message
from bashgraph.tools.safety import Redactor

SECRET = "hunter2-hunter2"


def test_a_call_is_checked_then_run() -> None:
    runner = CallRunner()
    assert runner.call({"command": "echo hi"}).stdout == "hi\n"
    refused = runner.call({"command": "echo hi", "shell": "zsh"})
    assert refused.outcome is Outcome.ARGS_ERROR
    assert "unknown argument 'shell'" in (refused.detail or "")


def test_the_langchain_tool_answers_what_the_runner_returns() -> None:
    raw = {"command": "echo same; exit 3"}
    direct = CallRunner().call(raw)
    message = bash.invoke(ToolCall(name="bash", args=raw, id="c1", type="tool_call"))
    assert message.artifact["stdout"] == direct.stdout
    assert message.artifact["exit_code"] == direct.exit_code == 3


def test_a_background_call_takes_no_timeout_and_runs_only_where_jobs_are_offered() -> None:
    offered = CallRunner(background=True)
    args = offered.check({"command": "sleep 9", "background": True})
    assert not isinstance(args, CommandResult)
    assert args.background
    both = offered.check({"command": "sleep 9", "background": True, "timeout": 5})
    assert isinstance(both, CommandResult)
    assert "does not apply to a background job" in (both.detail or "")
    plain = CallRunner().check({"command": "sleep 9", "background": True})
    assert isinstance(plain, CommandResult)
    assert plain.outcome is Outcome.ARGS_ERROR


def test_the_result_and_the_live_output_are_redacted(tmp_path: Path) -> None:
    runner = CallRunner(RunOptions(env={"SHOWN": SECRET}), redactor=Redactor({"SHOWN": SECRET}))
    args = runner.check({"command": 'echo "$SHOWN"'})
    assert not isinstance(args, CommandResult)
    live: list[str] = []
    result = runner.run(args, cwd=tmp_path, on_output=lambda stream, text: live.append(text))
    assert result.stdout == "[REDACTED:SHOWN]\n"
    assert SECRET not in "".join(live)
    assert asyncio.run(runner.arun(args)).stdout == "[REDACTED:SHOWN]\n"


def test_a_call_s_env_replaces_the_options_env_for_that_call_only() -> None:
    runner = CallRunner(RunOptions(env={"A": "options"}))
    args = runner.check({"command": 'echo "${A:-unset} ${B:-unset}"'})
    assert not isinstance(args, CommandResult)
    assert runner.run(args, env={"B": "call"}).stdout == "unset call\n"
    assert runner.run(args).stdout == "options unset\n"


def test_the_tool_message_carries_the_status_and_a_slim_artifact() -> None:
    call = ToolCall(name="bash", args={"command": "x"}, id="c7", type="tool_call")
    result = CallRunner().call({"command": "head -c 5000 /dev/zero | tr '\\0' a; exit 1"})
    message = tool_message(call, result, 100, id="m/c7")
    assert (message.status, message.tool_call_id, message.id, message.name) == ("error", "c7", "m/c7", "bash")
    assert len(message.artifact["stdout"]) < 2_100 < len(result.stdout)
    assert len(str(message.content)) < 300
