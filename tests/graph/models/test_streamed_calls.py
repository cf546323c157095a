"""StreamedCalls on pieces no scripted server sends whole: each rule of graph/models/stream_calls.py."""

from __future__ import annotations

import functools
import operator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, message_chunk_to_message
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk

from bashgraph.graph.models.stream_calls import INCOMPLETE_CALLS, StreamedCalls

Piece = tuple[str | None, str | None, str | None, int | None]


def merged(pieces: list[Piece], finish: str | None = "tool_calls") -> AIMessage:
    """The reply langchain-core makes of `pieces` (name, args, id, index) once StreamedCalls fixed them."""
    calls = StreamedCalls()
    chunks: list[Any] = [calls.fix(ChatGenerationChunk(message=AIMessageChunk(
        content="", tool_call_chunks=[tool_call_chunk(name=name, args=args, id=call_id, index=index)])))
        for name, args, call_id, index in pieces]
    chunks.append(calls.fix(ChatGenerationChunk(message=AIMessageChunk(content=""),
                                                generation_info={"finish_reason": finish} if finish else None)))
    if (last := calls.last_chunk()) is not None:
        chunks.append(last)
    message = message_chunk_to_message(functools.reduce(operator.add, chunks).message)
    assert isinstance(message, AIMessage)
    return message


def test_a_name_in_pieces_stays_one_name() -> None:
    reply = merged([("ba", None, "c1", None), ("sh", '{"command":', None, None), (None, ' "ls"}', None, None)])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("bash", {"command": "ls"})]


def test_a_name_after_arguments_starts_the_next_call() -> None:
    reply = merged([("bash", '{"command": "ls"}', None, None), ("bash", '{"command": "pwd"}', None, None)])
    assert [c["args"] for c in reply.tool_calls] == [{"command": "ls"}, {"command": "pwd"}]


def test_an_id_that_comes_back_continues_its_call() -> None:
    reply = merged([("bash", '{"command"', "a", None), ("bash", "{", "b", None),
                    (None, ': "ls"}', "a", None), (None, "}", "b", None)])
    assert [(c["id"], c["args"]) for c in reply.tool_calls] == [("a", {"command": "ls"}), ("b", {})]


def test_a_stream_cut_by_length_lists_every_call_with_its_raw_arguments() -> None:
    reply = merged([("bash", '{"command": "rm -rf ./build', "c1", 0)], finish="length")
    assert reply.response_metadata[INCOMPLETE_CALLS] == {"c1": '{"command": "rm -rf ./build'}


def test_a_stream_without_a_finish_reason_lists_its_calls() -> None:
    reply = merged([("bash", '{"command": "ls"}', "c1", 0)], finish=None)
    assert reply.response_metadata[INCOMPLETE_CALLS] == {"c1": '{"command": "ls"}'}


def test_a_whole_stream_lists_nothing() -> None:
    reply = merged([("bash", '{"command": "ls"}', "c1", 0)])
    assert INCOMPLETE_CALLS not in reply.response_metadata
