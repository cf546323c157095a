"""Background jobs end to end: real bash, real servers, real process trees, a real SQLite journal.

A job starts with `bash` + `background: true`, is read with `bash_output`, stopped with
`bash_kill`, and nothing of it is left once its run ends, however the run ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolCall, ToolMessage

from bashgraph.graph import AgentConfig, build_graph, open_session
from bashgraph.graph.store.journal import SqliteJournal
from bashgraph.graph.testing import ScriptedChatModel, answer
from tests.support.ports import free_port
from tests.tools.runner.proctools import gone_within, kill_quietly, marked_processes, running

THREAD = "jobs"


def bash(command: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[
        ToolCall(name="bash", args={"command": command, **args}, id=f"c{abs(hash(command)) % 10**8}",
                 type="tool_call")])


def background(command: str) -> AIMessage:
    return bash(command, background=True)


def job_tool(name: str, job_id: str = "job-1", **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[
        ToolCall(name=name, args={"job_id": job_id, **args}, id=f"{name}-{job_id}-{len(args)}",
                 type="tool_call")])



def fetch(port: int, path: str = "/") -> str:
    """A command that fetches a page from the server, waiting for it to listen (10 s at most).
    The script is written to a file first: `python3 -c CODE` is hidden code, asked by the rules."""
    script = (f"import time, urllib.request as u\nfor _ in range(100):\n    try:\n        "
              f"print(u.urlopen('http://127.0.0.1:{port}{path}').read().decode()); break\n    "
              "except OSError:\n        time.sleep(0.1)\n")
    return f"cat > fetch.py <<'EOF'\n{script}EOF\npython3 fetch.py"


def tool_results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


@contextmanager
def session_run(tmp_path: Path, steps: list[Any], **settings: Any) -> Iterator[dict[str, Any]]:
    """Run the scripted steps on a thread with a journal; yields the final state, then checks
    that no process of any job the journal recorded is left."""
    db = str(tmp_path / "runs.sqlite")
    config = AgentConfig(workdir=str(tmp_path), **settings)
    with open_session(db, model=ScriptedChatModel(steps), config=config) as session:
        for _ in session.run({"messages": [("user", "go")]}, THREAD):
            pass
        state = session.state(THREAD).values
        yield state
    markers = job_markers(db)
    for marker in markers:
        assert marked_processes(marker) == [], f"a process of job marker {marker} is still running"


def job_markers(db: str) -> list[str]:
    journal = SqliteJournal(db)
    try:
        return [row.marker for row in journal.job_rows(THREAD)]
    finally:
        journal.close()


def test_a_background_server_answers_the_next_command_and_is_gone_when_the_run_ends(
    tmp_path: Path,
) -> None:
    """http.server on a free port answers the next command; the run ends (done) without a
    bash_kill, and nothing carrying the job's marker runs any more: the port is free again."""
    (tmp_path / "hello.txt").write_text("hello from the job\n")
    port = free_port()
    steps = [background(f"exec python3 -m http.server {port} --bind 127.0.0.1"),
             bash(fetch(port, "/hello.txt")), answer("fetched")]
    with session_run(tmp_path, steps) as state:
        started, fetched = tool_results(state)
        assert started.artifact["outcome"] == "ok"
        assert "job job-1 started in the background" in str(started.content)
        assert str(fetched.content).strip() == "hello from the job"
        assert state["status"] == "done"
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 1):
            pass  # the session is still open: the run's end stopped the server


def test_the_async_graph_runs_and_stops_jobs_too(tmp_path: Path) -> None:
    """ainvoke: the job starts, the next command reaches it, bash_kill stops it."""
    port = free_port()
    model = ScriptedChatModel([
        background(f"exec python3 -m http.server {port} --bind 127.0.0.1"),
        bash(fetch(port)), job_tool("bash_kill"), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path)))
    state = asyncio.run(agent.ainvoke({"messages": [("user", "go")]}))
    _, fetched, killed = tool_results(state)
    assert "Directory listing" in str(fetched.content)
    assert killed.artifact["outcome"] == "ok"
    assert "[job job-1: stopped (bash_kill)]" in str(killed.content)
    assert "GET / HTTP" in killed.artifact["stderr"]  # the server's log, read by the kill
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 1):
        pass


#: A job that leaves its session (`setsid`) and writes both pids, so a test can look for them.
ESCAPING_JOB = "setsid sleep 300 & echo $! > escapee; echo $$ > leader; exec sleep 300"


