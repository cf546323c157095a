"""A worker that starts a background job, then pauses its thread for a person and stays alive
holding the job (as a Python session whose user has not answered yet would).

    python held_job_worker.py DB THREAD WORKDIR

The job writes its shell's pid to WORKDIR/leader; once the thread is paused the worker writes
`paused` and sleeps until it is killed, inside the session's block (so the job keeps running).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolCall

from bashgraph.graph import AgentConfig
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel

JOB = "echo $$ > {dir}/leader; exec sleep 300"


def call(name: str, call_id: str, **args: object) -> AIMessage:
    return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")])


def main(argv: list[str]) -> int:
    db, thread, workdir = argv[:3]
    model = ScriptedChatModel([call("bash", "start", command=JOB.format(dir=workdir), background=True),
                               call("bash", "ask", command="sudo true")])  # asked: the thread pauses
    with open_session(db, model=model, config=AgentConfig(workdir=workdir)) as session:
        for _ in session.run({"messages": [HumanMessage("start a job")]}, thread):
            pass
        assert session.state(thread).next, "the thread should wait for a person"
        Path(workdir, "paused").write_text("paused\n")
        time.sleep(300)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
