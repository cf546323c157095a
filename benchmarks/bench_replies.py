"""Time of the readers of model replies that bashgraph adds to langchain's, as the reply grows.

Hostile shapes at 10 KB, 100 KB and 1 MB: a `<think>` block that never closes, one full of
almost-closing tags, and one that closes at the very end (`split_think`); the pieces of one
streamed tool call's arguments in 8-character deltas without an `index`, many calls of one
piece each told apart only by their ids, and pieces repeating `id` and `name` every time
(`StreamedCalls`, then the strict check of the arguments at the end of the stream; the chunks
are built before the clock starts: langchain builds them either way). Printed:
µs per KB at each size and the growth of time per KB from the smallest to the largest size
(1.0 is linear; quadratic would be 100).

    python benchmarks/bench_replies.py            # 3 rounds, up to 1 MB
    python benchmarks/bench_replies.py --quick    # 2 rounds, 10 KB and 100 KB (CI smoke)
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk

from bashgraph.graph.models.reasoning import split_think
from bashgraph.graph.models.stream_calls import StreamedCalls

PIECE = 8


def think_open(size: int) -> str:
    return ("<think>" + "a" * size)[:size]


def think_almost(size: int) -> str:
    return ("<think>" + "</thin<think>" * size)[:size]


def think_closed(size: int) -> str:
    return "<think>" + "a" * max(size - 20, 0) + "</think>answer"


def chunks(pieces: list[tuple[str | None, str, str | None, int | None]]) -> list[ChatGenerationChunk]:
    """The chunks of a stream, each with one piece (name, args, id, index), then its finish."""
    made = [ChatGenerationChunk(message=AIMessageChunk(
        content="", tool_call_chunks=[tool_call_chunk(name=name, args=args, id=call_id, index=index)]))
        for name, args, call_id, index in pieces]
    end = AIMessageChunk(content="")
    return [*made, ChatGenerationChunk(message=end, generation_info={"finish_reason": "tool_calls"})]


def stream_of(stream: object) -> None:
    calls = StreamedCalls()
    for chunk in stream:  # type: ignore[attr-defined]
        calls.fix(chunk)
    calls.last_chunk()


def _arguments(size: int) -> list[str]:
    args = ('{"command": "' + "x" * size)[:size - 2] + '"}'
    return [args[i:i + PIECE] for i in range(0, len(args), PIECE)]


def one_call_no_index(size: int) -> list[ChatGenerationChunk]:
    return chunks([("bash", "", "call_1", None)] + [(None, piece, None, None) for piece in _arguments(size)])


def many_calls_by_id(size: int) -> list[ChatGenerationChunk]:
    return chunks([("bash", "{}", f"call_{n}", None) for n in range(size // 16)])


def repeated_id_and_name(size: int) -> list[ChatGenerationChunk]:
    return chunks([("bash", piece, "call_1", 0) for piece in _arguments(size)])


def think(text: object) -> object:
    return split_think(str(text))


#: name: (what builds the input of a size, untimed and anew each round; what reads it, timed).
CASES: dict[str, tuple[Callable[[int], object], Callable[[object], object]]] = {
    "think: never closed": (think_open, think),
    "think: almost tags": (think_almost, think),
    "think: closed at end": (think_closed, think),
    "deltas: no index": (one_call_no_index, stream_of),
    "deltas: many ids": (many_calls_by_id, stream_of),
    "deltas: id+name": (repeated_id_and_name, stream_of),
}


def seconds(func: Callable[[object], object], value: object) -> float:
    gc.collect()  # the garbage of building the input is not the reader's
    started = time.perf_counter()
    func(value)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    rounds, sizes = (2, (10_000, 100_000)) if quick else (3, (10_000, 100_000, 1_000_000))
    print(f"{'case':<22}" + "".join(f"{f'{size // 1000} KB µs/KB':>16}" for size in sizes) + f"{'growth':>8}")
    for name, (build, read) in CASES.items():
        times: dict[int, list[float]] = {size: [] for size in sizes}
        for _ in range(rounds):
            for size in sizes:
                times[size].append(seconds(read, build(size)))  # chunks are changed as they are read
        per_kb = {size: statistics.median(times[size]) / (size / 1000) * 1e6 for size in sizes}
        growth = per_kb[sizes[-1]] / per_kb[sizes[0]]
        print(f"{name:<22}" + "".join(f"{per_kb[size]:16.1f}" for size in sizes) + f"{growth:8.2f}")


if __name__ == "__main__":
    main()
