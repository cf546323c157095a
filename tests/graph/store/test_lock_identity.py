"""The thread lock belongs to the database file, not to the way its path is written: two workers
reaching one SQLite file through a symlink, or as `./x.sqlite` and its absolute path, never run
one thread at once. (PostgreSQL: advisory locks belong to the server's database whatever URL
reached it — `localhost` and `127.0.0.1` included.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bashgraph.graph.errors import ThreadBusyError
from bashgraph.graph.store.locks import thread_lock
from tests.graph.store.conftest import POSTGRES_ENV
from tests.graph.store.test_resume import WORKER, kill, wait_until


def worker(db: str, workdir: Path, cwd: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), db, "t1", "slow", str(workdir), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def spellings(tmp_path: Path, how: str) -> tuple[str, str, Path]:
    """Two ways to write one database file, and the directory the workers start in.

    (A symlinked *directory* was never a problem: the lock folder sits next to the file, so
    both spellings reach the same one. A symlink to the file itself has a folder of its own.)
    """
    real, project = tmp_path / "real", tmp_path / "project"
    real.mkdir()
    project.mkdir()
    (project / "x.sqlite").symlink_to(real / "x.sqlite")
    if how == "symlink":
        return str(real / "x.sqlite"), str(project / "x.sqlite"), tmp_path
    return "./x.sqlite", str(real / "x.sqlite"), project


@pytest.mark.parametrize("how", ["symlink", "relative"])
def test_two_workers_on_two_spellings_of_one_file_do_not_run_one_thread_together(
    tmp_path: Path, workdir: Path, how: str
) -> None:
    """The first worker runs the thread (a command sleeps); the second, given the other path,
    gets "busy" and runs nothing: the command ran once, and was not reported `interrupted`."""
    first_db, second_db, cwd = spellings(tmp_path, how)
    first = worker(first_db, workdir, cwd)
    try:
        wait_until((workdir / "pid").exists, "the command to start", first)
        second = worker(second_db, workdir, cwd, "--resume")
        out, err = second.communicate(timeout=60)
        assert second.returncode == 3, f"{out}{err}"
        assert json.loads(out.splitlines()[-1])["error"] == "busy"
        assert (workdir / "counter").read_text() == "run\n"
    finally:
        kill(first)


def test_postgres_lock_is_the_same_for_two_host_names_of_one_server() -> None:
    url = os.environ.get(POSTGRES_ENV)
    if not url or "127.0.0.1" not in url:
        pytest.skip(f"{POSTGRES_ENV} is not set to a 127.0.0.1 URL")
    other = url.replace("127.0.0.1", "localhost")
    with thread_lock(url, "lock-identity"), pytest.raises(ThreadBusyError), \
            thread_lock(other, "lock-identity"):
        pytest.fail("one thread was locked twice through two host names")