@pytest.mark.parametrize(("ending", "steps", "settings", "status"), [
    ("done", [answer("done")], {}, "done"),
    ("step limit", [bash("true")], {"max_steps": 2}, "failed"),
    ("args errors", [job_tool("bash_output", "job-7")], {"max_args_errors": 1}, "failed"),
    ("environment fault", [bash("sleep 5", timeout=0.3)], {"on_environment_error": "stop"},
     "environment_fault"),
])
def test_every_way_a_run_ends_stops_its_jobs_escapees_included(
    tmp_path: Path, ending: str, steps: list[Any], settings: dict[str, Any], status: str,
) -> None:
    """done, step limit, failure, environment fault: the job's shell and the process that left
    its session are both gone when the run has ended."""
    wait_for_pids = bash("for _ in $(seq 100); do [ -s escapee ] && [ -s leader ] && break; sleep 0.05; done")
    with session_run(tmp_path, [background(ESCAPING_JOB), wait_for_pids, *steps], **settings) as state:
        assert state["status"] == status, state.get("reason")
        # The session is still open: the run's end stopped them, not the session's.
        pids = [int((tmp_path / name).read_text()) for name in ("escapee", "leader")]
        try:
            assert [pid for pid in pids if running(pid)] == [], f"{ending}: a job process is left"
        finally:
            kill_quietly(*pids)


def test_bash_output_returns_new_output_and_the_state(tmp_path: Path) -> None:
    """Each read returns only what is new; a job that exited non-zero reads as exit_error."""
    steps = [
        background("echo one; for _ in $(seq 100); do [ -e go ] && break; sleep 0.05; done; "
                   "echo two; echo oops >&2; exit 3"),
        bash("sleep 0.5"), job_tool("bash_output"),
        bash("touch go; sleep 1"), job_tool("bash_output"),
        bash("true"), job_tool("bash_output"),
        answer("read"),
    ]
    with session_run(tmp_path, steps) as state:
        results = tool_results(state)
        first, second, third = results[2], results[4], results[6]
    assert first.artifact["outcome"] == "ok"
    assert str(first.content) == "[job job-1: running]\none"
    assert second.artifact["outcome"] == "exit_error"
    assert second.artifact["exit_code"] == 3
    assert str(second.content) == "[exit code 3]\n[stdout] [job job-1: exited 3]\ntwo\n[stderr] oops"
    assert third.artifact["outcome"] == "exit_error"
    assert str(third.content) == "[exit code 3]\n[stdout] [job job-1: exited 3]"


def test_bash_kill_stops_the_whole_tree(tmp_path: Path) -> None:
    """bash_kill: the shell and the process that left its session are gone when it returns."""
    wait = bash("for _ in $(seq 100); do [ -s escapee ] && [ -s leader ] && break; sleep 0.05; done")
    pids: list[int] = []

    def after_the_kill(messages: list[Any]) -> AIMessage:
        # Still inside the run (which would stop the job anyway): bash_kill alone did it.
        pids.extend(int((tmp_path / name).read_text()) for name in ("escapee", "leader"))
        assert [pid for pid in pids if running(pid)] == []
        return answer("stopped")

    steps = [background(ESCAPING_JOB), wait, job_tool("bash_kill"), after_the_kill]
    with session_run(tmp_path, steps) as state:
        killed = tool_results(state)[2]
    assert len(pids) == 2
    assert killed.artifact["outcome"] == "ok"
    assert str(killed.content).startswith("[job job-1: stopped (bash_kill)]")


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("bash_output", {"job_id": "job-9"}, "no background job 'job-9' in this run (jobs: job-1)"),
    ("bash_kill", {"job_id": "nope"}, "no background job 'nope' in this run (jobs: job-1)"),
    ("bash_output", {}, "'job_id' must be a non-empty string"),
    ("bash_kill", {"job_id": "job-1", "signal": 9}, "unknown argument 'signal' (allowed: job_id)"),
    ("bash", {"command": "sleep 1", "background": "yes"}, "'background' must be true or false"),
    ("bash", {"command": "sleep 1", "background": True, "timeout": 5},
     "'timeout' does not apply to a background job"),
])
def test_bad_job_ids_and_arguments_are_args_errors(
    tmp_path: Path, name: str, args: dict[str, Any], expected: str
) -> None:
    call = AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id="bad", type="tool_call")])
    with session_run(tmp_path, [background("exec sleep 300"), call, answer("ok")]) as state:
        bad = tool_results(state)[1]
    assert bad.artifact["outcome"] == "args_error"
    assert expected in str(bad.content)


