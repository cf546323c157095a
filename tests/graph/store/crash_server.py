"""A fork server (see tests/graph/cli/forkserver.py) whose `bashgraph` commands can die at a chosen write.

Each command is `bashgraph.graph.cli.main(argv)` in a fork, with two test hooks from the
request's environment:

* the model is a scripted one that decides from the conversation alone (a resumed process
  replies as the dead one would have): run `CRASH_COMMANDS` one per turn, then answer "done".
  Each command appends a line to `count-N` in the workdir, so a second run shows.
* `CRASH_AT=N:before|after` makes the process `os._exit(9)` just before or just after its N-th
  durable write: every checkpoint `put` / `put_writes` of the four LangGraph savers and every
  journal `start` / `finish`. `CRASH_LOG=FILE` gets one line per write, `KIND STEP`, written
  before the write itself (the line of the write it died at is there).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bashgraph.graph import models
from bashgraph.graph.store.journal import PostgresJournal, SqliteJournal
from bashgraph.graph.testing import ScriptedChatModel
from tests.graph.cli import forkserver

CRASH_COMMANDS = 2
CRASH_EXIT = 9
#: (class, method, kind as logged)
WRITES: tuple[tuple[type[Any], str, str], ...] = (
    (SqliteSaver, "put", "put"), (SqliteSaver, "put_writes", "put_writes"),
    (AsyncSqliteSaver, "aput", "put"), (AsyncSqliteSaver, "aput_writes", "put_writes"),
    (PostgresSaver, "put", "put"), (PostgresSaver, "put_writes", "put_writes"),
    (AsyncPostgresSaver, "aput", "put"), (AsyncPostgresSaver, "aput_writes", "put_writes"),
    (SqliteJournal, "start", "journal_start"), (SqliteJournal, "finish", "journal_finish"),
    (PostgresJournal, "start", "journal_start"), (PostgresJournal, "finish", "journal_finish"),
)


def reply(workdir: str) -> Any:
    def step(messages: list[BaseMessage]) -> AIMessage:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done >= CRASH_COMMANDS:
            return AIMessage(content="done")
        command = f"echo run >> {workdir}/count-{done + 1}"
        call = ToolCall(name="bash", args={"command": command}, id=f"c{done + 1}", type="tool_call")
        return AIMessage(content="", tool_calls=[call])

    return step


def install(env: dict[str, str]) -> None:
    """The two hooks (module doc), in this fork only."""
    workdir = env["BASHGRAPH_WORKDIR"]
    # The public name, which the CLI looks up (the factory module's own is not used by it).
    setattr(models, "make_chat_model",  # noqa: B010 (patching on purpose, in the fork)
            lambda config, **_: ScriptedChatModel([reply(workdir)] * 10))
    at, _, when = env.get("CRASH_AT", "0:after").partition(":")
    crash_at, log = int(at), env.get("CRASH_LOG")
    count = [0]

    def note(kind: str, args: tuple[Any, ...]) -> int:
        count[0] += 1
        if log:
            step = args[2].get("step") if kind == "put" and len(args) > 2 else ""
            with open(log, "a") as file:
                file.write(f"{kind} {step}\n")
        if count[0] == crash_at and when == "before":
            os._exit(CRASH_EXIT)
        return count[0]

    def after(number: int) -> None:
        # By the write's number: async writes overlap, the count may have moved on meanwhile.
        if number == crash_at and when == "after":
            os._exit(CRASH_EXIT)

    for cls, name, kind in WRITES:
        original = getattr(cls, name)
        if name in ("aput", "aput_writes"):
            async def wrapped_async(self: Any, *args: Any, _o: Any = original, _k: str = kind,
                                    **kwargs: Any) -> Any:
                number = note(_k, args)
                result = await _o(self, *args, **kwargs)
                after(number)
                return result

            setattr(cls, name, wrapped_async)
        else:
            def wrapped(self: Any, *args: Any, _o: Any = original, _k: str = kind,
                        **kwargs: Any) -> Any:
                number = note(_k, args)
                result = _o(self, *args, **kwargs)
                after(number)
                return result

            setattr(cls, name, wrapped)


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            install(request["env"])
            os._exit(forkserver.run_command(request))
        forkserver.reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        forkserver.reply({"code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
