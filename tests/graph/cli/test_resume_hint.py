"""The printed resume command names the database so that it works from any directory."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from bashgraph.graph.cli.status import absolute
from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, text, tool_call


def test_relative_paths_and_sqlite_urls_become_absolute_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runs.db` and `sqlite:///runs.db` both print as the absolute file they opened."""
    monkeypatch.chdir(tmp_path)
    assert absolute("runs.db") == os.path.join(str(tmp_path), "runs.db")
    assert absolute("sqlite:///runs.db") == os.path.join(str(tmp_path), "runs.db")


def test_postgres_urls_are_printed_unchanged() -> None:
    """A server URL already works from anywhere."""
    assert absolute("postgresql://postgres@127.0.0.1:5432/test") == "postgresql://postgres@127.0.0.1:5432/test"


def test_an_answer_for_a_question_already_answered_elsewhere_runs_nothing(tmp_path: Path) -> None:
    """The CLI answers by interrupt id: a stale answer leaves the newer question pending."""
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from bashgraph.graph import AgentConfig, build_graph
    from bashgraph.graph.cli.run import stop_of
    from bashgraph.graph.testing import ScriptedChatModel, answer, calls_reply

    model = ScriptedChatModel([calls_reply("echo A > a"), calls_reply("echo B > b"), answer("ok")])
    agent = build_graph(model=model, config=AgentConfig(workdir=str(tmp_path), approval="always"),
                        checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "race"}}
    agent.invoke({"messages": [HumanMessage("t")]}, config)
    seen = stop_of(agent.get_state(config))  # what worker 1 shows its person
    agent.invoke(Command(resume="approve"), config)  # worker 2 answers first; B is now asked
    agent.invoke(Command(resume={seen.pending_ids[0]: "approve"}), config)  # worker 1's late answer
    assert (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists()
    assert "echo B" in str(stop_of(agent.get_state(config)).pending)


def test_the_resume_command_is_printed_unbroken_on_a_narrow_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rich wraps text at the terminal's width; the commands a person copies (`continue
    with:`, `answer with:`, an error naming the command) come out as one line each, so a
    paste runs all of it."""
    import io
    import re

    from rich.console import Console

    from bashgraph.graph.cli.progress import stop_events
    from bashgraph.graph.cli.status import ResumeHint, Stop
    from bashgraph.graph.cli.terminal import TerminalRenderer

    monkeypatch.setenv("COLUMNS", "40")  # the width of the stderr console made for errors
    hint = ResumeHint(("--db", "/home/someone/projects/agent/checkpoints.sqlite",
                       "--base-url", "http://127.0.0.1:8080/v1", "--rule", "ask:git push *"))
    resume = hint.command("20250101-120000-ab12cd")
    screen = io.StringIO()
    terminal = TerminalRenderer(Console(file=screen, force_terminal=True, width=40))
    question = {"kind": "approval", "choices": ["approve", "reject", "edit"],
                "requests": [{"command": "git push", "reason": "r", "rule": "ask:git push *"}]}
    for event in stop_events(Stop("paused", "asks", [question]), "20250101-120000-ab12cd", hint):
        terminal.emit(event)
    terminal.emit({"event": "end", "status": "config_error", "thread_id": "t", "exit_code": 2,
                   "resume": None, "reason": f"thread t has not finished; continue it with: {resume}"})
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).splitlines()
    assert f"continue with: {resume}" in lines
    assert any(line.startswith(f"answer with: {resume} --answer approve|reject|") for line in lines)
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"bashgraph: error: thread t has not finished; continue it with: {resume}"]


def test_a_stored_keep_think_does_not_swallow_the_next_flag() -> None:
    """A resume given `--keep-think` stores it before the thread's older options; the next
    resume that gives `--model` must print its own model, not the stored one after it."""
    from bashgraph.graph.cli.status import ResumeHint

    stored = ("--keep-think", "--model", "old")  # what `resume T --keep-think` stores after `run --model old`
    hint = ResumeHint(("--model", "new")).merged(stored)
    assert hint.options == ("--model", "new", "--keep-think")


def test_every_switch_of_run_is_known_to_the_resume_hint() -> None:
    """An option without a value read as one with a value takes the next flag with it."""
    import argparse

    from bashgraph.graph.cli.app import build_parser
    from bashgraph.graph.cli.status import SWITCHES

    run = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    switches = {flag for action in run.choices["run"]._actions if action.nargs == 0
                for flag in action.option_strings if flag not in ("-h", "--help", "--json")}
    assert switches == set(SWITCHES)


def test_odd_option_values_print_as_the_words_a_shell_reads(
    cli: Cli, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A --workdir with a line feed printed as `⏎` inside quotes resumed in a directory that
    does not exist; the tab of a rule turns into spaces when copied. The printed command, run
    by bash, gives back every word exactly."""
    import subprocess

    odd = tmp_path / "a\nb\u202e 'c'"
    odd.mkdir()
    openai_server.add(tool_call("bash", {"command": "pwd"}))
    result = cli("run", "t", "--thread", "odd", "--workdir", str(odd), "--approval", "always",
                 "--rule", "ask:x\ty\\z")
    assert result.code == 3, result.err
    resume = next(line for line in result.out.splitlines() if line.startswith("continue with: "))
    assert not set("\t\u202e⏎") & set(resume)
    printed = resume.removeprefix("continue with: bashgraph ")
    words = subprocess.run(["bash", "-c", f"printf '%s\\0' {printed}"], capture_output=True, check=True).stdout
    assert words.decode().split("\0")[:-1] == [
        "resume", "odd", "--workdir", str(odd), "--approval", "always", "--rule", "ask:x\ty\\z",
    ]


def test_a_value_that_looks_like_a_flag_is_printed_joined_to_its_own() -> None:
    """`run --model=-x` printed `resume T --model -x`, which argparse refuses."""
    import shlex

    from bashgraph.graph.cli.app import build_parser
    from bashgraph.graph.cli.status import ResumeHint

    printed = ResumeHint(("--model", "-x", "--timeout", "5", "--sandbox", "--keep-think")).command("t")
    args = build_parser().parse_args(shlex.split(printed)[1:])
    assert (args.model, args.timeout, args.sandbox, args.keep_think) == ("-x", 5.0, True, True)


def test_a_thread_id_that_looks_like_a_flag_comes_after_the_options() -> None:
    """`run --thread=-x` printed `resume -x …`, which argparse reads as an unknown option."""
    import shlex

    from bashgraph.graph.cli.app import build_parser
    from bashgraph.graph.cli.progress import stop_events
    from bashgraph.graph.cli.status import ResumeHint, Stop

    question = {"kind": "approval", "choices": ["approve", "reject", "edit"], "requests": []}
    paused, end = stop_events(Stop("paused", "asks", [question]), "-x", ResumeHint(("--model", "m")))
    for printed in (end["resume"], paused["answer_with"].replace("approve|reject|", "")):
        args = build_parser().parse_args(shlex.split(printed)[1:])
        assert (args.thread, args.model) == ("-x", "m")
    assert args.answer.startswith("{")


def test_a_run_keeps_no_database_url_in_its_checkpoints(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The options stored for resume hints leave `--db` out: a PostgreSQL URL may hold a
    password, and checkpoints are read by every tool that opens the database."""
    openai_server.add(tool_call("bash", {"command": "true"}), text("done"))
    done = cli("run", "a task", "--thread", "kept", "--db", str(cli.db), "--timeout", "7")
    assert done.code == 0, done.err
    with sqlite3.connect(cli.db) as db:
        metadata = [row[0] for row in db.execute("SELECT metadata FROM checkpoints")]
    stored = [str(m) for m in metadata if "bashgraph_options" in str(m)]
    assert stored
    assert all("--timeout" in m for m in stored)
    assert not any("--db" in m or str(cli.db) in m for m in stored)
