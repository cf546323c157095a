"""After Ctrl-C: nothing stays drawn on the terminal, and the resume reports how long the
command ran and what it printed."""

from __future__ import annotations

import os
import re
import signal
import time

import pyte

from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_terminal import terminal
from tests.support.openai_server import FakeOpenAIServer, tool_call

SLOW = "echo started; echo warming >&2; sleep 30; echo late"
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


def shown_at_the_end(raw: bytes) -> list[str]:
    """The lines a terminal of 120 × 40 shows once every byte was drawn."""
    screen = pyte.Screen(120, 40)
    pyte.ByteStream(screen).feed(raw)
    return [line.rstrip() for line in screen.display]


def test_ctrl_c_leaves_no_spinner_and_resume_shows_the_duration_and_output(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(tool_call("bash", {"command": SLOW}))
    with terminal() as (screen, tty):
        running = cli.start("run", "wait", "--thread", "i1", tty=tty, TERM="xterm-256color")
        screen.read_until("started", running)  # the live tail of the running command
        time.sleep(1.5)
        os.kill(running.pid, signal.SIGINT)
        result = screen.wait(running, timeout=15)
    assert result.code == 130, screen.screen
    final = shown_at_the_end(screen.raw)
    assert not [line for line in final if SPINNER & set(line)], "\n".join(final)
    assert any("stopping the run" in line for line in final)

    resumed = cli("resume", "i1", "--json")
    assert resumed.code == 3, resumed.err  # interrupted: an environment fault, asked about
    (end,) = resumed.of("command_end")
    assert end["spawn_error"] == "interrupted"
    assert 1.5 <= end["duration_s"] < 30
    assert end["stdout_preview"] == ["started"]
    assert end["stderr_preview"] == ["warming"]
    fault = resumed.of("paused")[0]["questions"][0]["faults"][0]
    assert re.search(r"^started at [-\d: ]+ and ran \d+\.\ds but the run stopped", fault["detail"])

    piped = cli("resume", "i1")  # the question again, with the output as its evidence
    assert piped.code == 3, piped.err
    assert "  stdout, last lines:\n    started\n" in piped.out
