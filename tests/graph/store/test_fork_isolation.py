"""A fork is a thread of its own: it does not own its source's background jobs (and no job id
names two jobs), and nobody runs it while it is being made."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langgraph.types import Command

from bashgraph.graph import AgentConfig
from bashgraph.graph import session as session_module
from bashgraph.graph.errors import ThreadBusyError
from bashgraph.graph.session import open_session
from bashgraph.graph.store import threads
from bashgraph.graph.store.journal_rows import note_source_jobs
from bashgraph.graph.testing import ScriptedChatModel, answer, call


def reply(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")])


def test_a_fork_does_not_own_its_sources_jobs_and_numbers_its_own_on_from_them(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The source starts job-1 and pauses at an escalation; its fork asks for job-1 (an args
    error that names the source), starts a job of its own (job-2, not a second job-1), and
    `bash_kill job-1` there is refused too: the source's job runs on. A fork of that fork
    still names, for each job, the thread that started it."""
    source, forked = f"{thread_prefix}-src", f"{thread_prefix}-fork"
    steps = [
        reply("bash", "c1", command="exec sleep 300", background=True),
        AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.3)]),  # escalates: paused
        reply("bash_output", "c3", job_id="job-1"),  # the fork's replies from here
        reply("bash", "c4", command="exec sleep 300", background=True),
        reply("bash_kill", "c5", job_id="job-1"),
        reply("bash_kill", "c6", job_id="job-2"),
        answer("fork done"),
    ]
    with open_session(db_url, model=ScriptedChatModel(steps), config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run({"messages": [HumanMessage("go")]}, source):
            pass
        paused = session.history(source)[0]
        assert paused.next == ("escalate",)
        session.fork(source, paused.checkpoint_id, forked)
        for _ in session.run(Command(resume="skip"), forked):
            pass
        answers = {m.tool_call_id: m for m in session.state(forked).values["messages"] if isinstance(m, ToolMessage)}
        assert session.journal.job_rows(source)[0].ended is None  # the source's job-1 still runs
        session.fork(forked, session.history(forked)[0].checkpoint_id, f"{forked}-again")
        inherited = {row.job_id: row.ended for row in session.journal.job_rows(f"{forked}-again")}
    # A fork of the fork: job-1 still names the first source, job-2 the fork that started it.
    assert inherited == {"job-1": f"started by the thread this one was forked from: {source}",
                         "job-2": f"started by the thread this one was forked from: {forked}"}
    for call_id in ("c3", "c5"):
        assert answers[call_id].artifact["outcome"] == "args_error"
        assert f"started by thread {source}, which this thread was forked from" in str(answers[call_id].content)
    assert "job job-2 started" in str(answers["c4"].content)
    assert answers["c6"].artifact["outcome"] == "ok"  # the fork's own job, stopped by the fork


def test_a_run_of_a_fork_being_made_is_refused(
    db_url: str, thread_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While `fork` copies, another thread running the new id (on the same session) gets
    ThreadBusyError, not a turn in a half-made thread; once the fork is made it runs."""
    source, forked = f"{thread_prefix}-src", f"{thread_prefix}-new"
    copy = threads.fork  # what Session.fork calls, under the name it imported
    refused: list[BaseException] = []

    def copy_while_someone_runs_it(*args: Any) -> str:
        made = copy(*args)

        def run_it() -> None:
            try:
                for _ in session.run(None, forked):
                    pass
            except ThreadBusyError as busy:
                refused.append(busy)

        runner = threading.Thread(target=run_it)
        runner.start()
        runner.join()
        return made

    with open_session(db_url, model=ScriptedChatModel([answer("ok"), answer("fork ok")]),
                      config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run({"messages": [HumanMessage("t")]}, source):
            pass
        first = session.history(source)[-1]
        monkeypatch.setattr(session_module, "fork", copy_while_someone_runs_it)
        session.fork(source, first.checkpoint_id, forked)
        assert [f"thread {forked} is busy" in str(busy) for busy in refused] == [True]
        for _ in session.run(None, forked):
            pass
        assert session.state(forked).values["status"] == "done"


def test_job_ids_go_on_from_the_highest_even_after_a_refused_start_and_a_crashed_fork(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """A start refused at the job limit uses a number and writes no row (rows job-1 and job-3):
    a later run, in a new session, and a fork both number on from job-3, not from the count of
    rows (which gave job-3 again and failed on the journal's unique key). A fork whose job rows
    were written before a crash kept it from making its checkpoints is made again cleanly."""
    source, forked = f"{thread_prefix}-src", f"{thread_prefix}-fork"
    background = {"command": "exec sleep 300", "background": True}
    config = AgentConfig(workdir=str(tmp_path), max_jobs=1)
    first = [reply("bash", "c1", **background), reply("bash", "c2", **background),  # refused
             reply("bash_kill", "c3", job_id="job-1"), reply("bash", "c4", **background), answer("done")]
    with open_session(db_url, model=ScriptedChatModel(first), config=config) as session:
        for _ in session.run({"messages": [HumanMessage("go")]}, source):
            pass
        assert [row.job_id for row in session.journal.job_rows(source)] == ["job-1", "job-3"]
    later = [reply("bash", "d1", **background), answer("done"), reply("bash", "f1", **background), answer("done")]
    with open_session(db_url, model=ScriptedChatModel(later), config=config) as session:
        for _ in session.run({"messages": [HumanMessage("again")]}, source):
            pass
        assert "job job-4 started" in str(session.state(source).values["messages"][-2].content)
        end = session.history(source)[0].checkpoint_id
        note_source_jobs(session.journal, source, forked)  # what a fork killed right after it wrote
        session.fork(source, end, forked)
        for _ in session.run({"messages": [HumanMessage("in the fork")]}, forked):
            pass
        assert "job job-5 started" in str(session.state(forked).values["messages"][-2].content)


def test_a_fork_cut_off_between_its_writes_leaves_no_thread(
    db_url: str, thread_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork of new input writes the thread so far, then the input. Ctrl-C between the two
    left a fork that looked finished, with the input lost, and its id taken."""
    source, copy = f"{thread_prefix}-src", f"{thread_prefix}-cut"
    model = ScriptedChatModel([answer("one"), answer("two")])
    with open_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
        for task in ("first task", "second task"):
            for _ in session.run({"messages": [("user", task)]}, source):
                pass
        # Newest first: the second task's input, waiting to run on top of the first's run.
        new_input = next(row.checkpoint_id for row in session.history(source) if row.next == ("__start__",))
        writes = 0
        real_update = session.agent.update_state

        def cut_off_at_the_second(*args: Any, **kwargs: Any) -> Any:
            nonlocal writes
            writes += 1
            if writes == 2:
                raise KeyboardInterrupt
            return real_update(*args, **kwargs)

        monkeypatch.setattr(session.agent, "update_state", cut_off_at_the_second)
        with pytest.raises(KeyboardInterrupt):
            session.fork(source, new_input, copy)
        monkeypatch.undo()
        assert session.state(copy).created_at is None
        assert session.fork(source, new_input, copy) == copy
        assert session.state(copy).next == ("__start__",)  # the second task waits, as in its source
