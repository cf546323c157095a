"""Ctrl-C: the first stops the running command and leaves the thread resumable (exit 130);
a second one exits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, ToolCall, tool_calls
from tests.tools.runner.proctools import group_running


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_ctrl_c_kills_the_commands_and_resume_reports_them_interrupted(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """SIGINT while two `sleep`s run: exit 130 soon, no process left, resume says `interrupted`."""
    slow = "echo ran >> runs-{0}; echo $$ > pid-{0}; sleep 30; echo late >> runs-{0}"
    openai_server.add(tool_calls(ToolCall("bash", {"command": slow.format("a")}),
                                 ToolCall("bash", {"command": slow.format("b")})))
    running = cli.start("run", "wait a while", "--thread", "c1", "--json")
    pid_files = [cli.workdir / "pid-a", cli.workdir / "pid-b"]
    wait_for(lambda: all(p.exists() and p.read_text().endswith("\n") for p in pid_files))
    shells = [int(p.read_text()) for p in pid_files]  # each command's process group leader
    assert all(group_running(shell) for shell in shells)
    sent = time.monotonic()
    os.kill(running.pid, signal.SIGINT)
    result = running.finish(timeout=10)
    assert result.code == 130, result.err
    assert time.monotonic() - sent < 3
    assert "stopping the run (Ctrl-C again to exit at once)" in result.err
    assert result.events[-1]["status"] == "interrupted"
    assert result.events[-1]["resume"] == "bashgraph resume c1"
    # The groups were signalled before the exit; their last members may still be waiting to be
    # reaped by init on a loaded machine (killpg(0) sees zombies), hence seconds, not zero.
    wait_for(lambda: not any(group_running(shell) for shell in shells), timeout=5)

    resumed = cli("resume", "c1", "--json")
    assert resumed.code == 3, resumed.err  # an interrupted command is an environment fault
    ended = [(e["outcome"], e["spawn_error"]) for e in resumed.of("command_end")]
    assert ended == [("spawn_error", "interrupted")] * 2
    for name in "ab":  # neither ran a second time, nor reached its end
        assert (cli.workdir / f"runs-{name}").read_text() == "ran\n"


SLOW_TO_STOP = """
import asyncio
from bashgraph.graph.cli.signals import SigintGuard

async def slow_to_stop():
    print("ready", flush=True)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        print("cancelled", flush=True)
        await asyncio.sleep(60)  # a clean-up that never ends

SigintGuard().run(slow_to_stop())
"""


def test_second_ctrl_c_exits_at_once_even_if_cleanup_hangs(tmp_path: Path) -> None:
    """The first SIGINT cancels the work; a second exits 130 without waiting for it."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_TO_STOP], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == "cancelled\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=5)
        assert proc.returncode == 130
        assert "interrupted again; exiting now" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
