"""Watch a run as it happens: node updates plus live command events.

`stream_mode=["updates", "custom"]` yields each node's update and the `command_start` /
`command_end` events the tools node emits, so a UI can show every command while it runs.
"""

from __future__ import annotations

import tempfile
from typing import Any

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply


def main() -> None:
    model = ScriptedChatModel([
        calls_reply("ls /definitely-not-here"),
        calls_reply("ls /"),
        answer("The root directory is listed above."),
    ])
    with tempfile.TemporaryDirectory() as workdir:
        agent = build_graph(model=model, config=AgentConfig(workdir=workdir))
        inputs = {"messages": [("user", "What is in the root directory?")]}
        for mode, chunk in agent.stream(inputs, stream_mode=["updates", "custom"]):
            show(mode, chunk)


def show(mode: Any, chunk: Any) -> None:
    """One line per event: node updates, and the command events the tools node emits."""
    event = chunk.get("event") if mode == "custom" else None
    if event == "command_start":
        print(f"running: {chunk['command']}")
    elif event == "command_output":
        print(f"  {chunk['stream']}: {chunk['text'].rstrip()}")
    elif event == "command_end":
        print(f"  ended: {chunk['outcome']} in {chunk['duration_s']:.3f}s")
    elif mode == "updates":
        print(f"node finished: {', '.join(chunk)}")

if __name__ == "__main__":
    main()
