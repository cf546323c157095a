"""Drawing the graph offline: the Mermaid snapshot, ASCII, DOT and a real PNG."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_ascii_lists_every_edge_with_the_label_of_each_routed_one(agent: object) -> None:
    """Under each node, its edges: `..>` and the outcome for a routed one, `-->` for the others."""
    lines = str(draw(agent, "ascii")).splitlines()
    for source, target, label in ROUTED_EDGES:
        under = lines[lines.index(source.strip("_")) + 1:]
        assert any(line.split() == ["..>", target.strip("_"), *label.split()] for line in under[:5]), label
    assert lines[lines.index("approve") + 1] == "  --> tools"


def test_ascii_names_every_node(agent: object) -> None:
    """The ASCII drawing works offline and shows all public node names."""
    text = str(draw(agent, "ascii"))
    for node in ("agent", "approve", "tools", "route", "retry", "replan", "escalate"):
        assert node in text


ASCII = "from bashgraph.graph import build_graph, draw; print(draw(build_graph(), 'ascii'), end='')"


def test_ascii_is_the_same_every_time_and_fits_100_columns() -> None:
    """grandalf's art was 118-132 columns and changed with the hash seed; the list does not."""
    drawings = {
        subprocess.run([sys.executable, "-c", ASCII], env={**os.environ, "PYTHONHASHSEED": seed},
                       capture_output=True, text=True, check=True, timeout=120).stdout
        for seed in ("1", "2", "3")
    }
    assert len(drawings) == 1
    (drawing,) = drawings
    assert max(len(line) for line in drawing.splitlines()) <= 100


def test_the_stored_edge_list_is_what_the_real_graph_draws() -> None:
    """`bashgraph graph --format ascii` prints a stored copy, without building the graph."""
    from bashgraph.graph.cli.stored_drawing import ASCII

    assert draw(build_graph(), "ascii") == ASCII


def test_a_long_label_wraps_under_itself() -> None:
    from bashgraph.graph.edge_list import Edge, edge_list

    text = edge_list(["a", "b"], [Edge("a", "b", "word " * 40, conditional=True)])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[-1].startswith(" " * 9 + "word")


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
