"""The graph declares its input and output: the task goes in, the public state comes out, the
bookkeeping stays in the thread's state (and is documented apart in docs/graph.md#state)."""

from __future__ import annotations

import asyncio
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bashgraph.graph import AgentConfig, AgentInput, AgentState, PublicState, build_graph
from bashgraph.graph.state import Bookkeeping
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

GRAPH_DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"
#: Written out, not read from state.py: a field moving between the parts must be a decision.
PUBLIC = {"messages", "status", "reason", "cwd", "steps", "exit_streak", "args_errors", "spawn_retries",
          "replans", "failures"}
BOOKKEEPING = {"next_hop", "routed_reply", "route_base", "attempt_serial", "policy_checks", "environment_told",
               "rejected", "context", "compact_due"}
#: Written only when a thread's requests outgrow the model's window (tests/graph/test_context.py).
COMPACTION_ONLY = {"context", "compact_due"}
#: What `every_field_written` writes: all but `rejected` (only a person's rejection writes it)
#: and the compaction fields.
WRITTEN = BOOKKEEPING - {"rejected"} - COMPACTION_ONLY
THREAD = {"configurable": {"thread_id": "t"}}


def compiled(tmp_path: Path, steps: list[Any] | None = None, **settings: Any) -> Any:
    config = AgentConfig(workdir=str(tmp_path), retry_backoff_s=0.01, retry_backoff_max_s=0.02, **settings)
    return build_graph(model=ScriptedChatModel(steps or []), config=config, checkpointer=InMemorySaver())


def every_field_written(tmp_path: Path) -> Any:
    """A run that writes every bookkeeping field but `rejected`: a checked call, a transient fault retried once,
    escalated and handed to the model (`environment_told`), then an answer."""
    steps = [calls_reply("kill -9 $$"), answer("the shell keeps dying")]
    return compiled(tmp_path, steps, on_environment_error="model", max_spawn_retries=1)


def task(text: str = "task") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def json_schema(agent: Any, which: str) -> dict[str, Any]:
    """The schema Studio shows, built without a warning (pydantic refuses typing.TypedDict on 3.11)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schema: dict[str, Any] = agent.get_input_jsonschema() if which == "input" else agent.get_output_jsonschema()
    return schema


def test_the_input_schema_is_the_task_alone(tmp_path: Path) -> None:
    schema = json_schema(compiled(tmp_path), "input")
    assert set(schema["properties"]) == {"messages"}
    assert schema["required"] == ["messages"]


def test_the_output_schema_is_the_public_state(tmp_path: Path) -> None:
    schema = json_schema(compiled(tmp_path), "output")
    assert set(schema["properties"]) == PUBLIC
    assert schema["properties"]["status"]["enum"] == ["running", "done", "failed", "aborted", "environment_fault"]


def test_the_state_is_the_public_fields_and_the_bookkeeping(tmp_path: Path) -> None:
    """Every channel is in exactly one part; the graph has no channel outside them."""
    assert set(AgentInput.__annotations__) == {"messages"}
    assert set(PublicState.__annotations__) == PUBLIC
    assert set(Bookkeeping.__annotations__) == BOOKKEEPING
    assert set(AgentState.__annotations__) == PUBLIC | BOOKKEEPING
    channels = {name for name in compiled(tmp_path).channels if not name.startswith(("__", "branch:to:"))}
    assert channels == PUBLIC | BOOKKEEPING


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_run_returns_the_public_fields_only(tmp_path: Path, mode: str) -> None:
    """The run wrote every bookkeeping field (the thread's state has them); its result has none."""
    agent = every_field_written(tmp_path)
    result = agent.invoke(task(), THREAD) if mode == "invoke" else asyncio.run(agent.ainvoke(task(), THREAD))
    assert result["status"] == "done"
    assert set(result) <= PUBLIC
    assert set(result) >= PUBLIC - {"replans"}  # no re-plan in this run
    values = agent.get_state(THREAD).values
    assert set(values) >= WRITTEN
    assert values["attempt_serial"] == 1
    assert values["environment_told"] is not None
    assert {key: values[key] for key in result} == result


def test_the_thread_state_and_values_stream_hold_the_bookkeeping(tmp_path: Path) -> None:
    """get_state().values and stream(stream_mode="values") show every field (docs/graph.md#state)."""
    agent = every_field_written(tmp_path)
    chunks = list(agent.stream(task(), THREAD, stream_mode="values"))
    assert set(chunks[-1]) == PUBLIC - {"replans"} | WRITTEN
    assert chunks[-1] == agent.get_state(THREAD).values


def test_a_paused_run_returns_its_question_with_the_public_fields(tmp_path: Path) -> None:
    agent = compiled(tmp_path, [calls_reply("kill -9 $$")], on_environment_error="ask", max_spawn_retries=0)
    result = agent.invoke(task(), THREAD)
    assert set(result) - {"__interrupt__"} <= PUBLIC
    assert result["__interrupt__"][0].value["kind"] == "environment_error"
    assert agent.get_state(THREAD).values["next_hop"] == "escalate"


def test_keys_other_than_messages_are_not_input(tmp_path: Path) -> None:
    """`cwd` and `steps` passed with the task are ignored: the command runs in the workdir, and
    the step limit (2) that steps=2 would have hit at once is not reached."""
    agent = compiled(tmp_path, [calls_reply("pwd"), answer("done")], max_steps=2)
    result = agent.invoke({**task(), "cwd": "/", "steps": 2, "next_hop": "route"}, THREAD)
    assert (result["status"], result["steps"]) == ("done", 2)
    tool = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool.content == str(tmp_path)


def documented_fields(heading: str) -> set[str]:
    """The first column of the docs/graph.md table whose header starts with `heading`."""
    section = GRAPH_DOC.read_text().split("\n## State\n", 1)[1].split("\n## ", 1)[0]
    table = section.split(f"| {heading} |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE))


def test_the_docs_list_every_public_and_bookkeeping_field() -> None:
    assert documented_fields("public field") == PUBLIC
    assert documented_fields("bookkeeping field") == BOOKKEEPING
