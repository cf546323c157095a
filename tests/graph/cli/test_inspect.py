"""`threads`, `history`, `fork` and `graph`: what they print, and that a fork runs on its own."""

from __future__ import annotations

import struct

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, text, tool_call


def test_threads_history_and_fork(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """After a run: `threads` lists it, `history` shows nodes and outcomes, a fork re-runs from
    a checkpoint as a new thread."""
    openai_server.add(tool_call("bash", {"command": "echo hi >> log"}), text("logged"))
    assert cli("run", "log a line", "--thread", "h1").code == 0

    listed = cli("threads", "--json")
    assert listed.code == 0, listed.err
    (thread,) = listed.events
    assert (thread["thread_id"], thread["status"], thread["task"]) == ("h1", "done", "log a line")
    table = cli("threads").out.splitlines()
    assert table[0].split("\t") == ["thread_id", "status", "updated_at", "task", "forked_from"]
    assert table[1].startswith("h1\tdone\t")

    history = cli("history", "h1", "--json")
    assert history.code == 0, history.err
    rows = history.events
    nodes = [row["node"] for row in rows]  # newest first
    assert nodes[0] == "agent"
    assert {"agent", "tools", "input"} <= set(nodes)
    assert "route" not in nodes  # a clean batch goes from `tools` straight back to `agent`
    assert "ok `echo hi >> log`" in [row["outcomes"] for row in rows]
    before_tools = next(row for row in rows if row["next"] == "tools")

    fork = cli("fork", "h1", "--checkpoint", before_tools["checkpoint_id"], "--thread", "h2")
    assert fork.code == 0, fork.err
    assert fork.out == "h2\n"
    assert "continue it with: bashgraph resume h2" in fork.err
    openai_server.add(text("logged again"))
    resumed = cli("resume", "h2")
    assert resumed.code == 0, resumed.err
    assert (cli.workdir / "log").read_text() == "hi\nhi\n"  # a fork's commands are new commands
    forked = next(t for t in cli("threads", "--json").events if t["thread_id"] == "h2")
    assert forked["forked_from"] == f"h1@{before_tools['checkpoint_id']}"


def test_graph_png_is_a_real_png_made_offline(cli: Cli) -> None:
    """`graph --format png -o FILE` writes a PNG image through Graphviz, no network."""
    target = cli.home / "graph.png"
    result = cli("graph", "--format", "png", "-o", str(target))
    assert result.code == 0, result.err
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100
    assert height > 100


def test_graph_text_formats_name_every_branch(cli: Cli) -> None:
    """Mermaid on stdout and dot to a file both show the retry, replan and escalate nodes."""
    mermaid = cli("graph")
    assert mermaid.code == 0, mermaid.err
    assert mermaid.out.startswith("---") or "graph TD" in mermaid.out
    for node in ("agent", "tools", "route", "retry", "replan", "escalate"):
        assert node in mermaid.out
    dot = cli("graph", "--format", "dot", "-o", "graph.dot")
    assert dot.code == 0
    assert (cli.home / "graph.dot").read_text().startswith("digraph bashgraph {")
