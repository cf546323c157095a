"""The approve node: rules before any command runs, a real interrupt, and each answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.approval import read_verdict, read_verdicts
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply
from bashgraph.tools import CommandResult


def start(
    steps: list[Any], tmp_path: Path, thread: str = "a", **settings: Any
) -> tuple[Any, ScriptedChatModel, RunnableConfig]:
    model = ScriptedChatModel(steps)
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), **settings),
                        checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [HumanMessage("task")]}, config)
    return agent, model, config


def tool_results(state: dict[str, Any]) -> list[CommandResult]:
    return [CommandResult.from_dict(m.artifact) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_a_rule_that_asks_pauses_before_the_command_runs(tmp_path: Path) -> None:
    """`sudo` matches a default ask rule: interrupt with command, rule and reason; nothing ran."""
    marker = tmp_path / "ran"
    agent, _, config = start([calls_reply(f"sudo touch {marker}")], tmp_path)
    [pending] = agent.get_state(config).interrupts
    request = pending.value["requests"][0]
    assert pending.value["kind"] == "approval"
    assert request["command"] == f"sudo touch {marker}"
    assert request["rule"]
    assert request["reason"]
    assert not marker.exists()
    assert agent.get_state(config).next == ("approve",)


def test_approve_runs_the_command(tmp_path: Path) -> None:
    """Answering approve lets the asked command run and the run continue."""
    agent, model, config = start([calls_reply("rm -rf /tmp/bashgraph-approval-test-nothing"), answer("done")],
                                 tmp_path, approval="always")
    state = agent.invoke(Command(resume="approve"), config)
    model.assert_done()
    assert [r.outcome for r in tool_results(state)] == ["ok"]
    assert state["status"] == "done"


def test_reject_answers_denied_with_the_message_and_goes_to_the_model(tmp_path: Path) -> None:
    """A rejected command never runs: spawn_error/denied carrying the person's message -> agent."""
    marker = tmp_path / "ran"
    agent, model, config = start([calls_reply(f"touch {marker}"), answer("ok, not doing it")], tmp_path,
                                 approval="always")
    state = agent.invoke(Command(resume={"action": "reject", "message": "not on Fridays"}), config)
    model.assert_done()
    [result] = tool_results(state)
    assert (result.outcome, result.spawn_error) == ("spawn_error", "denied")
    assert result.detail == "rejected by a person: not on Fridays"
    assert not marker.exists()
    seen = next(m for m in model.received[-1] if isinstance(m, ToolMessage))
    assert seen.content == "[spawn error: denied — rejected by a person: not on Fridays]"
    assert state["status"] == "done"


def test_edit_runs_the_changed_command_and_the_model_sees_it(tmp_path: Path) -> None:
    """An edit replaces the call's command in the model's reply, and the edited one runs."""
    agent, model, config = start([calls_reply("echo original"), answer("ok")], tmp_path, approval="always")
    state = agent.invoke(Command(resume={"action": "edit", "command": "echo edited"}), config)
    model.assert_done()
    [result] = tool_results(state)
    assert result.stdout == "edited\n"
    reply = next(m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert reply.tool_calls[0]["args"]["command"] == "echo edited"
    assert len([m for m in state["messages"] if isinstance(m, AIMessage)]) == 2  # replaced, not added


def test_an_unreadable_answer_asks_again_instead_of_failing(tmp_path: Path) -> None:
    """A typo in the answer re-asks with the problem named; a good answer then proceeds."""
    agent, model, config = start([calls_reply("echo hi"), answer("ok")], tmp_path, approval="always")
    agent.invoke(Command(resume="maybe"), config)
    [pending] = agent.get_state(config).interrupts
    assert "unreadable approval answer" in pending.value["error"]
    state = agent.invoke(Command(resume="yes"), config)
    model.assert_done()
    assert tool_results(state)[0].stdout == "hi\n"


def test_a_deny_rule_answers_without_asking_and_routes_to_the_model(tmp_path: Path) -> None:
    """deny -> spawn_error/denied, no interrupt, back to the model (not escalate)."""
    marker = tmp_path / "ran"
    steps = [calls_reply(f"touch {marker}"), answer("understood")]
    model = ScriptedChatModel(steps)
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), rules=("deny:touch *",)))
    state = agent.invoke({"messages": [HumanMessage("task")]})
    model.assert_done()
    [result] = tool_results(state)
    assert result.spawn_error == "denied"
    assert "denied by rule 'touch *'" in (result.detail or "")
    assert not marker.exists()
    assert state["status"] == "done"


def test_a_batch_runs_allowed_calls_and_refuses_denied_ones(tmp_path: Path) -> None:
    """Per-call decisions in one reply: the allowed call runs, the denied one is answered."""
    model = ScriptedChatModel([calls_reply("echo fine", "touch nope"), answer("ok")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), rules=("deny:touch *",)))
    state = agent.invoke({"messages": [HumanMessage("task")]})
    results = tool_results(state)
    assert sorted((r.command, r.outcome) for r in results) == [("echo fine", "ok"), ("touch nope", "spawn_error")]


def test_repeating_a_denied_command_replans(tmp_path: Path) -> None:
    """The model must choose another way: the same denied command twice asks for a new plan."""
    steps = [calls_reply("touch x"), calls_reply("touch x"), answer("giving up")]
    model = ScriptedChatModel(steps)
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), rules=("deny:touch *",)))
    state = agent.invoke({"messages": [HumanMessage("task")]})
    model.assert_done()
    assert state["replans"] == 1


