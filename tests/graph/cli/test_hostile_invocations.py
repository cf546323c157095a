"""The `bashgraph` command as shells and people really call it: its stdout closed by `| head`,
Ctrl-C while it starts, arguments that are not UTF-8, settings that are not numbers, an output
file it cannot write. Each ends with one line and an exit status, never a traceback. The real
interpreter runs `python -m bashgraph.graph.cli` (not the fork server): the cases are about
what happens around the command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, text, tool_call

PIPE_CLOSED, USAGE, INTERRUPTED = 141, 2, 130


def bashgraph(cli: Cli, *argv: str | bytes, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "bashgraph.graph.cli", *argv], env=cli.env, cwd=cli.home,
                          stdout=stdout, stderr=subprocess.PIPE, timeout=60, check=False)


@contextmanager
def closed_pipe() -> Iterator[int]:
    """The write end of a pipe whose reader has gone (`bashgraph threads | head -0`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        yield write
    finally:
        os.close(write)


def test_a_closed_stdout_ends_a_listing_quietly(cli: Cli) -> None:
    with closed_pipe() as stdout:
        for argv in (("threads",), ("graph",), ("graph", "--format", "ascii")):
            done = bashgraph(cli, *argv, stdout=stdout)
            assert (done.returncode, done.stderr) == (PIPE_CLOSED, b""), argv


def test_a_run_whose_stdout_is_closed_from_the_start_runs_nothing(cli: Cli) -> None:
    with closed_pipe() as stdout:
        done = bashgraph(cli, "run", "say hi", "--thread", "piped", stdout=stdout)
    assert done.returncode == PIPE_CLOSED
    assert done.stderr.decode().splitlines() == ["bashgraph: stdout was closed before the run started; nothing ran"]
    assert "no thread piped" in cli("history", "piped").err


def test_a_run_whose_stdout_closes_midway_stops_where_it_was_and_resumes(
    cli: Cli, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The reader goes away while a command runs (`| head -2`): the run stops at its next line,
    stderr says how to continue it, and the thread continues from there.

    The command waits until the reader has gone, so the pipe breaks at the line that ends the
    command, never at the one that starts it (that break would cut the command off, and its
    resume asks a person, as after Ctrl-C: docs/cli.md)."""
    reader_gone = tmp_path / "reader-gone"
    command = f"echo one; until [ -e {reader_gone} ]; do sleep 0.05; done; echo two"
    openai_server.add(tool_call("bash", {"command": command}), text("all done"))
    process = subprocess.Popen([sys.executable, "-m", "bashgraph.graph.cli", "run", "count", "--thread", "midway"],
                               env=cli.env, cwd=cli.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline().startswith(b"thread midway")
    assert process.stdout.readline().startswith(b"$ echo one")  # the command has started
    process.stdout.close()
    reader_gone.touch()
    _, err = process.communicate(timeout=60)
    assert process.returncode == PIPE_CLOSED
    assert len(err.decode().splitlines()) == 1, err.decode()
    [line] = err.decode().splitlines()
    assert line.startswith("bashgraph: stdout was closed; the run stopped where it was; continue it with: "
                           "bashgraph resume midway")
    resumed = cli("resume", "midway")
    assert resumed.code == 0, resumed.err
    assert "all done" in resumed.out


def test_a_fork_made_with_stdout_closed_still_names_the_new_thread(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    openai_server.add(text("nothing to do"))
    assert cli("run", "a task", "--thread", "source").code == 0
    checkpoint = cli("history", "source", "--json").events[-1]["checkpoint_id"]
    with closed_pipe() as stdout:
        done = bashgraph(cli, "fork", "source", "--checkpoint", checkpoint, "--thread", "copy", stdout=stdout)
    assert done.returncode == PIPE_CLOSED
    assert done.stderr.decode().splitlines() == ["continue it with: bashgraph resume copy"]


def test_ctrl_c_while_starting_up_exits_130_without_a_traceback(cli: Cli) -> None:
    """SIGINT once the command is loading LangChain (pydantic's core mapped), before its own
    Ctrl-C handling is in place."""
    process = subprocess.Popen([sys.executable, "-m", "bashgraph.graph.cli", "run", "a task"], env=cli.env,
                               cwd=cli.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while "_pydantic_core" not in Path(f"/proc/{process.pid}/maps").read_text():
        assert process.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == INTERRUPTED, err.decode()
    assert b"Traceback" not in err


@pytest.mark.parametrize("argv", [(b"run", b"remove caf\xe9.txt"), (b"run", b"task", b"--thread", b"t\xff"),
                                  (b"history", b"t\xff"), (b"run", b"task", b"--rule", b"ask:rm \xff*")])
def test_an_argument_that_is_not_utf8_is_a_usage_error(cli: Cli, argv: tuple[bytes, ...]) -> None:
    done = bashgraph(cli, *argv)
    assert done.returncode == USAGE
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("bashgraph: error: ")
    assert line.endswith("is not valid UTF-8 text")


@pytest.mark.parametrize("argv", [("--timeout", "nan"), ("--request-timeout", "nan"), ("--model-retries", "-3"),
                                  ("--base-url", "http://[::1"), ("--db", "sqlite:///")])
def test_a_setting_that_is_no_value_is_a_usage_error(cli: Cli, argv: tuple[str, ...]) -> None:
    done = bashgraph(cli, "run", "a task", *argv)
    assert done.returncode == USAGE, done.stderr.decode()
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("bashgraph: error: ")


def test_a_drawing_that_cannot_be_written_is_one_line(cli: Cli, tmp_path: Path) -> None:
    for target in (tmp_path / "no" / "such" / "dir.png", tmp_path):
        done = bashgraph(cli, "graph", "-o", str(target))
        assert done.returncode == USAGE
        [line] = done.stderr.decode().splitlines()
        assert line.startswith(f"bashgraph: error: cannot write {target}: ")
