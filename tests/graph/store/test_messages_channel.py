"""The `messages` DeltaChannel reducer: batching-invariant, deterministic, add_messages semantics."""

from __future__ import annotations

import copy
from functools import reduce
from typing import Any, cast, get_type_hints

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

from bashgraph.graph.state import AgentState, merge_message_batches

texts = st.sampled_from(["ls", "done", "", "again"])
human = st.builds(HumanMessage, content=texts, id=st.sampled_from([None, "h1", "h2"]))
# A retried call's answer carries the same id as the first answer: it must replace it in place.
tool = st.builds(
    lambda n, text: ToolMessage(text, tool_call_id=f"c{n}", id=f"result-c{n}"),
    st.integers(0, 3), texts,
)
ai = st.builds(AIMessage, texts)
ai_with_id = st.builds(lambda text: AIMessage(text, id=f"ai-{text}"), texts)
as_tuple = st.builds(lambda text: ("user", text), texts)
write = st.lists(st.one_of(human, tool, ai, as_tuple), min_size=1, max_size=4)
writes = st.lists(write, min_size=0, max_size=6)


@settings(max_examples=300, deadline=None)
@given(writes, st.data())
def test_any_split_of_the_writes_gives_the_same_messages(batches: list[Any], data: Any) -> None:
    """reducer(reducer(s, xs), ys) == reducer(s, xs + ys), ids included."""
    split = data.draw(st.integers(0, len(batches)))
    whole = merge_message_batches([], copy.deepcopy(batches))
    parts = merge_message_batches(merge_message_batches([], batches[:split]), batches[split:])
    assert _dump(parts) == _dump(whole)


@settings(max_examples=100, deadline=None)
@given(writes)
def test_replaying_the_same_writes_rebuilds_the_same_ids(batches: list[Any]) -> None:
    """Messages stored without an id get the same id on every replay (no random uuid)."""
    first = merge_message_batches([], copy.deepcopy(batches))
    second = merge_message_batches([], copy.deepcopy(batches))
    assert [m.id for m in first] == [m.id for m in second]
    assert all(m.id for m in first)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.one_of(tool, ai_with_id), min_size=1, max_size=4), max_size=6))
def test_with_ids_it_is_exactly_add_messages_applied_write_by_write(batches: list[Any]) -> None:
    """Parity: when every message has an id, the result is add_messages folded over the writes."""
    expected: list[Any] = reduce(cast(Any, add_messages), copy.deepcopy(batches), [])
    assert _dump(merge_message_batches([], batches)) == _dump(expected)


def test_a_streamed_chunk_is_stored_as_the_whole_message_add_messages_makes_of_it() -> None:
    """A write of new messages is appended as it is, except a chunk (or a removal), which goes
    through add_messages like any write that is not only new whole messages."""
    chunk = AIMessageChunk(content="partial answer", id="chunk")
    state = merge_message_batches([], [[HumanMessage("task", id="h")], [chunk]])
    expected = cast(Any, add_messages)(
        [HumanMessage("task", id="h")], [AIMessageChunk(content="partial answer", id="chunk")])
    assert _dump(state) == _dump(cast(Any, expected))
    assert type(state[-1]) is AIMessage


def test_a_retried_answer_replaces_the_first_in_place() -> None:
    """The retry node's ToolMessage (same id) replaces the failed one; order is kept."""
    task = HumanMessage("task", id="h")
    call = AIMessage("", id="a", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}])
    failed = ToolMessage("[spawn error: signal]", tool_call_id="c1", id="result-c1")
    retried = ToolMessage("second", tool_call_id="c1", id="result-c1")
    state = merge_message_batches([], [[task], [call], [failed]])
    state = merge_message_batches(state, [[retried], [AIMessage("ok", id="b")]])
    assert [(m.id, m.content) for m in state] == [
        ("h", "task"), ("a", ""), ("result-c1", "second"), ("b", "ok")]


def test_the_state_declares_messages_as_a_delta_channel() -> None:
    """AgentState.messages stores deltas, reduced by merge_message_batches."""
    channel = get_type_hints(AgentState, include_extras=True)["messages"]
    meta = [m for m in getattr(channel, "__metadata__", ()) if isinstance(m, DeltaChannel)]
    assert meta
    assert meta[0].reducer is merge_message_batches


def _dump(messages: list[AnyMessage]) -> list[tuple[str, Any, str | None]]:
    return [(m.type, m.content, m.id) for m in messages]
