"""Pure routing: which node runs next, decided from structured results and counters only.

Every routing rule of the graph is here: after the model, after `tools`, after `route`, and
where `escalate` goes on its policy or on a person's answer. Nothing here reads a tool's answer
text or does I/O, so every branch is a plain unit test and the `Literal` return types let
LangGraph draw every edge. What a kind of spawn error is (transient, an environment fault or a
refusal) is read from `CommandResult`, which reads the taxonomy in `bashgraph.tools.failures`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

# Not typing.TypedDict: on Python < 3.12 pydantic refuses it (see graph/state.py).
from typing_extensions import TypedDict

from bashgraph.graph.checks import Checker, PolicyChecks
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.models import prompts
from bashgraph.graph.state import (
    FINAL_STATUSES,
    AgentState,
    Failure,
    Hop,
    Messages,
    NextHop,
    RunStatus,
    last_ai_message,
)
from bashgraph.tools import JOB_TOOL_NAMES, CommandResult, Outcome

END: Final = "__end__"


@dataclass(frozen=True)
class Counters:
    """The streak counters after a batch (each resets when its kind of failure is absent)."""

    exit_streak: int = 0
    args_errors: int = 0
    spawn_retries: int = 0


@dataclass(frozen=True)
class RouteDecision:
    """What `route` writes into state: the next hop, the updated counters, and why."""

    hop: Hop
    counters: Counters
    failures: list[Failure] = field(default_factory=list)
    status: RunStatus = "running"
    reason: str | None = None


def failure_of(result: CommandResult) -> Failure:
    """The short record of a failed call kept in state."""
    if result.outcome is Outcome.EXIT_ERROR:
        code = str(result.exit_code)
    elif result.outcome is Outcome.ARGS_ERROR:
        code = "args"
    else:
        code = result.spawn_error.value if result.spawn_error else "spawn"
    return Failure(
        command=result.command, outcome=result.outcome.value, code=code,
        evidence=evidence_line(result),
    )


def evidence_line(result: CommandResult) -> str:
    """The most telling line of a failure: the last stderr line, else detail, else stdout."""
    for text in (result.stderr, result.detail or "", result.stdout):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        if lines:
            return lines[-1][:200]
    return "(no output)"


def is_repeat(failure: Failure, history: list[Failure]) -> bool:
    """The same command already failed the same way (exit code or spawn kind)."""
    return any(
        old["command"] == failure["command"] and old["code"] == failure["code"] for old in history
    )


def decide_after_tools(
    results: list[CommandResult], state: AgentState, config: AgentConfig
) -> RouteDecision:
    """Route one batch of tool results. Worst outcome wins: environment > args > exit > ok."""
    history = list(state.get("failures", []))
    failed = [r for r in results if not r.ok]
    new = [failure_of(r) for r in failed]
    # A repeat counts within its own kind: an args error seen twice says nothing about exits.
    exit_repeat = any(is_repeat(f, history) for f in new if f["outcome"] == Outcome.EXIT_ERROR.value)
    refused_again = any(is_repeat(f, history) for r, f in zip(failed, new, strict=True) if r.refused)
    history = ([] if not new else history + new)[-config.budgets.failure_history :]
    has = {r.outcome for r in results}
    env_faults = [r for r in results if r.environment_fault]
    counters = Counters(
        exit_streak=state.get("exit_streak", 0) + 1 if Outcome.EXIT_ERROR in has else 0,
        args_errors=state.get("args_errors", 0) + 1 if Outcome.ARGS_ERROR in has else 0,
        spawn_retries=state.get("spawn_retries", 0) if env_faults else 0,
    )
    if env_faults:
        return _decide_environment(env_faults, counters, history, config)
    if counters.args_errors >= config.budgets.max_args_errors:
        reason = f"{counters.args_errors} invalid tool calls in a row"
        return RouteDecision(END, counters, history, status="failed", reason=reason)
    if Outcome.ARGS_ERROR in has:
        # Worse than any exit error beside it: the model must fix the call first. The exit
        # streak still counts, so the next batch re-plans if the exits go on.
        return RouteDecision("agent", counters, history)
    streak = counters.exit_streak >= config.budgets.replan_after
    if streak or exit_repeat or refused_again:
        return _decide_replan(state, counters, history, config, streak)
    return RouteDecision("agent", counters, history)


def _decide_environment(
    faults: list[CommandResult], counters: Counters, history: list[Failure], config: AgentConfig
) -> RouteDecision:
    all_transient = all(r.transient for r in faults)
    if all_transient and counters.spawn_retries < config.budgets.max_spawn_retries:
        return RouteDecision("retry", counters, history)
    return RouteDecision("escalate", counters, history)


def _decide_replan(
    state: AgentState, counters: Counters, history: list[Failure], config: AgentConfig,
    streak: bool,
) -> RouteDecision:
    if state.get("replans", 0) >= config.budgets.max_replans:
        reason = f"no progress after {config.budgets.max_replans} re-plans"
        return RouteDecision(END, counters, history, status="failed", reason=reason)
    why = (
        f"{counters.exit_streak} failed commands in a row" if streak
        else "the same command failed the same way twice"
    )
    return RouteDecision("replan", counters, history, reason=why)


def routing_view(state: AgentState, reply_id: str) -> tuple[AgentState, dict[str, Any]]:
    """The state `route` decides from, and the base to remember for this reply's batch.

    A batch is routed once after `tools` and again after each `retry`. Every pass must start
    from the counters as they were before the batch, or a retried batch would count its
    other failures twice (a false re-plan, or "N invalid calls in a row" from one call).
    """
    stored = state.get("route_base")
    if state.get("routed_reply") == reply_id and stored is not None:
        base = dict(stored)
        spawn_retries = state.get("spawn_retries", 0)  # spent on this batch: keep counting
    else:
        base = {k: state.get(k, d) for k, d in (("exit_streak", 0), ("args_errors", 0), ("failures", []))}
        spawn_retries = 0  # a new reply gets a fresh retry budget
    view: AgentState = {**state, **base, "spawn_retries": spawn_retries}  # type: ignore[typeddict-item]
    return view, base


#: Drawn labels of the routed edges: which outcome takes each one (`bashgraph graph`).
AGENT_EDGES: Final = {
    "tools": "every call allowed", "approve": "ask / deny / invalid call", END: "answer / final status",
    "compact": "over budget / too long",
}
TOOLS_EDGES: Final = {"agent": "ok", "route": "exit_error / spawn_error / args_error / denied"}
ROUTE_EDGES: Final = {
    "agent": "exit_error / args_error / denied / ok after retry",
    "replan": "exit_error ×N / repeat",
    "retry": "transient spawn_error",
    "escalate": "other spawn_error / retries spent",
    END: "args_error ×N / no progress after re-plans",
}
ESCALATE_EDGES: Final = {"retry": "answer: retry", "agent": "skip / hint / model told", END: "abort / stop"}


class AgentEdgeView(TypedDict, total=False):
    """What the edge after `agent` reads. LangGraph builds a router's input from the channels its
    input type names, so it copies these few for each decision instead of the whole state.

    A router sees no other key: one that starts reading another field must add it to its view
    (tests/graph/test_build.py lists each view's keys)."""

    messages: Messages
    status: RunStatus
    cwd: str | None
    policy_checks: PolicyChecks | None
    compact_due: dict[str, Any] | None


class HopView(TypedDict, total=False):
    """What the edges after `tools` and `route` read: the hop the node decided."""

    next_hop: NextHop


def next_after_agent(
    state: AgentEdgeView, checker: Checker | None = None
) -> Literal["approve", "tools", "compact", "__end__"]:
    """After the model: stop (answer or final status), or run its calls — through `approve`
    unless the policy allows every one of them (a superstep and a checkpoint saved per step);
    or, when the request would not fit the model's window, `compact` before the call.

    The checks are the ones `agent` stored with the reply (made now only if they no longer apply)."""
    if state.get("status", "running") in FINAL_STATUSES:
        return END
    if state.get("compact_due"):
        return "compact"
    message = last_ai_message(state.get("messages", []))
    if message is None or not (message.tool_calls or message.invalid_tool_calls):
        return END
    # Malformed calls go on too: each one must be answered (with an args error).
    if checker is None or message.invalid_tool_calls:
        return "approve"
    cwd, checks = state.get("cwd"), state.get("policy_checks")
    # Only valid commands reach the rules: an invalid one (too long…) goes on to its args_error.
    for call in message.tool_calls:
        if call["name"] in JOB_TOOL_NAMES:  # they run no command (a background one is a `bash` call)
            continue
        check = checker.check_of(call, cwd, checks)
        if check is None or check["action"] != "allow":
            return "approve"
    return "tools"


def batch_is_clean(state: AgentState) -> bool:
    """Every answer to the newest reply is `ok` (read from the artifacts, never the text)."""
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage):
            return True
        artifact = message.artifact if isinstance(message, ToolMessage) else None
        if isinstance(artifact, dict) and artifact.get("outcome") != Outcome.OK.value:
            return False
    return True


