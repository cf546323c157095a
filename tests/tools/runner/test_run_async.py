"""arun_command: the same results as run_command, on the event loop (ordinary commands start no thread)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bashgraph.tools import CommandResult, Outcome, SpawnErrorKind, arun_command, run_command
from tests.tools.runner.proctools import (
    cancel_once_started,
    gone_within,
    kill_quietly,
    marked_processes,
    read_pids,
)


def arun(command: str, **kwargs: Any) -> CommandResult:
    """arun_command in a fresh event loop."""
    return asyncio.run(arun_command(command, **kwargs))


def test_the_basic_shapes_match_the_sync_results() -> None:
    """Output, exit codes and stderr on success end the same way in both forms."""
    commands = ["echo hi", "exit 3", "echo hello; echo warn >&2; exit 3"]
    for command in commands:
        sync, async_ = run_command(command), arun(command)
        assert (async_.outcome, async_.exit_code, async_.stdout, async_.stderr) == (
            sync.outcome, sync.exit_code, sync.stdout, sync.stderr)
    missing = arun("echo hi", shell="/nonexistent/bash")
    assert (missing.outcome, missing.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.NOT_FOUND)


def test_async_final_cwd_and_missing_cwd(tmp_path: Path) -> None:
    """final_cwd and a missing working directory behave as in the sync form."""
    assert arun("cd / && exit 1", cwd=tmp_path).final_cwd == "/"
    missing = arun("true", cwd=tmp_path / "gone")
    assert missing.spawn_error is SpawnErrorKind.NOT_FOUND


def test_async_timeout_with_grandchild_holding_the_pipe(tmp_path: Path) -> None:
    """A grandchild holding the pipe does not hold the coroutine; everything is killed."""
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = arun(f"sleep 30 & echo $! > {pids}; echo partial; sleep 30", timeout=0.5, grace=0.3)
    assert time.monotonic() - started < 2.5
    assert (result.spawn_error, result.stdout) == (SpawnErrorKind.TIMEOUT, "partial\n")
    assert all(gone_within(pid, 1) for pid in read_pids(pids))


def test_async_setsid_escapee_is_killed(tmp_path: Path) -> None:
    """An escaped process is found and killed by the async form too."""
    pids = tmp_path / "pids"
    result = arun(f"setsid sh -c 'echo $$ > {pids}; exec sleep 30' & sleep 30", timeout=0.5,
                  grace=0.3)
    assert result.spawn_error is SpawnErrorKind.TIMEOUT
    assert all(gone_within(pid, 1) for pid in read_pids(pids))


def test_async_large_output_is_bounded(tmp_path: Path) -> None:
    """Tens of MB through the event loop: capped text, complete spill file."""
    result = arun("head -c 50000000 /dev/zero", spill_dir=tmp_path)
    assert result.stdout_file is not None
    assert os.path.getsize(result.stdout_file) == result.stdout_bytes == 50_000_000
    assert len(result.stdout) <= 10_000
    os.unlink(result.stdout_file)


def test_cancelling_kills_the_process_tree(tmp_path: Path) -> None:
    """Cancelling the coroutine kills the command and what it started, then propagates."""
    pids = tmp_path / "pids"

    assert asyncio.run(cancel_once_started(pids, f"sleep 30 & echo $! $$ > {pids}; sleep 30"))
    assert all(gone_within(pid, 1) for pid in read_pids(pids))


_CANCEL_TWICE = """
import asyncio, os, sys
from bashgraph.tools import arun_command

async def main(pids):
    task = asyncio.create_task(arun_command(
        f"setsid sleep 30 & echo $! > {pids}.tmp; sleep 30 & echo $! >> {pids}.tmp; "
        f"mv {pids}.tmp {pids}; wait", timeout=60))
    while not os.path.exists(pids):
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        sys.exit(0)
    sys.exit("the task was not cancelled")

asyncio.run(main(sys.argv[1]))
"""


def test_a_second_cancel_still_waits_for_the_kill(tmp_path: Path) -> None:
    """Cancelled twice, the task still ends only once its process tree is dead: the program
    exits right after, and the thread doing the kill (a daemon) would die with it."""
    pids = tmp_path / "pids"
    done = subprocess.run([sys.executable, "-c", _CANCEL_TWICE, str(pids)], timeout=30, check=False)
    assert done.returncode == 0
    left = [pid for pid in read_pids(pids) if not gone_within(pid, 1)]
    kill_quietly(*left)
    assert left == []


def test_concurrent_commands_run_together_without_threads() -> None:
    """Ten 0.3 s commands finish together, and no thread is started while they run."""
    threads_before = threading.active_count()
    # Threads of ours already running (the process-wide spawner of background jobs, when an
    # earlier test started a job) are not started by these commands.
    existing = set(threading.enumerate())

    async def many() -> tuple[list[CommandResult], int, list[str]]:
        batch = asyncio.gather(*(arun_command(f"sleep 0.3; echo {i}") for i in range(10)))
        await asyncio.sleep(0.15)  # every command is running now
        ours = [t.name for t in threading.enumerate()
                if t.name.startswith("bashgraph") and t not in existing]
        return await batch, threading.active_count(), ours

    started = time.monotonic()
    results, threads_during, ours = asyncio.run(many())
    assert time.monotonic() - started < 2.0
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]
    # (<=: a hand-over thread of an earlier test may still be on its way out)
    assert threads_during <= threads_before
    assert ours == []


def test_no_marked_process_survives_a_batch() -> None:
    """After many async runs with background jobs, none of their processes remain."""
    async def batch() -> list[CommandResult]:
        return await asyncio.gather(
            *(arun_command("sleep 30 & echo $BASHGRAPH_RUN_ID", timeout=5) for _ in range(5))
        )

    results = asyncio.run(batch())
    markers = [r.stdout.strip().rsplit(":", 1)[-1] for r in results]
    assert all(len(marker) == 32 for marker in markers)
    assert all(not marked_processes(marker) for marker in markers)


def test_a_cancel_after_the_thread_finished_is_a_cancel_and_leaves_no_spill_file(tmp_path: Path) -> None:
    """Cancelled once its hand-over thread has built the result (the loop was busy and had not
    delivered it yet): the caller gets CancelledError, not the wake pipe's BrokenPipeError, and
    the dropped result's spill file is removed like that of any cancelled run."""

    async def cancel_late() -> BaseException | None:
        task = asyncio.ensure_future(arun_command(
            "seq 1 200000; sleep 0.2", spill_dir=tmp_path, max_output_chars=300))
        await asyncio.sleep(0.1)  # spawned, spilled, handed over to its thread
        time.sleep(0.6)  # the loop is busy elsewhere while the thread finishes the run
        task.cancel()
        try:
            await task
        except BaseException as exc:  # what the caller sees
            return exc
        return None

    raised = asyncio.run(cancel_late())
    assert isinstance(raised, asyncio.CancelledError), repr(raised)
    assert list(tmp_path.iterdir()) == []
