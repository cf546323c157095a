"""bashgraph against `langchain.agents.create_agent` with a shell tool: every row of the
per-step and concurrency targets, each against its anchor in the same process.

    python benchmarks/bench_agent.py            # full run (figures in docs/benchmarks.md)
    python benchmarks/bench_agent.py --quick    # CI smoke test, well under a minute

Both agents get the same model, `CommandsThenAnswer` (benchmarks/anchor_agent.py): it runs the
command N times, then answers, as a pure function of the conversation, so one instance serves
every run the way one chat client serves a deployment. Rounds are interleaved (ours and the
anchor alternate, the order swapped every round) and each figure is the median over the rounds,
so a machine that speeds up or slows down during the run moves both sides alike.

1. Per model step, no checkpointer: one model call and one `true` per step; the anchor's tool
   runs `subprocess.run(["bash", "-c", cmd], capture_output=True)`.
2. Per step with SQLite: ours is the real setup (`open_session`: SqliteSaver, command journal
   in the same file, thread lock, `durability="sync"`); the anchor is `create_agent` on a
   `SqliteSaver` (LangGraph's default `durability="async"`). In the same rounds, ours on the
   anchor's terms (the same saver and durability, no journal, no lock) splits the row into what
   LangGraph does for our graph and what exactly-once costs; the journal's own cost per command
   (a fsynced `start` row and a `finish` row) is measured after.
3. N concurrent runs x 5 steps of `sleep 0.2` on one event loop (ideal: 1.0 s), against
   `create_agent` with an async tool (`asyncio.create_subprocess_exec`, its best case); without a
   checkpointer, then on SQLite: ours through `aopen_checkpointer` (AsyncSqliteSaver) with the
   command journal, the anchor on an AsyncSqliteSaver. Each side compiles its graph once and
   runs it N times at once on N threads, as a server does. The floor is what LangGraph itself
   needs for the same runs: a two-node graph (the model, then the command through
   `asyncio.create_subprocess_exec`) with nothing else in it.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
from anchor_agent import CommandsThenAnswer, abash, bash
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.session import open_session
from bashgraph.graph.store.checkpoints import aopen_checkpointer
from bashgraph.graph.store.journal import SqliteJournal
from bashgraph.tools.results import CommandResult, Outcome

TARGET_STEP = 0.90
TARGET_SQLITE_STEP = 0.80
TARGET_CONCURRENT_ANCHOR = 1.0
TARGET_CONCURRENT_IDEAL = 1.3





def task() -> Any:
    """The same task for both agents (typed Any: create_agent's input type wants message objects)."""
    return {"messages": [("user", "go")]}


def config(workdir: str, steps: int) -> AgentConfig:
    return AgentConfig(workdir=workdir, max_steps=steps + 5)


@dataclass(frozen=True)
class Sample:
    """Seconds of wall time, and of CPU time of this process and the commands it waited for."""

    wall: float
    cpu: float


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(go: Callable[[], object]) -> Sample:
    cpu, started = cpu_seconds(), time.perf_counter()
    go()
    return Sample(time.perf_counter() - started, cpu_seconds() - cpu)


def interleaved(rounds: int, ours: Callable[[int], Sample], anchor: Callable[[int], Sample],
                *more: Callable[[int], Sample]) -> list[Sample]:
    """Median of each side over `rounds` (ours, the anchor, then `more`), the order of the
    sides reversed every other round."""
    sides = [ours, anchor, *more]
    samples: list[list[Sample]] = [[] for _ in sides]
    for side in sides:
        side(-1)  # warm-up: imports, first compile, page cache
    for index in range(rounds):
        order = list(zip(samples, sides, strict=True))
        for taken, side in order if index % 2 == 0 else reversed(order):
            taken.append(side(index))
    return [median(taken) for taken in samples]


def median(samples: list[Sample]) -> Sample:
    return Sample(statistics.median(s.wall for s in samples), statistics.median(s.cpu for s in samples))


def verdict(ratio: float, target: float) -> str:
    return f"target ≤ {target:.2f}x: {'holds' if ratio <= target else 'NOT met'}"


# -- 1 and 2: per step ----------------------------------------------------------------------
def plain_ours(model: CommandsThenAnswer, workdir: str) -> Callable[[int], Sample]:
    agent = build_graph(model=model, config=config(workdir, model.steps))
    return lambda _: timed(lambda: agent.invoke(task()))


def plain_anchor(model: CommandsThenAnswer) -> Callable[[int], Sample]:
    agent = create_agent(model, [bash])
    return lambda _: timed(lambda: agent.invoke(task()))


def sqlite_ours(model: CommandsThenAnswer, workdir: str, db: Path) -> Callable[[int], Sample]:
    def go(index: int) -> Sample:
        with open_session(str(db), model=model, config=config(workdir, model.steps)) as session:
            return timed(lambda: [None for _ in session.run(task(), f"ours-{index}")])
    return go


def sqlite_anchor(model: CommandsThenAnswer, db: Path) -> Callable[[int], Sample]:
    def go(index: int) -> Sample:
        conn = sqlite3.connect(db, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            agent = create_agent(model, [bash], checkpointer=saver)
            return timed(lambda: agent.invoke(task(), {"configurable": {"thread_id": f"base-{index}"}}))
        finally:
            conn.close()
    return go


def sqlite_equal_terms(model: CommandsThenAnswer, workdir: str, db: Path) -> Callable[[int], Sample]:
    """Ours on the anchor's terms: the same SqliteSaver, LangGraph's default durability (saves
    in the background), no journal, no thread lock. What is left is LangGraph's own work for
    our graph; the difference to `sqlite_ours` is what exactly-once costs."""
    def go(index: int) -> Sample:
        conn = sqlite3.connect(db, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            agent = build_graph(model=model, config=config(workdir, model.steps), checkpointer=saver)
            return timed(lambda: agent.invoke(task(), {"configurable": {"thread_id": f"equal-{index}"}}))
        finally:
            conn.close()
    return go


def journal_ms_per_command(db: Path, commands: int) -> float:
    """A fsynced `start` and a `finish` row, as the executor writes around every command."""
    journal = SqliteJournal(str(db))
    result = CommandResult(Outcome.OK, "true", exit_code=0)
    try:
        started = time.perf_counter()
        for index in range(commands):
            journal.start("bench", f"call-{index}", 0, "true")
            journal.finish("bench", f"call-{index}", 0, result)
        return (time.perf_counter() - started) * 1000 / commands
    finally:
        journal.close()


def session_ms(calls: int) -> tuple[float, float]:
    """`true` through subprocess.run, without and with a new session (as every command of
    ours gets, so a kill reaches its whole tree): with the kernel's autogroup scheduling, each
    new session is a scheduling group of its own, which waits its turn on a busy machine."""
    plain: list[float] = []
    session: list[float] = []
    for _ in range(calls):
        for samples, new in ((plain, False), (session, True)):
            started = time.perf_counter()
            subprocess.run(["bash", "-c", "true"], capture_output=True, check=False, start_new_session=new)
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(plain), statistics.median(session)


def per_step(steps: int, rounds: int) -> None:
    print(f"\n1-2. per model step ({steps}-step runs, one `true` per step; median of {rounds} interleaved rounds)")
    with tempfile.TemporaryDirectory() as tmp:
        model = CommandsThenAnswer(steps=steps, command="true")
        plain, base_plain = interleaved(rounds, plain_ours(model, tmp), plain_anchor(model))
        report("no checkpointer", plain, base_plain, steps, TARGET_STEP)
        mine, theirs, equal = interleaved(
            rounds, sqlite_ours(model, tmp, Path(tmp, "ours.sqlite")), sqlite_anchor(model, Path(tmp, "base.sqlite")),
            sqlite_equal_terms(model, tmp, Path(tmp, "equal.sqlite")))
        report("SQLite (+journal, lock)", mine, theirs, steps, TARGET_SQLITE_STEP)
        ms = 1000 / steps
        print(f"   {'':24} on the anchor's terms (the same saver and durability, no journal, no lock):"
              f" bashgraph {equal.wall * ms:.2f} ms, ratio {equal.wall / theirs.wall:.2f}x")
        ours_saves, their_saves = (equal.wall - plain.wall) * ms, (theirs.wall - base_plain.wall) * ms
        print(f"   {'':24} so LangGraph's checkpointing adds per step: bashgraph {ours_saves:.2f} ms,"
              f" create_agent {their_saves:.2f} ms")
        journal = journal_ms_per_command(Path(tmp, "journal.sqlite"), 5 * steps)
        print(f"   {'':24} the journal alone (fsynced start + finish row): {journal:.2f} ms per command")
    subprocess_ms, session = session_ms(20 * steps)
    print(f"   `true` through subprocess.run: {subprocess_ms:.2f} ms; in a new session: {session:.2f} ms"
          f" (the machine's cost of a session per command, in wall time)")


def report(label: str, mine: Sample, theirs: Sample, steps: int, target: float) -> None:
    ratio, ms = mine.wall / theirs.wall, 1000 / steps
    print(f"   {label:24} bashgraph {mine.wall * ms:6.2f} ms   create_agent {theirs.wall * ms:6.2f} ms"
          f"   ratio {ratio:.2f}x   {verdict(ratio, target)}")
    print(f"   {'':24} CPU (own + commands) {mine.cpu * ms:6.2f} ms   {theirs.cpu * ms:6.2f} ms"
          f"   ratio {mine.cpu / theirs.cpu:.2f}x")


# -- 3: concurrency -------------------------------------------------------------------------
#: Builds one side's agent for a round (the SQLite file and its connections live in the stack).
Builder = Callable[[AsyncExitStack, str, CommandsThenAnswer, bool], Awaitable[Any]]


async def ours_agent(stack: AsyncExitStack, tmp: str, model: CommandsThenAnswer, sqlite: bool) -> Any:
    saver = journal = None
    if sqlite:
        db = str(Path(tmp, f"ours-{time.monotonic_ns()}.sqlite"))
        saver = await stack.enter_async_context(aopen_checkpointer(db))
        journal = SqliteJournal(db)
        stack.callback(journal.close)
    return build_graph(model=model, config=config(tmp, model.steps), checkpointer=saver, journal=journal)


async def anchor_agent(stack: AsyncExitStack, tmp: str, model: CommandsThenAnswer, sqlite: bool) -> Any:
    saver = None
    if sqlite:
        conn = await stack.enter_async_context(aiosqlite.connect(Path(tmp, f"base-{time.monotonic_ns()}.sqlite")))
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
    return create_agent(model, [abash], checkpointer=saver)


async def floor_agent(stack: AsyncExitStack, tmp: str, model: CommandsThenAnswer, sqlite: bool) -> Any:
    """The least LangGraph needs for these runs: the model node, the command node, one edge."""

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def run_command(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        text = await abash.ainvoke(call["args"])
        return {"messages": [ToolMessage(text, tool_call_id=call["id"])]}

    def next_node(state: MessagesState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", run_command)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", next_node, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


async def wall(build: Builder, runs: int, model: CommandsThenAnswer, sqlite: bool, tmp: str) -> Sample:
    """`runs` runs of one compiled agent at once, each on a thread of its own; the agent has run
    once before (as a server's has), so first-call costs stay out."""
    async with AsyncExitStack() as stack:
        agent = await build(stack, tmp, model, sqlite)
        await agent.ainvoke(task(), {"configurable": {"thread_id": "warm-up"}})
        cpu, started = cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(agent.ainvoke(task(), {"configurable": {"thread_id": f"run-{i}"}})
                               for i in range(runs)))
        return Sample(time.perf_counter() - started, cpu_seconds() - cpu)


async def concurrency(runs: int, steps: int, sleep_s: float, rounds: int) -> None:
    ideal = steps * sleep_s
    model = CommandsThenAnswer(steps=steps, command=f"sleep {sleep_s}")
    print(f"\n3. {runs} concurrent runs x {steps} steps of `{model.command}`, one event loop (ideal {ideal:.2f} s;"
          f" median of {rounds} interleaved rounds)")
    with tempfile.TemporaryDirectory() as tmp:
        for label, sqlite in (("no checkpointer", False), ("SQLite (+journal)", True)):
            sides: list[tuple[list[Sample], Builder]] = [([], ours_agent), ([], anchor_agent)]
            if not sqlite:
                sides.append(([], floor_agent))
            for index in range(rounds):
                for samples, build in sides if index % 2 == 0 else reversed(sides):
                    samples.append(await wall(build, runs, model, sqlite, tmp))
            ours_s, base_s = median(sides[0][0]), median(sides[1][0])
            ratio = ours_s.wall / base_s.wall
            print(f"   {label:18} bashgraph {ours_s.wall:5.2f} s ({ours_s.wall / ideal:.2f}x ideal)"
                  f"   create_agent {base_s.wall:5.2f} s ({base_s.wall / ideal:.2f}x ideal)   ratio {ratio:.2f}x")
            print(f"   {'':18} {verdict(ratio, TARGET_CONCURRENT_ANCHOR)} (anchor);"
                  f" {verdict(ours_s.wall / ideal, TARGET_CONCURRENT_IDEAL)} (ideal)")
            print(f"   {'':18} CPU (own + commands) {ours_s.cpu:5.2f} s   {base_s.cpu:5.2f} s"
                  f"   ratio {ours_s.cpu / base_s.cpu:.2f}x")
            if not sqlite:
                floor = median(sides[2][0])
                print(f"   {'':18} LangGraph floor {floor.wall:5.2f} s ({floor.wall / ideal:.2f}x ideal,"
                      f" CPU {floor.cpu:.2f} s): bashgraph is {ours_s.wall / floor.wall:.2f}x the floor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a CI smoke test")
    quick = parser.parse_args().quick
    per_step(steps=5 if quick else 20, rounds=2 if quick else 9)
    asyncio.run(concurrency(runs=10 if quick else 50, steps=2 if quick else 5, sleep_s=0.2, rounds=1 if quick else 5))


if __name__ == "__main__":
    main()
