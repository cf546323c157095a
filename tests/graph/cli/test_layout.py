"""A recorded terminal session: the real CLI in tmux at 80 columns, its screen checked for layout.

One session runs a task against the scripted model server (commands that succeed, fail, run
long, time out; a question answered with the keyboard), then `threads` and `history`. The
pane's text (`capture-pane -J`: lines the terminal wrapped are joined, so a wrapped line shows
as longer than 80) must have: the `$` of every finished command in one column, no wrapped line
except the commands meant to be copied whole, and tables no wider than the terminal.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.graph.cli.conftest import REPO, Cli
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls

WIDTH = 80
LONG = "echo " + "a-rather-long-argument " * 5 + "; true"
DONE = "LAYOUT-SESSION-DONE"
#: A finished command's line: the badge (17 wide, reverse video, padded by one space each side),
#: a space, the duration (8 wide, right-aligned), two spaces, `$ ` and the command.
BADGE_LINE = re.compile(r"^ (?P<badge>.{17})  (?P<duration>.{8})  \$ (?P<command>.*)$")
#: Lines printed to be copied whole: the terminal wraps them, and a copy gives the whole line.
COPIED = ("continue with: ", "answer with: ")


def pane(tmux: list[str]) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True,
                          text=True, check=True, timeout=10).stdout


def wait_for(tmux: list[str], words: str, timeout: float = 40) -> str:
    deadline = time.monotonic() + timeout
    while words not in (screen := pane(tmux)):
        assert time.monotonic() < deadline, f"{words!r} never appeared:\n{screen}"
        time.sleep(0.2)
    return screen


@pytest.fixture
def recorded(cli: Cli, openai_server: FakeOpenAIServer, tmp_path: Path) -> str:
    """The pane of a whole session, as text."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    openai_server.add(
        tool_calls(ToolCall("bash", {"command": "echo hello"}), ToolCall("bash", {"command": "ls /nonexistent"}),
                   content="Looking around first."),
        tool_call("bash", {"command": LONG}),
        tool_call("bash", {"command": "printf 'one\\ntwo\\nthree\\nfour\\n'; echo oops >&2; sleep 5",
                           "timeout": 0.3}),
        text("All **done**."),
    )
    env = {k: v for k, v in cli.env.items() if k not in ("COLUMNS", "LINES")}  # the pane's size counts
    bashgraph = shlex.join([sys.executable, "-m", "bashgraph.graph.cli"])
    script = tmp_path / "session.sh"
    script.write_text(
        f"cd {shlex.quote(str(REPO))}\n"
        f"export {shlex.join(f'{k}={v}' for k, v in env.items())}\n"
        f"{bashgraph} run 'look around, then report' --thread layout1\n"
        f"{bashgraph} threads\n{bashgraph} history layout1\necho {DONE}\nsleep 60\n"
    )
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock")]
    subprocess.run([*tmux, "new-session", "-d", "-x", str(WIDTH), "-y", "30", f"bash {script}"],
                   check=True, timeout=10)
    try:
        wait_for(tmux, "answer (retry):")
        subprocess.run([*tmux, "send-keys", "skip", "Enter"], check=True, timeout=10)
        return wait_for(tmux, "\n" + DONE)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, timeout=10)


def test_a_recorded_session_reads_well_at_80_columns(recorded: str) -> None:
    """One session (it takes a while), three looks at it."""
    progress_lines_up(recorded)
    the_question_says_each_thing_once(recorded)
    the_tables_fit_and_line_up(recorded)


def progress_lines_up(recorded: str) -> None:
    lines = [line.rstrip() for line in recorded.splitlines()]
    assert "status: done" in lines, recorded

    finished = [match for line in lines if (match := BADGE_LINE.match(line))]
    badges = [m["badge"].strip() for m in finished]
    assert sorted(badges[:2]) == ["exit 2", "ok"], recorded  # run side by side: either ends first
    assert badges[2:] == ["ok", "timeout"], recorded
    assert all(re.fullmatch(r" *\d+\.\d\ds", m["duration"]) for m in finished), recorded
    long_line = next(m for m in finished if m["command"].startswith("echo a-rather"))
    assert long_line["command"].endswith("…")  # cut at the edge, not wrapped under the badges
    assert len(long_line.group(0)) == WIDTH

    too_wide = [line for line in lines if len(line) > WIDTH and not line.startswith(COPIED)]
    assert too_wide == [], recorded


def the_question_says_each_thing_once(recorded: str) -> None:
    box = [line.strip("│ ") for line in recorded.splitlines() if line.startswith("│")]
    assert box[0].startswith("`printf 'one\\ntwo\\nthree\\nfour\\n'; echo oops >&2; sleep 5`")
    shown = "\n".join(box)
    assert shown.count("sleep 5") == 1
    assert box[box.index("stderr, last lines:"):][:2] == ["stderr, last lines:", "oops"]
    assert box[box.index("stdout, last lines:"):][:4] == ["stdout, last lines:", "two", "three", "four"]
    assert [line.split()[0] for line in box if line.split()[:1] in (["retry"], ["skip"], ["abort"])] == \
        ["retry", "skip", "abort"]
    assert "Enter alone answers retry." in box


def the_tables_fit_and_line_up(recorded: str) -> None:
    lines = [line.rstrip() for line in recorded.splitlines()]
    header = lines.index(next(line for line in lines if line.split() == ["thread", "status", "updated", "task"]))
    row = lines[header + 1]
    assert row.startswith("layout1 ")
    for word in ("status", "updated", "task"):
        column = lines[header].index(word)
        assert row[column - 2:column] == "  ", (lines[header], row)
        assert row[column] != " ", (lines[header], row)
    history = next(i for i, line in enumerate(lines) if line.split()[:3] == ["checkpoint", "step", "node"])
    rows = [line for line in lines[history + 1:] if re.match(r"^[0-9a-f]{8}-", line)]
    assert len(rows) >= 8
    node_column = lines[history].index("node")
    assert all(row[node_column - 2:node_column] == "  " for row in rows)
    assert any("exit 2 `ls /nonexistent`" in line for line in lines[history:])