def test_the_job_limit_is_a_clear_args_error_and_starts_nothing(tmp_path: Path) -> None:
    steps = [background("exec sleep 300"), background("echo started >> second; exec sleep 300"),
             answer("limited")]
    with session_run(tmp_path, steps, max_jobs=1) as state:
        limited = tool_results(state)[1]
    assert limited.artifact["outcome"] == "args_error"
    assert "this run already has 1 background jobs running (job-1)" in str(limited.content)
    assert not (tmp_path / "second").exists()


def test_a_job_that_cannot_start_is_a_spawn_error(tmp_path: Path) -> None:
    with session_run(tmp_path, [background("sleep 1"), answer("no")], shell="/nonexistent/bash") as state:
        [failed] = tool_results(state)
    assert (failed.artifact["outcome"], failed.artifact["spawn_error"]) == ("spawn_error", "not_found")


def test_approval_rules_and_redaction_apply_to_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A denied background command never starts; a secret a job prints is redacted."""
    monkeypatch.setenv("JOB_TEST_TOKEN", "s3cr3t-value-4242")
    steps = [background("touch denied-ran"), background("echo token=$JOB_TEST_TOKEN"),
             bash("sleep 0.3"), job_tool("bash_output", "job-1"), answer("ok")]
    with session_run(tmp_path, steps, rules=("deny:touch *",), pass_env=("JOB_TEST_TOKEN",)) as state:
        denied, _, _, read = tool_results(state)
    assert (denied.artifact["outcome"], denied.artifact["spawn_error"]) == ("spawn_error", "denied")
    assert not (tmp_path / "denied-ran").exists()
    assert "token=" in str(read.content)
    assert "s3cr3t-value-4242" not in str(read.content)


MEMORY_PROBE = textwrap.dedent("""
    import json, sys
    from langchain_core.messages import AIMessage, ToolCall, ToolMessage
    from bashgraph.graph import AgentConfig, build_graph
    from bashgraph.graph.testing import ScriptedChatModel

    def peak_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

    def call(name, args):
        return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=f"c{next(ids)}",
                                                          type="tool_call")])

    import itertools
    ids = itertools.count()
    total = [0]

    def poll(messages):
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:  # a compaction's summary request: a slow machine polls long enough for one
            return AIMessage(content="polling job-1 until it exits")
        last = results[-1]
        if last.name == "bash_output":
            total[0] += last.artifact["stdout_bytes"]
            if "exited" in str(last.content).splitlines()[0]:
                return AIMessage(content="written")
            return call("bash", {"command": "sleep 0.2"})
        return call("bash_output", {"job_id": "job-1"})

    workdir, size = sys.argv[1], int(sys.argv[2])
    config = AgentConfig(workdir=workdir, spill_dir=workdir, max_steps=2000)
    warm_up = ScriptedChatModel([call("bash", {"command": "head -c 100 /dev/zero", "background": True}),
                                 call("bash_output", {"job_id": "job-1"}), AIMessage(content="ok")])
    build_graph(model=warm_up, config=config).invoke({"messages": [("user", "warm up")]})
    before = peak_kib()
    start = call("bash", {"command": f"head -c {size} /dev/zero", "background": True})
    agent = build_graph(model=ScriptedChatModel([start, *[poll] * 2000]), config=config)
    agent.invoke({"messages": [("user", "write")]}, {"recursion_limit": 10000})
    print(json.dumps({"before_kib": before, "after_kib": peak_kib(), "bytes": total[0]}))