def test_a_refusal_beside_an_environment_fault_is_not_escalated_nor_run_again(tmp_path: Path) -> None:
    """`denied` is a refusal, not an environment fault: the person is asked about the timeout
    alone, and the answer retry re-runs that call only; the refused one keeps its answer."""
    marker = tmp_path / "ran"
    reply = AIMessage(content="", tool_calls=[call("sleep 5", timeout=0.2), call(f"touch {marker}")])
    agent, _model, config = start([reply, answer("ok")], tmp_path, rules=("deny:touch *",))
    [pending] = agent.get_state(config).interrupts
    assert [fault["kind"] for fault in pending.value["faults"]] == ["timeout"]
    assert "touch" not in pending.value["summary"]
    state = agent.invoke(Command(resume="retry"), config)
    assert agent.get_state(config).interrupts  # the timeout again: asked again
    outcomes = sorted((r.command, r.spawn_error) for r in tool_results(state))
    assert outcomes == [("sleep 5", "timeout"), (f"touch {marker}", "denied")]
    assert agent.get_state(config).values["attempt_serial"] == 1  # one retry ran, without the refused call
    assert not marker.exists()


def test_approval_never_still_denies(tmp_path: Path) -> None:
    """Mode never skips questions but deny rules still hold."""
    model = ScriptedChatModel([
        calls_reply("sudo true"), AIMessage(content="", tool_calls=[call("touch y")]), answer("ok"),
    ])
    config = AgentConfig(workdir=str(tmp_path), approval="never", rules=("deny:touch *",))
    state = build_graph(model=model, config=config).invoke({"messages": [HumanMessage("task")]})
    outcomes = [(r.command, r.spawn_error) for r in tool_results(state)]
    assert outcomes[1] == ("touch y", "denied")
    assert outcomes[0][1] != "denied"


@pytest.mark.parametrize(("answer_value", "action"), [
    ("approve", "approve"), (True, "approve"), ("no", "reject"), (False, "reject"),
    ({"action": "reject", "message": "m"}, "reject"), ({"action": "edit", "command": "ls"}, "edit"),
])
def test_answers_are_read_in_their_documented_forms(answer_value: Any, action: str) -> None:
    """Strings, booleans and dicts all map to a verdict."""
    assert read_verdict(answer_value).action == action


@pytest.mark.parametrize("command", [5, None, "", "   ", ["ls"], "echo \ud800"])
def test_an_edit_whose_command_is_not_text_is_unreadable(command: Any) -> None:
    """A number is not a command to run (it was once run as `5`), nor is text that cannot be
    encoded for the shell."""
    with pytest.raises(ValueError, match="unreadable approval answer"):
        read_verdict({"action": "edit", "command": command})


def test_an_edit_for_several_calls_must_name_the_call() -> None:
    """One edit cannot apply to a batch; a dict by call id can."""
    with pytest.raises(ValueError, match="keyed by call_id"):
        read_verdicts({"action": "edit", "command": "ls"}, ["a", "b"])
    verdicts = read_verdicts({"a": "approve", "b": {"action": "edit", "command": "ls"}}, ["a", "b"])
    assert (verdicts["a"].action, verdicts["b"].command) == ("approve", "ls")


def test_an_edit_beside_a_malformed_call_keeps_tool_call_ids_unique(tmp_path: Path) -> None:
    """The edited reply is rebuilt from its real calls only: no duplicate id reaches a provider."""
    reply = AIMessage(
        content="", tool_calls=[{"name": "bash", "args": {"command": "sudo true"}, "id": "c_ok"}],
        invalid_tool_calls=[{"name": "bash", "args": "{bad", "id": "c_bad", "error": "bad json",
                             "type": "invalid_tool_call"}],
    )
    agent, _, config = start([reply, answer("ok")], tmp_path)
    state = agent.invoke(Command(resume={"action": "edit", "command": "echo edited"}), config)
    edited = next(m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert [c["id"] for c in edited.tool_calls] == ["c_ok"]
    assert [c["id"] for c in edited.invalid_tool_calls] == ["c_bad"]
    assert sorted(m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)) == ["c_bad", "c_ok"]


def test_each_call_is_checked_once_per_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`agent` checks each call once; the edge after it and `approve` (even when re-run on resume
    after the question) use that check instead of asking the policy again."""
    from bashgraph.tools.safety.policy import Policy

    seen: list[str] = []
    decide = Policy.decide

    def counting(self: Policy, command: str, cwd: str | None = None) -> Any:
        seen.append(command)
        return decide(self, command, cwd)

    monkeypatch.setattr(Policy, "decide", counting)
    marker = tmp_path / "ran"
    agent, model, config = start([calls_reply("echo hi", f"sudo touch {marker}"), answer("done")], tmp_path)
    assert agent.get_state(config).next == ("approve",)
    state = agent.invoke(Command(resume="reject"), config)
    model.assert_done()
    assert sorted(seen) == sorted(["echo hi", f"sudo touch {marker}"])
    assert sorted(r.outcome for r in tool_results(state)) == ["ok", "spawn_error"]


def test_a_stored_check_is_used_only_for_the_command_it_checked(tmp_path: Path) -> None:
    """A call changed after its check (same id), another directory or another policy: checked again."""
    from bashgraph.graph.checks import Checker
    from bashgraph.tools.safety.policy import Policy, Rule

    checker = Checker(Policy([Rule("rm *", "deny")], workdir=str(tmp_path)))
    original = call("echo hi", id="c1")
    checks = checker.check_calls([original], None)
    assert checker.check_of(original, None, checks) is checks["calls"]["c1"]
    edited = call("rm -rf x", id="c1")
    assert checker.check_of(edited, None, checks)["action"] == "deny"  # type: ignore[index]
    assert checker.check_of(original, "sub", checks) is not checks["calls"]["c1"]
    other = Checker(Policy([Rule("echo *", "deny")], workdir=str(tmp_path)))
    assert other.check_of(original, None, checks)["action"] == "deny"  # type: ignore[index]
