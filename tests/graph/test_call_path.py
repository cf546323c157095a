"""How many of bashgraph's modules one tool call crosses: what a reader opens to follow it.

**One call's path**, as measured here: the set of `bashgraph` modules in which at least one
function runs, in any thread, while the graph's `tools` node handles one `bash` call of
`echo hello` (a command that succeeds and prints), from the node's start to its end (the edge it
then takes included). The node runs in both its forms, `invoke` and `ainvoke`, and the path is
the union of both. The graph is built with `build_graph` on the scripted model, with no
checkpointer and no session, and has run one call before (what is looked up once per agent or
per process is not a call's work). A module counts once however much of it runs; what runs in
the child process (the shell) does not count, nor do modules of other packages.

The anchors (mini-swe-agent, langchain-ai/react-agent, LangGraph's `ToolNode`) are followed in
2-3 files; issue 31 asks for at most `MAX_MODULES` here.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, ToolMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

MAX_MODULES = 20
COMMAND = "echo hello"


class _ToolsNodeSpan(BaseCallbackHandler):
    """Turns the trace on while LangGraph runs the `tools` node (its own run, not its children)."""

    run_inline = True  # in the node's thread, before and after it: not in a pool, not later

    def __init__(self) -> None:
        self.active = False
        self._node: UUID | None = None

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if kwargs.get("name") == "tools" and self._node is None:
            self._node, self.active = run_id, True

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if run_id == self._node:
            self._node, self.active = None, False

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.on_chain_end(None, run_id=run_id)


@contextmanager
def modules_run(span: _ToolsNodeSpan) -> Iterator[set[str]]:
    """The `bashgraph` modules whose functions are called, in any thread, while `span` is active."""
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and span.active:
            name = frame.f_globals.get("__name__", "")
            if name.startswith("bashgraph."):
                seen.add(name)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def _one_call(tmp_path: Path, mode: str) -> set[str]:
    """The modules of the `tools` node's run of one call, in `mode` ("sync" or "async")."""
    model = ScriptedChatModel([calls_reply(COMMAND), answer("warm"), calls_reply(COMMAND), answer("done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), approval="never"))
    task = {"messages": [HumanMessage("go")]}
    span = _ToolsNodeSpan()
    if mode == "sync":
        agent.invoke(task)
        with modules_run(span) as seen:
            final = agent.invoke(task, {"callbacks": [span]})
    else:
        asyncio.run(agent.ainvoke(task))
        with modules_run(span) as seen:
            final = asyncio.run(agent.ainvoke(task, {"callbacks": [span]}))
    answered = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert "hello" in str(answered[-1].content)
    model.assert_done()
    return seen


def call_path(tmp_path: Path) -> set[str]:
    """One call's path (see the module docstring)."""
    return _one_call(tmp_path, "sync") | _one_call(tmp_path, "async")


def test_one_call_crosses_at_most_max_modules(tmp_path: Path) -> None:
    path = call_path(tmp_path)
    assert "bashgraph.graph.nodes" in path  # the trace saw the node
    assert any(name.startswith("bashgraph.tools.") for name in path)  # and the command's run
    assert len(path) <= MAX_MODULES, sorted(path)


if __name__ == "__main__":  # python tests/graph/test_call_path.py: the path, one module a line
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        found = sorted(call_path(Path(where)))
    print(f"{len(found)} modules:", *found, sep="\n  ")
