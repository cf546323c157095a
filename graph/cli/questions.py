"""The questions a paused thread asks a person, in words: what happened, the evidence, the
choices and the default, each said once.

Two kinds exist (their payloads are built by the graph): `environment_error` from `escalate`
(graph/recovery.py) and `approval` from `approve` (graph/approval.py). Any other payload is
shown as it is and answered with free text.

Every line is passed through `one_line`: what the model wrote (a command with an escape sequence
or a line break in it) is shown with visible symbols, exactly one line per item, so the person
sees what will run.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from bashgraph.graph.cli.words import SPAWN_WORDS
from bashgraph.tools.safety import one_line

EDIT_EXAMPLE = json.dumps({"action": "edit", "command": "..."})
#: Lines of each output stream shown as evidence.
TAIL_LINES = 3
#: What each choice does, in the words a person reads.
CHOICE_WORDS = {
    "retry": "run the command again (after you fixed what it needs)",
    "skip": "go on without it; the model is told it was skipped",
    "abort": "stop the thread",
    "approve": "run it",
    "reject": "do not run it; the model is told",
    "edit": "run a command you type instead",
}
#: What Enter answers on a terminal: re-running a command that was allowed to run once, and
#: never running a command a rule held back.
DEFAULTS = {"environment_error": "retry", "approval": "reject"}


def summary(question: Mapping[str, Any]) -> str:
    """One line: what is being asked (the reason of a paused stop in --json)."""
    if question.get("kind") == "approval":
        commands = ", ".join(f"`{r.get('command')}`" for r in question.get("requests") or [])
        return one_line(f"approval needed for {commands}")
    return one_line(str(question.get("summary") or question.get("kind") or dict(question)))


def default(question: Mapping[str, Any]) -> str | None:
    """The answer Enter gives on a terminal, if the question has one."""
    return DEFAULTS.get(str(question.get("kind")))


def lines(question: Mapping[str, Any], *, interactive: bool = False) -> list[str]:
    """What happened, the evidence, the choices and (when a person answers here, on a
    terminal) the default: one line each, made visible."""
    return [one_line(line) for line in _lines(question, interactive)]


def _lines(question: Mapping[str, Any], interactive: bool) -> Iterable[str]:
    kind = question.get("kind")
    if kind == "approval":
        yield from _approval(question)
    elif kind == "environment_error":
        yield from _faults(question)
    else:
        yield f"question: {summary(question)}"
    if question.get("error"):
        yield f"Your last answer was not understood: {question['error']}"
    yield from _choices(question)
    if interactive and default(question):
        yield f"Enter alone answers {default(question)}."


def _approval(question: Mapping[str, Any]) -> Iterable[str]:
    for request in question.get("requests") or []:
        yield f"Approval needed to run `{request.get('command')}`"
        reason, rule = str(request.get("reason") or ""), str(request.get("rule") or "")
        if rule and rule not in reason:  # a rule's reason usually names its pattern already
            reason = f"{reason or 'a rule asks'} (rule {rule})"
        if reason:
            yield f"  why: {reason}"


def _faults(question: Mapping[str, Any]) -> Iterable[str]:
    for fault in question.get("faults") or []:
        yield f"`{fault.get('command')}` could not run to its end: {_what(fault)}"
        for name in ("stderr", "stdout"):
            tail = str(fault.get(f"{name}_tail") or "").rstrip("\n").split("\n")[-TAIL_LINES:]
            if any(line.strip() for line in tail):
                yield f"  {name}, last lines:"
                yield from (f"    {line}" for line in tail)


def _what(fault: Mapping[str, Any]) -> str:
    """The fault's own one-line detail ("timeout after 30s — process group killed", "shell not
    found: ..."), which says the kind in words; the kind alone when there is no detail."""
    kind = str(fault.get("kind") or "unknown")
    return str(fault.get("detail") or "") or SPAWN_WORDS.get(kind, kind.replace("_", " "))


def _choices(question: Mapping[str, Any]) -> Iterable[str]:
    choices = list(question.get("choices") or [])
    if not choices:
        yield "Answer with any text."
        return
    width = max(len(choice) for choice in choices)
    yield "Choices:"
    for choice in choices:
        yield f"  {choice.ljust(width)}  {CHOICE_WORDS.get(choice, '')}".rstrip()
    if question.get("kind") == "environment_error":
        yield "  or type a hint for the model"


def answer_words(answer: Any) -> str:
    """An answer as a person reads it: `approve`, `reject, telling the model: …`, `edit: run
    `ls -la` instead`, a hint as written; answers by call id each after their id."""
    if not isinstance(answer, Mapping):
        return str(answer)
    action = str(answer.get("action") or "")
    if action == "edit":
        return f"edit: run `{answer.get('command')}` instead"
    if action in ("approve", "reject"):
        message = answer.get("message")
        return f"{action}, telling the model: {message}" if message else action
    if answer and "action" not in answer:
        return "; ".join(f"{call_id}: {answer_words(value)}" for call_id, value in answer.items())
    return json.dumps(answer, default=str)


def answer_forms(question: Mapping[str, Any]) -> str:
    """What follows `--answer` in the printed resume command."""
    if question.get("kind") == "approval":
        return f"approve|reject|{shlex.quote(EDIT_EXAMPLE)}"
    if question.get("kind") == "environment_error":
        return "retry|skip|abort|TEXT"
    return "TEXT"


def read_answer(text: str) -> Any:
    """An --answer value: a JSON object (e.g. an edit) when it is one, else the text itself."""
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, dict):
            return value
    return text
