"""Fixtures of the CLI tests: the `bashgraph` command run as its own process against a
FakeOpenAIServer, with a temporary database, working directory and home.

`cli(...)` runs one command to its end; `cli.start(...)` returns the running process (for
Ctrl-C). Each command runs in a process of its own, forked from a server that has done the
imports already (see forkserver.py); test_entry_points.py starts the real console script.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_server import FakeOpenAIServer, openai_server_fixture  # noqa: F401

FORKSERVER = Path(__file__).with_name("forkserver.py")
REPO = Path(__file__).resolve().parents[3]
#: Variables of the test runner's own environment that would change what the CLI does.
_HIDDEN_PREFIXES = ("OPENAI_", "BASHGRAPH_", "LANGSMITH_", "LANGCHAIN_")


@dataclass(frozen=True)
class Result:
    """How one `bashgraph` command ended."""

    code: int
    out: str
    err: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """stdout of a --json command, every line parsed (a line that is not JSON fails)."""
        return [json.loads(line) for line in self.out.splitlines()]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["event"] == kind]


class ForkServer:
    """tests/graph/cli/forkserver.py, started once per session; its replies are read on a thread."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(FORKSERVER)], cwd=REPO, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )
        self.replies: queue.Queue[dict[str, int] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)  # the server died: waiting tests fail instead of hanging

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> dict[str, int]:
        message = self.replies.get(timeout=timeout)
        if message is None:
            raise RuntimeError(f"the CLI fork server exited with status {self.proc.wait()}")
        return message

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


class Running:
    """A `bashgraph` command still running."""

    def __init__(self, server: ForkServer, pid: int, out: Path, err: Path) -> None:
        self.server, self.pid, self._out, self._err = server, pid, out, err
        self.code: int | None = None

    @property
    def ended(self) -> bool:
        """The server has reported its exit (the one command it runs at a time)."""
        return self.code is not None or not self.server.replies.empty()

    def finish(self, timeout: float = 30) -> Result:
        if self.code is None:
            try:
                self.code = self.server.receive(timeout)["code"]
            except queue.Empty:
                os.kill(self.pid, signal.SIGKILL)
                self.code = self.server.receive(10)["code"]
                raise AssertionError(f"bashgraph did not end within {timeout} s:\n"
                                     f"{self._read(self._out)}\n{self._read(self._err)}") from None
        return Result(self.code, self._read(self._out), self._read(self._err))

    @staticmethod
    def _read(path: Path) -> str:
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class Cli:
    """Runs `bashgraph ARGV` in `home` with `env` (server URL, database, workdir)."""

    server: ForkServer
    home: Path
    env: dict[str, str]
    db: Path
    workdir: Path
    running: list[Running] = field(default_factory=list)

    def __call__(self, *argv: str, timeout: float = 30, **env: str) -> Result:
        return self.start(*argv, **env).finish(timeout)

    def start(self, *argv: str, tty: str | None = None, **env: str) -> Running:
        """Start a command (the server runs one at a time: finish it before the next)."""
        number = len(self.running)
        out, err = self.home / f".out-{number}", self.home / f".err-{number}"
        self.server.send({"argv": list(argv), "env": {**self.env, **env}, "cwd": str(self.home),
                          "stdout": str(out), "stderr": str(err), "tty": tty})
        running = Running(self.server, self.server.receive(30)["pid"], out, err)
        self.running.append(running)
        return running


def cli_env(home: Path, server: FakeOpenAIServer, db: Path, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_HIDDEN_PREFIXES)}
    return {
        **env, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"), "COLUMNS": "120",
        "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "x",
        "BASHGRAPH_DB": str(db), "BASHGRAPH_WORKDIR": str(workdir),
        # Model failures surface at once unless a test asks for retries.
        "BASHGRAPH_MODEL_MAX_RETRIES": "0", "BASHGRAPH_REQUEST_TIMEOUT_S": "10",
    }


@pytest.fixture(scope="session")
def fork_server() -> Iterator[ForkServer]:
    server = ForkServer()
    yield server
    server.close()


@pytest.fixture
def cli(fork_server: ForkServer, tmp_path: Path, openai_server: FakeOpenAIServer) -> Iterator[Cli]:
    """`bashgraph` against `openai_server`, with its own database, workdir and home."""
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    db = tmp_path / "db" / "bashgraph.sqlite"
    runner = Cli(fork_server, home, cli_env(home, openai_server, db, workdir), db, workdir)
    yield runner
    for running in runner.running:  # a test that failed half-way must not leave one running
        if running.code is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.pid, signal.SIGKILL)
            running.finish(10)
