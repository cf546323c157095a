"""The graph served by `langgraph dev` (what LangGraph Studio talks to), driven with langgraph-sdk.

One server for the module: it starts in ~1.5 s and each run costs ~1 s of queue pickup, so the
graph's logic is tested elsewhere; this proves langgraph.json, the factory without a
checkpointer, and the async tool path work together. The server runs without `--allow-blocking`,
so BlockBuster fails the run on any blocking call on the event loop (the graph factory runs
there too); tests/tools/runner/test_event_loop_blocking.py covers the harder paths (spill, timeout,
cancellation) without a server.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.graph.test_schema import BOOKKEEPING, PUBLIC
from tests.support.openai_server import FakeOpenAIServer, text, tool_call
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
STATE_DIR = REPO / ".langgraph_api"
#: No version check, usage ping or tracing: the server makes no outbound connection.
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
           "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
PORT_MOVED = "is already in use"



def wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 60) -> None:
    """Poll GET /ok; fail early with the log's tail if the server exits or moved port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text_so_far = log.read_text(errors="replace")
        if proc.poll() is not None or PORT_MOVED in text_so_far:
            raise AssertionError(f"langgraph dev did not start:\n{text_so_far[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"langgraph dev did not answer /ok in {timeout} s:\n{log.read_text()[-3000:]}")


@dataclass(frozen=True)
class DevServer:
    url: str
    log: Path
    model: FakeOpenAIServer
    """The server's model: scripted by the test."""

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """`langgraph dev` on a free 127.0.0.1 port (BlockBuster on: no `--allow-blocking`), a
    FakeOpenAIServer as its OpenAI endpoint."""
    if shutil.which("langgraph") is None:
        pytest.skip("langgraph-cli is not installed (pip install 'langgraph-cli[inmem]')")
    log = tmp_path_factory.mktemp("studio-log") / "server.log"
    with FakeOpenAIServer() as model:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASHGRAPH_"))},
            **OFFLINE, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "x",
            "BASHGRAPH_WORKDIR": str(tmp_path_factory.mktemp("studio-work")),
            "BASHGRAPH_SPILL_DIR": str(tmp_path_factory.mktemp("studio-spill")),
            "BASHGRAPH_ON_ENVIRONMENT_ERROR": "stop", "BASHGRAPH_MODEL_MAX_RETRIES": "0",
        }
        with serve(env, log) as url:
            yield DevServer(url, log, model)


@contextmanager
def serve(env: dict[str, str], log: Path) -> Iterator[str]:
    """Run `langgraph dev` from the repo root in its own process group; clear its state dir."""
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    port = free_port()
    command = ["langgraph", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
               "--port", str(port)]
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(proc, url, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(STATE_DIR, ignore_errors=True)


def test_a_run_through_the_sdk_runs_a_command_and_finishes(dev_server: DevServer) -> None:
    """create thread → runs.wait: the command ran (ToolMessage artifact ok), its stderr went over
    the cap (a spill file, written off the event loop), and the status is done."""
    from langgraph_sdk import get_sync_client

    model_server = dev_server.model
    command = "echo from-studio; seq 1 5000 >&2"
    model_server.add(tool_call("bash", {"command": command}), text("it printed from-studio"))
    client = get_sync_client(url=dev_server.url)
    thread = client.threads.create()
    task: Any = {"messages": [{"role": "user", "content": "print something"}]}
    state: Any = client.runs.wait(thread["thread_id"], "bashgraph", input=task)
    assert state["status"] == "done", state
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert len(tools) == 1
    assert tools[0]["artifact"]["outcome"] == "ok"
    assert tools[0]["artifact"]["stdout"] == "from-studio\n"
    assert tools[0]["artifact"]["stderr_file"] is not None
    assert state["messages"][-1]["content"] == "it printed from-studio"
    # The run's result is the public state; the thread's state keeps the bookkeeping this run wrote.
    assert set(state) <= PUBLIC
    assert set(client.threads.get_state(thread["thread_id"])["values"]) - PUBLIC == {"next_hop", "policy_checks"}
    assert "BlockingError" not in dev_server.log_text()
    model_server.assert_done()


def test_studio_shows_the_declared_input_and_output_schemas(dev_server: DevServer) -> None:
    """The run form asks for `messages` only; the output is the public state; the state view
    (every channel) includes the bookkeeping."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=dev_server.url)
    assistant = client.assistants.search(graph_id="bashgraph")[0]
    schemas: Any = client.assistants.get_schemas(assistant["assistant_id"])
    assert set(schemas["input_schema"]["properties"]) == {"messages"}
    assert set(schemas["output_schema"]["properties"]) == PUBLIC
    assert set(schemas["state_schema"]["properties"]) >= PUBLIC | BOOKKEEPING


def test_live_output_goes_on_after_the_run_moved_to_a_thread(dev_server: DevServer) -> None:
    """stream_mode="custom": output printed after 19 KB of output (the run moved to a thread)
    still arrives as a command_output event; the server logs no `get_config` error."""
    from langgraph_sdk import get_sync_client

    dev_server.model.add(tool_call("bash", {"command": "seq 1 4000; sleep 0.5; echo tail"}), text("ok"))
    client = get_sync_client(url=dev_server.url)
    thread = client.threads.create()
    task: Any = {"messages": [{"role": "user", "content": "count"}]}
    parts = client.runs.stream(thread["thread_id"], "bashgraph", input=task, stream_mode="custom")
    events = [part.data for part in parts if part.event == "custom"]
    streamed = "".join(e["text"] for e in events if e.get("event") == "command_output")
    assert streamed.endswith("tail\n")
    assert "get_config" not in dev_server.log_text()
    dev_server.model.assert_done()
