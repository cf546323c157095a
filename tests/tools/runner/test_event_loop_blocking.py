"""No blocking call on the event loop: the async path under BlockBuster, as `langgraph dev` runs it.

`langgraph dev` activates BlockBuster (langgraph_runtime_inmem/queue.py `_enable_blockbuster`),
which raises `BlockingError` for a blocking call made in any thread that runs an event loop. A
call made inside an `add_reader` callback does not fail the coroutine: asyncio only logs it, so
every test here also fails on anything the loop's exception handler saw.

The graph-level test builds the graph on the running loop, as the server calls graph factories.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

from bashgraph.graph.build import build_graph
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.testing import ScriptedChatModel, answer, call
from bashgraph.tools import CommandResult, Outcome, SpawnErrorKind, arun_command
from bashgraph.tools.safety.sandbox import BwrapSandbox, sandbox_available
from tests.tools.runner.proctools import cancel_once_started, gone_within, read_pids

blockbuster = pytest.importorskip("blockbuster")

_T = TypeVar("_T")

#: What `_enable_blockbuster` switches off again (langgraph-runtime-inmem 0.36): file reads and
#: writes through `io`, `os.stat`, `os.listdir`, `os.remove`, lock acquisition, and `os.path.*`.
#: Everything else BlockBuster knows stays forbidden: `os.getcwd`, `os.access`, `os.mkdir`,
#: `os.readlink`, `os.unlink`, `time.sleep`, and `os.read`/`os.write` on blocking descriptors.
LANGGRAPH_ALLOWS = ("os.stat", "os.listdir", "os.remove", "io.BufferedReader.read",
                    "io.BufferedWriter.write", "io.TextIOWrapper.read", "io.TextIOWrapper.write",
                    "threading.Lock.acquire")


@contextmanager
def blockbuster_like_langgraph_dev() -> Iterator[None]:
    """BlockBuster with `langgraph dev`'s settings, active for the block."""
    buster = blockbuster.BlockBuster(excluded_modules=[])
    for name in [*LANGGRAPH_ALLOWS, *(f for f in buster.functions if f.startswith("os.path."))]:
        function = buster.functions.pop(name, None)
        if function is not None:
            function.deactivate()
    buster.activate()
    try:
        yield
    finally:
        buster.deactivate()


def run_strict(make: Callable[[], Awaitable[_T]]) -> _T:
    """`asyncio.run(make())` under BlockBuster; fails on anything the loop only logged."""
    problems: list[dict[str, Any]] = []

    async def main() -> _T:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: problems.append(ctx))
        return await make()

    with blockbuster_like_langgraph_dev():
        outcome = asyncio.run(main())
    assert not problems, problems
    return outcome


def test_blockbuster_is_really_active() -> None:
    """The control: a blocking call on the loop raises BlockingError under this set-up."""
    async def blocking() -> None:
        time.sleep(0.001)

    with pytest.raises(blockbuster.BlockingError):
        run_strict(blocking)


def test_an_ordinary_command_first_seen_shell_and_cd(tmp_path: Path) -> None:
    """Output, a shell name looked up for the first time, a tracked `cd`, with and without
    `process_cwd`: no blocking call."""
    (tmp_path / "sub").mkdir()
    here = os.getcwd()

    async def both() -> list[CommandResult]:
        return [
            await arun_command("echo hi; echo err >&2", cwd=tmp_path, process_cwd=here),
            await arun_command("cd sub && exit 4", cwd=tmp_path, shell="sh",
                               env={"PATH": f"/usr/bin:/bin:{tmp_path}"}),
        ]

    plain, moved = run_strict(both)
    assert (plain.outcome, plain.stdout, plain.stderr) == (Outcome.OK, "hi\n", "err\n")
    assert (moved.exit_code, moved.final_cwd) == (4, str(tmp_path / "sub"))


def test_output_over_the_cap_spills_off_the_loop(tmp_path: Path) -> None:
    """A stream that spills writes its file from a thread; the result is complete."""
    lines: list[str] = []

    async def spill() -> CommandResult:
        return await arun_command("seq 1 200000", max_output_chars=1000, spill_dir=tmp_path / "s",
                                  cwd=tmp_path, on_output=lambda _s, text: lines.append(text))

    result = run_strict(spill)
    assert result.truncated
    assert result.stdout_file is not None
    assert Path(result.stdout_file).read_text().splitlines()[-1] == "200000"
    assert lines
    assert lines[-1].endswith("200000\n")


def test_a_timeout_stops_the_tree_off_the_loop(tmp_path: Path) -> None:
    """The /proc scans and waits of a timeout run in a thread; the call returns on time."""
    pids = tmp_path / "pids"

    async def timed_out() -> CommandResult:
        return await arun_command(f"sleep 30 & echo $! > {pids}; sleep 30", timeout=0.5,
                                  grace=0.3, cwd=tmp_path)

    started = time.monotonic()
    result = run_strict(timed_out)
    assert time.monotonic() - started < 0.5 + 0.3 + 1.5
    assert result.spawn_error is SpawnErrorKind.TIMEOUT
    assert all(gone_within(pid, 1) for pid in read_pids(pids))


