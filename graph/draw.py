"""Drawing the graph offline: Mermaid text, a plain-text edge list (`ascii`, graph/edge_list.py),
or PNG through Graphviz's `dot`.

LangGraph's own PNG path calls the mermaid.ink web service; this one never leaves the machine.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any, Literal

from langchain_core.runnables.graph import Graph

from bashgraph.graph.edge_list import Edge, edge_list
from bashgraph.graph.errors import BashgraphError

DrawFormat = Literal["mermaid", "ascii", "png", "dot"]
DRAW_FORMATS: tuple[DrawFormat, ...] = ("mermaid", "ascii", "png", "dot")


def draw(agent: Any, format: DrawFormat = "mermaid") -> str | bytes:
    """The drawing of a compiled graph: text for mermaid/ascii/dot, PNG bytes for png."""
    picture: Graph = agent.get_graph()
    if format == "mermaid":
        return picture.draw_mermaid()
    if format == "ascii":
        edges = (Edge(e.source, e.target, str(e.data) if e.data else None, e.conditional) for e in picture.edges)
        return edge_list(list(picture.nodes), edges)
    if format == "dot":
        return to_dot(picture)
    if format == "png":
        return render_png(to_dot(picture))
    raise BashgraphError(f"unknown drawing format {format!r}; choose one of {DRAW_FORMATS}")


def to_dot(picture: Graph) -> str:
    """Graphviz source: solid edges always taken, dashed ones chosen by a router and labelled
    with the outcome that takes them."""
    lines = [
        "digraph bashgraph {", "  rankdir=TB;", '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in picture.nodes.values():
        shape = ", shape=oval" if node.id in ("__start__", "__end__") else ""
        lines.append(f'  "{node.id}" [label="{node.name.strip("_")}"{shape}];')
    for edge in picture.edges:
        attributes = ["style=dashed"] if edge.conditional else []
        if edge.data:
            attributes.append(f'label="{_dot_text(str(edge.data))}"')
        style = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f'  "{edge.source}" -> "{edge.target}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_png(dot_source: str) -> bytes:
    """Run Graphviz; a missing `dot` is a clear error naming the package to install."""
    dot = shutil.which("dot")
    if dot is None:
        raise BashgraphError("drawing PNG needs Graphviz: `apt-get install graphviz` (or use --format mermaid)")
    done = subprocess.run([dot, "-Tpng"], input=dot_source.encode(), capture_output=True, timeout=30, check=False)
    if done.returncode != 0:
        raise BashgraphError(f"graphviz failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
