"""The questions a paused thread asks a person, in words: evidence, choices, how to answer.

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

from bashgraph.tools.visible import one_line

EDIT_EXAMPLE = json.dumps({"action": "edit", "command": "..."})


def summary(question: Mapping[str, Any]) -> str:
    """One line: what is being asked."""
    if question.get("kind") == "approval":
        commands = ", ".join(f"`{r.get('command')}`" for r in question.get("requests") or [])
        return one_line(f"approval needed for {commands}")
    return one_line(str(question.get("summary") or question.get("kind") or dict(question)))


def lines(question: Mapping[str, Any]) -> list[str]:
    """The evidence of a question, one line each, made visible."""
    return [one_line(line) for line in _evidence(question)]


def _evidence(question: Mapping[str, Any]) -> Iterable[str]:
    yield f"question: {summary(question)}"
    if question.get("kind") == "approval":
        for request in question.get("requests") or []:
            rule = f" (rule {request['rule']})" if request.get("rule") else ""
            yield f"  `{request.get('command')}`: {request.get('reason')}{rule}"
    for fault in question.get("faults") or []:
        yield f"  `{fault.get('command')}`: {fault.get('kind')} ({fault.get('detail')})"
        for name in ("stderr_tail", "stdout_tail"):
            tail = str(fault.get(name) or "").strip()
            if tail:
                yield f"    {name.removesuffix('_tail')}: {tail.splitlines()[-1]}"
    if question.get("error"):
        yield f"  the last answer was not understood: {question['error']}"
    yield f"  choices: {choices_text(question)}"


def choices_text(question: Mapping[str, Any]) -> str:
    choices = ", ".join(question.get("choices") or [])
    if question.get("kind") == "approval":
        return f"{choices} (edit: give the command to run instead)"
    if question.get("kind") == "environment_error":
        return f"{choices}, or any other text as a hint"
    return "any text"


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
