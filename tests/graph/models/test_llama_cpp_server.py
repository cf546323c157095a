"""The tool round trip against a real strict server: llama-cpp-python's, with the bundled model.

The server (`python -m llama_cpp.server`, the `[server]` extra) runs in its own process group on
a free 127.0.0.1 port with `--chat_format chatml-function-calling`, started through
tests/support/llama_server.py so that it loads the model without the buffers that crash AMX
CPUs. The model is tiny, so what it says is not tested: that the requests are accepted is.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.factory import as_model_error, make_chat_model
from bashgraph.graph.models.local import bundled_model_path
from bashgraph.tools.model_tools.bash_tool import make_bash_tool
from tests.support.child_process import describe_exit
from tests.support.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[3]
MODEL = "smollm2"
SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context",
                  "pydantic_settings")


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 10) -> bool:
        """The server logs a failed stream's traceback after the reply ended: wait for it."""
        deadline = time.monotonic() + timeout
        while text not in self.log_text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


def missing_requirement() -> str | None:
    for module in SERVER_MODULES:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'llama-cpp-python[server]')"
    try:
        bundled_model_path()
    except Exception as missing:
        return str(missing)
    return None



def wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the llama-cpp-python server died of {describe_exit(proc.returncode)}"
                                 f":\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the llama-cpp-python server did not answer in {timeout} s:\n"
                         f"{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if missing := missing_requirement():
        if os.environ.get("CI"):  # CI installs the extras: a missing piece there is a failure
            pytest.fail(missing)
        pytest.skip(missing)
    port = free_port()
    # One thread: llama.cpp's worker threads spin while they wait, and on a busy CI machine two of
    # them slowed each request down several times over.
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, "-m", "tests.support.llama_server", "--model", str(bundled_model_path()),
               "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
               "--chat_format", "chatml-function-calling", "--n_ctx", "2048", "--n_threads", "1"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_up(proc, base_url, log)
        yield LlamaServer(base_url, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def settings(server: LlamaServer, workdir: Path, **overrides: Any) -> AgentConfig:
    """Two model calls at most: the second is the one that carries a tool result."""
    values = {"max_steps": 2, "model_max_retries": 0, "on_environment_error": "stop", **overrides}
    return AgentConfig(model=MODEL, base_url=server.base_url, workdir=str(workdir), **values)


def run_task(server: LlamaServer, workdir: Path, *, stream_tokens: bool = False,
             **overrides: Any) -> dict[str, Any]:
    """One task; `stream_tokens` streams with mode "messages" as the CLI on a terminal and Studio do.
    A failed model call fails the test with the line the CLI would print."""
    config = settings(server, workdir, **overrides)
    agent = build_graph(model=make_chat_model(config, environ={}), config=config)
    task = {"messages": [HumanMessage("list the files in the current directory")]}
    try:
        if not stream_tokens:
            return dict(agent.invoke(task))
        chunks = list(agent.stream(task, stream_mode=["messages", "values"]))
        return dict(next(chunk for mode, chunk in reversed(chunks) if mode == "values"))
    except Exception as exc:
        raise AssertionError(str(as_model_error(exc, base_url=server.base_url, model=MODEL))) from exc


def test_a_tool_call_is_made_its_result_accepted_and_the_run_ends(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """The model calls bash, the request carrying the result is answered, the graph ends the run."""
    (tmp_path / "notes.txt").write_text("x\n")
    state = run_task(llama_server, tmp_path)
    messages = state["messages"]
    first_result = next(i for i, m in enumerate(messages) if isinstance(m, ToolMessage))
    assert any(isinstance(m, AIMessage) for m in messages[first_result:])  # answered after it
    assert state["status"] in {"done", "failed"}, state.get("reason")  # the graph decided the end
    assert state.get("reason") is None or "step limit" in state["reason"] or "re-plan" in state["reason"]
    assert "500 Internal Server Error" not in llama_server.log_text()


def test_with_model_streaming_off_token_streaming_works(llama_server: LlamaServer, tmp_path: Path) -> None:
    """model_streaming=False: with stream_mode "messages" on, replies are asked for whole."""
    state = run_task(llama_server, tmp_path, stream_tokens=True, model_streaming=False, max_steps=1)
    assert any(isinstance(m, ToolMessage) for m in state["messages"])


def test_streaming_a_tool_call_fails_with_a_line_saying_what_to_set(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """The server cannot stream a reply when tool_choice is set: the error names the setting."""
    with pytest.raises(AssertionError, match="ended a streamed reply without any content") as caught:
        run_task(llama_server, tmp_path, stream_tokens=True)
    assert "BASHGRAPH_MODEL_STREAMING=false" in str(caught.value)
    assert llama_server.wait_for_log("Automatic streaming tool choice is not supported")


def test_plain_chat_openai_gets_no_tool_call_and_null_content_is_rejected(
    llama_server: LlamaServer,
) -> None:
    """What plain ChatOpenAI meets here: no tool_choice means no tool call, and `content: null`
    with tool calls is answered with HTTP 500."""
    client = ChatOpenAI(model=MODEL, base_url=llama_server.base_url, api_key=SecretStr("x"),
                        max_retries=0)
    without_choice = client.bind_tools([make_bash_tool()]).invoke("list the files, using bash")
    assert isinstance(without_choice, AIMessage)
    assert not without_choice.tool_calls
    plain = client.bind_tools([make_bash_tool()], tool_choice="auto")
    call = AIMessage(content="", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "c1"}])
    history = [HumanMessage("list the files"), call, ToolMessage("notes.txt", tool_call_id="c1")]
    with pytest.raises(openai.InternalServerError, match="validation errors"):
        plain.invoke(history)
