"""bashgraph on a real self-hosted server under load: langhost + langgraph-runtime-pg, PostgreSQL,
Redis, driven with `langgraph_sdk` (what docs/serving.md deploys).

    python benchmarks/bench_serving.py            # 20/50/100/200 concurrent runs, 1 and 2 workers
    python benchmarks/bench_serving.py --quick    # 20 runs, 1 and 2 workers (CI smoke, ~1-2 min)

Each run is a new thread whose model (tests/serving/command_model.py, over HTTP) asks for
`sleep 0.2` three times, then answers: 4 model calls and 3 commands, ideally 0.6 s. All runs of a
level start at once with `runs.wait`. Per level: runs/s (runs / wall time), p50/p95 latency of
one `runs.wait`, failed runs, runs whose `runs.wait` did not return the final state, server CPU
per run (user + system time of the server's Python processes), and bashgraph's share of it: each
worker is sampled with py-spy, and a sample is bashgraph's when the innermost frame that is
bashgraph's or LangGraph's/LangChain's/the server's is bashgraph's (a library bashgraph calls, such
as psycopg or subprocess, counts as bashgraph's; one LangGraph calls does not).

Needs langhost, langgraph-runtime-pg, redis-server and BASHGRAPH_TEST_POSTGRES (an admin URL:
a fresh database is created and dropped); without them it says so and exits 0. Without py-spy
the share is not measured. Exits 1 when a run failed or a `runs.wait` did not return the final
state (the server's `http.app`, graph/server_app.py, answers it from the thread when
langgraph-runtime-pg's join ended before the last event arrived from the other worker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.serving: the deployment and the model

from tests.serving.command_model import CommandModel, task  # noqa: E402
from tests.serving.deployment import (  # noqa: E402
    OFFLINE,
    POSTGRES_ENV,
    Deployment,
    Redis,
    fresh_database,
    missing,
)
from tests.support.openai_server import FakeOpenAIServer  # noqa: E402

COMMAND, STEPS = "sleep 0.2", 3
#: The packages whose frames are the server's, LangGraph's or LangChain's (not bashgraph's).
THEIRS = ("/langgraph/", "/langchain_core/", "/langchain_openai/", "/langgraph_api/",
          "/langgraph_runtime_pg/", "/langgraph_runtime_inmem/", "/uvicorn/", "/starlette/")
_FILE = re.compile(r"\(([^()]*):\d+\)$")


@dataclass
class Level:
    workers: int
    runs: int
    wall_s: float
    latencies: list[float]
    failed: int
    not_final: int
    cpu_s: float
    share: float | None

    def row(self) -> str:
        p50 = statistics.median(self.latencies) if self.latencies else float("nan")
        p95 = _percentile(self.latencies, 0.95)
        share = f"{self.share:.0%}" if self.share is not None else "n/a"
        return (f"| {self.workers} | {self.runs} | {self.runs / self.wall_s:.1f} | {p50:.2f} | {p95:.2f} "
                f"| {self.failed} | {self.not_final} | {self.cpu_s / self.runs * 1000:.0f} ms | {share} |")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _server_env(database: str, redis: str, model: FakeOpenAIServer, folder: Path) -> dict[str, str]:
    (folder / "work").mkdir(parents=True, exist_ok=True)
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))},
            **OFFLINE, "DATABASE_URI": database, "REDIS_URI": redis,
            "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "x",
            "BASHGRAPH_WORKDIR": str(folder / "work"), "BASHGRAPH_MODEL_MAX_RETRIES": "0"}


def _server_cpu_s(server: Deployment) -> float:
    """User + system seconds of the server's Python processes (its commands left out)."""
    assert server.proc is not None
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in {server.proc.pid, *server.worker_pids()}:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _one_run(client: Any) -> tuple[float, bool]:
    thread = await client.threads.create()
    started = time.perf_counter()
    state = await client.runs.wait(thread["thread_id"], "bashgraph", input=task(COMMAND, STEPS))
    latency = time.perf_counter() - started
    tools = [m for m in state.get("messages", []) if m.get("type") == "tool"]
    final = state.get("status") == "done" and len(tools) == STEPS
    return latency, final


