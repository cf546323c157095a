"""Call the agent from Python: one task, one thread, the final state.

Runs offline with a scripted model. For a real model, replace `model` with e.g.
`ChatOpenAI(model="gpt-4.1-mini")` (any OpenAI-compatible server via OPENAI_BASE_URL).
"""

from __future__ import annotations

import tempfile

from langchain_core.messages import ToolMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from bashgraph.tools import CommandResult


def main() -> None:
    model = ScriptedChatModel([
        calls_reply("printf 'alpha\\nbeta\\n' > notes.txt", "grep -c gamma notes.txt"),
        calls_reply("wc -l < notes.txt"),
        answer("notes.txt has 2 lines and no 'gamma' (grep exited 1: no match)."),
    ])
    with tempfile.TemporaryDirectory() as workdir:
        agent = build_graph(model=model, config=AgentConfig(workdir=workdir))
        state = agent.invoke({"messages": [("user", "How many lines does notes.txt have?")]})
    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            result = CommandResult.from_dict(message.artifact)
            print(f"$ {result.command}\n  -> {result.outcome} (exit {result.exit_code})")
    print(f"status: {state['status']}\nanswer: {state['messages'][-1].content}")


if __name__ == "__main__":
    main()
