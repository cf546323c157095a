"""Drawing the graph offline: the Mermaid snapshot, ASCII, DOT and a real PNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashgraph.graph import BashgraphError, build_graph, draw

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
#: Every routed edge, with the outcome named on it.
ROUTED_EDGES = [
    ("agent", "approve", "ask / deny / invalid call"), ("agent", "tools", "every call allowed"),
    ("agent", "__end__", "answer / final status"),
    ("tools", "agent", "ok"), ("tools", "route", "exit_error / spawn_error / args_error / denied"),
    ("route", "agent", "exit_error / args_error / denied / ok after retry"),
    ("route", "replan", "exit_error ×N / repeat"),
    ("route", "retry", "transient spawn_error"), ("route", "escalate", "other spawn_error / retries spent"),
    ("route", "__end__", "args_error ×N / no progress after re-plans"),
    ("escalate", "retry", "answer: retry"), ("escalate", "agent", "skip / hint / model told"),
    ("escalate", "__end__", "abort / stop"),
]


@pytest.fixture(scope="module")
def agent() -> object:
    return build_graph(model=None)


def test_mermaid_matches_the_snapshot(agent: object) -> None:
    """The public drawing changes only on purpose (update the snapshot file with the change)."""
    assert draw(agent, "mermaid") == SNAPSHOT.read_text()


def test_every_routed_branch_is_a_dashed_edge_named_by_its_outcome(agent: object) -> None:
    """Each routing row is visible: conditional edges are dashed and labelled in Mermaid and DOT."""
    mermaid, dot = str(draw(agent, "mermaid")), str(draw(agent, "dot"))
    for source, target, label in ROUTED_EDGES:
        assert f"{source} -. &nbsp;{label}&nbsp; .-> {target};" in mermaid
        assert f'"{source}" -> "{target}" [style=dashed, label="{label}"];' in dot
    assert '"approve" -> "tools";' in dot
    assert '"retry" -> "route";' in dot
    assert '"tools" -> "route";' not in dot  # only a batch with a failure is routed


def test_ascii_lists_the_label_of_every_routed_edge(agent: object) -> None:
    """ASCII art has no room for labels: a legend under it names each routed edge's outcome."""
    text = str(draw(agent, "ascii"))
    for source, target, label in ROUTED_EDGES:
        assert f"  {source.strip('_')} -> {target.strip('_')}: {label}\n" in text


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
    the drawing of the graph as built now, without a model as the other formats draw it. After
    a change to the graph, copy the new drawing into graph/cli/stored_drawing.py."""
    from bashgraph.graph.cli.stored_drawing import MERMAID

    assert draw(build_graph(), "mermaid") == MERMAID
