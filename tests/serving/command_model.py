"""A model for many conversations at once: the scripted server's wire format, without a script.

`FakeOpenAIServer` plays one script in arrival order, which only fits one conversation at a
time. `CommandModel` answers each request from the request alone, so any number of threads can
run side by side (two workers, the load benchmark):

* the last user message of the form `run <n>: <command>` (bashgraph adds messages of its own
  after it, such as an environment fault's note) — the model asks for `<command>` (one bash
  call) until the conversation holds `<n>` tool results after that message, then answers
  `done: <the last result's first line>`.

Every reply has an id of its own (the journal keys a call by its reply's id and its call id).
"""

from __future__ import annotations

import re

from tests.support.openai_script import RecordedRequest, Step, text, tool_call
from tests.support.openai_server import FakeOpenAIServer

_ASK = re.compile(r"run (\d{1,4}): (.{1,2000})", re.DOTALL)


def task(command: str, times: int = 1) -> dict[str, list[dict[str, str]]]:
    """The run input that makes the model ask for `command` `times` times."""
    return {"messages": [{"role": "user", "content": f"run {times}: {command}"}]}


class CommandModel(FakeOpenAIServer):
    """Answers every chat request from its messages (see the module docstring)."""

    def _receive_chat(self, request: RecordedRequest) -> tuple[int, Step] | None:
        with self._lock:
            self._requests.append(request)
            self._next += 1
            return self._next, _reply(request.messages)


def _reply(messages: list[dict[str, object]]) -> Step:
    asks = [(i, m) for i, m in enumerate(messages)
            if m.get("role") == "user" and _ASK.fullmatch(str(m.get("content", "")))]
    if not asks:
        return text("no task")
    start, message = asks[-1]
    asked = _ASK.fullmatch(str(message.get("content", "")))
    assert asked is not None
    results = [m for m in messages[start:] if m.get("role") == "tool"]
    if len(results) < int(asked.group(1)):
        return tool_call("bash", {"command": asked.group(2)})
    first_line = str(results[-1].get("content", "")).split("\n", 1)[0] if results else ""
    return text(f"done: {first_line[:200]}")
