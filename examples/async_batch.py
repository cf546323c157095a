"""Many runs on one event loop: the tool path is async, so commands overlap.

Twenty agents each run `sleep 0.5`; together they take about 0.5 s, not 10 s.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

RUNS = 20


async def one(workdir: str, index: int) -> str:
    model = ScriptedChatModel([calls_reply(f"sleep 0.5; echo run {index}"), answer(f"run {index} done")])
    agent = build_graph(model=model, config=AgentConfig(workdir=workdir))
    state = await agent.ainvoke({"messages": [("user", f"task {index}")]})
    return str(state["status"])


async def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        started = time.perf_counter()
        statuses = await asyncio.gather(*(one(workdir, i) for i in range(RUNS)))
        elapsed = time.perf_counter() - started
    print(f"{RUNS} runs of `sleep 0.5`: {elapsed:.2f}s wall, statuses: {set(statuses)}")


if __name__ == "__main__":
    asyncio.run(main())
