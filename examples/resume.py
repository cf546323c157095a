"""Checkpointed runs: a run pauses on an environment fault, and a later process resumes it.

The session stores checkpoints and the command journal in one SQLite file; the thread can be
picked up from there after a crash, Ctrl-C, or (as here) a question for a person.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.types import Command

from bashgraph.graph import AgentConfig, open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, call, calls_reply


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db, config = str(Path(tmp, "runs.sqlite")), AgentConfig(workdir=tmp, on_environment_error="ask")
        slow = AIMessage(content="", tool_calls=[call("sleep 10", timeout=0.5)])
        model = ScriptedChatModel([slow, calls_reply("echo 'fast path taken'"), answer("Done, without the slow step.")])

        with open_session(db, model=model, config=config) as session:
            for _ in session.run({"messages": [("user", "do the slow thing")]}, "thread-1"):
                pass
            pending = session.state("thread-1").interrupts[0].value
            print(f"paused: {pending['summary']}")
            print(f"choices: {pending['choices']} (or a free-text hint)")

        # Later, possibly in another process: open the same file and answer.
        with open_session(db, model=model, config=config) as session:
            for _ in session.run(Command(resume="try a faster way"), "thread-1"):
                pass
            state = session.state("thread-1").values
            print(f"status: {state['status']}; answer: {state['messages'][-1].content}")
            for row in reversed(session.history("thread-1")):
                print(f"  step {row.step:>2} {row.node:<9} {row.outcomes}")


if __name__ == "__main__":
    main()
