"""On a terminal: rich progress, the model's words streamed (SSE), and a person asked."""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.graph.cli.conftest import REPO, Cli, Result, Running
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """The test's end of a pseudo-terminal: what the CLI drew, and a keyboard."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.screen = ""
        self.raw = b""  # every byte the CLI wrote, escape sequences included

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
        self.raw += data
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
        screen.read_until("answer (retry)", running)
        screen.type("skip")
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    shown = screen.screen
    assert "thread tty1" in shown
    assert "model · step 1  Checking twice" in shown
    assert "$ echo one; sleep 0.3; echo two" in shown  # the spinner line while it ran
    assert re.search(r" ok +\d+\.\d\ds  \$ echo one; sleep 0\.3; echo two", shown)
    assert re.search(r" timeout +0\.\d\ds  \$ sleep 5", shown)
    assert "`sleep 5` could not run to its end: timeout after 0.2s" in shown
    assert "answer given: skip" in shown
    assert "Finished well" in shown  # the final answer, rendered as Markdown
    assert "status: done" in shown
    assert [request.stream for request in openai_server.chat_requests] == [True, True, True]


def test_ctrl_c_at_a_question_leaves_it_pending(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """An approval asked on the terminal; Ctrl-C there exits 130 and `resume --answer` goes on."""
    openai_server.add(tool_call("bash", {"command": "echo approved > mark"}))
    with terminal() as (screen, tty):
        running = cli.start("run", "mark it", "--thread", "tty2", "--rule", "ask:echo *", tty=tty)
        screen.read_until("answer (reject):", running)
        os.kill(running.pid, signal.SIGINT)
        result = screen.wait(running, timeout=10)
    assert result.code == 130, screen.screen
    assert "Approval needed to run `echo approved > mark`" in screen.screen
    assert "continue with: bashgraph resume tty2 --rule 'ask:echo *'" in screen.screen
    assert not (cli.workdir / "mark").exists()

    openai_server.add(text("marked"))
    resumed = cli("resume", "tty2", "--rule", "ask:echo *", "--answer", "approve")
    assert resumed.code == 0, resumed.err
    assert (cli.workdir / "mark").read_text() == "approved\n"


def test_ctrl_d_at_a_question_leaves_it_pending_as_a_paused_run(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """The end of input (Ctrl-D) means nobody can answer here: the run stops paused (exit 3),
    as it does without a terminal, not as if it were interrupted."""
    openai_server.add(tool_call("bash", {"command": "echo approved > mark"}))
    with terminal() as (screen, tty):
        running = cli.start("run", "mark it", "--thread", "tty4", "--rule", "ask:echo *", tty=tty)
        screen.read_until("answer (reject):", running)
        os.write(screen.master, b"\x04")  # the terminal's end-of-input key at an empty line
        result = screen.wait(running, timeout=10)
    assert result.code == 3, screen.screen
    assert "continue with: bashgraph resume tty4 --rule 'ask:echo *'" in screen.screen
    assert not (cli.workdir / "mark").exists()


#: Window title (OSC 0), clipboard write (OSC 52), clear screen, alternate screen.
HOSTILE = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[?1049h"
SHOWN = "␛]0;owned␇␛]52;c;cm0gLXJmIH4=␇␛[2J␛[?1049h"
RAW = (b"\x1b]0;", b"\x1b]52;", b"\x1b[2J", b"\x1b[?1049h")
#: Shown as `ls -la` by a terminal that obeys the escapes (erase the line, back to column 1).
DISGUISED = "rm -rf important \x1b[2K\x1b[1Gls -la"


def hostile_script(server: FakeOpenAIServer, answered: bool = True) -> None:
    """Escape sequences in the model's words, in a command that asks for approval, and (when
    the approval is answered) in the final answer."""
    server.add(tool_calls(ToolCall("bash", {"command": DISGUISED}), content="look " + HOSTILE))
    if answered:
        server.add(text("all done " + HOSTILE))


def test_the_approval_shows_the_escape_sequences_in_a_command(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """On a terminal, the disguised command is shown as `rm -rf important ␛[2K␛[1Gls -la`, and
    no escape sequence the model wrote reaches the terminal."""
    hostile_script(openai_server)
    with terminal() as (screen, tty):
        running = cli.start("run", "tidy up", "--thread", "tty3", "--rule", "ask:rm *", tty=tty)
        screen.read_until("answer (reject):", running)
        screen.type("reject")
        screen.read_until("message for the model", running)
        screen.type("")
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    assert "Approval needed to run `rm -rf important ␛[2K␛[1Gls -la`" in screen.screen
    assert f"model · step 1  look {SHOWN}" in screen.screen
    assert f"all done {SHOWN}" in screen.screen
    assert b"\x1b[1Gls" not in screen.raw
    for raw in RAW:
        assert raw not in screen.raw
    assert not (cli.workdir / "important").exists()


def test_pipe_and_json_output_carry_no_raw_escape_sequence(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """In a pipe the same text shows the symbols; --json escapes every control character."""
    hostile_script(openai_server, answered=False)
    piped = cli("run", "tidy up", "--rule", "ask:rm *")
    assert piped.code == 3, piped.err
    assert "Approval needed to run `rm -rf important ␛[2K␛[1Gls -la`" in piped.out
    assert f"model (step 1): look {SHOWN}" in piped.out
    hostile_script(openai_server, answered=False)
    as_json = cli("run", "tidy up", "--rule", "ask:rm *", "--json")
    assert as_json.code == 3, as_json.err
    assert as_json.of("model_reply")[0]["tool_calls"][0]["command"] == DISGUISED
    for result in (piped, as_json):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", result.out + result.err)


#: Passes the output cap at once (the rest of the run moves to a thread), then prints more.
PAST_THE_CAP = "seq 1 4000; sleep 0.5; echo tail"


def test_output_after_a_big_burst_is_still_streamed(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """--json: `tail`, printed after 19 KB of output, arrives as a command_output event, and
    nothing is logged on stderr."""
    openai_server.add(tool_call("bash", {"command": PAST_THE_CAP}), text("ok"))
    result = cli("run", "count", "--json")
    assert result.code == 0, result.err
    streamed = "".join(event["text"] for event in result.of("command_output"))
    assert streamed.endswith("tail\n")
    assert result.err == ""


def test_the_terminal_shows_output_after_a_big_burst(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """On a terminal the live tail goes on after the burst: `tail` appears under the command."""
    openai_server.add(tool_call("bash", {"command": PAST_THE_CAP + "; sleep 0.6"}), text("ok"))
    with terminal() as (screen, tty):
        running = cli.start("run", "count", "--thread", "tty4", tty=tty)
        screen.read_until("    tail", running)
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    assert "Traceback" not in screen.screen


def test_a_multi_line_command_keeps_every_line_whole(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """Pipe mode prints the command on one line (`⏎` between its lines); --json's end.reason
    is one line."""
    command = "echo one\necho two"
    openai_server.add(tool_call("bash", {"command": command}), text("ok"))
    piped = cli("run", "two lines")
    assert piped.code == 0, piped.err
    assert "$ echo one⏎echo two" in piped.out.splitlines()
    assert not [line for line in piped.out.splitlines() if line in ("echo two", "echo two`")]
    openai_server.add(tool_call("bash", {"command": command}))
    paused = cli("run", "two lines", "--rule", "ask:echo *", "--json")
    assert paused.code == 3, paused.err
    assert paused.events[-1]["reason"] == "approval needed for `echo one⏎echo two`"


def test_the_resume_command_is_never_broken_at_the_terminal_width(
    cli: Cli, openai_server: FakeOpenAIServer
) -> None:
    """On a 50-column terminal the printed resume command is still one line: a paste of it
    runs the whole command."""
    openai_server.add(tool_call("bash", {"command": "echo approved > mark"}))
    rules = ("--rule", "ask:echo *", "--base-url", openai_server.base_url, "--db", str(cli.db))
    with terminal() as (screen, tty):
        running = cli.start("run", "mark it", "--thread", "tty5", *rules, tty=tty, COLUMNS="50")
        screen.read_until("answer (reject):", running)
        os.kill(running.pid, signal.SIGINT)
        screen.wait(running, timeout=10)
    expected = (f"continue with: bashgraph resume tty5 --db {cli.db} "
                f"--base-url {openai_server.base_url} --rule 'ask:echo *'")
    assert expected in screen.screen.splitlines(), screen.screen


def test_the_resume_command_pastes_whole_from_an_80_column_tmux(
    cli: Cli, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """In tmux at 80 columns, the pane's text with wrapped lines joined (what a copy gives)
    has the whole resume command on one line."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    openai_server.add(tool_call("bash", {"command": "echo approved > mark"}))
    env = {k: v for k, v in cli.env.items() if k != "COLUMNS"}  # the pane's own width counts
    argv = [sys.executable, "-m", "bashgraph.graph.cli", "run", "mark it", "--thread", "tmux1",
            "--rule", "ask:echo *", "--base-url", openai_server.base_url, "--db", str(cli.db)]
    script = f"cd {shlex.quote(str(REPO))} && env {shlex.join(f'{k}={v}' for k, v in env.items())} " \
             f"{shlex.join(argv)} < /dev/null; sleep 60"
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock")]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "50", script], check=True, timeout=10)
    try:
        deadline = time.monotonic() + 30
        while "continue with:" not in (pane := _pane(tmux)):
            assert time.monotonic() < deadline, pane
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=10)
    expected = (f"continue with: bashgraph resume tmux1 --db {cli.db} "
                f"--base-url {openai_server.base_url} --rule 'ask:echo *'")
    assert len(expected) > 80
    assert expected in [line.rstrip() for line in pane.splitlines()], pane


