"""Every routing row driven through the real compiled graph, real bash and a strict scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from bashgraph.tools import CommandResult

FAST = {"retry_backoff_s": 0.01, "retry_backoff_max_s": 0.02}


def make(steps: list[Any], tmp_path: Path, **settings: Any) -> tuple[Any, ScriptedChatModel]:
    saver = settings.pop("saver", None)
    model = ScriptedChatModel(steps)
    config = AgentConfig(workdir=str(tmp_path), **{**FAST, **settings})
    return build_graph(model=model, config=config, checkpointer=saver), model


def invoke(agent: Any, task: str = "task", thread: str = "t") -> dict[str, Any]:
    state: dict[str, Any] = agent.invoke({"messages": [HumanMessage(task)]}, {"configurable": {"thread_id": thread}})
    return state


def results(state: dict[str, Any]) -> list[CommandResult]:
    return [CommandResult.from_dict(m.artifact) for m in state["messages"] if isinstance(m, ToolMessage)]


def human_texts(model: ScriptedChatModel) -> list[str]:
    return [str(m.content) for m in model.received[-1] if isinstance(m, HumanMessage)]


def test_ok_output_reaches_the_model_and_the_run_is_done(tmp_path: Path) -> None:
    """exit 0 -> agent; the model's answer ends the run as done."""
    agent, model = make([calls_reply("echo hello; echo warn >&2"), answer("done")], tmp_path)
    state = invoke(agent)
    model.assert_done()
    tool = next(m for m in model.received[1] if isinstance(m, ToolMessage))
    assert tool.content == "hello\n[stderr] warn"
    assert (tool.status, state["status"]) == ("success", "done")


def test_exit_error_is_shown_to_the_model_as_evidence(tmp_path: Path) -> None:
    """grep with no match -> exit_error -> agent, with status=error and the exit code."""
    agent, model = make([calls_reply("grep nothing /dev/null"), answer("no match")], tmp_path)
    state = invoke(agent)
    model.assert_done()
    tool = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool.status == "error"
    assert str(tool.content).startswith("[exit code 1]")
    assert state["exit_streak"] == 1


def test_three_failures_in_a_row_trigger_one_replan(tmp_path: Path) -> None:
    """exit_error streak >= replan_after -> replan -> agent, with the attempts listed."""
    steps = [calls_reply("exit 1"), calls_reply("exit 2"), calls_reply("ls /nope-a"), answer("giving up")]
    agent, model = make(steps, tmp_path)
    state = invoke(agent)
    model.assert_done()
    replan = human_texts(model)[-1]
    assert replan.startswith("Stop and re-plan: 3 failed commands in a row")
    assert "`exit 1` -> exit_error (1)" in replan
    assert "`ls /nope-a` -> exit_error (2)" in replan
    assert (state["replans"], state["exit_streak"]) == (1, 0)


def test_a_model_repeating_a_failing_command_is_replanned_then_stopped(tmp_path: Path) -> None:
    """Same failure twice -> replan; still repeating after max_replans -> failed, no loop."""
    agent, model = make([calls_reply("ls /nope")] * 4, tmp_path, max_replans=2)
    state = invoke(agent)
    model.assert_done()  # exactly four model calls: the run did not loop
    assert state["status"] == "failed"
    assert state["reason"] == "no progress after 2 re-plans"
    assert state["replans"] == 2


def test_invalid_arguments_go_back_with_the_problem_and_schema(tmp_path: Path) -> None:
    """args_error -> agent; the message says what is wrong and what the tool takes."""
    bad = AIMessage(content="", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "c1"}])
    agent, model = make([bad, answer("sorry")], tmp_path)
    state = invoke(agent)
    model.assert_done()
    tool = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert str(tool.content).startswith("[args error]")
    assert "command" in tool.content
    assert results(state)[0].outcome == "args_error"


def test_args_errors_past_the_budget_end_the_run(tmp_path: Path) -> None:
    """max_args_errors consecutive invalid calls -> the run fails with a clear reason."""
    bad = AIMessage(content="", tool_calls=[{"name": "bash", "args": {}, "id": "c"}])
    agent, model = make([bad, bad], tmp_path, max_args_errors=2)
    state = invoke(agent)
    model.assert_done()
    assert (state["status"], state["reason"]) == ("failed", "2 invalid tool calls in a row")


