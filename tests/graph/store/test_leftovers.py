"""kill -9 of the worker leaves its command running (it leads its own session, so nothing kills
it with the worker). The resume stops whatever of it still runs — its process group and the
processes that left it, found by the run marker its journal row holds — before it reports the
call `interrupted`: a retry can never run next to the first run."""

from __future__ import annotations

from pathlib import Path

from tests.graph.store.test_resume import kill, outcome, runs, spawn, wait_until
from tests.tools.runner.proctools import group_running, running


def test_resume_stops_the_cut_off_command_before_reporting_it_interrupted(
    db_url: str, thread_prefix: str, workdir: Path
) -> None:
    thread = f"{thread_prefix}-left"
    first = spawn(db_url, thread, "escaping", workdir)
    wait_until(lambda: (workdir / "pid").exists() and (workdir / "escaped").exists(),
               "the command to start", first)
    kill(first)
    shell, escaped = int((workdir / "pid").read_text()), int((workdir / "escaped").read_text())
    assert group_running(shell), "the command should outlive its worker"
    assert running(escaped)

    code, report = outcome(spawn(db_url, thread, "escaping", workdir, "--resume"))
    assert code == 0, report
    assert not group_running(shell)
    assert not running(escaped)
    [result] = report["results"]
    assert (result["outcome"], result["spawn_error"]) == ("spawn_error", "interrupted")
    assert "processes were still running and were stopped" in result["detail"]
    assert runs(workdir / "counter") == 1, report
