"""The Executor runs every call with the options it built once from the config, sync and async."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolCall

from bashgraph.graph import AgentConfig
from bashgraph.graph.call_journal import CALL_MARKER_VAR, CallContext
from bashgraph.graph.execution import Executor
from bashgraph.tools import CommandResult, Outcome


def call(command: str, **args: Any) -> ToolCall:
    return ToolCall(name="bash", args={"command": command, **args}, id="call_0", type="tool_call")


def run_both(executor: Executor, tool_call: ToolCall) -> list[CommandResult]:
    """The call through `Executor.run` and through `Executor.arun` (no thread: nothing journaled)."""
    ctx = CallContext(thread_id=None)
    return [executor.run(tool_call, None, ctx), asyncio.run(executor.arun(tool_call, None, ctx))]


@pytest.fixture
def executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Executor]:
    monkeypatch.setenv("EXECUTION_TEST_TOKEN", "passed")
    config = AgentConfig(workdir=str(tmp_path), timeout_s=0.3, grace_s=0.1, max_output_chars=300, redact=False,
                         pass_env=("EXECUTION_TEST_TOKEN",), spill_dir=str(tmp_path / "spill"))
    executor = Executor(config)
    yield executor
    executor.close()


def test_the_config_sets_how_every_call_runs(executor: Executor, tmp_path: Path) -> None:
    """Workdir, cap, spill directory and pass_env come from the config, in both forms."""
    command = 'pwd; echo "$EXECUTION_TEST_TOKEN"; seq 1 300'
    for result in run_both(executor, call(command)):
        assert result.stdout.startswith(f"{tmp_path}\npassed\n")
        assert result.truncated
        assert Path(result.stdout_file or "").parent == tmp_path / "spill"


def test_the_configured_timeout_holds_unless_the_call_asks_for_another(executor: Executor) -> None:
    for timed_out in run_both(executor, call("sleep 5")):
        assert timed_out.spawn_error == "timeout"
    for longer in run_both(executor, call("sleep 0.5", timeout=5)):
        assert longer.outcome is Outcome.OK


def test_each_call_carries_a_marker_of_its_own(executor: Executor) -> None:
    """The per-call journal marker is set on top of the shared options, a new one every call."""
    markers = [result.stdout for result in run_both(executor, call(f'echo "${CALL_MARKER_VAR}"'))]
    assert all(len(marker.strip()) == 32 for marker in markers)
    assert markers[0] != markers[1]


def test_a_background_job_starts_with_the_same_options(executor: Executor, tmp_path: Path) -> None:
    """A job runs in the workdir with pass_env and writes its output below the spill directory."""
    ctx = CallContext(thread_id="jobs")
    started = executor.run(call('pwd; echo "$EXECUTION_TEST_TOKEN"', background=True), None, ctx)
    assert started.outcome is Outcome.OK
    read = ToolCall(name="bash_output", args={"job_id": "job-1"}, id="call_1", type="tool_call")
    text = ""
    for _ in range(100):  # each read returns what arrived since the previous one
        output = executor.run(read, None, ctx)
        text += output.stdout.split("\n", 1)[1]
        if "exited" in (output.detail or ""):
            break
        time.sleep(0.05)
    assert text == f"{tmp_path}\npassed\n"
    assert Path(output.stdout_file or "").parent == tmp_path / "spill"
