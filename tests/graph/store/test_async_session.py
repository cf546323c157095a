"""The async session (`aopen_session`, `AsyncSession.arun`) keeps the sync one's promises: one
worker per thread, new input refused on an unfinished thread, and when its block ends — also by
an error or a cancelled task — the lock is free, the jobs are stopped and the store is closed.
Real bash, real SQLite files and PostgreSQL. (Crash and resume: test_resume.py, both sessions.)"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langgraph.types import Command

from bashgraph.graph import AgentConfig, AsyncSession, ThreadBusyError, UnfinishedThreadError, aopen_session
from bashgraph.graph.store.locks import thread_lock
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from tests.tools.runner.proctools import gone_within, group_running, kill_quietly

WAIT_S = 30


async def drain(session: AsyncSession, inputs: Any, thread: str) -> None:
    async for _ in session.arun(inputs, thread):
        pass


async def until(path: Path) -> None:
    """Wait until a command under test has written `path`."""
    for _ in range(WAIT_S * 50):
        if path.exists() and path.read_text().strip():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path.name} was never written")


def task(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def assert_closed(db_url: str) -> None:
    """Every connection to a SQLite database is closed: SQLite removes the write-ahead log when
    its last connection closes. (PostgreSQL: the freed lock is what the tests check.)"""
    if "://" not in db_url:
        assert not Path(f"{db_url}-wal").exists(), "a connection to the database is still open"


def free(db_url: str, thread: str) -> bool:
    try:
        with thread_lock(db_url, thread):
            return True
    except ThreadBusyError:
        return False


def test_a_running_thread_is_busy_for_a_second_worker(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """While `arun` streams, another session's run of that thread raises ThreadBusyError and runs
    nothing; another thread is free; when the run ends, the thread is free again."""
    thread, other = f"{thread_prefix}-busy", f"{thread_prefix}-other"
    gate = tmp_path / "gate"
    command = f"echo run >> {tmp_path}/counter; echo $$ > {tmp_path}/pid; while [ ! -e {gate} ]; do sleep 0.05; done"
    config = AgentConfig(workdir=str(tmp_path))

    async def main() -> None:
        async with aopen_session(db_url, model=ScriptedChatModel([calls_reply(command), answer("done")]),
                                 config=config) as first, aopen_session(db_url, config=config) as second:
            running = asyncio.create_task(drain(first, task("wait for the gate"), thread))
            await until(tmp_path / "pid")
            with pytest.raises(ThreadBusyError, match=f"thread {thread} is busy: another worker is running it"):
                await drain(second, None, thread)
            assert free(db_url, other)
            gate.touch()
            await asyncio.wait_for(running, WAIT_S)
            assert (await first.astate(thread)).values["status"] == "done"
            await drain(second, None, thread)  # free now (a finished thread: nothing to run)

    asyncio.run(main())
    assert (tmp_path / "counter").read_text() == "run\n"


def test_a_lock_block_holds_the_thread_across_runs(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """Inside `session.lock(thread)` the session's runs use that hold (and so do those of a
    session made from it with `with_config`); other workers are refused until the block ends."""
    thread = f"{thread_prefix}-held"
    config = AgentConfig(workdir=str(tmp_path), timeout_s=0.3, on_environment_error="ask")
    model = ScriptedChatModel([calls_reply("sleep 5"), answer("skipped")])

    async def main() -> None:
        async with aopen_session(db_url, model=model, config=config) as session:
            with session.lock(thread):
                await drain(session, task("sleep"), thread)
                assert (await session.astate(thread)).interrupts, "the timeout should ask a person"
                assert not free(db_url, thread)
                fewer_steps = dataclasses.replace(config.budgets, max_steps=10)
                other_settings = session.with_config(dataclasses.replace(config, budgets=fewer_steps))
                await drain(other_settings, Command(resume="skip"), thread)
                assert not free(db_url, thread)
            assert free(db_url, thread)
            assert (await session.astate(thread)).values["status"] == "done"

    asyncio.run(main())


def test_new_input_to_an_unfinished_thread_is_refused(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """As `Session.run`: a thread waiting for an answer refuses new input (nothing is lost);
    the answer continues it."""
    thread = f"{thread_prefix}-unfinished"
    config = AgentConfig(workdir=str(tmp_path), timeout_s=0.3, on_environment_error="ask")
    model = ScriptedChatModel([calls_reply("sleep 5"), answer("skipped")])

    async def main() -> str:
        async with aopen_session(db_url, model=model, config=config) as session:
            await drain(session, task("sleep"), thread)
            with pytest.raises(UnfinishedThreadError, match="waits for an answer"):
                await drain(session, task("something else"), thread)
            with pytest.raises(UnfinishedThreadError, match="waits for an answer"):
                await drain(session, Command(update=task("something else")), thread)
            await drain(session, Command(resume="skip"), thread)
            return str((await session.astate(thread)).values["status"])

    assert asyncio.run(main()) == "done"


def _background_job(pid_file: Path) -> AIMessage:
    call = ToolCall(name="bash", args={"command": f"echo $$ > {pid_file}; exec sleep 300", "background": True},
                    id="job", type="tool_call")
    return AIMessage(content="", tool_calls=[call])


def _fails(messages: list[BaseMessage]) -> AIMessage:
    raise RuntimeError("the model failed")


def _run_in_session(db_url: str, model: ScriptedChatModel, config: AgentConfig, thread: str,
                    interrupt: Callable[[asyncio.Task[None]], Awaitable[None]]) -> None:
    """One session that runs `thread`; `interrupt` acts on the task running the whole block."""

    async def whole_block() -> None:
        async with aopen_session(db_url, model=model, config=config) as session:
            await drain(session, task("go"), thread)

    async def main() -> None:
        block = asyncio.create_task(whole_block())
        await interrupt(block)

    asyncio.run(main())


def test_an_error_ends_the_block_with_the_lock_freed_jobs_stopped_and_the_store_closed(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The model fails after a background job started: the error reaches the caller, and by
    then the job's process is gone, the thread is free and the database closed."""
    thread = f"{thread_prefix}-error"
    leader = tmp_path / "leader"
    model = ScriptedChatModel([_background_job(leader), _fails])

    async def raises(block: asyncio.Task[None]) -> None:
        with pytest.raises(RuntimeError, match="the model failed"):
            await asyncio.wait_for(block, WAIT_S)

    try:
        _run_in_session(db_url, model, AgentConfig(workdir=str(tmp_path)), thread, raises)
        job = int(leader.read_text())
        assert gone_within(job, 5), "the session's background job outlived it"
    finally:
        if leader.exists():
            kill_quietly(int(leader.read_text()))
    assert free(db_url, thread)
    assert_closed(db_url)


