"""Sessions, thread listing, history, fork and small state, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from bashgraph.graph import AgentConfig
from bashgraph.graph.errors import ConfigError, StoreError, ThreadBusyError, UnfinishedThreadError
from bashgraph.graph.session import Session, open_session
from bashgraph.graph.store.locks import thread_lock
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply


def session_for(
    db_url: str, steps: list[Any], tmp_path: Path, **settings: Any
) -> AbstractContextManager[Session]:
    config = AgentConfig(workdir=str(tmp_path), **settings)
    return open_session(db_url, model=ScriptedChatModel(steps), config=config)


def drain(session: Session, inputs: Any, thread: str, config: Any = None) -> None:
    for _ in session.run(inputs, thread, config=config):
        pass


def task(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def timed_out() -> AIMessage:
    """A reply whose command times out: an environment fault that escalates."""
    return AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.2)])


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    return tmp_path / "counter"


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_threads_lists_done_and_paused_threads_with_their_task(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """A finished thread shows "done"; one waiting at an escalation shows "paused"."""
    done, paused = f"{thread_prefix}-done", f"{thread_prefix}-paused"
    with session_for(db_url, [calls_reply("true"), answer("ok"), timed_out()], tmp_path) as session:
        drain(session, task("first task"), done)
        drain(session, task("second task"), paused)
        mine = {t.thread_id: t for t in session.threads() if t.thread_id.startswith(thread_prefix)}
    assert (mine[done].status, mine[done].task) == ("done", "first task")
    assert (mine[paused].status, mine[paused].task) == ("paused", "second task")
    assert mine[paused].updated_at > mine[done].updated_at


def test_a_paused_thread_resumes_in_a_new_session_with_the_answer(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The interrupt survives closing the database; Command(resume=...) completes the run."""
    thread = f"{thread_prefix}-p"
    with session_for(db_url, [timed_out()], tmp_path) as session:
        drain(session, task("t"), thread)
        assert session.state(thread).interrupts[0].value["faults"][0]["kind"] == "timeout"
    with session_for(db_url, [], tmp_path) as session:
        drain(session, Command(resume="abort"), thread)
        assert session.state(thread).values["status"] == "aborted"
        [info] = [t for t in session.threads() if t.thread_id == thread]
    assert info.status == "aborted"


