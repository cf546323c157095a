"""Where row 2 of bench_agent.py goes: LangGraph's checkpointing of a step, taken apart.

    python benchmarks/bench_checkpoint_floor.py            # full run (docs/benchmarks.md)
    python benchmarks/bench_checkpoint_floor.py --quick    # CI smoke test, a few seconds

1. Row 2 again (ours: `open_session`; the anchor: `create_agent` on a `SqliteSaver`), and in the
   same interleaved rounds each of them with LangGraph's saves run in the calling thread. Those
   two variants are a diagnosis, not something bashgraph ships: they swap the thread pool that
   LangGraph's loop hands every `put` and `put_writes` to (a private import of
   `langgraph.pregel._executor`) for one that runs them at once, for the length of a run.
   The same rounds hold row 2's floor: ours with no checkpointer, and ours on LangGraph's own
   `InMemorySaver` (its saves touch no file, no fsync, no journal), handed to the thread pool as
   LangGraph does and run inline. What the goal leaves above that floor is what SQLite's writes
   and the journal's durable start may cost together; the script prints both against it.
2. The saver's own work per step: every `put` and `put_writes` of one of our runs, replayed into
   a fresh file in one thread.
3. Channel count: a two-node loop with 3 state channels against the same loop with 16 (13 never
   written), on a `SqliteSaver` with synchronous saves, per superstep.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import operator
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import langgraph.pregel._executor as pregel_executor
from anchor_agent import CommandsThenAnswer
from bench_agent import (
    TARGET_SQLITE_STEP,
    Sample,
    config,
    interleaved,
    journal_ms_per_command,
    plain_ours,
    sqlite_anchor,
    sqlite_equal_terms,
    sqlite_ours,
    task,
    timed,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from bashgraph.graph import build_graph


class _RunAtOnce(concurrent.futures.Executor):
    """An executor that runs what it is given in the caller's thread, before returning."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the waiter, as a pool would
            future.set_exception(exc)
        return future


@contextmanager
def _saves_in_caller_thread() -> Iterator[None]:
    # LangGraph's loop looks the name up in its own module each run: swap it there.
    original = getattr(pregel_executor, "get_executor_for_config")  # noqa: B009 - not exported

    @contextmanager
    def run_at_once(config: Any) -> Iterator[concurrent.futures.Executor]:
        yield _RunAtOnce()

    setattr(pregel_executor, "get_executor_for_config", run_at_once)  # noqa: B010
    try:
        yield
    finally:
        setattr(pregel_executor, "get_executor_for_config", original)  # noqa: B010


def inline_saves(side: Callable[[int], Sample]) -> Callable[[int], Sample]:
    def go(index: int) -> Sample:
        with _saves_in_caller_thread():
            return side(index)
    return go


def memory_ours(model: CommandsThenAnswer, workdir: str) -> Callable[[int], Sample]:
    """Our graph on LangGraph's InMemorySaver with its default durability: LangGraph's whole
    checkpointing of a step (its bookkeeping, serialising every write, the hand-offs to its
    thread pool) and nothing else: no file, no fsync, no journal, no lock."""
    agent = build_graph(model=model, config=config(workdir, model.steps), checkpointer=InMemorySaver())
    return lambda index: timed(lambda: agent.invoke(task(), {"configurable": {"thread_id": f"memory-{index}"}}))


def row_2(steps: int, rounds: int, tmp: Path) -> None:
    model = CommandsThenAnswer(steps=steps, command="true")
    sides = {
        "ours": sqlite_ours(model, str(tmp), tmp / "ours.sqlite"),
        "anchor": sqlite_anchor(model, tmp / "anchor.sqlite"),
        "inline": inline_saves(sqlite_ours(model, str(tmp), tmp / "inline.sqlite")),
        "anchor_inline": inline_saves(sqlite_anchor(model, tmp / "anchor-inline.sqlite")),
        "plain": plain_ours(model, str(tmp)),
        "memory": memory_ours(model, str(tmp)),
        "memory_inline": inline_saves(memory_ours(model, str(tmp))),
        "equal": sqlite_equal_terms(model, str(tmp), tmp / "equal.sqlite"),
    }
    samples = interleaved(rounds, *sides.values())
    ms = {name: sample.wall / steps * 1000 for name, sample in zip(sides, samples, strict=True)}
    print(f"\n1. row 2 ({steps}-step runs, one `true` per step; median of {rounds} interleaved rounds)")
    print(f"   bashgraph (open_session)             {ms['ours']:6.3f} ms/step   "
          f"ratio {ms['ours'] / ms['anchor']:.2f}x create_agent")
    print(f"   same, LangGraph's saves run inline   {ms['inline']:6.3f} ms/step   "
          f"ratio {ms['inline'] / ms['anchor']:.2f}x create_agent (a diagnosis, not shipped)")
    print(f"   create_agent + SqliteSaver           {ms['anchor']:6.3f} ms/step")
    print(f"   so handing saves to LangGraph's thread pool costs ours {ms['ours'] - ms['inline']:.3f} ms/step")
    print(f"   create_agent, its saves run inline   {ms['anchor_inline']:6.3f} ms/step   (its background saves "
          f"hide behind its tool's subprocess: inline they cost it {ms['anchor_inline'] - ms['anchor']:.3f} ms/step)")
    floor(ms, journal_ms_per_command(tmp / "journal.sqlite", 50))


