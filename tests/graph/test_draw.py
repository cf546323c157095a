"""Drawing the graph offline: the Mermaid snapshot, ASCII, DOT and a real PNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashgraph.graph import BashgraphError, build_graph, draw
from bashgraph.graph.testing import ScriptedChatModel

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
ROUTED_EDGES = [
    ("agent", "approve"), ("agent", "tools"), ("agent", "__end__"), ("route", "agent"), ("route", "replan"),
    ("route", "retry"), ("route", "escalate"), ("route", "__end__"), ("escalate", "retry"),
    ("escalate", "agent"), ("escalate", "__end__"),
]


@pytest.fixture(scope="module")
def agent() -> object:
    return build_graph(model=ScriptedChatModel([]))


def test_mermaid_matches_the_snapshot(agent: object) -> None:
    """The public drawing changes only on purpose (update the snapshot file with the change)."""
    assert draw(agent, "mermaid") == SNAPSHOT.read_text()


def test_every_routed_branch_is_a_dashed_edge(agent: object) -> None:
    """Each routing row is visible: conditional edges are dashed in Mermaid and DOT."""
    mermaid, dot = str(draw(agent, "mermaid")), str(draw(agent, "dot"))
    for source, target in ROUTED_EDGES:
        assert f"{source} -.-> {target};" in mermaid
        assert f'"{source}" -> "{target}" [style=dashed];' in dot
    assert '"approve" -> "tools";' in dot
    assert '"tools" -> "route";' in dot
    assert '"retry" -> "route";' in dot


def test_ascii_names_every_node(agent: object) -> None:
    """The ASCII drawing works offline and shows all public node names."""
    text = str(draw(agent, "ascii"))
    for node in ("agent", "approve", "tools", "route", "retry", "replan", "escalate"):
        assert node in text


def test_png_is_rendered_locally(agent: object) -> None:
    """PNG comes from Graphviz on this machine (no mermaid.ink), a real image."""
    png = draw(agent, "png")
    assert isinstance(png, bytes)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 5_000


def test_unknown_format_is_a_clear_error(agent: object) -> None:
    """A typo in the format names the choices."""
    with pytest.raises(BashgraphError, match="choose one of"):
        draw(agent, "svg")  # type: ignore[arg-type]


def test_the_stored_mermaid_is_what_the_real_graph_draws() -> None:
    """`bashgraph graph` prints a stored copy (it starts without building the graph); it must be
    the drawing of the graph as built now. After a change to the graph, copy the new drawing
    into graph/drawing.py."""
    from bashgraph.graph.cli_session import inspection_agent
    from bashgraph.graph.drawing import MERMAID

    assert draw(inspection_agent(), "mermaid") == MERMAID