async def _level(url: str, runs: int) -> tuple[float, list[float], int, int]:
    from langgraph_sdk import get_client

    client = get_client(url=url, timeout=600)
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(_one_run(client) for _ in range(runs)), return_exceptions=True)
    wall = time.perf_counter() - started
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    failed = len(outcomes) - len(done)
    for problem in [o for o in outcomes if isinstance(o, BaseException)][:3]:
        print(f"  a run failed: {problem!r}"[:300])
    return wall, [latency for latency, _ in done], failed, sum(not final for _, final in done)


def _profile(server: Deployment, folder: Path) -> list[tuple[subprocess.Popen[bytes], Path]]:
    if shutil.which("py-spy") is None:
        return []
    spies = []
    for pid in server.worker_pids():
        out = folder / f"profile-{pid}.txt"
        command = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                   "--nonblocking", "--full-filenames", "--output", str(out)]
        spies.append((subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out))
    time.sleep(1)  # attached
    return spies


def _share(spies: list[tuple[subprocess.Popen[bytes], Path]]) -> float | None:
    """bashgraph's share of the samples py-spy took while the level ran."""
    if not spies:
        return None
    owners: Counter[str] = Counter()
    for spy, out in spies:
        spy.send_signal(2)  # SIGINT: py-spy writes what it sampled
        spy.wait(60)
        if out.exists():
            for line in out.read_text(errors="replace").splitlines():
                stack, _, count = line.rpartition(" ")
                if stack and count.isdigit():
                    owners[_owner(stack.split(";"))] += int(count)
    total = sum(owners.values())
    return owners["bashgraph"] / total if total else None


def _owner(frames: list[str]) -> str:
    """"bashgraph" when the innermost frame that is a file of this repository (bashgraph, also
    through an editable install's links) or of LangGraph/LangChain/the server is the former."""
    for frame in reversed(frames):  # innermost first
        found = _FILE.search(frame)
        path = found.group(1) if found else ""
        if path.startswith(f"{REPO}/"):
            return "bashgraph"
        if any(part in path for part in THEIRS):
            return "server"
    return "server"


def _run_workers(workers: int, levels: list[int], database: str, redis: str, folder: Path) -> list[Level]:
    results = []
    with CommandModel() as model:
        env = _server_env(database, redis, model, folder)
        jobs = max(levels) // workers + 1  # every run of the largest level at once
        server = Deployment(env, folder / f"server-{workers}.log", workers=workers, jobs_per_worker=jobs)
        server.start()
        try:
            asyncio.run(_level(server.url, 2))  # warm: the graph is built on a worker's first run
            for runs in levels:
                spies = _profile(server, folder)
                cpu_before = _server_cpu_s(server)
                wall, latencies, failed, not_final = asyncio.run(_level(server.url, runs))
                cpu = _server_cpu_s(server) - cpu_before
                level = Level(workers, runs, wall, latencies, failed, not_final, cpu, _share(spies))
                print(level.row(), flush=True)
                results.append(level)
        finally:
            server.stop()
    return results


def _migrate(database: str, redis: str, folder: Path) -> None:
    with CommandModel() as model:
        first = Deployment(_server_env(database, redis, model, folder), folder / "migrate.log")
        first.start()
        first.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 concurrent runs, 1 and 2 workers")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], choices=[1, 2, 3, 4],
                        help="worker counts to measure (default: 1 2)")
    parser.add_argument("--levels", type=int, nargs="+", help="concurrent runs per level")
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"bench_serving: skipped, no self-hosted deployment here: {reason}")
        return 0
    levels = args.levels or ([20] if args.quick else [20, 50, 100, 200])
    if min(levels) < 1:
        parser.error("--levels: each level needs at least one run")
    print(f"{len(levels)} level(s), each run: {STEPS} x `{COMMAND}` (ideal {STEPS * 0.2:.1f} s)")
    print("| workers | concurrent runs | runs/s | p50 s | p95 s | failed | not final "
          "| server CPU/run | bashgraph share |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    results: list[Level] = []
    with tempfile.TemporaryDirectory() as tmp, Redis() as redis, \
            fresh_database(os.environ[POSTGRES_ENV]) as database:
        folder = Path(tmp)
        if min(args.workers) > 1:  # the migrations need one worker first (docs/serving.md)
            _migrate(database, redis.url, folder)
        for workers in sorted(args.workers):
            results += _run_workers(workers, levels, database, redis.url, folder)
    failed = sum(level.failed for level in results)
    not_final = sum(level.not_final for level in results)
    if failed or not_final:
        print(f"bench_serving: {failed} run(s) failed, {not_final} runs.wait did not return the final state")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
