"""A worker process for the job crash tests: runs or resumes one thread, prints a JSON report.

    python job_worker.py DB THREAD WORKDIR [--resume]

The scripted model decides from the conversation alone (so a fresh process that resumes the
thread replies as the killed one would have): start a background job that leaves its session
(`setsid`) and records its pids in WORKDIR (`job-starts` gets one line per start), then run a
slow foreground command (its pid in `pid`) — the test kills the worker there —, then read the
job with `bash_output`, then answer with what it read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from bashgraph.graph import AgentConfig
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel
from bashgraph.tools.results import CommandResult

JOB = ("echo run >> {dir}/job-starts; setsid sleep 300 & echo $! > {dir}/escapee; "
       "echo $$ > {dir}/leader; exec sleep 300")
SLOW = "for _ in $(seq 100); do [ -s {dir}/escapee ] && break; sleep 0.05; done; echo $$ > {dir}/pid; sleep 30"


def call(name: str, call_id: str, **args: object) -> AIMessage:
    return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=call_id, type="tool_call")])


def scenario(workdir: str) -> Callable[[list[BaseMessage]], AIMessage]:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if not answers:
            return call("bash", "start", command=JOB.format(dir=workdir), background=True)
        if len(answers) == 1:
            return call("bash", "slow", command=SLOW.format(dir=workdir))
        if not any(m.name == "bash_output" for m in answers):
            return call("bash_output", "read", job_id="job-1")
        return AIMessage(content="saw: " + " | ".join(str(m.content) for m in answers))

    return reply


def main(argv: list[str]) -> int:
    db, thread, workdir = argv[:3]
    resume = "--resume" in argv[3:]
    model = ScriptedChatModel([scenario(workdir)] * 6)
    config = AgentConfig(workdir=workdir, on_environment_error="model", timeout_s=60)
    with open_session(db, model=model, config=config) as session:
        inputs = None if resume else {"messages": [HumanMessage("start a job")]}
        for _ in session.run(inputs, thread):
            pass
        state = session.state(thread).values
        rows = session.journal.job_rows(thread)
    tools = [m for m in state.get("messages", []) if isinstance(m, ToolMessage)]
    print(json.dumps({
        "status": state.get("status"),
        "results": [{"name": m.name, **CommandResult.from_dict(m.artifact).to_dict()} for m in tools],
        "markers": [row.marker for row in rows],
        "ended": [row.ended for row in rows],
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
