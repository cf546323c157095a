"""The graph in plain text: every edge, grouped by the node it leaves, with the outcome that takes
each routed edge. What `draw(agent, "ascii")` and `bashgraph graph --format ascii` print.

Laid-out ASCII art (grandalf's) is 120–130 columns wide for this graph, unreadable once a
terminal wraps it, and differs from run to run (its layout follows set order, which changes
with Python's hash seed). A list is the same every time and fits 100 columns. The CLI prints a
stored copy (graph/cli/stored_drawing.py), so `--format ascii` needs no graph built.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import NamedTuple

#: The widest line the list prints (a long label wraps under itself).
WIDTH = 100


class Edge(NamedTuple):
    source: str
    target: str
    label: str | None
    conditional: bool


def edge_list(nodes: Sequence[str], edges: Iterable[Edge]) -> str:
    """Each node in `nodes` order with the edges that leave it, sorted by target."""
    order = {node: index for index, node in enumerate(nodes)}
    leaving: dict[str, list[Edge]] = {}
    for edge in edges:
        leaving.setdefault(edge.source, []).append(edge)
    lines = ["The agent's graph, edge by edge (--> always taken; ..> chosen by a router,",
             "with the outcome that takes it):", ""]
    width = max((len(_name(e.target)) for group in leaving.values() for e in group), default=0)
    for source in sorted(leaving, key=lambda node: (order.get(node, len(order)), node)):
        lines.append(_name(source))
        for edge in sorted(leaving[source], key=lambda e: (order.get(e.target, len(order)), e.target)):
            lines.extend(_edge_lines(edge, width))
    return "\n".join(lines) + "\n"


def _edge_lines(edge: Edge, width: int) -> list[str]:
    arrow = "..>" if edge.conditional else "-->"
    head = f"  {arrow} {_name(edge.target)}"
    if not edge.label:
        return [head]
    head = f"{head:<{width + 6}}  "
    return textwrap.wrap(edge.label, WIDTH, initial_indent=head, subsequent_indent=" " * len(head)) or [head]


def _name(node: str) -> str:
    return node.strip("_")
