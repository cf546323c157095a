"""A worker process for the kill -9 tests: runs or resumes one thread, prints a JSON report.

    python worker.py DB THREAD SCENARIO WORKDIR [--resume] [--async]

`--async` runs the thread through the async session (`aopen_session`, `arun`), else the sync one.

Scenarios are scripted models that decide from the conversation alone, so a fresh process that
resumes the thread replies exactly as the killed one would have. Commands leave evidence in
WORKDIR: `counter` / `count-a` / `count-b` get one line per run, `pid` holds the process group
of a command still sleeping (the test kills it when done); `escaped` the pid of a process a
command moved out of its session.

Env `WORKER_KILL_AFTER_FINISH=1` SIGKILLs this process right after the journal records a
result, before LangGraph can checkpoint it: the window between a command's end and its step.

Exit status: 0 finished or paused, 3 thread busy, 4 database error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from bashgraph.graph import AgentConfig, StoreError, ThreadBusyError, aopen_session, open_session
from bashgraph.graph.store.journal import PostgresJournal, SqliteJournal
from bashgraph.graph.testing import ScriptedChatModel
from bashgraph.tools.results import CommandResult

SLOW = "echo run >> {dir}/{name}; echo $$ > {dir}/pid; sleep 30"
FAST = "echo run >> {dir}/{name}; echo {name}-done"
#: Also leaves a process outside its session and group (`setsid`), pid in `escaped`.
ESCAPING = "setsid sleep 31 & echo $! > {dir}/escaped; " + SLOW


def bash(call_id: str, command: str) -> ToolCall:
    return ToolCall(name="bash", args={"command": command}, id=call_id, type="tool_call")


def policy(first_batch: list[ToolCall]) -> Callable[[list[BaseMessage]], AIMessage]:
    """Reply with `first_batch`; once tool results are in, answer with what they said."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if not answers:
            return AIMessage(content="", tool_calls=first_batch)
        return AIMessage(content="saw: " + " | ".join(str(m.content) for m in answers))

    return reply


def scenario(name: str, workdir: str) -> Callable[[list[BaseMessage]], AIMessage]:
    slow = SLOW.format(dir=workdir, name="counter")
    batches = {
        "slow": [bash("c1", slow)],
        "fast": [bash("c1", FAST.format(dir=workdir, name="counter"))],
        "escaping": [bash("c1", ESCAPING.format(dir=workdir, name="counter"))],
        "parallel": [
            bash("ca", FAST.format(dir=workdir, name="count-a")),
            bash("cb", SLOW.format(dir=workdir, name="count-b")),
        ],
    }
    return policy(batches[name])


def kill_after_finish() -> None:
    """Die by SIGKILL as soon as a journal records a result (test hook, see module doc)."""
    for cls in (SqliteJournal, PostgresJournal):
        original = cls.finish

        def finish(self: Any, *args: Any, _original: Any = original) -> None:
            _original(self, *args)
            os.kill(os.getpid(), signal.SIGKILL)

        setattr(cls, "finish", finish)  # noqa: B010 (patching a method on purpose)


def report(state: dict[str, Any], model: ScriptedChatModel) -> dict[str, Any]:
    tools = [m for m in state.get("messages", []) if isinstance(m, ToolMessage)]
    last_call = model.received[-1] if model.received else []
    return {
        "status": state.get("status"),
        "results": [CommandResult.from_dict(m.artifact).to_dict() for m in tools],
        "model_saw": [str(m.content) for m in last_call if isinstance(m, ToolMessage)],
        "model_calls": len(model.received),
    }


def run(db: str, thread: str, inputs: dict[str, Any] | None, model: ScriptedChatModel,
        config: AgentConfig) -> dict[str, Any]:
    with open_session(db, model=model, config=config) as session:
        for _ in session.run(inputs, thread):
            pass
        return dict(session.state(thread).values)


async def arun(db: str, thread: str, inputs: dict[str, Any] | None, model: ScriptedChatModel,
               config: AgentConfig) -> dict[str, Any]:
    async with aopen_session(db, model=model, config=config) as session:
        async for _ in session.arun(inputs, thread):
            pass
        return dict((await session.astate(thread)).values)


def main(argv: list[str]) -> int:
    db, thread, name, workdir = argv[:4]
    resume = "--resume" in argv[4:]
    if os.environ.get("WORKER_KILL_AFTER_FINISH") == "1":
        kill_after_finish()
    model = ScriptedChatModel([scenario(name, workdir)] * 3)
    config = AgentConfig(workdir=workdir, on_environment_error="model", timeout_s=60)
    inputs = None if resume else {"messages": [HumanMessage(f"run scenario {name}")]}
    try:
        if "--async" in argv[4:]:
            state = asyncio.run(arun(db, thread, inputs, model, config))
        else:
            state = run(db, thread, inputs, model, config)
    except ThreadBusyError as exc:
        print(json.dumps({"error": "busy", "message": str(exc)}), flush=True)
        return 3
    except StoreError as exc:
        print(json.dumps({"error": "store", "message": str(exc)}), flush=True)
        return 4
    print(json.dumps(report(state, model)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
