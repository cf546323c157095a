"""Policy checks made once per call: by `agent` when the reply arrives, read by the edge after
`agent` and by `approve`.

A check is a pure function of (policy, command, working directory), so a stored check is reused
only when all three still match: the policy's fingerprint, the directory, and a digest of the
command (a call edited after it was checked, or a reused call id, is checked again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from langchain_core.messages import ToolCall

# Not typing.TypedDict, for the same reason as in graph/state.py (pydantic on Python < 3.12).
from typing_extensions import TypedDict

from bashgraph.tools import CommandResult, SpawnErrorKind, checkable_command, spawn_failure
from bashgraph.tools.safety import Policy


class Check(TypedDict):
    """The policy's answer for one command: allow, ask or deny, with the rule and why."""

    action: str
    rule: str | None
    """The pattern of the rule that decided, if one did."""
    reason: str
    part: str
    """The part of the command the rule matched."""


class StoredCheck(Check):
    digest: str
    """Of the command that was checked."""


class PolicyChecks(TypedDict):
    """The checks of one model reply's calls, keyed by tool-call id (valid calls only)."""

    policy: str
    cwd: str | None
    calls: dict[str, StoredCheck]


class Checker:
    """A policy and its fingerprint: checks calls, and finds the stored check of a call."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        rules = [(r.pattern, r.action, r.reason) for r in policy.rules]
        # Changes when anything that could change a decision changes.
        self.fingerprint = _digest(repr((policy.mode, policy.workdir, policy.home, rules)))

    def check(self, command: str, cwd: str | None) -> Check:
        decision = self.policy.decide(command, cwd)
        pattern = decision.rule.pattern if decision.rule else None
        return Check(action=decision.action, rule=pattern, reason=decision.reason, part=decision.part)

    def check_calls(self, calls: Iterable[ToolCall], cwd: str | None) -> PolicyChecks:
        """Check every valid call once (an invalid one never reaches the rules: it is an args error)."""
        stored: dict[str, StoredCheck] = {}
        for call in calls:
            command = checkable_command(call["args"])
            if command is not None:
                stored[call.get("id") or ""] = StoredCheck(**self.check(command, cwd), digest=_digest(command))
        return PolicyChecks(policy=self.fingerprint, cwd=cwd, calls=stored)

    def check_of(self, call: ToolCall, cwd: str | None, checks: PolicyChecks | None) -> Check | None:
        """The check of `call`: the stored one when it still applies, else made now; None for
        invalid arguments."""
        command = checkable_command(call["args"])
        if command is None:
            return None
        if checks is not None and checks["policy"] == self.fingerprint and checks["cwd"] == cwd:
            stored = checks["calls"].get(call.get("id") or "")
            if stored is not None and stored["digest"] == _digest(command):
                return stored
        return self.check(command, cwd)


#: Commands up to this many characters in all are checked in well under a millisecond, even in
#: the slowest shapes of benchmarks/bench_policy.py; longer ones are checked off the event loop.
CHEAP_CHECK_CHARS = 256


def checks_are_cheap(calls: object) -> bool:
    """True when checking `calls` (a reply's tool calls) cannot take more than about 1 ms."""
    if not isinstance(calls, list):
        return True
    total = 0
    for call in calls:
        args = call.get("args") if isinstance(call, dict) else None
        command = args.get("command") if isinstance(args, dict) else None
        total += len(command) if isinstance(command, str) else 0
    return total <= CHEAP_CHECK_CHARS


def denial_of(call: ToolCall, check: Check | None) -> CommandResult | None:
    """The `denied` result of a call a rule refused, else None."""
    if check is None or check["action"] != "deny":
        return None
    rule = check["rule"] or "policy"
    return spawn_failure(SpawnErrorKind.DENIED, str(call["args"].get("command", "")),
                         f"denied by rule {rule!r}: {check['reason']}")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
