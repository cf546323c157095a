"""`AsyncSession.athreads` and `afork` answer as `Session.threads` and `fork` do, on the async
savers (AsyncSqliteSaver, AsyncPostgresSaver). Real bash, real SQLite files and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from bashgraph.graph import AgentConfig, AsyncSession, aopen_session
from bashgraph.graph.errors import ConfigError, StoreError, ThreadBusyError
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply
from tests.graph.store.test_threads import assert_fork_ran_on_its_own


async def drain(session: AsyncSession, inputs: Any, thread: str) -> None:
    async for _ in session.arun(inputs, thread):
        pass


def task(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def timed_out() -> AIMessage:
    """A reply whose command times out: an environment fault that asks a person."""
    return AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.2)])


def test_athreads_lists_what_threads_lists(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """A finished thread shows "done", one waiting for an answer "paused", each with its task,
    newest first: the same rows the sync session reads from the same database."""
    done, paused = f"{thread_prefix}-done", f"{thread_prefix}-paused"
    config = AgentConfig(workdir=str(tmp_path))
    model = ScriptedChatModel([calls_reply("true"), answer("ok"), timed_out()])

    async def main() -> list[Any]:
        async with aopen_session(db_url, model=model, config=config) as session:
            await drain(session, task("first task"), done)
            await drain(session, task("second task"), paused)
            return [t for t in await session.athreads() if t.thread_id.startswith(thread_prefix)]

    listed = asyncio.run(main())
    assert [(t.thread_id, t.status, t.task) for t in listed] == [
        (paused, "paused", "second task"), (done, "done", "first task")]
    with open_session(db_url, config=config) as sync_session:
        assert [t for t in sync_session.threads() if t.thread_id.startswith(thread_prefix)] == listed


def test_afork_continues_from_its_checkpoint_and_leaves_the_original_alone(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """A fork before `tools` runs the command again as a new command (the original's journal
    row is not reused), ends on its own answer, and `athreads` names where it came from."""
    thread, copy = f"{thread_prefix}-orig", f"{thread_prefix}-fork"
    counter = tmp_path / "counter"
    model = ScriptedChatModel([calls_reply(f"echo run >> {counter}"), answer("ok"), answer("fork ok")])

    async def main() -> tuple[Any, Any, Any, str]:
        async with aopen_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
            await drain(session, task("t"), thread)
            before_tools = next(row for row in await session.ahistory(thread) if row.next == ("tools",))
            made = await session.afork(thread, before_tools.checkpoint_id, copy)
            assert made == copy
            assert (await session.astate(made)).next == ("tools",)
            await drain(session, None, made)
            [info] = [t for t in await session.athreads() if t.thread_id == made]
            return (await session.astate(made)).values, (await session.astate(thread)).values, info, \
                before_tools.checkpoint_id

    forked, original, info, checkpoint_id = asyncio.run(main())
    runs = counter.read_text().splitlines()
    assert set(runs) == {"run"}
    assert_fork_ran_on_its_own(len(runs), forked, original, info, f"{thread}@{checkpoint_id}")


def test_afork_refuses_an_unknown_checkpoint_and_an_existing_thread(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    thread = f"{thread_prefix}-src"

    async def main() -> None:
        model = ScriptedChatModel([answer("ok")])
        async with aopen_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
            await drain(session, task("t"), thread)
            [latest, *_] = await session.ahistory(thread)
            with pytest.raises(ConfigError, match=f"thread {thread} has no checkpoint nope"):
                await session.afork(thread, "nope")
            with pytest.raises(ConfigError, match=f"thread {thread} already exists"):
                await session.afork(thread, latest.checkpoint_id, thread)

    asyncio.run(main())


def test_two_aforks_into_one_id_make_one_whole_thread(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """The new thread is held while it is made: of two forks into the same id at once, one
    makes it and the other is refused (busy, or the thread exists), never a mix of both."""
    first, second, target = f"{thread_prefix}-a", f"{thread_prefix}-b", f"{thread_prefix}-x"

    async def main() -> tuple[Any, Any, str]:
        model = ScriptedChatModel([answer("a"), answer("b")])
        async with aopen_session(db_url, model=model, config=AgentConfig(workdir=str(tmp_path))) as session:
            await drain(session, task("task a"), first)
            await drain(session, task("task b"), second)
            [a_end, *_] = await session.ahistory(first)
            [b_end, *_] = await session.ahistory(second)
            outcomes = await asyncio.gather(session.afork(first, a_end.checkpoint_id, target),
                                            session.afork(second, b_end.checkpoint_id, target),
                                            return_exceptions=True)
            [info] = [t for t in await session.athreads() if t.thread_id == target]
            return outcomes, info, (await session.astate(target)).values["messages"][0].content

    outcomes, info, first_message = asyncio.run(main())
    made = [o for o in outcomes if o == target]
    refused = [o for o in outcomes if isinstance(o, ThreadBusyError | ConfigError)]
    assert (len(made), len(refused)) == (1, 1), outcomes
    assert info.task == first_message  # the listing and the state tell of the same source
    source = first if first_message == "task a" else second
    assert str(info.forked_from).startswith(f"{source}@")


def test_a_cancelled_afork_leaves_no_thread(db_url: str, thread_prefix: str, tmp_path: Path) -> None:
    """Its copy runs on in a worker thread after the cancel; looked at once that copy has had
    time to end, the thread is still not there (a cancel that did not wait and delete it would
    leave the copy behind)."""
    thread, target = f"{thread_prefix}-src", f"{thread_prefix}-gone"

    async def main() -> list[str]:
        async with aopen_session(db_url, model=ScriptedChatModel([answer("ok")]),
                                 config=AgentConfig(workdir=str(tmp_path))) as session:
            await drain(session, task("t"), thread)
            [latest, *_] = await session.ahistory(thread)
            forking = asyncio.create_task(session.afork(thread, latest.checkpoint_id, target))
            await asyncio.sleep(0)  # the copy has started in its thread
            forking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await forking
            await asyncio.sleep(1.0)  # a copy still running would have written its thread by now
            assert await session.ahistory(target) == []
            return [t.thread_id for t in await session.athreads()]

    assert f"{thread_prefix}-gone" not in asyncio.run(main())


def test_an_ended_session_says_so(db_url: str, tmp_path: Path) -> None:
    """Its connections are closed: reading through them must not look like a damaged file."""
    async def main() -> AsyncSession:
        async with aopen_session(db_url, config=AgentConfig(workdir=str(tmp_path))) as session:
            return session

    session = asyncio.run(main())
    for late in (session.astate("t"), session.athreads(), session.ahistory("t"),
                 session.afork("t", "c"), drain(session, None, "t")):
        with pytest.raises(StoreError, match="has ended; open a new one"):
            asyncio.run(late)
    with pytest.raises(StoreError, match="has ended; open a new one"), session.lock("t"):
        pass
    with pytest.raises(StoreError, match="has ended; open a new one"):
        session.with_config(AgentConfig(workdir=str(tmp_path)))


def test_thread_ids_need_no_private_cursor(
    db_url: str, thread_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quick query uses a PostgreSQL saver's private `_cursor`; without it, the thread ids
    come from walking the checkpoints, and they are the same."""
    from bashgraph.graph.store import threads
    from bashgraph.graph.store.checkpoints import aopen_checkpointer, open_checkpointer

    thread = f"{thread_prefix}-listed"
    with open_session(db_url, model=ScriptedChatModel([answer("ok")]),
                      config=AgentConfig(workdir=str(tmp_path))) as session:
        for _ in session.run(task("t"), thread):
            pass

    async def async_ids() -> dict[str, str]:
        async with aopen_checkpointer(db_url) as saver:
            return dict(await threads.athread_ids(saver))

    with open_checkpointer(db_url) as saver:
        quick = dict(threads.thread_ids(saver))
    assert thread in quick
    assert asyncio.run(async_ids()) == quick
    monkeypatch.setattr(threads, "_has_private_cursor", lambda saver: False)
    with open_checkpointer(db_url) as saver:
        assert dict(threads.thread_ids(saver)) == quick
    assert asyncio.run(async_ids()) == quick
