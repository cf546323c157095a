"""Draw the agent: Mermaid text, ASCII art and a PNG (through Graphviz, offline).

Solid edges are always taken; dashed ones are chosen by a router (see docs/graph.md). Drawing
needs no chat model: a graph built without one makes it only when it is first called.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bashgraph.graph import build_graph, draw


def main() -> None:
    agent = build_graph(model=None)
    print(draw(agent, "mermaid"))
    print(draw(agent, "ascii"))
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "bashgraph.png"
    out.write_bytes(draw(agent, "png"))  # type: ignore[arg-type]
    print(f"PNG written to {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
