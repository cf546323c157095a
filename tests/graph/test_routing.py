"""Pure routing decisions: every branch from structured results and counters alone."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from bashgraph.graph.config import AgentConfig
from bashgraph.graph.routing import decide_after_tools, evidence_line, next_after_route
from bashgraph.graph.state import AgentState
from bashgraph.tools.failures import KINDS
from bashgraph.tools.results import (
    CommandResult,
    Outcome,
    SpawnErrorKind,
    args_error,
    spawn_failure,
)

CONFIG = AgentConfig(replan_after=3, max_args_errors=2, max_spawn_retries=2, max_replans=1)


def ok(command: str = "true") -> CommandResult:
    return CommandResult(Outcome.OK, command, exit_code=0)


def failed(command: str = "false", code: int = 1, stderr: str = "") -> CommandResult:
    return CommandResult(Outcome.EXIT_ERROR, command, exit_code=code, stderr=stderr)


def spawn(kind: SpawnErrorKind, command: str = "x") -> CommandResult:
    return spawn_failure(kind, command, "detail")


def test_success_resets_every_counter() -> None:
    """An all-ok batch goes back to the model and clears streaks and history."""
    state: AgentState = {"exit_streak": 2, "args_errors": 1, "spawn_retries": 1,
                         "failures": [{"command": "a", "outcome": "exit_error", "code": "1", "evidence": ""}]}
    decision = decide_after_tools([ok()], state, CONFIG)
    assert decision.hop == "agent"
    assert (decision.counters.exit_streak, decision.counters.args_errors) == (0, 0)
    assert decision.counters.spawn_retries == 0
    assert decision.failures == []


def test_exit_error_is_an_observation_for_the_model() -> None:
    """One exit-code failure goes to the model and starts a streak."""
    decision = decide_after_tools([failed("grep x f")], {}, CONFIG)
    assert decision.hop == "agent"
    assert decision.counters.exit_streak == 1
    assert decision.failures[0]["code"] == "1"


def test_exit_streak_reaching_the_limit_replans() -> None:
    """The third exit-code failure in a row asks for a new plan."""
    decision = decide_after_tools([failed("c")], {"exit_streak": 2}, CONFIG)
    assert decision.hop == "replan"
    assert "3 failed commands in a row" in (decision.reason or "")


def test_same_command_failing_the_same_way_twice_replans() -> None:
    """A repeat is caught on the second try, before the streak limit."""
    first = decide_after_tools([failed("ls /nope", 2)], {}, CONFIG)
    second = decide_after_tools([failed("ls /nope", 2)], {"failures": first.failures, "exit_streak": 1}, CONFIG)
    assert second.hop == "replan"
    assert "same command" in (second.reason or "")


def test_same_command_with_a_different_exit_code_is_not_a_repeat() -> None:
    """Different evidence is progress, not a loop."""
    first = decide_after_tools([failed("make", 2)], {}, CONFIG)
    second = decide_after_tools([failed("make", 1)], {"failures": first.failures, "exit_streak": 1}, CONFIG)
    assert second.hop == "agent"


def test_replan_budget_spent_ends_the_run() -> None:
    """After max_replans, another replan-worthy batch fails the run instead of looping."""
    decision = decide_after_tools([failed("c")], {"exit_streak": 2, "replans": 1}, CONFIG)
    assert (decision.hop, decision.status) == ("__end__", "failed")
    assert "no progress" in (decision.reason or "")


def test_args_error_goes_back_until_the_budget_is_spent() -> None:
    """Invalid arguments are corrected by the model, up to max_args_errors in a row."""
    first = decide_after_tools([args_error("'command' is required")], {}, CONFIG)
    assert (first.hop, first.counters.args_errors) == ("agent", 1)
    second = decide_after_tools([args_error("'command' is required")], {"args_errors": 1}, CONFIG)
    assert (second.hop, second.status) == ("__end__", "failed")


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_goes_where_the_taxonomy_says(kind: SpawnErrorKind) -> None:
    """The route in each kind's entry (and in the docs' table of kinds) is the one `route` takes."""
    assert decide_after_tools([spawn(kind)], {}, CONFIG).hop == KINDS[kind].route


@pytest.mark.parametrize("kind", [kind for kind, entry in KINDS.items() if entry.transient])
def test_transient_spawn_error_retries_while_budget_lasts(kind: SpawnErrorKind) -> None:
    """Transient faults are re-run automatically, then escalated."""
    assert decide_after_tools([spawn(kind)], {}, CONFIG).hop == "retry"
    assert decide_after_tools([spawn(kind)], {"spawn_retries": 1}, CONFIG).hop == "retry"
    assert decide_after_tools([spawn(kind)], {"spawn_retries": 2}, CONFIG).hop == "escalate"


@pytest.mark.parametrize("kind", [kind for kind, entry in KINDS.items() if entry.route == "escalate"])
def test_non_transient_spawn_errors_escalate_at_once(kind: SpawnErrorKind) -> None:
    """Timeouts, missing binaries, permissions and interruptions never auto-retry."""
    assert decide_after_tools([spawn(kind)], {}, CONFIG).hop == "escalate"


def test_denied_goes_to_the_model_not_to_escalate() -> None:
    """A refused command never ran: the model must choose another way."""
    decision = decide_after_tools([spawn(SpawnErrorKind.DENIED, "rm -rf /")], {}, CONFIG)
    assert decision.hop == "agent"


def test_denied_beside_a_transient_fault_neither_blocks_nor_joins_the_retry() -> None:
    """A refusal in the batch is no environment fault: the transient one is retried alone."""
    batch = [spawn(SpawnErrorKind.DENIED, "rm x"), spawn(SpawnErrorKind.RESOURCE, "make")]
    assert decide_after_tools(batch, {}, CONFIG).hop == "retry"


def test_the_same_denied_command_twice_replans() -> None:
    """The model asking again for what was refused is a loop: a re-plan breaks it."""
    first = decide_after_tools([spawn(SpawnErrorKind.DENIED, "rm x")], {}, CONFIG)
    second = decide_after_tools([spawn(SpawnErrorKind.DENIED, "rm x")], {"failures": first.failures}, CONFIG)
    assert (first.hop, second.hop) == ("agent", "replan")


def test_worst_outcome_of_a_mixed_batch_wins() -> None:
    """An environment fault anywhere in a parallel batch escalates; exit errors still count."""
    batch = [ok(), failed("false"), spawn(SpawnErrorKind.TIMEOUT)]
    decision = decide_after_tools(batch, {}, CONFIG)
    assert decision.hop == "escalate"
    assert decision.counters.exit_streak == 1
    assert [f["outcome"] for f in decision.failures] == ["exit_error", "spawn_error"]


def test_an_args_error_outranks_a_repeated_exit_error_beside_it() -> None:
    """Args error > exit error: the batch goes back to the model to fix the call, and the
    exit streak still counts toward the next re-plan."""
    repeated = failed("grep x f")
    first = decide_after_tools([repeated], {}, CONFIG)
    state: AgentState = {"failures": first.failures, "exit_streak": first.counters.exit_streak}
    decision = decide_after_tools([args_error("bad"), repeated], state, CONFIG)
    assert decision.hop == "agent"
    assert decision.counters.exit_streak == 2


def test_a_transient_fault_beside_a_fatal_one_escalates() -> None:
    """Retrying cannot help when another call of the batch needs a person."""
    batch = [spawn(SpawnErrorKind.RESOURCE), spawn(SpawnErrorKind.NOT_FOUND)]
    assert decide_after_tools(batch, {}, CONFIG).hop == "escalate"


def test_failure_history_is_bounded() -> None:
    """Only the newest failure_history failures are kept in state."""
    config = AgentConfig(failure_history=3, replan_after=100)
    state: AgentState = {}
    for i in range(6):
        decision = decide_after_tools([failed(f"cmd{i}")], state, config)
        state = {"failures": decision.failures, "exit_streak": decision.counters.exit_streak}
    assert [f["command"] for f in state["failures"]] == ["cmd3", "cmd4", "cmd5"]


def test_evidence_prefers_the_last_stderr_line() -> None:
    """The re-plan listing shows the most telling line."""
    assert evidence_line(failed(stderr="warning\nls: cannot access '/nope'\n")) == "ls: cannot access '/nope'"
    assert evidence_line(spawn(SpawnErrorKind.TIMEOUT)) == "detail"


def test_route_edge_refuses_a_missing_hop() -> None:
    """An inconsistent state is an error, not a silent default."""
    with pytest.raises(ValueError, match="next hop"):
        next_after_route({})


def test_agent_edge_skips_approve_only_when_every_call_is_allowed() -> None:
    """No rule matched -> straight to tools; any ask or deny -> approve; no calls -> end."""
    from langchain_core.messages import AIMessage

    from bashgraph.graph.checks import Checker
    from bashgraph.graph.routing import next_after_agent
    from bashgraph.graph.testing import answer, calls_reply
    from bashgraph.tools.safety.policy import Policy, Rule

    checker = Checker(Policy([Rule("sudo *", "ask"), Rule("rm *", "deny")]))

    def hop(message: AIMessage) -> str:
        return next_after_agent({"messages": [message]}, checker)

    assert hop(calls_reply("ls", "echo hi")) == "tools"
    assert hop(calls_reply("ls", "sudo reboot")) == "approve"
    assert hop(calls_reply("rm x")) == "approve"
    assert hop(answer("done")) == "__end__"
    assert next_after_agent({"messages": [calls_reply("ls")]}) == "approve"  # no policy given: always check


CLEAN_START_STATES: list[AgentState] = [
    {},
    {"exit_streak": 2, "args_errors": 1, "spawn_retries": 1, "status": "running", "reason": "re-plan",
     "failures": [{"command": "a", "outcome": "exit_error", "code": "1", "evidence": ""}]},
    {"exit_streak": 0, "args_errors": 0, "spawn_retries": 0, "failures": [], "status": "running", "reason": None},
]


def test_a_clean_batch_skips_route_with_the_values_route_would_write() -> None:
    """`tools` settles an all-ok batch itself: the same counters, history, status and reason as
    `route` decides for it, writing only what changes, and the hop back to `agent`."""
    from bashgraph.graph.routing import after_clean_batch, next_after_tools

    for state in CLEAN_START_STATES:
        decision = decide_after_tools([ok(), ok("ls")], state, CONFIG)
        routed = {**state, "next_hop": decision.hop, **asdict(decision.counters), "failures": decision.failures,
                  "status": decision.status, "reason": decision.reason}
        settled = {**state, **after_clean_batch(state)}
        defaults = {"exit_streak": 0, "args_errors": 0, "spawn_retries": 0, "failures": [], "reason": None,
                    "status": "running"}
        assert {**defaults, **settled} == {**defaults, **routed}
        assert next_after_tools(settled) == "agent"  # type: ignore[arg-type]
    assert after_clean_batch(CLEAN_START_STATES[2]) == {"next_hop": "agent"}  # nothing else to write
    assert after_clean_batch({**CLEAN_START_STATES[2], "next_hop": "agent"}) == {}  # nothing at all


def test_a_batch_with_any_failure_goes_to_route() -> None:
    """Only `ok` answers count as clean: a denied answer from `approve` sends the batch to `route`."""
    from langchain_core.messages import ToolMessage

    from bashgraph.graph.routing import batch_is_clean, next_after_tools
    from bashgraph.graph.testing import calls_reply

    reply = calls_reply("ls", "rm x")
    denied = spawn(SpawnErrorKind.DENIED, "rm x")
    answered = ToolMessage("denied", tool_call_id="c", artifact=denied.to_dict(), status="error")
    fine = ToolMessage("ok", tool_call_id="d", artifact=ok().to_dict())
    assert batch_is_clean({"messages": [reply, fine]})
    assert not batch_is_clean({"messages": [reply, answered, fine]})
    assert next_after_tools({"next_hop": "route"}) == "route"
    assert next_after_tools({}) == "route"


# -- escalate: its policy, and where a person's answer goes ------------------------------------
SUMMARY = "`make`: timeout (timeout after 1s)"


@pytest.mark.parametrize(("answer", "hop"), [
    ("retry", "retry"), (" Retry ", "retry"), ({"action": "retry"}, "retry"),
    ("skip", "agent"), ({"action": "skip"}, "agent"),
    ("abort", "__end__"), ({"action": "ABORT"}, "__end__"),
    ("use /usr/bin/make", "agent"), ({"action": "hint", "hint": "try gmake"}, "agent"),
    ({"action": "nonsense", "hint": "h"}, "agent"), ("", "agent"),
])
def test_a_persons_answer_picks_the_hop(answer: object, hop: str) -> None:
    """retry → `retry`; skip and any hint → the model; abort → the end."""
    from bashgraph.graph.routing import ESCALATE_EDGES, decide_on_answer

    decision = decide_on_answer(answer, SUMMARY)
    assert decision.hop == hop
    assert decision.hop in ESCALATE_EDGES


def test_an_answer_writes_what_its_hop_needs() -> None:
    """retry and the model get a fresh retry budget; the model is told what happened; abort ends
    the run with the fault named."""
    from bashgraph.graph.routing import decide_on_answer

    assert decide_on_answer("retry", SUMMARY).update == {"spawn_retries": 0}
    skipped = decide_on_answer("skip", SUMMARY).update
    hinted = decide_on_answer({"action": "hint", "hint": "try gmake"}, SUMMARY).update
    assert skipped["spawn_retries"] == hinted["spawn_retries"] == 0
    assert SUMMARY in skipped["messages"][0].content
    assert "try gmake" in hinted["messages"][0].content
    aborted = decide_on_answer("abort", SUMMARY).update
    assert aborted == {"status": "aborted", "reason": f"aborted by a person after: {SUMMARY}"}


def test_the_ask_policy_leaves_the_decision_to_a_person() -> None:
    from bashgraph.graph.routing import decide_escalation

    assert decide_escalation({}, AgentConfig(on_environment_error="ask"), SUMMARY) is None


def test_the_stop_policy_ends_the_run_as_an_environment_fault() -> None:
    from bashgraph.graph.routing import decide_escalation

    decision = decide_escalation({}, AgentConfig(on_environment_error="stop"), SUMMARY)
    assert decision is not None
    assert (decision.hop, decision.update) == (
        "__end__", {"status": "environment_fault", "reason": f"environment fault: {SUMMARY}"})


def test_the_model_policy_tells_the_model_once() -> None:
    """The first time the model is told; the same fault again ends the run (it is looping)."""
    from bashgraph.graph.routing import decide_escalation

    config = AgentConfig(on_environment_error="model")
    first = decide_escalation({}, config, SUMMARY)
    assert first is not None
    assert (first.hop, first.update["environment_told"]) == ("agent", SUMMARY)
    assert SUMMARY in first.update["messages"][0].content
    again = decide_escalation({"environment_told": SUMMARY}, config, SUMMARY)
    assert again is not None
    assert (again.hop, again.update["status"]) == ("__end__", "environment_fault")
    other = decide_escalation({"environment_told": SUMMARY}, config, "`ls`: not_found (x)")
    assert other is not None
    assert other.hop == "agent"


def test_every_hop_a_router_may_answer_is_a_drawn_edge() -> None:
    """The labelled edges name exactly the hops the decisions return (the drawing shows them all)."""
    from typing import get_args

    from bashgraph.graph.routing import ESCALATE_EDGES, ROUTE_EDGES, EscalateHop
    from bashgraph.graph.state import Hop

    assert set(ESCALATE_EDGES) == set(get_args(EscalateHop))
    assert set(ROUTE_EDGES) == set(get_args(Hop))
