"""The `approve` node: approval rules before any command runs.

Each call of a model reply is checked by the policy (deny → ask → allow) once, by `agent` when
the reply arrives (graph/checks.py); `approve` uses those checks. Denied calls are
answered at once with `spawn_error/denied` (they never ran). Calls that need a person are put
to one LangGraph `interrupt()` for the whole batch; the answer approves, rejects (with a
message for the model) or edits (a changed command runs instead). `tools` then runs only the
calls that have no answer yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.config import get_stream_writer
from langgraph.types import interrupt

from bashgraph.graph.checks import Check, Checker, denial_of
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.nodes import end_event, pending_calls, to_tool_message
from bashgraph.graph.state import AgentState, last_ai_message
from bashgraph.tools import CommandResult, SpawnErrorKind, spawn_failure
from bashgraph.tools.safety import Policy, load_policy

APPROVAL_CHOICES = ("approve", "reject", "edit")
#: What the model reads for a command a person already rejected in this run.
REPEATED_REJECTION = ("rejected by a person earlier in this run{why}; the same command is not asked "
                      "again: do something else, or finish with what you have")


@dataclass(frozen=True)
class Verdict:
    """A person's (or a rule's) answer for one call."""

    action: str  # "approve" | "reject" | "edit"
    message: str = ""
    command: str = ""
    repeated: bool = False
    """The rejection a person gave earlier in this run, for the same command (not asked again)."""


def make_policy(config: AgentConfig) -> Policy:
    """The policy of an agent: CLI-style rules, an optional file, the defaults, the mode."""
    safety = config.safety
    return load_policy(safety.policy_file, workdir=config.execution.workdir, extra=safety.rules, mode=safety.approval)


class ApprovalNode:
    """Decides, asks and answers; holds no state between runs (the answers live in state)."""

    def __init__(self, config: AgentConfig, checker: Checker) -> None:
        self.config = config
        self.checker = checker

    def __call__(self, state: AgentState) -> dict[str, Any]:
        message = last_ai_message(state.get("messages", []))
        if message is None:
            return {}
        # The checks `agent` made (an invalid call has none: `tools` answers it with an args error).
        cwd, checks = state.get("cwd"), state.get("policy_checks")
        decided = [(call, self.checker.check_of(call, cwd, checks)) for call in pending_calls(message)]
        asked = [(call, d) for call, d in decided if d is not None and d["action"] == "ask"]
        # A command a person rejected in this run is not put to them again unchanged.
        rejected = state.get("rejected") or {}
        remembered = {call.get("id") or "": Verdict("reject", rejected[_command(call)], repeated=True)
                      for call, _ in asked if _command(call) in rejected}
        asked = [(call, d) for call, d in asked if (call.get("id") or "") not in remembered]
        verdicts = (self._ask(asked) if asked else {}) | remembered
        return self._update(message, decided, verdicts, rejected)

    def _ask(self, asked: list[tuple[ToolCall, Check]]) -> dict[str, Verdict]:
        question: dict[str, Any] = {
            "kind": "approval",
            "requests": [approval_request(call, decision) for call, decision in asked],
            "choices": list(APPROVAL_CHOICES),
            "note": 'answer approve, reject, {"action": "reject", "message": ...} or '
                    '{"action": "edit", "command": ...}; or an object of such answers by call_id',
        }
        while True:
            # An unreadable answer asks again (a new interrupt), instead of failing the run.
            try:
                return read_verdicts(interrupt(question), [call.get("id") or "" for call, _ in asked])
            except ValueError as problem:
                question = {**question, "error": str(problem)}

    def _update(
        self, message: AIMessage, decided: list[tuple[ToolCall, Check | None]],
        verdicts: dict[str, Verdict], rejected: dict[str, str],
    ) -> dict[str, Any]:
        answers: list[ToolMessage] = []
        newly = {_command(call): verdicts[call.get("id") or ""].message for call, _ in decided
                 if (v := verdicts.get(call.get("id") or "")) is not None and v.action == "reject" and not v.repeated}
        for call, decision in decided:
            refusal = refusal_of(call, decision, verdicts.get(call.get("id") or ""))
            if refusal is not None:
                get_stream_writer()(end_event(call, refusal))  # shown like every other outcome
                cap = self.config.execution.options.max_output_chars
                answers.append(to_tool_message(call, refusal, cap, message.id or ""))
        edits = {call_id: v.command for call_id, v in verdicts.items() if v.action == "edit"}
        update: list[Any] = answers
        if edits:
            # Same id: add_messages replaces the reply, so the model sees the command that ran.
            # Rebuilt from the real tool_calls only (malformed calls stay in invalid_tool_calls).
            calls = [edited_call(call, edits.get(call.get("id") or "")) for call in message.tool_calls]
            update = [message.model_copy(update={"tool_calls": calls}), *answers]
        result: dict[str, Any] = {"messages": update} if update else {}
        if newly:
            result["rejected"] = {**rejected, **newly}
        return result


def edited_call(call: ToolCall, command: str | None) -> ToolCall:
    """`call` with its command replaced by a person's edit (unchanged when there is none)."""
    if command is None:
        return call
    return ToolCall(name=call["name"], args={**call["args"], "command": command}, id=call.get("id"), type="tool_call")


