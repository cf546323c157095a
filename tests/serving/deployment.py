"""A real self-hosted deployment for tests and the load benchmark: bashgraph's `langgraph.json`
under `langhost serve` (the stock LangGraph API on langgraph-runtime-pg), on a PostgreSQL
database of its own and a Redis started as a child process.

    with Redis() as redis, fresh_database(admin_url) as db:
        server = Deployment(env, log, workers=1)
        server.start()          # the first start on an empty database runs the migrations
        ...
        server.stop()

What is missing to run one (langhost, redis-server, a PostgreSQL URL) is named by `missing()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
POSTGRES_ENV = "BASHGRAPH_TEST_POSTGRES"
#: No version check, usage ping or tracing: the server makes no outbound connection.
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
           "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
START_TIMEOUT_S = 120


def missing() -> str | None:
    """Why no deployment can run here (None when everything is there)."""
    if shutil.which("langhost") is None:
        return "langhost is not installed (pip install langhost langgraph-runtime-pg)"
    try:
        import langgraph_runtime_pg  # noqa: F401
    except ImportError:
        return "langgraph-runtime-pg is not installed (pip install langgraph-runtime-pg)"
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    if not os.environ.get(POSTGRES_ENV):
        return f"{POSTGRES_ENV} is not set"
    return None


class Redis:
    """`redis-server` on a free 127.0.0.1 port, in memory only, as a child process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def __enter__(self) -> Redis:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), _connect(self.port) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with status {self.proc.returncode}")
            time.sleep(0.1)
        raise RuntimeError("redis-server did not answer PING in 30 s")

    def __exit__(self, *exc_info: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def _connect(port: int) -> Any:
    import socket

    return socket.create_connection(("127.0.0.1", port), timeout=1)


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of `admin_url`; dropped afterwards."""
    import psycopg

    name = f"bashgraph_serving_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Deployment:
    """`langhost serve -c langgraph.json` from the repository root, in its own process group."""

    def __init__(self, env: dict[str, str], log: Path, *, workers: int = 1,
                 jobs_per_worker: int = 10) -> None:
        self.env, self.log = env, log
        self.workers, self.jobs_per_worker = workers, jobs_per_worker
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> Deployment:
        port = free_port()
        command = ["langhost", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "-c", "langgraph.json", "--workers", str(self.workers),
                   "--n-jobs-per-worker", str(self.jobs_per_worker)]
        with self.log.open("ab") as sink:
            self.proc = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=sink,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        self._wait_until_up()
        return self

    def _wait_until_up(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"langhost exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=1) as answer:
                    if answer.status == 200 and len(self.worker_pids()) >= self.workers:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"langhost did not answer /ok in {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        """The processes that run graphs: the server itself with one worker, else its children
        that are Python (uvicorn's workers; not a command a worker started)."""
        assert self.proc is not None
        if self.workers == 1:
            return [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            pids = [int(pid) for pid in children.read_text().split()]
        except OSError:
            return []
        return [pid for pid in pids if _is_worker(pid)]

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _is_worker(pid: int) -> bool:
    """A process uvicorn spawned to serve (not multiprocessing's resource tracker)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"multiprocessing.spawn" in cmdline and b"resource_tracker" not in cmdline