def test_a_cancelled_block_stops_the_command_frees_the_thread_and_resumes_without_rerunning(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Cancelling the task that holds the session (what Ctrl-C does to `bashgraph run`) kills
    the running command's process group, frees the thread and closes the store; a new session
    resumes the thread, reports the command interrupted and does not run it again."""
    thread = f"{thread_prefix}-cancel"
    pid, counter = tmp_path / "pid", tmp_path / "counter"
    config = AgentConfig(workdir=str(tmp_path), on_environment_error="model")
    model = ScriptedChatModel([calls_reply(f"echo run >> {counter}; echo $$ > {pid}; sleep 300"),
                               answer("it was interrupted")])

    async def cancel(block: asyncio.Task[None]) -> None:
        await until(pid)
        block.cancel()
        with pytest.raises(asyncio.CancelledError):
            await block

    try:
        _run_in_session(db_url, model, config, thread, cancel)
        assert not group_running(int(pid.read_text())), "the cancelled command still runs"
    finally:
        if pid.exists():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid.read_text()), signal.SIGKILL)
    assert free(db_url, thread)
    assert_closed(db_url)

    async def resume() -> dict[str, Any]:
        async with aopen_session(db_url, model=model, config=config) as session:
            await drain(session, None, thread)
            return dict((await session.astate(thread)).values)

    state = asyncio.run(resume())
    assert state["status"] == "done"
    result = next(m.artifact for m in state["messages"] if getattr(m, "artifact", None))
    assert (result["outcome"], result["spawn_error"]) == ("spawn_error", "interrupted")
    assert counter.read_text() == "run\n"


def test_ahistory_gives_the_rows_of_the_sync_history(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """`AsyncSession.ahistory` and `Session.history` read the same rows of a thread."""
    from bashgraph.graph import open_session

    thread = f"{thread_prefix}-rows"
    config = AgentConfig(workdir=str(tmp_path))
    with open_session(db_url, model=ScriptedChatModel([calls_reply("echo one"), answer("done")]),
                      config=config) as session:
        for _ in session.run(task("echo"), thread):
            pass
        rows = session.history(thread)

    async def read() -> list[Any]:
        async with aopen_session(db_url, config=config) as session:
            return await session.ahistory(thread)

    assert len(rows) > 3
    assert asyncio.run(read()) == rows


def test_a_lock_block_holds_the_thread_for_its_own_task_only(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Another task running the held thread on the same session is refused, as any other
    worker is: the hold belongs to the code inside the block, not to the session."""
    thread = f"{thread_prefix}-own"
    model = ScriptedChatModel([calls_reply("echo other >> log"), answer("ran")])

    async def main() -> None:
        async with aopen_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
            held, release = asyncio.Event(), asyncio.Event()

            async def holder() -> None:
                with session.lock(thread):
                    held.set()
                    await release.wait()

            async def other() -> None:
                await held.wait()
                try:
                    with pytest.raises(ThreadBusyError):
                        await drain(session, task("run it"), thread)
                finally:
                    release.set()

            await asyncio.gather(holder(), other())
        assert not (tmp_path / "log").exists()

    asyncio.run(main())