#: The values `route` writes for a clean batch (also the defaults of a new thread).
_CLEAN: Final[dict[str, Any]] = {
    "exit_streak": 0, "args_errors": 0, "spawn_retries": 0, "failures": [], "status": "running", "reason": None,
}


def after_clean_batch(state: AgentState) -> dict[str, Any]:
    """What `tools` writes for a batch whose every result is `ok`: the same values `route`
    decides for such a batch (counters and failure history reset) and the hop straight back to
    `agent`, minus what is already so (a channel not written costs LangGraph nothing to apply
    or save)."""
    changed = {key: value for key, value in _CLEAN.items() if key in state and state[key] != value}  # type: ignore[literal-required]
    if state.get("next_hop") != "agent":
        changed["next_hop"] = "agent"
    return changed


def next_after_tools(state: HopView) -> Literal["agent", "route"]:
    """After `tools`: a clean batch goes straight back to the model; any failure is routed."""
    return "agent" if state.get("next_hop") == "agent" else "route"


def next_after_route(state: HopView) -> Literal["agent", "replan", "retry", "escalate", "__end__"]:
    """After `route`: follow the hop it decided (kept in state so resumes take the same edge)."""
    hop = state.get("next_hop")
    if hop is None or hop == "route":
        raise ValueError("route did not record a next hop; the state is inconsistent")
    return hop