def test_unparseable_tool_arguments_are_answered_not_dropped(tmp_path: Path) -> None:
    """A call whose arguments were not JSON still gets a ToolMessage (providers require one)."""
    broken = AIMessage(content="", invalid_tool_calls=[
        {"name": "bash", "args": "{oops", "id": "bad1", "error": "Expecting value", "type": "invalid_tool_call"}])
    agent, _model = make([broken, answer("ok")], tmp_path)
    state = invoke(agent)
    tool = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool.tool_call_id == "bad1"
    assert "not valid JSON" in tool.content


def test_transient_signal_is_retried_and_the_retry_result_replaces_the_first(tmp_path: Path) -> None:
    """spawn_error/signal -> retry re-runs the same call -> route -> agent on success."""
    flaky = "if [ -e marker ]; then echo second; else touch marker; kill -9 $$; fi"
    agent, model = make([calls_reply(flaky), answer("done")], tmp_path)
    state = invoke(agent)
    model.assert_done()
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tools) == 1  # the retried answer replaced the failed one
    assert tools[0].content == "second"
    assert state["spawn_retries"] == 0  # reset by the success


def test_transient_fault_that_persists_escalates_after_the_budget(tmp_path: Path) -> None:
    """Retries spent -> escalate; with on_environment_error=stop the run ends as a fault."""
    agent, model = make([calls_reply("kill -9 $$")], tmp_path, on_environment_error="stop", max_spawn_retries=2,
                        saver=InMemorySaver())
    state = invoke(agent)
    model.assert_done()
    assert state["status"] == "environment_fault"
    assert "signal" in state["reason"]
    # Bookkeeping is not output; the thread's state holds it.
    assert agent.get_state({"configurable": {"thread_id": "t"}}).values["attempt_serial"] == 2


def test_timeout_escalates_and_stop_reports_the_fault(tmp_path: Path) -> None:
    """A timeout is never auto-retried (side effects): escalate -> stop."""
    agent, model = make([run_with_timeout("sleep 5", 0.3)], tmp_path, on_environment_error="stop")
    state = invoke(agent)
    model.assert_done()
    assert state["status"] == "environment_fault"
    assert "timeout" in state["reason"]


def test_missing_workdir_is_an_environment_fault(tmp_path: Path) -> None:
    """spawn_error/not_found for the working directory escalates, the model is not asked again."""
    model = ScriptedChatModel([calls_reply("ls")])
    config = AgentConfig(workdir=str(tmp_path / "gone"), on_environment_error="stop")
    state = invoke(build_graph(model=model, config=config))
    assert state["status"] == "environment_fault"
    assert results(state)[0].spawn_error == "not_found"


def test_on_environment_error_model_tells_once_then_stops_on_repeat(tmp_path: Path) -> None:
    """policy=model: the fault goes to the model once; the same fault again stops the run."""
    timed = run_with_timeout("sleep 5", 0.2)
    agent, model = make([timed, run_with_timeout("sleep 5", 0.2)], tmp_path, on_environment_error="model")
    state = invoke(agent)
    model.assert_done()
    assert any("Environment fault" in text for text in human_texts(model))
    assert state["status"] == "environment_fault"
    assert "repeated" in state["reason"]


@pytest.mark.parametrize(
    ("resume", "expected_status", "model_sees"),
    [
        ("abort", "aborted", None),
        ("skip", "done", "chose to skip"),
        ("try /usr/bin instead", "done", "says: try /usr/bin instead"),
        ({"action": "hint", "hint": "use ls -la"}, "done", "says: use ls -la"),
    ],
)
def test_escalate_asks_a_person_and_resumes_on_each_answer(
    tmp_path: Path, resume: Any, expected_status: str, model_sees: str | None
) -> None:
    """policy=ask: interrupt() with the evidence; abort / skip / hint each resume correctly."""
    from langgraph.types import Command

    steps: list[Any] = [run_with_timeout("sleep 5", 0.2)]
    if model_sees:
        steps.append(answer("ok"))
    agent, model = make(steps, tmp_path, saver=InMemorySaver())
    config = {"configurable": {"thread_id": "esc"}}
    agent.invoke({"messages": [HumanMessage("task")]}, config)
    pending = agent.get_state(config).interrupts
    assert len(pending) == 1
    assert pending[0].value["faults"][0]["kind"] == "timeout"
    state = agent.invoke(Command(resume=resume), config)
    model.assert_done()
    assert state["status"] == expected_status
    if model_sees:
        assert any(model_sees in text for text in human_texts(model))