def floor(ms: dict[str, float], journal_ms: float) -> None:
    """Row 2's floor: what is left of the goal once LangGraph has checkpointed our step in memory."""
    goal = TARGET_SQLITE_STEP * ms["anchor"]
    print(f"   row 2's floor, same rounds (the goal, ≤ {TARGET_SQLITE_STEP:.2f}x, is {goal:.3f} ms/step here):")
    for name, label in (("plain", "ours, no checkpointer"),
                        ("memory", "ours, InMemorySaver (no I/O)"),
                        ("memory_inline", "same, its saves run inline"),
                        ("equal", "ours, SqliteSaver, no journal")):
        print(f"     {label:32s} {ms[name]:6.3f} ms/step   ratio {ms[name] / ms['anchor']:.2f}x create_agent")
    room = goal - ms["memory"]
    sqlite_writes = ms["equal"] - ms["memory"]
    print(f"     room the goal leaves above the in-memory floor: {room:.3f} ms/step, for SQLite's writes "
          f"({sqlite_writes:.3f} ms/step here, async) and the journal ({journal_ms:.3f} ms per command)")


# -- 2: the saver's own work ------------------------------------------------------------------
SaverCall = tuple[str, tuple[Any, ...]]


def recorded_saves(steps: int, tmp: Path) -> list[SaverCall]:
    """Every put and put_writes of one of our runs, with copies of their arguments."""
    calls: list[SaverCall] = []
    originals = {name: getattr(SqliteSaver, name) for name in ("put", "put_writes")}

    def recorder(name: str) -> Callable[..., Any]:
        def record(self: SqliteSaver, *args: Any) -> Any:
            calls.append((name, copy.deepcopy(args)))
            return originals[name](self, *args)
        return record

    try:
        for name in originals:
            setattr(SqliteSaver, name, recorder(name))
        sqlite_ours(CommandsThenAnswer(steps=steps, command="true"), str(tmp), tmp / "record.sqlite")(0)
    finally:
        for name, original in originals.items():
            setattr(SqliteSaver, name, original)
    return calls


def saver_work(steps: int, rounds: int, tmp: Path) -> None:
    calls = recorded_saves(steps, tmp)
    samples = []
    for index in range(rounds):
        conn = sqlite3.connect(tmp / f"replay-{index}.sqlite", check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # as open_checkpointer sets it
        saver = SqliteSaver(conn)
        saver.setup()
        started = time.perf_counter()
        for name, args in calls:
            getattr(saver, name)(*args)
        samples.append((time.perf_counter() - started) / steps * 1000)
        conn.close()
    puts = sum(name == "put" for name, _ in calls)
    print(f"\n2. the saver's own work: {puts} put and {len(calls) - puts} put_writes of a {steps}-step run, "
          f"replayed in one thread: {statistics.median(samples):.3f} ms/step")


# -- 3: channel count -------------------------------------------------------------------------
def loop_graph(channels: int, supersteps: int) -> StateGraph[Any]:
    fields: dict[str, Any] = {"count": int, "log": Annotated[list[int], operator.add]}
    fields.update({f"unused_{index}": Any for index in range(channels - 2)})
    state = TypedDict("LoopState", fields)  # type: ignore[misc]
    graph = StateGraph(state)
    graph.add_node("a", lambda s: {"count": s["count"] + 1, "log": [s["count"]]})
    graph.add_node("b", lambda s: {"log": [0]})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_conditional_edges("b", lambda s: END if s["count"] * 2 >= supersteps else "a")
    return graph


def channel_count(supersteps: int, rounds: int, tmp: Path) -> None:
    conn = sqlite3.connect(tmp / "channels.sqlite", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    saver = SqliteSaver(conn)
    saver.setup()
    graphs = {n: loop_graph(n, supersteps).compile(checkpointer=saver) for n in (3, 16)}
    samples: dict[int, list[float]] = {3: [], 16: []}
    for index in range(rounds):
        for n in (3, 16) if index % 2 == 0 else (16, 3):
            started = time.perf_counter()
            graphs[n].invoke({"count": 0}, {"configurable": {"thread_id": f"{n}-{index}"}}, durability="sync")
            samples[n].append((time.perf_counter() - started) / supersteps * 1000)
    conn.close()
    few, many = statistics.median(samples[3]), statistics.median(samples[16])
    print(f"\n3. channel count ({supersteps} supersteps, SqliteSaver, synchronous saves; median of {rounds} rounds)")
    print(f"   3 channels {few:.3f} ms/superstep, 16 channels {many:.3f} ms/superstep: ratio {many / few:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for CI")
    quick = parser.parse_args().quick
    steps, rounds = (5, 2) if quick else (20, 11)
    if quick:
        print("--quick: a smoke test of the script; 2 rounds of 5 steps are noise, not figures")
    with tempfile.TemporaryDirectory() as tmp:
        row_2(steps, rounds, Path(tmp))
        saver_work(steps, rounds, Path(tmp))
        channel_count(steps * 2, rounds, Path(tmp))


if __name__ == "__main__":
    main()
