"""Workers take turns on a thread: what one worker remembers of the thread's jobs is read again
from the journal each time it takes the thread, so job ids never repeat and a job another
worker left behind when it was killed is swept. Real processes, real bash, SQLite and
PostgreSQL."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer
from tests.graph.store import job_worker
from tests.graph.store.test_job_resume import spawn, wait_for
from tests.tools.runner.proctools import gone_within, kill_quietly


def start_a_job_then_answer(tag: str) -> Callable[[list[BaseMessage]], AIMessage]:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        latest = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        answers = [m for m in messages[latest:] if isinstance(m, ToolMessage)]
        if not answers:
            return job_worker.call("bash", f"{tag}-{len(messages)}", command="sleep 30", background=True)
        return AIMessage(content=f"started: {answers[-1].content}")
    return reply


def test_two_workers_taking_turns_never_give_one_job_id_twice(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    thread = f"{thread_prefix}-turns"
    config = AgentConfig(workdir=str(tmp_path), on_environment_error="model", timeout_s=30)
    with open_session(db_url, model=ScriptedChatModel([start_a_job_then_answer("a")] * 4), config=config) as a, \
         open_session(db_url, model=ScriptedChatModel([start_a_job_then_answer("b")] * 4), config=config) as b:
        for session, task in ((a, "first"), (b, "second"), (a, "third")):
            for _ in session.run({"messages": [HumanMessage(task)]}, thread):
                pass
            assert session.state(thread).values["status"] == "done"
        rows = a.journal.job_rows(thread)
        answers = [m for m in a.state(thread).values["messages"] if isinstance(m, ToolMessage)]
    assert sorted(row.job_id for row in rows) == ["job-1", "job-2", "job-3"]
    assert [m.status for m in answers] == ["success"] * 3


def test_a_worker_that_ran_the_thread_before_sweeps_the_job_a_killed_worker_left(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Worker A runs the thread, worker B (another process) runs it on, starts a job and is
    killed with -9; A, still up, resumes the thread: B's job is stopped and recorded so."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    thread = f"{thread_prefix}-left"
    config = AgentConfig(workdir=str(workdir), on_environment_error="model", timeout_s=60)
    model = ScriptedChatModel([answer("hello")] + [job_worker.scenario(str(workdir))] * 6)
    job_pids: list[int] = []
    try:
        with open_session(db_url, model=model, config=config) as a:
            for _ in a.run({"messages": [HumanMessage("say hello")]}, thread):
                pass
            b = spawn(db_url, thread, workdir)  # new input: "start a job"
            wait_for(workdir / "pid", b)  # B's job runs, and B is inside its slow command
            job_pids = [int((workdir / name).read_text()) for name in ("escapee", "leader")]
            b.send_signal(signal.SIGKILL)
            b.communicate(timeout=10)
            for _ in a.run(None, thread):
                pass
            rows = a.journal.job_rows(thread)
        assert [pid for pid in job_pids if not gone_within(pid, 5)] == []
        assert [(row.job_id, row.ended) for row in rows] == [("job-1", "the worker process that ran it stopped")]
    finally:
        kill_quietly(*job_pids)
        slow = (workdir / "pid").read_text().strip() if (workdir / "pid").exists() else ""
        if slow:
            kill_quietly(int(slow))
