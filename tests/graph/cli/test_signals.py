"""SIGTERM (`timeout`, systemd, docker, CI runners) and SIGHUP (the terminal went away) stop a run
like Ctrl-C: the command's process tree is killed, the thread is resumable, and the exit status
is 128 + the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_interrupt import wait_for
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_calls
from tests.tools.runner.proctools import group_running

SLOW = "echo ran >> runs; echo $$ > pid; sleep 30; echo late >> runs"


@pytest.mark.parametrize(("signum", "code", "status"), [
    (signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hangup")])
def test_a_stopping_signal_kills_the_command_and_leaves_the_thread_resumable(
    cli: Cli, openai_server: FakeOpenAIServer, signum: signal.Signals, code: int, status: str,
) -> None:
    """The signal while `sleep` runs: the exit status names it, no process of the command is
    left (the sleep is not re-parented to init), and resume reports it `interrupted`."""
    openai_server.add(tool_calls(ToolCall("bash", {"command": SLOW})))
    running = cli.start("run", "wait a while", "--thread", "s1", "--json")
    pid_file = cli.workdir / "pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
    shell = int(pid_file.read_text())
    sent = time.monotonic()
    os.kill(running.pid, signum)
    result = running.finish(timeout=10)
    assert result.code == code, result.err
    assert time.monotonic() - sent < 3
    assert f"{signum.name}: stopping the run" in result.err
    end = result.events[-1]
    assert (end["status"], end["exit_code"], end["resume"]) == (status, code, "bashgraph resume s1")
    wait_for(lambda: not group_running(shell), timeout=2)

    openai_server.add(text("it was interrupted"))
    resumed = cli("resume", "s1", "--json", "--on-env-error", "model")
    assert resumed.code == 0, resumed.err
    ended = [(e["outcome"], e["spawn_error"]) for e in resumed.of("command_end")]
    assert ended == [("spawn_error", "interrupted")]
    assert (cli.workdir / "runs").read_text() == "ran\n"


#: A prompt's read, with another thread alive that receives the Ctrl-C (the kernel may pick any
#: thread that does not block the signal; `pthread_kill` makes that choice here, every time).
PROMPT_READER = """
import signal, sys, threading, time
from bashgraph.graph.cli.signals import SignalAwareStdin, SigintGuard

def press_ctrl_c_on_another_thread():
    time.sleep(0.3)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

guard = SigintGuard()
threading.Thread(target=press_ctrl_c_on_another_thread).start()
with guard.default():
    try:
        SignalAwareStdin().readline()
    except KeyboardInterrupt:
        print("interrupted", guard.status)
"""


def test_ctrl_c_at_a_prompt_ends_the_read_whichever_thread_receives_it() -> None:
    """Ctrl-C while a question waits for its answer stops the wait even when the signal is
    delivered to a thread other than the one reading (with plain `input()` this test hangs)."""
    reader = subprocess.Popen([sys.executable, "-c", PROMPT_READER],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        reader.wait(timeout=10)  # stdin stays open: no line ever arrives
    finally:
        reader.kill()
    assert reader.stdout is not None
    assert reader.stdout.read().split() == ["interrupted", "interrupted"]


def test_the_prompt_reader_gives_lines_as_input_does(tmp_path: Path) -> None:
    """A line comes back without its line ending (\\n or \\r\\n); the end of input is EOFError, as
    with `input()`."""
    script = ("from bashgraph.graph.cli.signals import SignalAwareStdin\n"
              "r = SignalAwareStdin()\nprint(repr(r.readline()), repr(r.readline()))\n"
              "try:\n    r.readline()\nexcept EOFError:\n    print('eof')\n")
    done = subprocess.run([sys.executable, "-c", script], check=False, input="approve\r\nécrit\n", capture_output=True,
                          text=True, timeout=30)
    assert done.stdout.splitlines() == ["'approve' 'écrit'", "eof"], done.stderr
