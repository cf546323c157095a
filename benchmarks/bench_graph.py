"""Graph overhead: bashgraph against `langchain.agents.create_agent`, measured side by side.

    python benchmarks/bench_graph.py            # full run (figures in docs/benchmarks.md)
    python benchmarks/bench_graph.py --quick    # CI smoke test, a few seconds

1. ms per step (one model call + one no-op command) with the same scripted model, without a
   checkpointer and with SQLite, and the ratio ours / create_agent.
2. 50 concurrent runs of 5 steps of `sleep 0.2` on one event loop, against the ideal 1.0 s.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anchor_agent import abash, bash, script
from langchain.agents import create_agent
from langgraph.checkpoint.sqlite import SqliteSaver

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel


def ours(steps: int, workdir: str, saver: Any) -> Callable[[int], None]:
    def go(index: int) -> None:
        agent = build_graph(
            model=ScriptedChatModel(script(steps, "true")), config=AgentConfig(workdir=workdir),
            checkpointer=saver,
        )
        agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": f"ours-{index}"}})
    return go


def baseline(steps: int, saver: Any) -> Callable[[int], None]:
    def go(index: int) -> None:
        agent = create_agent(ScriptedChatModel(script(steps, "true")), [bash], checkpointer=saver)
        agent.invoke(task_input(), {"configurable": {"thread_id": f"base-{index}"}})
    return go


def task_input() -> Any:
    """The same task for both agents (typed Any: create_agent's input type wants message objects)."""
    return {"messages": [("user", "go")]}


def ms_per_step(run: Callable[[int], None], steps: int, repeats: int) -> float:
    run(-1)  # warm-up: imports, first compile
    samples = []
    for index in range(repeats):
        started = time.perf_counter()
        run(index)
        samples.append((time.perf_counter() - started) * 1000 / steps)
    return statistics.median(samples)


def per_step(steps: int, repeats: int) -> None:
    print(f"\n1. per step ({steps}-step runs, median of {repeats}; one model call + `true`)")
    with tempfile.TemporaryDirectory() as tmp:
        for label, saver_of in (("no checkpointer", lambda _: None), ("SQLite", sqlite_saver)):
            ours_saver, base_saver = saver_of(Path(tmp, "ours.db")), saver_of(Path(tmp, "base.db"))
            mine = ms_per_step(ours(steps, tmp, ours_saver), steps, repeats)
            theirs = ms_per_step(baseline(steps, base_saver), steps, repeats)
            print(f"   {label:16} bashgraph {mine:6.2f} ms/step   create_agent {theirs:6.2f} ms/step"
                  f"   ratio {mine / theirs:.2f}x")


def sqlite_saver(path: Path) -> SqliteSaver:
    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver.setup()
    return saver


async def concurrent(runs: int, steps: int, sleep_s: float) -> None:
    ideal = steps * sleep_s
    print(f"\n2. {runs} concurrent runs x {steps} steps of `sleep {sleep_s}` (ideal {ideal:.2f}s)")
    with tempfile.TemporaryDirectory() as tmp:
        mine = [
            build_graph(model=ScriptedChatModel(script(steps, f"sleep {sleep_s}")), config=AgentConfig(workdir=tmp))
            for _ in range(runs)
        ]
        theirs = [create_agent(ScriptedChatModel(script(steps, f"sleep {sleep_s}")), [abash]) for _ in range(runs)]
        for label, agents in (("bashgraph", mine), ("create_agent + async tool", theirs)):
            started = time.perf_counter()
            await asyncio.gather(*(a.ainvoke(task_input()) for a in agents))
            wall = time.perf_counter() - started
            print(f"   {label:26} wall {wall:.2f}s   ratio to ideal {wall / ideal:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a CI smoke test")
    quick = parser.parse_args().quick
    per_step(steps=5 if quick else 20, repeats=2 if quick else 7)
    asyncio.run(concurrent(runs=10 if quick else 50, steps=2 if quick else 5, sleep_s=0.2))


if __name__ == "__main__":
    main()
