"""Exactly-once under the LangGraph server: a command cut off mid-run is never started again.

Two ways to cut a command off under `langgraph dev`, each followed by continuing the thread with
`input=None` through `langgraph_sdk`:
* `runs.cancel` while the command runs (the server stays up);
* kill -9 of the whole server while the command runs, then a new server on the same state.
Each time the command (`echo x >> counter; sleep 120`) must have run once, no process of it may
be left, and the model's next request must carry the `spawn_error/interrupted` result.

The journal lives in the server's own store (`BaseStore`). `langgraph dev` writes its in-memory
state (checkpoints and store alike) to `.langgraph_api/` every 10 s, so the kill test waits for
one flush after the command started: a kill inside that window loses the checkpoint together
with the journal row, which is what docs/servers.md says about `langgraph dev`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_langgraph_dev import OFFLINE, REPO, STATE_DIR, wait_until_up
from tests.support.openai_server import FakeOpenAIServer, text, tool_call
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

MARKER_ENV = "BASHGRAPH_TEST_EXACTLY_ONCE"
DEV_FLUSH_S = 10  # langgraph_runtime_inmem writes its state every 10 s


def _server_env(model: FakeOpenAIServer, work: Path, spill: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))},
        **OFFLINE, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "x",
        "BASHGRAPH_WORKDIR": str(work), "BASHGRAPH_SPILL_DIR": str(spill),
        "BASHGRAPH_MODEL_MAX_RETRIES": "0",
        # An environment fault goes to the model (not to a person), so the test can read what
        # the model was told.
        "BASHGRAPH_ON_ENVIRONMENT_ERROR": "model",
        # Lets the test find the command's processes (and only this test's) in /proc.
        MARKER_ENV: str(work),
    }


class Server:
    """`langgraph dev` that can be killed with SIGKILL and started again on the same state."""

    def __init__(self, env: dict[str, str], log: Path, repo: Path) -> None:
        self.env, self.log, self.repo = env, log, repo
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        port = free_port()
        command = ["langgraph", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                   "--port", str(port)]
        with self.log.open("ab") as sink:
            self.proc = subprocess.Popen(command, cwd=self.repo, env=self.env, stdout=sink,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        wait_until_up(self.proc, self.url, self.log)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def server(model: FakeOpenAIServer, tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "work").mkdir()
    (tmp_path / "spill").mkdir()
    env = _server_env(model, tmp_path / "work", tmp_path / "spill")
    running = Server(env, tmp_path / "server.log", REPO)
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    running.start()
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(STATE_DIR, ignore_errors=True)


def _script(model: FakeOpenAIServer) -> None:
    model.add(tool_call("bash", {"command": "echo x >> counter; sleep 120"}), text("it was cut off"))


def _wait_for(predicate: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _marked_processes(marker: str) -> list[int]:
    """Processes whose environment carries this test's marker (the command and its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0") and _is_sleep(entry):
            found.append(int(entry.name))
    return found


def _is_sleep(proc_dir: Path) -> bool:
    try:
        return (proc_dir / "cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep")
    except OSError:
        return False


def _start(server: Server) -> tuple[Any, str, str]:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    task: Any = {"messages": [{"role": "user", "content": "count once"}]}
    run = client.runs.create(thread["thread_id"], "bashgraph", input=task)
    return client, thread["thread_id"], run["run_id"]


def _continue(server: Server, thread_id: str) -> Any:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server.url)
    return client.runs.wait(thread_id, "bashgraph", input=None)


def _assert_told_interrupted(model: FakeOpenAIServer, state: Any) -> None:
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert len(tools) == 1, state["messages"]
    artifact = tools[0]["artifact"]
    assert (artifact["outcome"], artifact["spawn_error"]) == ("spawn_error", "interrupted"), artifact
    last_request = model.chat_requests[-1].messages
    told = [m for m in last_request if m.get("role") == "tool"]
    assert told, last_request
    assert "interrupted" in json.dumps(told[-1]), told
    model.assert_done()


def test_a_cancelled_command_is_not_run_again(server: Server, model: FakeOpenAIServer) -> None:
    _script(model)
    work = Path(server.env["BASHGRAPH_WORKDIR"])
    counter = work / "counter"
    client, thread_id, run_id = _start(server)
    _wait_for(lambda: _runs(counter) == 1, "the command to start")
    client.runs.cancel(thread_id, run_id, wait=True)
    _wait_for(lambda: not _marked_processes(str(work)), "the cancelled command's tree to stop", 10)

    state = _continue(server, thread_id)

    assert _runs(counter) == 1, "the cancelled command ran a second time"
    _assert_told_interrupted(model, state)
    assert not _marked_processes(str(work))


def test_a_command_cut_off_by_a_server_crash_is_not_run_again(
    server: Server, model: FakeOpenAIServer
) -> None:
    _script(model)
    work = Path(server.env["BASHGRAPH_WORKDIR"])
    counter = work / "counter"
    _client, thread_id, _run_id = _start(server)
    _wait_for(lambda: _runs(counter) == 1, "the command to start")
    time.sleep(DEV_FLUSH_S + 2)  # one state flush of langgraph dev after the command started
    server.stop(signal.SIGKILL)
    # The command's own process group survives a SIGKILL of the server's group only if it was
    # moved out of it; the run marker finds it either way, and the next resume must stop it.
    server.start()

    state = _continue(server, thread_id)

    assert _runs(counter) == 1, "the command cut off by the crash ran a second time"
    _assert_told_interrupted(model, state)
    _wait_for(lambda: not _marked_processes(str(work)), "no process of the command to be left", 10)
