"""Background jobs in the CLI: progress lines and --json events for a job's start, output and
end, and Ctrl-C (or SIGTERM) stopping the run's jobs with it. Real `bashgraph` processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls
from tests.tools.runner.proctools import gone_within, kill_quietly, running

JOB = "echo ready; echo warming >&2; echo $$ > leader; exec sleep 300"


def script(openai_server: FakeOpenAIServer) -> None:
    openai_server.add(
        tool_call("bash", {"command": JOB, "background": True}),
        tool_call("bash", {"command": "for _ in $(seq 100); do [ -s leader ] && break; sleep 0.05; done"}),
        tool_call("bash_output", {"job_id": "job-1"}),
        text("the job is ready"),
    )


def test_json_has_job_start_output_and_end_events(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """job_start (id, pid, command), job_output (what bash_output read), job_end when the run
    ended; the job is gone by then."""
    script(openai_server)
    result = cli("run", "start a job", "--json")
    assert result.code == 0, result.err
    [start] = result.of("job_start")
    assert (start["job_id"], start["command"]) == ("job-1", JOB)
    [command_start] = [e for e in result.of("command_start") if e["command"] == JOB]
    assert start["call_id"] == command_start["call_id"]  # one name for the call in every event
    outputs = {event["stream"]: event["text"] for event in result.of("job_output")}
    assert outputs["stdout"].strip() == "ready"
    assert outputs["stderr"].strip() == "warming"
    [end] = result.of("job_end")
    assert end["job_id"] == "job-1"
    assert end["state"] == "stopped (the run ended)"
    events = [event["event"] for event in result.events]
    assert events.index("job_end") < events.index("end")
    assert not running(start["pid"])
    leader = int((cli.workdir / "leader").read_text())
    assert not running(leader)


def test_plain_lines_show_the_job_starting_and_ending(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    script(openai_server)
    result = cli("run", "start a job")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    started = [line for line in lines if line.startswith("  job job-1 started (pid ")]
    assert started
    assert started[0].endswith(f"`{JOB}`")
    assert "  job job-1: stopped (the run ended)" in lines


def wait_for(condition: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _stop_with(cli: Cli, openai_server: FakeOpenAIServer, sig: signal.Signals) -> tuple[int, int]:
    """Start a job, then a slow command; send `sig` to the CLI; its exit code and the job's pid."""
    openai_server.add(
        tool_call("bash", {"command": "echo $$ > leader; setsid sleep 300 & echo $! > escapee; wait",
                           "background": True}),
        tool_calls(ToolCall("bash", {"command": "echo $$ > pid; sleep 30"})),
    )
    running_cli = cli.start("run", "start a job and wait", "--thread", "j1", "--json")
    files = [cli.workdir / name for name in ("leader", "escapee", "pid")]
    wait_for(lambda: all(f.exists() and f.read_text().endswith("\n") for f in files))
    pids = [int(f.read_text()) for f in files[:2]]
    try:
        assert all(running(pid) for pid in pids)
        os.kill(running_cli.pid, sig)
        result = running_cli.finish(timeout=15)
        assert [pid for pid in pids if not gone_within(pid, 5)] == [], "a job process is left"
        return result.code, pids[0]
    finally:
        kill_quietly(*pids)


def test_ctrl_c_stops_the_runs_jobs_escapees_included(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    code, _ = _stop_with(cli, openai_server, signal.SIGINT)
    assert code == 130


def test_sigterm_stops_the_runs_jobs_like_ctrl_c(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    code, _ = _stop_with(cli, openai_server, signal.SIGTERM)
    assert code == 143


def test_the_terminal_shows_job_lines_and_output_tails_without_raw_escapes() -> None:
    """rich mode: start, the last lines a read returned (stderr marked `!`), end; an escape
    sequence in the command or the output shows as `␛`."""
    import io
    import re

    from rich.console import Console

    from bashgraph.graph.cli.terminal import TerminalRenderer

    screen = io.StringIO()
    terminal = TerminalRenderer(Console(file=screen, force_terminal=True, width=120))
    try:
        terminal.emit({"event": "job_start", "job_id": "job-1", "pid": 42, "call_id": "c1",
                       "command": "serve \x1b[5;5H", "thread_id": "t"})
        terminal.emit({"event": "job_output", "job_id": "job-1", "stream": "stdout",
                       "text": "one\ntwo\nthree\nfour\nfive \x1b]0;title\x07\n", "thread_id": "t"})
        terminal.emit({"event": "job_output", "job_id": "job-1", "stream": "stderr",
                       "text": "warning\n", "thread_id": "t"})
        terminal.emit({"event": "job_end", "job_id": "job-1", "state": "stopped (bash_kill)",
                       "exit_code": None, "signal": 15, "thread_id": "t"})
    finally:
        terminal.close()
    printed = screen.getvalue()
    assert "\x1b[5;5H" not in printed
    assert "\x1b]0;" not in printed
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed)  # rich's own colours
    assert "job job-1 started (pid 42): `serve ␛[5;5H`" in shown
    assert "job-1 │ two" in shown
    assert "job-1 │ one" not in shown  # only the last lines
    assert "job-1 │ five ␛]0;title␇" in shown
    assert "job-1 ! warning" in shown
    assert "job job-1: stopped (bash_kill)" in shown