#: A person's answers to an environment fault; any other text is a hint for the model.
ESCALATION_CHOICES: Final = ("retry", "skip", "abort")

EscalateHop = Literal["retry", "agent", "__end__"]


@dataclass(frozen=True)
class EscalateDecision:
    """Where `escalate` sends the run, and what it writes into state on the way."""

    hop: EscalateHop
    update: dict[str, Any]


def decide_escalation(state: AgentState, config: AgentConfig, summary: str) -> EscalateDecision | None:
    """`escalate` on its policy (`on_environment_error`): `stop` and `model` decide at once;
    None means ask a person, whose answer `decide_on_answer` routes."""
    if config.budgets.on_environment_error == "stop":
        return _finish("environment_fault", f"environment fault: {summary}")
    if config.budgets.on_environment_error == "model":
        return _tell_model(state, summary)
    return None


def _tell_model(state: AgentState, summary: str) -> EscalateDecision:
    # Told once: the same fault again means the model is looping on it, so the run stops.
    if state.get("environment_told") == summary:
        return _finish("environment_fault", f"environment fault repeated: {summary}")
    message = HumanMessage(prompts.environment_fault_message(summary))
    return EscalateDecision("agent", {"messages": [message], "environment_told": summary})


def decide_on_answer(answer: Any, summary: str) -> EscalateDecision:
    """Where a person's answer to an environment fault goes: `retry` re-runs the failed calls with
    a fresh retry budget, `abort` ends the run, `skip` and a hint go to the model."""
    action, hint = parse_answer(answer)
    if action == "retry":
        return EscalateDecision("retry", {"spawn_retries": 0})
    if action == "abort":
        return _finish("aborted", f"aborted by a person after: {summary}")
    text = prompts.skipped_message(summary) if action == "skip" else prompts.hint_message(hint)
    return EscalateDecision("agent", {"messages": [HumanMessage(text)], "spawn_retries": 0})


def parse_answer(answer: Any) -> tuple[str, str]:
    """Read a person's answer: "retry" / "skip" / "abort", {"action": ..., "hint": ...}, or a hint."""
    if isinstance(answer, dict):
        action = str(answer.get("action") or "hint").lower()
        return (action if action in ESCALATION_CHOICES else "hint"), str(answer.get("hint") or "")
    text = str(answer).strip()
    return (text.lower(), "") if text.lower() in ESCALATION_CHOICES else ("hint", text)


def _finish(status: RunStatus, reason: str) -> EscalateDecision:
    return EscalateDecision(END, {"status": status, "reason": reason})


def labelled(edge: Callable[[Any], str], labels: Mapping[str, str], view: type[Any]) -> Callable[[Any], str]:
    """`edge` answering with the label of its target, so a drawing can name each branch; its
    input type is `view`, the channels the edge reads."""

    def choose(state: Any) -> str:
        return labels[edge(state)]

    choose.__name__ = edge.__name__
    choose.__annotations__ = {"state": view, "return": str}
    return choose


def inline_forms(choose: Callable[[Any], str]) -> tuple[Callable[[Any], str], Callable[[Any], Awaitable[str]]]:
    """`choose` and an async form of it that decides right where it is awaited, on the event
    loop (graph/build.py's `inline_router` makes the edge of both)."""

    async def achoose(state: Any) -> str:
        return choose(state)

    achoose.__annotations__ = choose.__annotations__  # LangGraph reads the input type from it
    return choose, achoose