def test_cancelling_kills_the_tree_off_the_loop(tmp_path: Path) -> None:
    """Cancelled while running on the loop and while handed over: killed, no blocking call."""
    for handed_over in (False, True):
        pids = tmp_path / f"pids-{handed_over}"
        # `seq` over the cap hands the run to a thread first; then it sleeps in the background.
        noisy = "seq 1 100000; " if handed_over else ""

        async def cancel_soon(pids: Path = pids, noisy: str = noisy) -> bool:
            cancelled: bool = await cancel_once_started(
                pids, f"{noisy}sleep 30 & echo $! $$ > {pids}; sleep 30",
                cwd=tmp_path, max_output_chars=100, spill_dir=tmp_path)
            return cancelled

        assert run_strict(cancel_soon)
        assert all(gone_within(pid, 1) for pid in read_pids(pids))


def test_a_sandboxed_command_runs_without_blocking(tmp_path: Path) -> None:
    """The sandbox's wrap, spawn and status read make no blocking call on the loop."""
    problem = sandbox_available()
    if problem is not None:
        if os.environ.get("CI"):  # CI installs bubblewrap: a missing sandbox there is a failure
            pytest.fail(f"CI must run the sandbox tests: {problem}")
        pytest.skip(f"no sandbox: {problem}")
    with BwrapSandbox(str(tmp_path), hidden_paths=()) as box:
        async def boxed() -> CommandResult:
            return await arun_command("echo boxed; cd / && pwd", cwd=tmp_path, sandbox=box)

        result = run_strict(boxed)
    assert (result.outcome, result.stdout, result.final_cwd) == (Outcome.OK, "boxed\n/\n", "/")


def test_the_graph_built_and_run_on_the_loop_makes_no_blocking_call(tmp_path: Path) -> None:
    """ainvoke with a normal command, one over the cap, and a timeout; then a cancelled run."""
    model = ScriptedChatModel([
        AIMessage(content="", tool_calls=[
            call("echo normal"), call("seq 1 50000"), call("sleep 30", timeout=0.5)]),
        answer("done"),
    ])
    config = AgentConfig(workdir=str(tmp_path), approval="never", max_output_chars=500,
                         grace_s=0.2, on_environment_error="model",
                         spill_dir=str(tmp_path / "spill"))

    async def run_graph() -> dict[str, Any]:
        agent = build_graph(model=model, config=config)  # like a server's graph factory
        state: dict[str, Any] = await agent.ainvoke({"messages": [HumanMessage("go")]})
        return state

    state = run_strict(run_graph)
    outcomes = [(m.artifact["outcome"], m.artifact["spawn_error"])
                for m in state["messages"] if isinstance(m, ToolMessage)]
    assert outcomes == [("ok", None), ("ok", None), ("spawn_error", "timeout")]
    model.assert_done()

    pids = tmp_path / "pids"
    hanging = ScriptedChatModel([AIMessage(content="", tool_calls=[
        call(f"sleep 30 & echo $! $$ > {pids}; sleep 30")])])

    async def cancelled_run() -> None:
        agent = build_graph(model=hanging, config=config)
        task = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("go")]}))
        while not pids.exists() or not pids.read_text().strip():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_strict(cancelled_run)
    assert all(gone_within(pid, 1) for pid in read_pids(pids))


@pytest.mark.parametrize("ending", ["done", "step limit", "environment fault"])
def test_background_jobs_start_read_and_stop_off_the_loop(tmp_path: Path, ending: str) -> None:
    """ainvoke: a job starts, is read, and is still running when the run ends — in `agent`
    (done, the step limit) or `escalate` (an environment fault): nothing blocks the loop."""
    pid_file = tmp_path / "job-pid"
    start = AIMessage(content="", tool_calls=[ToolCall(
        name="bash", args={"command": f"echo $$ > {pid_file}; exec sleep 300", "background": True},
        id="start", type="tool_call")])
    read = AIMessage(content="", tool_calls=[ToolCall(
        name="bash_output", args={"job_id": "job-1"}, id="read", type="tool_call")])
    last = {"done": answer("done"), "step limit": answer("unused"),
            "environment fault": AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.2)])}
    model = ScriptedChatModel([start, read, last[ending]])
    config = AgentConfig(workdir=str(tmp_path), approval="never", grace_s=0.2,
                         on_environment_error="stop", max_steps=2 if ending == "step limit" else 50,
                         spill_dir=str(tmp_path / "spill"))

    async def run_graph() -> dict[str, Any]:
        agent = build_graph(model=model, config=config)
        state: dict[str, Any] = await agent.ainvoke({"messages": [HumanMessage("go")]})
        return state

    state = run_strict(run_graph)
    assert state["status"] == {"done": "done", "step limit": "failed",
                               "environment fault": "environment_fault"}[ending]
    assert gone_within(read_pids(pid_file)[0], 1)
