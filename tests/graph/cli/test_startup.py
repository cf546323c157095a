"""The quick commands import no model, LangChain or LangGraph code; `--version` works.

Each command runs cold in a new interpreter (what a person's shell starts) and reports the
modules it ended with. Start times themselves are measured by benchmarks/bench_startup.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from bashgraph.graph import AgentConfig, open_session
from bashgraph.graph.store import read_history
from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply
from tests.graph.cli.conftest import REPO

#: Packages a quick command must not import (each costs from tens of ms to most of a second).
HEAVY = ("langchain", "langchain_core", "langchain_openai", "langgraph", "langsmith", "openai",
         "httpx", "pydantic", "rich", "psycopg", "aiosqlite")
#: Runs `bashgraph ARGV` as the console script does, then prints the heavy modules it loaded.
PROBE = """
import json, sys
from bashgraph.graph.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.stdin.read())))
sys.stderr.write("\\nPROBE " + json.dumps({"code": code, "heavy": heavy}) + "\\n")
"""

QUICK = {
    "help": ["--help"],
    "version": ["--version"],
    "threads": ["threads"],
    "threads json": ["threads", "--json"],
    "history": ["history", "quick"],
    "history json": ["history", "quick", "--json"],
    "mermaid": ["graph"],
    "run help": ["run", "--help"],
    "usage error": ["run"],
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with one finished thread (a command and an answer)."""
    path = tmp_path_factory.mktemp("startup") / "db.sqlite"
    model = ScriptedChatModel([calls_reply("echo hi"), answer("done")])
    with open_session(str(path), model=model, config=AgentConfig(workdir=str(path.parent))) as session:
        for _ in session.run({"messages": [HumanMessage("say hi")]}, "quick"):
            pass
    return path


def probe(argv: list[str], db: Path, watched: tuple[str, ...] = HEAVY, **extra: str) -> tuple[dict[str, Any], str]:
    """Run `bashgraph ARGV` cold; the report holds its exit code and which `watched` packages it loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BASHGRAPH_", "OPENAI_"))}
    env |= {"BASHGRAPH_DB": str(db), "HOME": str(db.parent), **extra}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], input=json.dumps(watched), capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=60, check=False)
    report = done.stderr.rsplit("\nPROBE ", 1)
    assert len(report) == 2, done.stderr
    return json.loads(report[1]), done.stdout


@pytest.mark.parametrize("argv", QUICK.values(), ids=QUICK.keys())
def test_quick_commands_import_nothing_heavy(argv: list[str], db: Path) -> None:
    result, _ = probe(argv, db)
    assert result["heavy"] == [], result
    assert result["code"] == (2 if argv == ["run"] else 0)


def test_threads_and_history_read_the_real_thread(db: Path) -> None:
    """The quick path still shows the thread: the probe above is not passing on empty output."""
    _, threads = probe(["threads", "--json"], db)
    assert [json.loads(line)["thread_id"] for line in threads.splitlines()] == ["quick"]
    _, history = probe(["history", "quick"], db)
    assert "ok `echo hi`" in history


def test_version_prints_the_installed_version(db: Path) -> None:
    result, out = probe(["--version"], db)
    assert result["code"] == 0
    assert out == f"bashgraph {version('bashgraph')}\n"


def test_run_still_loads_what_it_needs(db: Path) -> None:
    """`run` is not made quick by leaving its parts out: against a refused server it gets as
    far as the model call (a model error, exit 1), with LangGraph and the client loaded."""
    argv = ["run", "hi", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--model-retries", "0",
            "--workdir", str(db.parent)]
    result, out = probe(argv, db, OPENAI_API_KEY="x")
    assert result["code"] == 1, out
    assert {"langgraph", "langchain_openai"} <= set(result["heavy"])


def test_fork_needs_no_model(db: Path, tmp_path: Path) -> None:
    """`fork` builds the graph (LangGraph is loaded) but no chat model: with a remote model named
    and no key or endpoint — a model made now would fail — it forks, and loads neither the
    OpenAI client nor the local model's runtime."""
    copy = tmp_path / "db.sqlite"
    shutil.copy(db, copy)
    rows = read_history(str(copy), "quick")
    assert rows is not None
    before_tools = next(row for row in rows if row.next == ("tools",))
    argv = ["fork", "quick", "--checkpoint", before_tools.checkpoint_id, "--thread", "forked"]
    result, out = probe(argv, copy, ("openai", "langchain_openai", "llama_cpp", "langgraph"), BASHGRAPH_MODEL="gpt-x")
    assert (result["code"], out) == (0, "forked\n")
    assert result["heavy"] == ["langgraph"]