""")


def test_a_job_writing_500_mb_stays_within_the_memory_cap(tmp_path: Path) -> None:
    """500 MB through a job: the worker's peak memory (VmHWM) grows by far less than that, and
    every byte was counted by the reads."""
    size = 500_000_000
    probe = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(tmp_path), str(size)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    for spilled in tmp_path.glob("job-*"):
        spilled.unlink()  # 500 MB of zeros
    assert probe.returncode == 0, probe.stderr[-2000:]
    report = json.loads(probe.stdout.splitlines()[-1])
    assert report["bytes"] == size
    assert report["after_kib"] - report["before_kib"] < 64 * 1024, report


def test_jobs_are_numbered_per_thread_and_the_ids_stay_unique_across_runs(tmp_path: Path) -> None:
    """A follow-up run on the same thread numbers on: an id never names two jobs."""
    db = str(tmp_path / "runs.sqlite")
    config = AgentConfig(workdir=str(tmp_path))
    model = ScriptedChatModel([background("exec sleep 300"), answer("one"),
                               background("exec sleep 300"), job_tool("bash_output", "job-1"),
                               answer("two")])
    with open_session(db, model=model, config=config) as session:
        for task in ("first", "second"):
            for _ in session.run({"messages": [("user", task)]}, THREAD):
                pass
        results = tool_results(session.state(THREAD).values)
    assert "job job-2 started" in str(results[1].content)
    assert results[2].artifact["outcome"] == "args_error"
    assert "belonged to an earlier run of this thread" in str(results[2].content)
    for marker in job_markers(db):
        assert marked_processes(marker) == []


def _pids(path: Path) -> Callable[[], list[int]]:
    return lambda: [int(pid) for pid in path.read_text().split()] if path.exists() else []


def test_nothing_runs_after_the_session_closes_while_a_thread_waits_for_a_person(
    tmp_path: Path,
) -> None:
    """A paused thread keeps its jobs while its process serves it; closing the session (the
    process stopping) stops them, and a later read says the job is gone."""
    db = str(tmp_path / "runs.sqlite")
    config = AgentConfig(workdir=str(tmp_path), on_environment_error="ask")
    first = ScriptedChatModel([background("echo $$ > leader; exec sleep 300"),
                               bash("sleep 5", timeout=0.3)])
    with open_session(db, model=first, config=config) as session:
        for _ in session.run({"messages": [("user", "go")]}, THREAD):
            pass
        assert session.state(THREAD).interrupts, "the run should wait for a person"
        leader = _pids(tmp_path / "leader")()[0]
        assert running(leader), "a paused thread keeps its jobs while the process lives"
    assert gone_within(leader, 5)
    from langgraph.types import Command

    second = ScriptedChatModel([job_tool("bash_output"), answer("gone")])
    with open_session(db, model=second, config=config) as session:
        for _ in session.run(Command(resume="skip"), THREAD):
            pass
        read = tool_results(session.state(THREAD).values)[-1]
    assert (read.artifact["outcome"], read.artifact["spawn_error"]) == ("spawn_error", "interrupted")
    assert "job job-1 is gone" in str(read.content)


def test_a_sandboxed_job_runs_in_the_sandbox_and_is_gone_when_the_run_ends(tmp_path: Path) -> None:
    """With the sandbox, the job cannot write outside the workdir, its server (network kept)
    answers the next command, and it is stopped with the run."""
    from bashgraph.tools.safety.sandbox import sandbox_available

    problem = sandbox_available()
    if problem is not None:
        pytest.skip(f"no sandbox: {problem}")
    outside = Path(f"/usr/bashgraph-job-test-{os.getpid()}")  # read-only in the sandbox
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    steps = [background(f"touch {outside}; exec python3 -m http.server {port} --bind 127.0.0.1"),
             bash(fetch(port)), job_tool("bash_output"), answer("served")]
    with session_run(work, steps, sandbox=True, allow_network=True, approval="never") as state:
        _, fetched, read = tool_results(state)
        assert "Directory listing" in str(fetched.content)
        assert "Read-only file system" in str(read.content)
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 1):
            pass
    assert not outside.exists()


def test_a_job_killed_by_a_signal_from_elsewhere_reads_as_exit_error_naming_it(tmp_path: Path) -> None:
    """Not a spawn error: `retry` would only read again. The code is what a shell reports."""
    steps = [background("echo $$ > leader; exec sleep 300"),
             bash("for _ in $(seq 100); do [ -s leader ] && break; sleep 0.05; done; "
                  "kill -USR1 $(cat leader); sleep 0.3"),
             job_tool("bash_output"), answer("killed")]
    with session_run(tmp_path, steps) as state:
        read = tool_results(state)[2]
    assert (read.artifact["outcome"], read.artifact["exit_code"]) == ("exit_error", 138)
    assert read.artifact["signal"] == 10
    assert str(read.content).startswith(
        "[exit code 138] the job was killed by SIGUSR1\n[stdout] [job job-1: killed by SIGUSR1]")
