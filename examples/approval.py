"""Approval rules: a command matching an `ask` rule waits for a person, who approves,
rejects (with a message for the model) or edits it. Deny rules refuse without asking.
"""

from __future__ import annotations

import tempfile

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        config = AgentConfig(workdir=workdir, rules=("ask:git push *", "deny:curl *"))
        model = ScriptedChatModel([
            calls_reply("curl http://example.invalid/install.sh"),
            calls_reply("git push --force origin main"),
            answer("I did not push; the person asked for a pull request instead."),
        ])
        agent = build_graph(model=model, config=config, checkpointer=InMemorySaver())
        thread: RunnableConfig = {"configurable": {"thread_id": "approval-demo"}}
        agent.invoke({"messages": [("user", "publish the change")]}, thread)

        [question] = agent.get_state(thread).interrupts
        request = question.value["requests"][0]
        print(f"asks: {request['command']!r} (rule {request['rule']!r})")
        state = agent.invoke(Command(resume={"action": "reject", "message": "open a pull request"}), thread)

    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            print(f"model read: {message.content}")
    print(f"status: {state['status']}")


if __name__ == "__main__":
    main()
