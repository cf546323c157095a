"""Batches across retries, runs and directories: each failure counted once, limits per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply
from bashgraph.tools import CommandResult

FAST = {"retry_backoff_s": 0.01, "retry_backoff_max_s": 0.02}


def flaky(fail_times: int, counter: str = "cnt") -> str:
    """Killed by SIGKILL (a transient spawn error) the first `fail_times` runs, then fine."""
    return (f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; "
            f"[ $n -ge {fail_times} ] && exit 0; kill -9 $$")


def agent_for(steps: list[Any], tmp_path: Path, **settings: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(steps)
    config = AgentConfig(workdir=str(tmp_path), **{**FAST, **settings})
    return build_graph(model=model, config=config, checkpointer=InMemorySaver()), model


def go(agent: Any, text: str = "task", thread: str = "b") -> dict[str, Any]:
    state: dict[str, Any] = agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    return state


def test_a_retried_batch_counts_its_args_error_once(tmp_path: Path) -> None:
    """Re-routing after each retry starts from the pre-batch counters: one invalid call is one."""
    reply = AIMessage(content="", tool_calls=[call(flaky(2)), call("echo hi", timeout=-1)])
    agent, model = agent_for([reply, answer("fixed")], tmp_path, max_args_errors=2)
    state = go(agent)
    model.assert_done()
    assert state["status"] == "done"
    assert state["args_errors"] == 1


def test_a_retried_batch_does_not_replan_on_its_own_exit_error(tmp_path: Path) -> None:
    """An exit error beside a retried call is one failure, not 'the same command twice'."""
    reply = AIMessage(content="", tool_calls=[call(flaky(1)), call("exit 1")])
    agent, model = agent_for([reply, answer("ok")], tmp_path)
    state = go(agent)
    model.assert_done()
    assert state.get("replans", 0) == 0
    assert [(f["command"], f["code"]) for f in state["failures"]] == [("exit 1", "1")]


def test_a_new_reply_gets_a_fresh_retry_budget(tmp_path: Path) -> None:
    """Retries spent on one batch (then handed to the model) do not starve the next batch."""
    steps = [calls_reply("kill -9 $$"), calls_reply(flaky(1, "cnt2")), answer("ok")]
    agent, model = agent_for(steps, tmp_path, on_environment_error="model", max_spawn_retries=2)
    state = go(agent)
    model.assert_done()
    last = [CommandResult.from_dict(m.artifact) for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert last.outcome == "ok"


def test_a_retry_runs_in_the_directory_the_call_started_in(tmp_path: Path) -> None:
    """Another call of the batch that `cd`s away does not move the retried call."""
    (tmp_path / "other").mkdir()
    reply = AIMessage(content="", tool_calls=[call("cd other"), call("pwd >> where; " + flaky(1))])
    agent, _ = agent_for([reply, answer("ok")], tmp_path)
    assert go(agent)["status"] == "done"
    assert (tmp_path / "where").read_text().split() == [str(tmp_path)] * 2  # first run and retry
    assert not (tmp_path / "other" / "where").exists()


def test_limits_apply_per_run_on_a_reused_thread(tmp_path: Path) -> None:
    """A follow-up task on a finished thread starts with fresh counters (steps, re-plans)."""
    script = [calls_reply("true"), answer("one"), calls_reply("true"), answer("two")]
    agent, model = agent_for(script, tmp_path, max_steps=2)
    assert go(agent, "first")["status"] == "done"
    state = go(agent, "second")
    model.assert_done()
    assert (state["status"], state["steps"]) == ("done", 2)


def test_an_args_error_repeat_does_not_replan_a_new_exit_error(tmp_path: Path) -> None:
    """Repeats count within a kind: an old invalid call plus a new exit code is no loop."""
    bad = call("ls", timeout=-1)
    first = AIMessage(content="", tool_calls=[bad])
    second = AIMessage(content="", tool_calls=[call("ls", timeout=-1), call("exit 5")])
    agent, model = agent_for([first, second, answer("ok")], tmp_path)
    state = go(agent)
    model.assert_done()
    assert state.get("replans", 0) == 0


def test_a_lone_surrogate_in_a_command_is_an_args_error(tmp_path: Path) -> None:
    """Text that cannot be encoded is refused before the journal or the shell sees it."""
    agent, _ = agent_for([calls_reply("echo \udc80"), answer("ok")], tmp_path)
    state = go(agent)
    [result] = [CommandResult.from_dict(m.artifact) for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.outcome == "args_error"
    assert "surrogate" in (result.detail or "")