def test_escalate_retry_answer_reruns_the_failed_call(tmp_path: Path) -> None:
    """A person fixes the environment and answers retry: the same call runs again and succeeds."""
    from langgraph.types import Command

    needs = tmp_path / "ready"
    agent, model = make([run_with_timeout(f"test -e {needs} && echo ready || sleep 5", 0.3), answer("ok")],
                        tmp_path, saver=InMemorySaver())
    config = {"configurable": {"thread_id": "esc-retry"}}
    agent.invoke({"messages": [HumanMessage("task")]}, config)
    needs.touch()
    state = agent.invoke(Command(resume="retry"), config)
    model.assert_done()
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [t.content for t in tools] == ["ready"]
    assert state["status"] == "done"


def test_parallel_calls_with_mixed_outcomes_keep_their_order(tmp_path: Path) -> None:
    """Several calls of one reply run concurrently; each gets its own answer in order."""
    agent, _model = make([calls_reply("sleep 0.3; echo a", "exit 3", "sleep 0.3; echo c"), answer("ok")], tmp_path)
    state = invoke(agent)
    outcomes = [(r.outcome, r.stdout.strip()) for r in results(state)]
    assert outcomes == [("ok", "a"), ("exit_error", ""), ("ok", "c")]
    assert sum(r.duration_s for r in results(state)) > 0.55  # they overlapped in wall time...
    assert state["exit_streak"] == 1


def test_the_step_limit_stops_a_model_that_never_finishes(tmp_path: Path) -> None:
    """max_steps model calls, then the run fails with a reason (no runaway loop)."""
    agent, model = make([calls_reply("true")] * 3, tmp_path, max_steps=3)
    state = invoke(agent)
    model.assert_done()
    assert (state["status"], state["reason"]) == ("failed", "step limit reached (3)")


def test_cd_in_one_command_holds_for_the_next(tmp_path: Path) -> None:
    """The working directory persists across calls."""
    (tmp_path / "sub").mkdir()
    agent, _model = make([calls_reply("cd sub"), calls_reply("pwd"), answer("ok")], tmp_path)
    state = invoke(agent)
    assert results(state)[1].stdout.strip() == str((tmp_path / "sub").resolve())
    assert state["cwd"] == str((tmp_path / "sub").resolve())


def test_ainvoke_and_astream_run_the_same_graph(tmp_path: Path) -> None:
    """The async path works, and custom events announce each command."""
    agent, _ = make([calls_reply("echo one"), answer("ok")], tmp_path)
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("t")]}))
    assert results(state)[0].stdout == "one\n"
    agent2, _ = make([calls_reply("echo two"), answer("ok")], tmp_path)

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent2.astream({"messages": [HumanMessage("t")]}, stream_mode="custom")]

    events = asyncio.run(collect())
    kinds = [e["event"] for e in events]
    assert (kinds[0], kinds[-1]) == ("command_start", "command_end")
    assert set(kinds[1:-1]) <= {"command_output"}
    assert events[-1]["outcome"] == "ok"


def test_stream_yields_every_node_update(tmp_path: Path) -> None:
    """Sync streaming shows the public node names in order."""
    agent, _ = make([calls_reply("exit 1"), answer("ok")], tmp_path)
    nodes = [next(iter(chunk)) for chunk in agent.stream({"messages": [HumanMessage("t")]}, stream_mode="updates")]
    assert nodes == ["agent", "tools", "route", "agent"]  # approve is skipped: no rule matched


def test_a_clean_batch_goes_from_tools_straight_back_to_the_model(tmp_path: Path) -> None:
    """The happy path is two supersteps per model step, as in a plain tool loop: no `route`."""
    agent, _ = make([calls_reply("true", "echo hi"), calls_reply("true"), answer("ok")], tmp_path)
    updates = list(agent.stream({"messages": [HumanMessage("t")]}, stream_mode="updates"))
    assert [next(iter(chunk)) for chunk in updates] == ["agent", "tools", "agent", "tools", "agent"]
    assert updates[1]["tools"]["next_hop"] == "agent"
    # From the second step on, a channel whose value stays the same is not written: LangGraph
    # has less to apply and to save (status is still "running", the directory and hop the same).
    assert set(updates[2]["agent"]) == {"messages", "steps", "policy_checks"}
    assert set(updates[3]["tools"]) == {"messages"}


def run_with_timeout(command: str, timeout: float) -> AIMessage:
    from bashgraph.graph.testing import call

    return AIMessage(content="", tool_calls=[call(command, timeout=timeout)])


def test_the_old_name_of_calls_reply_still_builds_the_reply_with_a_warning() -> None:
    """`testing.run` (renamed `calls_reply`) keeps working for one release, and says so."""
    from bashgraph.graph import testing

    with pytest.warns(DeprecationWarning, match="calls_reply"):
        reply = testing.run("true", "false")
    assert [call["args"]["command"] for call in reply.tool_calls] == ["true", "false"]
