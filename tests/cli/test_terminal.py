"""On a terminal: rich progress, the model's words streamed (SSE), and a person asked."""

from __future__ import annotations

import os
import re
import select
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.cli.conftest import Cli, Result, Running
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """The test's end of a pseudo-terminal: what the CLI drew, and a keyboard."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.screen = ""

    def read_until(self, words: str, running: Running, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while words not in self.screen:
            assert time.monotonic() < deadline, f"{words!r} never appeared:\n{self.screen}"
            if not self._read(0.1) and running.ended:
                raise AssertionError(f"the CLI ended before {words!r} appeared:\n{self.screen}")

    def wait(self, running: Running, timeout: float = 20) -> Result:
        """Keep reading (a full terminal buffer would block the CLI) until it has ended."""
        deadline = time.monotonic() + timeout
        while not running.ended:
            assert time.monotonic() < deadline, f"the CLI did not end:\n{self.screen}"
            self._read(0.05)
        result = running.finish(timeout=5)
        while self._read(0.05):
            pass
        return result

    def _read(self, wait: float) -> bool:
        if not select.select([self.master], [], [], wait)[0]:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the CLI closed its end
            return False
        self.screen += ANSI.sub("", data.decode(errors="replace")).replace("\r", "")
        return bool(data)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")


@contextmanager
def terminal() -> Iterator[tuple[Terminal, str]]:
    master, slave = os.openpty()
    try:
        yield Terminal(master), os.ttyname(slave)
    finally:
        os.close(slave)
        os.close(master)


def test_terminal_streams_progress_and_asks_a_person(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """A run on a terminal: spinners and badges, streamed model replies, an interactive answer."""
    openai_server.add(
        tool_calls(ToolCall("bash", {"command": "echo one; sleep 0.3; echo two"}), content="Checking twice"),
        tool_call("bash", {"command": "sleep 5", "timeout": 0.2}),
        text("Finished **well**"),
    )
    with terminal() as (screen, tty):
        running = cli.start("run", "do things", "--thread", "tty1", tty=tty, TERM="xterm-256color")
        screen.read_until("answer (retry / skip / abort, or type a hint)", running)
        screen.type("skip")
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    shown = screen.screen
    assert "thread tty1" in shown
    assert "model · step 1  Checking twice" in shown
    assert "$ echo one; sleep 0.3; echo two" in shown  # the spinner line while it ran
    assert re.search(r" ok +\d+\.\d\ds  \$ echo one; sleep 0\.3; echo two", shown)
    assert re.search(r" spawn error timeout +0\.\d\ds  \$ sleep 5", shown)
    assert "question: `sleep 5`: timeout (timeout after 0.2s" in shown
    assert "answer given: skip" in shown
    assert "Finished well" in shown  # the final answer, rendered as Markdown
    assert "status: done" in shown
    assert [request.stream for request in openai_server.chat_requests] == [True, True, True]


def test_ctrl_c_at_a_question_leaves_it_pending(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """An approval asked on the terminal; Ctrl-C there exits 130 and `resume --answer` goes on."""
    openai_server.add(tool_call("bash", {"command": "echo approved > mark"}))
    with terminal() as (screen, tty):
        running = cli.start("run", "mark it", "--thread", "tty2", "--rule", "ask:echo *", tty=tty)
        screen.read_until("answer [approve/reject/edit]", running)
        os.kill(running.pid, signal.SIGINT)
        result = screen.wait(running, timeout=10)
    assert result.code == 130, screen.screen
    assert "question: approval needed for `echo approved > mark`" in screen.screen
    assert "continue with: bashgraph resume tty2 --rule 'ask:echo *'" in screen.screen
    assert not (cli.workdir / "mark").exists()

    openai_server.add(text("marked"))
    resumed = cli("resume", "tty2", "--rule", "ask:echo *", "--answer", "approve")
    assert resumed.code == 0, resumed.err
    assert (cli.workdir / "mark").read_text() == "approved\n"
