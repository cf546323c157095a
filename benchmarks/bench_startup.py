"""Start time of the `bashgraph` command, cold, against `python -c pass` in the same rounds.

Each round starts, in turn: the anchor (`python -c pass`), then every command below as a new
process (`python -m bashgraph.graph.cli ...`, what the console script runs). Medians of the
wall-clock time per command are printed, in ms and as a multiple of the anchor. The quick
commands must stay under TARGET_S; the run exits 1 when one does not and is also MAX_RATIO
times the anchor or more (on a slow or busy machine the interpreter's own start grows too, and
the ratio tells whether bashgraph is to blame). `graph --format dot`
builds the graph, as `run` does (it imports LangChain and LangGraph): it is shown for
comparison and has no target.

The database is made once, before timing, with a finished thread in it (a run against a
scripted model server on 127.0.0.1), so `threads` and `history` read real checkpoints.

    python benchmarks/bench_startup.py            # 9 rounds
    python benchmarks/bench_startup.py --quick    # 3 rounds (CI smoke, ~10 s)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support: the scripted OpenAI-compatible server

from tests.support.openai_server import FakeOpenAIServer, text, tool_call  # noqa: E402

TARGET_S = 0.3
MAX_RATIO = 3.0
THREAD = "bench-startup"
QUICK = {
    "--help": ["--help"],
    "--version": ["--version"],
    "threads": ["threads"],
    "threads --json": ["threads", "--json"],
    "history": ["history", THREAD],
    "graph (mermaid)": ["graph"],
    "graph (ascii)": ["graph", "--format", "ascii"],
}


def seconds(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return elapsed


def prepare(db: Path, env: dict[str, str], workdir: str) -> None:
    """One finished thread in `db`: a command and a final answer."""
    with FakeOpenAIServer(tool_call("bash", {"command": "echo hi"}), text("done")) as server:
        argv = [sys.executable, "-m", "bashgraph.graph.cli", "run", "say hi", "--thread", THREAD,
                "--base-url", server.base_url, "--workdir", workdir]
        seconds(argv, {**env, "OPENAI_API_KEY": "x"})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    rounds = 3 if parser.parse_args().quick else 9
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))}
        env |= {"BASHGRAPH_DB": str(Path(tmp) / "bench.sqlite"), "HOME": tmp}
        prepare(Path(env["BASHGRAPH_DB"]), env, tmp)
        commands = {name: [sys.executable, "-m", "bashgraph.graph.cli", *argv] for name, argv in QUICK.items()}
        commands["graph --format dot"] = [sys.executable, "-m", "bashgraph.graph.cli", "graph", "--format", "dot"]
        anchor_argv = [sys.executable, "-c", "pass"]
        times: dict[str, list[float]] = {name: [] for name in ["python -c pass", *commands]}
        for _ in range(rounds):  # interleaved: the anchor, then each command once
            times["python -c pass"].append(seconds(anchor_argv, env))
            for name, argv in commands.items():
                times[name].append(seconds(argv, env))
    anchor = statistics.median(times["python -c pass"])
    print(f"{'command':<18}{'median ms':>10}{'x anchor':>10}  target")
    slow = []
    for name, values in times.items():
        median = statistics.median(values)
        target = f"< {TARGET_S * 1000:.0f} ms" if name in QUICK else ""
        if name in QUICK and median >= TARGET_S and median >= MAX_RATIO * anchor:
            slow.append(name)
        print(f"{name:<18}{median * 1000:10.0f}{median / anchor:10.2f}  {target}")
    if slow:
        print(f"over {TARGET_S * 1000:.0f} ms and {MAX_RATIO:.0f}x the anchor: {', '.join(slow)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
