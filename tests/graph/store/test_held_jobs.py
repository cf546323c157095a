"""A thread paused by a live process that holds its background job, resumed by another process:
the job is never reported stopped while it runs. `bash_output` says which process runs it;
`bash_kill` stops it for real. Real processes, real bash, SQLite and PostgreSQL."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langgraph.types import Command
from rich.console import Console

from bashgraph.graph import AgentConfig
from bashgraph.graph.cli.progress import job_line
from bashgraph.graph.cli.terminal import TerminalRenderer
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel
from bashgraph.tools.results import CommandResult
from tests.tools.runner.proctools import gone_within, kill_quietly, running

WORKER = Path(__file__).with_name("held_job_worker.py")


def call(name: str, call_id: str, **args: object) -> AIMessage:
    return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")])


def wait_for(path: Path, worker: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if worker.poll() is not None:
            pytest.fail(f"worker exited ({worker.returncode}) first:\n{worker.communicate()[1][-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {path.name}"
        time.sleep(0.05)


def test_a_job_held_by_a_live_process_is_never_reported_stopped_while_it_runs(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    thread = f"{thread_prefix}-held"
    holder = subprocess.Popen([sys.executable, str(WORKER), db_url, thread, str(workdir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(workdir / "paused", holder)
        leader = int((workdir / "leader").read_text())
        seen_running: list[bool] = []

        def kill_after_reading(messages: list[BaseMessage]) -> AIMessage:
            seen_running.append(running(leader))  # what bash_output said was true when it said it
            return call("bash_kill", "kill", job_id="job-1")

        model = ScriptedChatModel([call("bash_output", "read", job_id="job-1"), kill_after_reading,
                                   AIMessage(content="done")])
        with open_session(db_url, model=model, config=AgentConfig(workdir=str(workdir))) as session:
            answer: Command[Any] = Command(resume={"action": "reject", "message": "no"})
            events = list(session.run(answer, thread, stream_mode="custom"))
            messages = session.state(thread).values["messages"]
            rows = session.journal.job_rows(thread)
        results = {m.name: CommandResult.from_dict(m.artifact) for m in messages
                   if isinstance(m, ToolMessage) and m.name in ("bash_output", "bash_kill")}
        read = results["bash_output"]
        detail = read.detail or ""
        assert f"still running in process {holder.pid}" in detail, detail
        assert "stopped" not in detail.replace("bash_kill stops it", "")
        assert read.outcome.value == "args_error"
        assert seen_running == [True]
        # The person is told too: the event the CLI prints, in both of its modes.
        [held] = [event for event in events if event.get("event") == "job_held"]
        assert (held["job_id"], held["pid"]) == ("job-1", holder.pid)
        shown = io.StringIO()
        TerminalRenderer(Console(file=shown, width=200, color_system=None))._on_job_held(held)
        assert f"job job-1: still running in process {holder.pid}" in shown.getvalue()
        assert job_line(held) == (f"  job job-1: still running in process {holder.pid}, which started "
                                  "it and still holds it")
        kill = results["bash_kill"]
        assert kill.outcome.value == "ok"
        assert kill.stdout.startswith("[job job-1: stopped (bash_kill)]")
        assert gone_within(leader, 5), "bash_kill stopped the job for real"
        assert rows[0].ended is not None
        assert rows[0].ended.startswith("stopped by bash_kill in process")
    finally:
        holder.kill()
        holder.communicate(timeout=30)
        if (workdir / "leader").exists():
            kill_quietly(int((workdir / "leader").read_text()))
