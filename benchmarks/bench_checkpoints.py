"""Checkpoint cost per step and stored bytes: bashgraph against langchain's `create_agent`.

Both run the same scripted model (N steps, each one tool call printing 10 KiB, then an answer)
on a SqliteSaver in a fresh file, side by side in one process:

* bashgraph: `open_session` (SqliteSaver + command journal + thread lock, the real setup);
* anchor: `langchain.agents.create_agent` with a plain `@tool` running the command through
  `subprocess.run(["bash", "-c", ...])`.

Printed: ms per step with the checkpointer, the checkpointer's own cost (run with it minus run
without it), and the bytes stored (checkpoint and write blobs, plus bashgraph's journal rows;
and the file size after VACUUM). Ratios are bashgraph / anchor.

    python benchmarks/bench_checkpoints.py            # 5/10/20/40 steps, 5 runs each
    python benchmarks/bench_checkpoints.py --quick    # 5/10 steps, 1 run (CI smoke, < 30 s)
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.session import open_session
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

COMMAND = "head -c 10240 /dev/zero | tr '\\0' a"
TARGET_STEP_RATIO = 0.8
TARGET_SIZE_RATIO = 0.3


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def script(steps: int) -> list[AIMessage]:
    return [*(calls_reply(COMMAND) for _ in range(steps)), answer("done")]


def task() -> Any:
    return {"messages": [HumanMessage("print 10 KiB, again and again")]}


def ours(steps: int, db: Path | None, workdir: Path) -> float:
    """Seconds for one run of bashgraph (checkpointed through a Session when `db` is set)."""
    model = ScriptedChatModel(script(steps))
    config = AgentConfig(workdir=str(workdir), max_steps=steps + 5)
    if db is None:
        agent = build_graph(model=model, config=config)
        started = time.perf_counter()
        agent.invoke(task())
        return time.perf_counter() - started
    with open_session(str(db), model=model, config=config) as session:
        started = time.perf_counter()
        for _ in session.run(task(), "bench"):
            pass
        return time.perf_counter() - started


def anchor(steps: int, db: Path | None, workdir: Path) -> float:
    """Seconds for one run of create_agent (on a SqliteSaver when `db` is set)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver

    model = ScriptedChatModel(script(steps))
    conn = sqlite3.connect(str(db), check_same_thread=False) if db else None
    saver = SqliteSaver(conn) if conn else None
    agent = create_agent(model, tools=[bash], checkpointer=saver)
    started = time.perf_counter()
    agent.invoke(task(), {"configurable": {"thread_id": "bench"}, "recursion_limit": 4 * steps + 10})
    elapsed = time.perf_counter() - started
    if conn:
        conn.close()
    return elapsed


@dataclass
class Figures:
    ms_per_step: float
    overhead_ms_per_step: float
    blob_bytes: int
    file_bytes: int


def stored_bytes(db: Path) -> tuple[int, int]:
    """(bytes of checkpoint, write and journal rows; file size after VACUUM)."""
    conn = sqlite3.connect(str(db))
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        total = conn.execute(
            "SELECT SUM(length(checkpoint) + length(metadata)) FROM checkpoints").fetchone()[0] or 0
        total += conn.execute("SELECT SUM(length(value)) FROM writes").fetchone()[0] or 0
        if "bashgraph_journal" in tables:
            total += conn.execute(
                "SELECT SUM(length(command) + length(coalesce(result_json, ''))) "
                "FROM bashgraph_journal").fetchone()[0] or 0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return int(total), db.stat().st_size


def fsync_cost_ms(root: Path, commits: int = 40) -> float:
    """Cost of one synchronous=FULL commit in WAL mode here: the journal pays it per command."""
    conn = sqlite3.connect(str(root / "fsync-probe.sqlite"), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE probe (n INTEGER)")
        started = time.perf_counter()
        for number in range(commits):
            conn.execute("INSERT INTO probe VALUES (?)", (number,))
        return (time.perf_counter() - started) * 1000 / commits
    finally:
        conn.close()


def measure(engine: Callable[[int, Path | None, Path], float], steps: int, runs: int,
            root: Path, name: str) -> Figures:
    with_db, without_db, sizes = [], [], []
    for index in range(runs):
        db = root / f"{name}-{steps}-{index}.sqlite"
        with_db.append(engine(steps, db, root))
        without_db.append(engine(steps, None, root))
        sizes.append(stored_bytes(db))
    checkpointed, bare = statistics.median(with_db), statistics.median(without_db)
    return Figures(
        ms_per_step=checkpointed * 1000 / steps,
        overhead_ms_per_step=(checkpointed - bare) * 1000 / steps,
        blob_bytes=sizes[-1][0], file_bytes=sizes[-1][1],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 and 10 steps, one run each")
    args = parser.parse_args()
    step_counts, runs = ((5, 10), 1) if args.quick else ((5, 10, 20, 40), 5)
    print(f"command per step: {COMMAND!r}; {runs} run(s) each, median; SqliteSaver on a file")
    print(f"{'steps':>5} | {'ms/step ours':>12} {'anchor':>8} {'ratio':>6} | "
          f"{'ckpt ms/step ours':>17} {'anchor':>8} | {'stored KiB ours':>15} {'anchor':>8} "
          f"{'ratio':>6} | {'file KiB ours':>13} {'anchor':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as tmp:
        root = Path(tmp)
        ours(2, root / "warm-ours.sqlite", root)
        anchor(2, root / "warm-anchor.sqlite", root)
        for steps in step_counts:
            mine = measure(ours, steps, runs, root, "ours")
            theirs = measure(anchor, steps, runs, root, "anchor")
            print(
                f"{steps:>5} | {mine.ms_per_step:>12.2f} {theirs.ms_per_step:>8.2f} "
                f"{mine.ms_per_step / theirs.ms_per_step:>6.2f} | "
                f"{mine.overhead_ms_per_step:>17.2f} {theirs.overhead_ms_per_step:>8.2f} | "
                f"{mine.blob_bytes / 1024:>15.1f} {theirs.blob_bytes / 1024:>8.1f} "
                f"{mine.blob_bytes / theirs.blob_bytes:>6.2f} | "
                f"{mine.file_bytes / 1024:>13.1f} {theirs.file_bytes / 1024:>8.1f}",
                flush=True,
            )
        print(f"one fsynced commit (synchronous=FULL, WAL) here: {fsync_cost_ms(root):.2f} ms; "
              "bashgraph's journal makes one per command")
    print(f"targets: ms/step ratio <= {TARGET_STEP_RATIO}; stored ratio at 40 steps <= "
          f"{TARGET_SIZE_RATIO}")


if __name__ == "__main__":
    main()
