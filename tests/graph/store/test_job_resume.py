"""kill -9 a worker while its background job runs, resume in a new process: nothing of the job
is left, the model is told the job is gone (`spawn_error/interrupted`), and it never starts
twice. Real processes, real bash, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools.runner.proctools import gone_within, kill_quietly, marked_processes, running

WORKER = Path(__file__).with_name("job_worker.py")


def spawn(db: str, thread: str, workdir: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), db, thread, str(workdir), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, worker: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        if worker.poll() is not None:
            pytest.fail(f"worker exited ({worker.returncode}) first:\n{worker.communicate()[1][-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {path.name}"
        time.sleep(0.05)


def report(worker: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = worker.communicate(timeout=90)
    assert worker.returncode == 0, err[-2000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_kill_9_of_the_worker_then_resume_leaves_nothing_of_the_job_running(
    db_url: str, thread_prefix: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    thread = f"{thread_prefix}-job"
    first = spawn(db_url, thread, workdir)
    wait_for(workdir / "pid", first)  # the job runs, and the worker is inside the slow command
    job_pids = [int((workdir / name).read_text()) for name in ("escapee", "leader")]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)
    try:
        assert all(running(pid) for pid in job_pids), "the job outlives its killed worker"
        resumed = report(spawn(db_url, thread, workdir, "--resume"))
        assert [pid for pid in job_pids if not gone_within(pid, 5)] == []
        for marker in resumed["markers"]:
            assert marked_processes(marker) == []
        assert (workdir / "job-starts").read_text().splitlines() == ["run"]  # never started twice
        read = next(r for r in resumed["results"] if r["name"] == "bash_output")
        assert (read["outcome"], read["spawn_error"]) == ("spawn_error", "interrupted")
        assert "job job-1 is gone" in read["detail"]
        assert "not started again" in read["detail"]
        assert resumed["ended"] == ["the worker process that ran it stopped"]
        assert resumed["status"] == "done"
    finally:
        kill_quietly(*job_pids)
        slow = (workdir / "pid").read_text().strip()
        if slow:
            kill_quietly(int(slow))

