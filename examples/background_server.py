"""Background jobs: start a web server, query it, read its log, stop it.

The model (scripted here) starts `python3 -m http.server` with `background: true`, fetches a
page from it with the next command, reads the server's log with `bash_output` and stops it with
`bash_kill`. Whatever happens, the server is stopped when the run ends.
"""

from __future__ import annotations

import re
import socket
import sys
import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

from bashgraph.graph import AgentConfig, open_session
from bashgraph.graph.testing import ScriptedChatModel, answer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def job_call(tool: str, messages: list[BaseMessage], call_id: str) -> AIMessage:
    """A call of `tool` about the job the first tool answer named."""
    started = next(m for m in messages if isinstance(m, ToolMessage))
    found = re.search(r"job (job-[0-9a-f]+)", str(started.content))
    job_id = found.group(1) if found else "unknown"
    return AIMessage(content="", tool_calls=[
        ToolCall(name=tool, args={"job_id": job_id}, id=call_id, type="tool_call")])


def main() -> int:
    port = free_port()
    # A script file, not `python3 -c CODE`: program text on the command line is asked.
    fetch = (f"cat > fetch.py <<'EOF'\nimport time, urllib.request as u\nfor _ in range(100):\n try: "
             f"print(u.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode()); break\n "
             f"except OSError: time.sleep(0.1)\nEOF\npython3 fetch.py")
    model = ScriptedChatModel([
        AIMessage(content="", tool_calls=[ToolCall(
            name="bash", args={"command": f"python3 -m http.server {port} --bind 127.0.0.1",
                               "background": True}, id="start", type="tool_call")]),
        AIMessage(content="", tool_calls=[ToolCall(
            name="bash", args={"command": fetch}, id="fetch", type="tool_call")]),
        lambda messages: job_call("bash_output", messages, "log"),
        lambda messages: job_call("bash_kill", messages, "stop"),
        answer("The server answered; it is stopped."),
    ])
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "hello.txt").write_text("hello from the background server\n")
        config = AgentConfig(workdir=tmp)
        with open_session(str(Path(tmp, "runs.sqlite")), model=model, config=config) as session:
            for _ in session.run({"messages": [("user", "serve this folder and fetch hello.txt")]},
                                 "background-demo"):
                pass
            state = session.state("background-demo").values
    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            print(f"--- {message.name} ({message.artifact['outcome']})\n{message.content}")
    print(f"status: {state['status']}")
    fetched = any("hello from the background server" in str(m.content) for m in state["messages"])
    return 0 if state["status"] == "done" and fetched else 1


if __name__ == "__main__":
    sys.exit(main())