def test_new_input_to_a_paused_thread_is_refused_and_loses_nothing(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The question stays pending and the answer still completes the run."""
    thread = f"{thread_prefix}-refuse"
    with session_for(db_url, [timed_out(), answer("done")], tmp_path) as session:
        drain(session, task("t"), thread)
        before = session.state(thread)
        with pytest.raises(UnfinishedThreadError, match="waits for an answer"):
            drain(session, task("something else"), thread)
        for given_as_command in (Command(update=task("something else")), Command(goto="agent")):
            with pytest.raises(UnfinishedThreadError, match="waits for an answer"):
                drain(session, given_as_command, thread)
        after = session.state(thread)
        assert after.values["messages"] == before.values["messages"]
        assert [i.id for i in after.interrupts] == [i.id for i in before.interrupts]
        drain(session, Command(resume="abort"), thread)
        assert session.state(thread).values["status"] == "aborted"
        drain(session, task("a follow-up"), thread)  # a finished thread takes new input
        assert session.state(thread).values["messages"][-1].content == "done"


def test_the_guard_looks_at_the_checkpoint_the_run_starts_from(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """New input from a finished checkpoint is a branch, whatever the latest one waits for;
    new input from a paused checkpoint is refused even when the latest one is finished."""
    thread = f"{thread_prefix}-branch"
    steps = [calls_reply("true"), answer("ok"), timed_out(), answer("branched")]
    with session_for(db_url, steps, tmp_path) as session:
        drain(session, task("first"), thread)
        finished = session.state(thread).config
        drain(session, task("second"), thread)  # waits at escalate
        paused = session.state(thread).config
        assert session.state(thread).interrupts
        drain(session, task("from the finished point"), thread, finished)
        assert session.state(thread).values["messages"][-1].content == "branched"
        with pytest.raises(UnfinishedThreadError, match="waits for an answer"):
            drain(session, task("from the paused point"), thread, paused)


def test_history_lists_each_checkpoint_with_its_node_and_outcomes(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Oldest to newest: input, __start__, agent, tools (with outcomes), route, agent."""
    thread = f"{thread_prefix}-h"
    with session_for(db_url, [calls_reply("echo one", "exit 3"), answer("ok")], tmp_path) as session:
        drain(session, task("t"), thread)
        rows = list(reversed(session.history(thread)))
    assert [row.node for row in rows] == ["input", "__start__", "agent", "tools", "route", "agent"]
    assert [row.step for row in rows] == [-1, 0, 1, 2, 3, 4]
    assert rows[3].outcomes == "ok `echo one`; exit_error(3) `exit 3`"
    assert [row.next for row in rows][2:] == [("tools",), ("route",), ("agent",), ()]
    assert all(row.created_at for row in rows)


def test_a_fork_continues_from_its_checkpoint_and_runs_new_commands(
    db_url: str, thread_prefix: str, tmp_path: Path, counter: Path
) -> None:
    """Fork at "tools": same messages, same next node; resuming it runs the command again as
    a new command (the original's journal result is not reused) and leaves the original alone."""
    thread = f"{thread_prefix}-orig"
    steps = [calls_reply(f"echo run >> {counter}; echo ran"), answer("ok"), answer("fork ok")]
    with session_for(db_url, steps, tmp_path) as session:
        drain(session, task("t"), thread)
        before_tools = next(row for row in session.history(thread) if row.next == ("tools",))
        fork = session.fork(thread, before_tools.checkpoint_id, f"{thread_prefix}-fork")
        source = session.agent.get_state(
            {"configurable": {"thread_id": thread, "checkpoint_id": before_tools.checkpoint_id}})
        copied = session.state(fork)
        assert copied.next == ("tools",)
        assert [m.id for m in copied.values["messages"]] == [m.id for m in source.values["messages"]]
        drain(session, None, fork)
        final = session.state(fork).values
        original = session.state(thread).values
        [info] = [t for t in session.threads() if t.thread_id == fork]
    assert_fork_ran_on_its_own(lines(counter), final, original, info, f"{thread}@{before_tools.checkpoint_id}")


def assert_fork_ran_on_its_own(runs: int, forked: dict[str, Any], original: dict[str, Any],
                               info: Any, source: str) -> None:
    """The command ran again for the fork (2 runs in all), the fork ended on its own answer, the
    original kept its own, and the listing names where the fork came from."""
    assert runs == 2
    assert (forked["status"], forked["messages"][-1].content) == ("done", "fork ok")
    assert original["messages"][-1].content == "ok"
    assert info.forked_from == source


def test_a_fork_of_a_paused_checkpoint_pauses_again_and_takes_an_answer(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Forking the checkpoint waiting at escalate gives a thread that accepts its own answer."""
    thread = f"{thread_prefix}-esc"
    with session_for(db_url, [timed_out(), answer("hinted")], tmp_path) as session:
        drain(session, task("t"), thread)
        waiting = session.history(thread)[0]
        assert waiting.next == ("escalate",)
        fork = session.fork(thread, waiting.checkpoint_id)
        drain(session, Command(resume="use a shorter sleep"), fork)
        assert session.state(fork).values["status"] == "done"
        assert session.state(thread).interrupts  # the original still waits for its answer


def test_a_fork_of_the_first_checkpoint_replays_the_task(
    db_url: str, thread_prefix: str, tmp_path: Path, counter: Path
) -> None:
    """The input checkpoint can be forked too: the fork starts the same task from scratch."""
    thread = f"{thread_prefix}-in"
    steps = [calls_reply(f"echo run >> {counter}"), answer("a"), calls_reply(f"echo run >> {counter}"), answer("b")]
    with session_for(db_url, steps, tmp_path) as session:
        drain(session, task("count once"), thread)
        first = session.history(thread)[-1]
        fork = session.fork(thread, first.checkpoint_id)
        drain(session, None, fork)
        values = session.state(fork).values
    assert lines(counter) == 2
    assert values["messages"][0].content == "count once"
    assert values["status"] == "done"


def test_fork_refuses_unknown_checkpoints_and_existing_threads(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Bad fork arguments are a ConfigError naming the problem; nothing is written."""
    thread = f"{thread_prefix}-bad"
    with session_for(db_url, [answer("ok")], tmp_path) as session:
        drain(session, task("t"), thread)
        latest = session.history(thread)[0].checkpoint_id
        with pytest.raises(ConfigError, match="has no checkpoint"):
            session.fork(thread, "1f000000-0000-6000-8000-000000000000")
        with pytest.raises(ConfigError, match="already exists"):
            session.fork(thread, latest, thread)


def test_state_is_rebuilt_identically_by_a_new_session(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The messages DeltaChannel replays to the same messages (ids included) after reopening."""
    thread = f"{thread_prefix}-re"
    flaky = "if [ -e marker ]; then echo second; else touch marker; kill -9 $$; fi"
    with session_for(db_url, [calls_reply(flaky), answer("done")], tmp_path) as session:
        drain(session, {"messages": [("user", "tuple input has no id")]}, thread)
        before = session.state(thread).values["messages"]
    with session_for(db_url, [], tmp_path) as session:
        after = session.state(thread).values["messages"]
    assert [(m.id, m.content) for m in after] == [(m.id, m.content) for m in before]
    tools = [m for m in after if isinstance(m, ToolMessage)]
    assert [t.content for t in tools] == ["second"]  # the retry replaced the failed answer


def test_stored_bytes_grow_linearly_with_steps(tmp_path: Path) -> None:
    """Each 10 KiB output is stored about once, not once per later checkpoint."""
    sizes = {}
    for steps in (4, 12):
        db = str(tmp_path / f"db-{steps}.sqlite")
        script = [calls_reply("head -c 10240 /dev/zero | tr '\\0' a") for _ in range(steps)]
        with session_for(db, [*script, answer("ok")], tmp_path) as session:
            drain(session, task("t"), "t")
        sizes[steps] = _stored_bytes(db)
    per_step = (sizes[12] - sizes[4]) / 8
    # content + artifact + the journal's full copy + ~5 small checkpoints; quadratic: ~80 KiB
    assert per_step < 3.5 * 10240
    assert sizes[12] < 3.5 * sizes[4]


def _stored_bytes(db: str) -> int:
    conn = sqlite3.connect(db)
    try:
        queries = [
            "SELECT SUM(length(checkpoint) + length(metadata)) FROM checkpoints",
            "SELECT SUM(length(value)) FROM writes",
            "SELECT SUM(length(result_json)) FROM bashgraph_journal",
        ]
        return sum(conn.execute(q).fetchone()[0] or 0 for q in queries)
    finally:
        conn.close()


def test_a_finished_thread_can_be_run_again_and_its_end_forked(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """run() releases the thread when its stream ends: a follow-up run on the same thread
    works; forking the final checkpoint gives a finished copy with nothing left to run."""
    thread = f"{thread_prefix}-end"
    with session_for(db_url, [answer("one"), answer("two")], tmp_path) as session:
        drain(session, task("first"), thread)
        drain(session, task("second"), thread)
        latest = session.history(thread)[0]
        fork = session.fork(thread, latest.checkpoint_id)
        copied = session.state(fork)
    assert latest.next == ()
    assert (copied.next, copied.values["status"]) == ((), "done")
    assert [m.content for m in copied.values["messages"]] == ["first", "one", "second", "two"]


def test_a_fork_that_would_land_elsewhere_is_refused_and_leaves_no_thread(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """Paused at approve under an ask rule, forked by a process without that rule: refused whole."""
    from bashgraph.graph import AgentConfig, BashgraphError, open_session
    from bashgraph.graph.testing import ScriptedChatModel

    thread = f"{thread_prefix}-ask"
    asking = AgentConfig(workdir=str(tmp_path), rules=("ask:echo *",))
    with open_session(db_url, model=ScriptedChatModel([calls_reply("echo hi")]), config=asking) as session:
        drain(session, task("t"), thread)
        paused = session.history(thread)[0]
    assert paused.next == ("approve",)
    with open_session(db_url, model=ScriptedChatModel([]), config=AgentConfig(workdir=str(tmp_path))) as session:
        with pytest.raises(BashgraphError, match="nothing was created"):
            session.fork(thread, paused.checkpoint_id, f"{thread_prefix}-stray")
        assert f"{thread_prefix}-stray" not in [t.thread_id for t in session.threads()]


def test_a_fork_into_a_held_thread_is_refused_and_history_of_none_is_empty(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """The new thread is held while a fork makes it: a worker holding that id (running it, or
    forking into it) makes the fork refuse, and nothing is written. An unknown thread has no
    history rather than an error."""
    thread, target = f"{thread_prefix}-src", f"{thread_prefix}-held"
    with session_for(db_url, [answer("ok")], tmp_path) as session:
        drain(session, task("t"), thread)
        [latest, *_] = session.history(thread)
        with thread_lock(db_url, target), pytest.raises(ThreadBusyError, match=f"thread {target} is busy"):
            session.fork(thread, latest.checkpoint_id, target)
        assert session.history(target) == []
        with session.lock(target):  # this session's own hold is used, not taken again
            assert session.fork(thread, latest.checkpoint_id, target) == target


def test_an_ended_session_says_so(db_url: str, tmp_path: Path) -> None:
    """Its connections are closed: reading through them must not look like a damaged file."""
    with session_for(db_url, [], tmp_path) as session:
        pass
    executors = len(session._executors)

    def hold() -> None:
        with session.lock("t"):
            pass

    for late in (lambda: session.state("t"), session.threads, lambda: session.history("t"),
                 lambda: drain(session, None, "t"), lambda: session.fork("t", "c"), hold,
                 lambda: session.with_config(AgentConfig(workdir=str(tmp_path)))):
        with pytest.raises(StoreError, match="has ended; open a new one"):
            late()
    assert len(session._executors) == executors  # no agent (nor job executor) made after the end


def test_a_fork_of_the_checkpoint_after_a_retry_answer_runs_the_retry(
    db_url: str, thread_prefix: str, tmp_path: Path, counter: Path
) -> None:
    """A person answered "retry" at an escalation: the checkpoint waiting to run `retry` can be
    forked, and the fork re-runs the failed command itself (its route had said "escalate")."""
    thread = f"{thread_prefix}-retry"
    marker = tmp_path / "marker"
    flaky = f"echo run >> {counter}; if [ -e {marker} ]; then echo ok; else touch {marker}; sleep 5; fi"
    steps = [AIMessage(content="", tool_calls=[call(flaky, timeout=0.3)]), answer("a"), answer("b")]
    with session_for(db_url, steps, tmp_path, max_spawn_retries=0) as session:
        drain(session, task("t"), thread)
        assert session.state(thread).next == ("escalate",)
        drain(session, Command(resume="retry"), thread)
        waiting = next(row for row in session.history(thread) if row.next == ("retry",))
        fork = session.fork(thread, waiting.checkpoint_id)
        assert session.state(fork).next == ("retry",)
        drain(session, None, fork)
        values = session.state(fork).values
    assert lines(counter) == 3  # the first run, its retry, and the fork's own retry
    assert values["status"] == "done"
    assert [m.content for m in values["messages"] if isinstance(m, ToolMessage)] == ["ok"]


def test_every_checkpoint_of_a_thread_through_every_node_forks_to_the_same_next_node(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """One thread passes agent, approve, tools, route, escalate, retry and replan; each of its
    checkpoints forks into a thread that continues at the same node."""
    thread = f"{thread_prefix}-all"
    marker = tmp_path / "marker"
    flaky = f"if [ -e {marker} ]; then echo ok; else touch {marker}; sleep 5; fi"
    steps = [
        AIMessage(content="", tool_calls=[call(flaky, timeout=0.3)]),
        calls_reply("exit 1"), calls_reply("exit 1"),  # two exit errors: replan_after=2
        answer("done"),
    ]
    with session_for(db_url, steps, tmp_path, max_spawn_retries=0, replan_after=2,
                     approval="always") as session:
        drain(session, task("t"), thread)
        for reply in ("approve", "retry", "approve", "approve"):
            drain(session, Command(resume=reply), thread)
        assert session.state(thread).values["status"] == "done"
        rows = session.history(thread)
        passed = {row.next for row in rows}
        assert {("approve",), ("escalate",), ("retry",), ("replan",), ("route",), ()} <= passed
        for row in rows:
            fork = session.fork(thread, row.checkpoint_id)
            assert session.state(fork).next == row.next, row


def test_a_fork_where_a_second_run_starts_keeps_the_thread_so_far(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    """New input to a finished thread is saved as a checkpoint about to run `__start__`; its
    fork holds the conversation and working directory so far, plus the new input, as a resume
    of the source would."""
    thread = f"{thread_prefix}-again"
    (tmp_path / "sub").mkdir()
    steps = [calls_reply("cd sub"), answer("first"), answer("second"), answer("forked")]
    with session_for(db_url, steps, tmp_path) as session:
        drain(session, task("first task"), thread)
        drain(session, task("second task"), thread)
        second_start = next(row for row in session.history(thread) if row.next == ("__start__",) and row.step > 0)
        fork = session.fork(thread, second_start.checkpoint_id)
        assert session.state(fork).next == ("__start__",)
        drain(session, None, fork)
        values = session.state(fork).values
    texts = [m.content for m in values["messages"] if isinstance(m, (HumanMessage, AIMessage))]
    assert texts == ["first task", "", "first", "second task", "forked"]
    assert values["cwd"] == str(tmp_path / "sub")
    assert values["status"] == "done"
