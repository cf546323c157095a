"""kill -9 a worker process at the worst moments, resume in a new one: nothing runs twice,
nothing is lost, every call gets an answer. Real processes, real bash, SQLite and PostgreSQL;
the workers use the sync session, or the async one (`aopen_session`) where a test says `mode`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bashgraph.graph.store.journal import open_journal

WORKER = Path(__file__).with_name("worker.py")
#: Worker flags of each session: the sync one, the async one.
MODES = {"sync": (), "async": ("--async",)}




def spawn(db: str, thread: str, scenario: str, workdir: Path, *flags: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), db, thread, scenario, str(workdir), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def outcome(worker: subprocess.Popen[str], timeout: float = 60) -> tuple[int, dict[str, Any]]:
    out, err = worker.communicate(timeout=timeout)
    lines = out.strip().splitlines()
    assert lines, f"worker printed nothing (exit {worker.returncode}); stderr:\n{err[-2000:]}"
    return worker.returncode, json.loads(lines[-1])


def wait_until(check: Any, what: str, worker: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if worker.poll() is not None:
            _, err = worker.communicate()
            pytest.fail(f"worker exited ({worker.returncode}) before {what}:\n{err[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def kill(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=10)


def runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("mode", MODES)
def test_a_command_killed_midway_is_reported_interrupted_not_rerun(
    db_url: str, thread_prefix: str, workdir: Path, mode: str
) -> None:
    """SIGKILL while a command sleeps; a new process resumes: the counter shows one run, the
    model reads spawn_error/interrupted, and the run completes."""
    thread = f"{thread_prefix}-mid"
    first = spawn(db_url, thread, "slow", workdir, *MODES[mode])
    wait_until((workdir / "pid").exists, "the command to start", first)
    kill(first)
    code, report = outcome(spawn(db_url, thread, "slow", workdir, "--resume", *MODES[mode]))
    assert code == 0, report
    assert runs(workdir / "counter") == 1
    [result] = report["results"]
    assert (result["outcome"], result["spawn_error"]) == ("spawn_error", "interrupted")
    assert "it may have had side effects, so it was not run again" in result["detail"]
    assert any(text.startswith("[spawn error: interrupted") for text in report["model_saw"])
    assert report["status"] == "done"


def test_a_kill_inside_a_parallel_batch_reuses_the_finished_call(
    db_url: str, thread_prefix: str, workdir: Path
) -> None:
    """Call A finished, call B still running at SIGKILL: on resume A's recorded result is reused
    (not re-run) and B is interrupted; both calls are answered."""
    thread = f"{thread_prefix}-par"
    first = spawn(db_url, thread, "parallel", workdir)
    with open_journal(db_url) as journal:
        def a_recorded() -> bool:
            return any(key.endswith("/ca") and entry.result is not None
                       for key, _, entry in journal.entries(thread))

        wait_until(a_recorded, "call A's result in the journal", first)
        wait_until((workdir / "pid").exists, "call B to start", first)
    kill(first)
    code, report = outcome(spawn(db_url, thread, "parallel", workdir, "--resume"))
    assert code == 0, report
    assert (runs(workdir / "count-a"), runs(workdir / "count-b")) == (1, 1)
    a, b = report["results"]
    assert (a["outcome"], a["stdout"]) == ("ok", "count-a-done\n")
    assert (b["outcome"], b["spawn_error"]) == ("spawn_error", "interrupted")
    assert report["model_saw"][0] == "count-a-done"
    assert report["status"] == "done"


@pytest.mark.parametrize("mode", MODES)
def test_a_kill_between_the_result_and_its_checkpoint_reuses_the_result(
    db_url: str, thread_prefix: str, workdir: Path, mode: str
) -> None:
    """SIGKILL right after the journal recorded a result, before LangGraph checkpointed the step:
    the resume answers the call with the recorded result and runs nothing again."""
    thread = f"{thread_prefix}-win"
    first = spawn(db_url, thread, "fast", workdir, *MODES[mode], env={"WORKER_KILL_AFTER_FINISH": "1"})
    first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert runs(workdir / "counter") == 1
    code, report = outcome(spawn(db_url, thread, "fast", workdir, "--resume", *MODES[mode]))
    assert code == 0, report
    assert runs(workdir / "counter") == 1
    [result] = report["results"]
    assert (result["outcome"], result["stdout"]) == ("ok", "counter-done\n")
    assert report["model_saw"] == ["counter-done"]
    assert report["status"] == "done"


@pytest.mark.parametrize(("first_mode", "second_mode"), [("sync", "async"), ("async", "sync")])
def test_a_second_process_resuming_a_running_thread_is_refused(
    db_url: str, thread_prefix: str, workdir: Path, first_mode: str, second_mode: str
) -> None:
    """While one worker runs the thread, another that resumes it gets "thread busy" and runs
    nothing, whichever session each uses; once the first dies, the thread can be resumed."""
    thread = f"{thread_prefix}-two"
    first = spawn(db_url, thread, "slow", workdir, *MODES[first_mode])
    wait_until((workdir / "pid").exists, "the command to start", first)
    try:
        code, report = outcome(spawn(db_url, thread, "slow", workdir, "--resume", *MODES[second_mode]))
        assert code == 3
        assert report["error"] == "busy"
        assert report["message"].startswith(f"thread {thread} is busy: another worker is running it")
        assert f"pid {first.pid}" in report["message"]
        assert runs(workdir / "counter") == 1
    finally:
        kill(first)
    code, report = outcome(spawn(db_url, thread, "slow", workdir, "--resume", *MODES[second_mode]))
    assert (code, report["status"], runs(workdir / "counter")) == (0, "done", 1)