def approval_request(call: ToolCall, check: Check) -> dict[str, Any]:
    """What a person sees for one call (plain values: it goes into the checkpoint)."""
    return {
        "call_id": call.get("id"), "command": call["args"].get("command"),
        "rule": check["rule"], "reason": check["reason"], "part": check["part"],
    }


def refusal_of(call: ToolCall, check: Check | None, verdict: Verdict | None) -> CommandResult | None:
    """The `denied` result of a call a rule or a person refused, else None (it may run)."""
    denied = denial_of(call, check)
    if denied is not None:
        return denied
    command = _command(call)
    if verdict is not None and verdict.action == "reject":
        why = f": {verdict.message}" if verdict.message else ""
        if verdict.repeated:
            return spawn_failure(SpawnErrorKind.DENIED, command, REPEATED_REJECTION.format(why=why))
        return spawn_failure(SpawnErrorKind.DENIED, command, f"rejected by a person{why}")
    return None


def _command(call: ToolCall) -> str:
    return str(call["args"].get("command", ""))


def read_verdicts(answer: Any, call_ids: list[str]) -> dict[str, Verdict]:
    """Read an answer for the asked calls: one answer for all, or a dict keyed by call id."""
    if isinstance(answer, dict) and answer and set(answer) <= set(call_ids):
        return {call_id: read_verdict(answer.get(call_id, "reject")) for call_id in call_ids}
    verdict = read_verdict(answer)
    if verdict.action == "edit" and len(call_ids) > 1:
        raise ValueError("an edit answers one call: give a dict of answers keyed by call_id")
    return dict.fromkeys(call_ids, verdict)


def _edited_command(command: Any) -> str:
    """The command of an edit: text, not empty, that can be handed to a shell."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError("unreadable approval answer: an edit's command must be a non-empty string, "
                         f"got {_shown(command)}")
    try:
        command.encode()
    except UnicodeEncodeError:
        raise ValueError("unreadable approval answer: an edit's command is not valid UTF-8 text") from None
    return command


def read_verdict(answer: Any) -> Verdict:
    """"approve" / True / "yes", "reject" / False / "no", or a dict with action and details."""
    if isinstance(answer, bool):
        return Verdict("approve" if answer else "reject")
    if isinstance(answer, dict):
        action = str(answer.get("action", "")).lower()
        if action == "edit":
            return Verdict("edit", command=_edited_command(answer.get("command")))
        if action in ("approve", "reject"):
            return Verdict(action, message=str(answer.get("message") or ""))
        raise ValueError(f"unreadable approval answer {_shown(answer)}: the action must be approve, reject or edit")
    text = str(answer).strip().lower()
    if text in ("approve", "approved", "yes", "y"):
        return Verdict("approve")
    if text in ("reject", "rejected", "no", "n"):
        return Verdict("reject")
    raise ValueError(f"unreadable approval answer {_shown(answer)}: answer approve, reject or edit")


def _shown(answer: Any) -> str:
    """An answer as JSON, not as a Python repr: a person reads it at the prompt."""
    return json.dumps(answer, ensure_ascii=False, default=str)
