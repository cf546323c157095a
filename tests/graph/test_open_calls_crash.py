"""A worker killed (SIGKILL) while `retry` runs a call again, and the thread then goes on with a
new message through plain LangGraph: the retry's leftover processes are stopped and the model is
told the call was interrupted, not the first attempt's fault. Real processes: a worker process
on a SQLite file, killed mid-command; the model is the real `ChatOpenAI` against the scripted
server that refuses a history with a call left unanswered."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.models.factory import make_chat_model
from bashgraph.graph.store.checkpoints import open_checkpointer
from bashgraph.graph.store.journal import open_journal
from tests.support.openai_server import FakeOpenAIServer, text
from tests.tools.runner.proctools import running

#: Kills its own shell the first time (spawn_error/signal: `retry` runs it again); the retry
#: writes its process group to `pid` and sleeps.
FLAKY = ("if [ -e marker ]; then echo x >> counter; echo $$ > pid; sleep 30; "
         "else touch marker; kill -9 $$; fi")
WORKER = """
import sys
from langchain_core.messages import HumanMessage
from bashgraph.graph import AgentConfig, build_graph
from bashgraph.graph.store.checkpoints import open_checkpointer
from bashgraph.graph.store.journal import open_journal
from bashgraph.graph.testing import ScriptedChatModel, calls_reply

db, workdir, command = sys.argv[1:4]
config = AgentConfig(workdir=workdir, retry_backoff_s=0.01, retry_backoff_max_s=0.02)
with open_checkpointer(db) as saver, open_journal(db) as journal:
    agent = build_graph(model=ScriptedChatModel([calls_reply(command)]), config=config,
                        checkpointer=saver, journal=journal)
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
"""


def _wait_for(path: Path, seconds: float = 30) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {path.name}")


def test_a_retry_cut_off_by_a_crash_is_swept_and_answered_interrupted(tmp_path: Path) -> None:
    db = str(tmp_path / "checkpoints.sqlite")
    worker = subprocess.Popen([sys.executable, "-c", WORKER, db, str(tmp_path), FLAKY],
                              cwd=Path(__file__).resolve().parents[2])
    try:
        retry_pid = _wait_for(tmp_path / "pid")
    finally:
        worker.kill()
        worker.wait()
    try:
        assert running(retry_pid), "the retry should outlive its worker"
        with FakeOpenAIServer() as server:
            server.add(text("told"))
            config = AgentConfig(model=server.model, base_url=server.base_url, workdir=str(tmp_path),
                                 model_max_retries=0)
            with open_checkpointer(db) as saver, open_journal(db) as journal:
                agent = build_graph(model=make_chat_model(config, environ={}), config=config,
                                    checkpointer=saver, journal=journal)
                agent.invoke({"messages": [HumanMessage("what happened?")]}, {"configurable": {"thread_id": "t1"}})
            server.assert_done()
            [told] = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]
        assert "interrupted" in told
        assert "were still running and were stopped" in told
        assert not running(retry_pid)
        assert (tmp_path / "counter").read_text().count("x") == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(retry_pid, signal.SIGKILL)