def _pane(tmux: list[str]) -> str:
    """The pane's text, soft-wrapped lines joined (`-J`), as a copy and paste would give it."""
    return subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True,
                          text=True, check=True, timeout=10).stdout


def test_thread_listings_show_a_hostile_task_visibly(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """`threads` prints the task of each thread on one line, escape sequences as symbols."""
    openai_server.add(text("ok"))
    assert cli("run", "task " + HOSTILE + "\nsecond line", "--thread", "listed").code == 0
    for listing in (cli("threads"), cli("threads", "--json")):
        assert listing.code == 0, listing.err
        assert not re.search("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]", listing.out)  # tabs: columns
    assert f"\ttask {SHOWN}⏎second line\t" in cli("threads").out


def test_error_lines_show_escape_sequences_as_symbols(cli: Cli) -> None:
    """`bashgraph: error: …` lines (an unknown thread, a missing policy file) are one line,
    with the sequences they quote shown as symbols."""
    unknown = cli("history", "t" + HOSTILE)
    assert unknown.code == 2
    assert f"no thread t{SHOWN}" in unknown.err
    no_policy = cli("run", "x", "--policy", "/nonexistent/" + HOSTILE + "\nrules.toml")
    assert no_policy.code == 2
    assert f"/nonexistent/{SHOWN}⏎rules.toml" in no_policy.err
    for result in (unknown, no_policy):
        assert len(result.err.splitlines()) == 1
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", result.err)
