"""The compiled graph publishes its input and output JSON schema (LangGraph Studio's input form)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel


def compiled(tmp_path: Path) -> Any:
    return build_graph(model=ScriptedChatModel([]), config=AgentConfig(workdir=str(tmp_path)))


@pytest.mark.parametrize("which", ["input", "output"])
def test_the_graph_has_a_json_schema_with_messages(tmp_path: Path, which: str) -> None:
    """pydantic builds the schema from AgentState without a warning, on every supported Python."""
    agent = compiled(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schema = agent.get_input_jsonschema() if which == "input" else agent.get_output_jsonschema()
    assert "messages" in schema["properties"]
    assert "status" in schema["properties"]
