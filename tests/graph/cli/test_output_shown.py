"""What a command printed is shown to the person: head and tail lines under its line, in a pipe,
on a terminal and in `--json`; the whole text stays in the spill file."""

from __future__ import annotations

import re
from pathlib import Path

from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_terminal import terminal
from tests.support.openai_server import FakeOpenAIServer, text, tool_call

FIFTY_LINES = "seq 1 50; echo warned >&2"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_a_pipe_shows_the_head_and_tail_of_each_stream(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """50 lines of stdout show as 3 + 3 with the count of the rest between; stderr is marked."""
    openai_server.add(tool_call("bash", {"command": FIFTY_LINES}), text("counted"))
    result = cli("run", "count")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.endswith(f"$ {FIFTY_LINES}") and "[ok]" in line)
    assert lines[end + 1:end + 9] == [
        "    │ 1", "    │ 2", "    │ 3", "    │ … 44 more lines …", "    │ 48", "    │ 49", "    │ 50",
        "    ! warned",
    ]
    assert lines[end + 9] == "final answer: counted"


def test_json_command_end_carries_the_previews(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    openai_server.add(tool_call("bash", {"command": FIFTY_LINES}), text("counted"))
    result = cli("run", "count", "--json")
    assert result.code == 0, result.err
    end = result.of("command_end")[0]
    assert end["stdout_preview"] == ["1", "2", "3", "… 44 more lines …", "48", "49", "50"]
    assert end["stderr_preview"] == ["warned"]
    assert end["output_file"] is None


def test_the_terminal_keeps_the_output_under_the_command(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The live tail disappears when the command ends; the preview stays on the screen."""
    openai_server.add(tool_call("bash", {"command": FIFTY_LINES}), text("counted"))
    with terminal() as (screen, tty):
        running = cli.start("run", "count", "--thread", "out1", tty=tty)
        result = screen.wait(running)
    assert result.code == 0, screen.screen
    # The live area's redraws share lines with what is printed above it: compare line ends.
    lines = [line.rstrip() for line in screen.screen.splitlines()]
    end = next(i for i, line in enumerate(lines) if " ok " in line and line.endswith(f"s  $ {FIFTY_LINES}"))
    expected = ["│ 1", "│ 2", "│ 3", "│ … 44 more lines …", "│ 48", "│ 49", "│ 50", "! warned"]
    assert [line.rsplit("    ", 1)[-1] for line in lines[end + 1:end + 9]] == expected, screen.screen


def test_huge_binary_output_is_previewed_in_a_few_short_lines(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """5 MB of random bytes and a 3 MB line: a few lines of at most 200 characters, no control
    character on the screen, and the spill file holds every byte."""
    command = "head -c 5000000 /dev/urandom; yes x | head -c 3000000 | tr -d '\\n' >&2"
    openai_server.add(tool_call("bash", {"command": command}), text("noise"))
    result = cli("run", "noise", "--json")
    assert result.code == 0, result.err
    end = result.of("command_end")[0]
    # Random bytes are described in one line, followed by whatever text their last bytes
    # happen to end with (tools/results.py): one line or a few, never the bytes.
    assert end["stdout_preview"][0].startswith("[binary output: 5,000,000 bytes")
    for stream in ("stdout_preview", "stderr_preview"):
        assert 1 <= len(end[stream]) <= 7
        assert all(len(line) <= 200 and not CONTROL.search(line) for line in end[stream])
    assert end["stderr_preview"][0] == "x" * 199 + "…"
    assert Path(end["output_file"]).stat().st_size == 5_000_000

    openai_server.add(tool_call("bash", {"command": command}), text("noise"))
    piped = cli("run", "noise")
    assert piped.code == 0, piped.err
    assert not CONTROL.search(piped.out)
    assert len(piped.out.splitlines()) < 30
    assert "    (all of the output: " in piped.out


def test_escape_sequences_in_output_never_reach_the_screen(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """The runner drops colour and title sequences; other controls show as their symbols."""
    openai_server.add(tool_call("bash", {"command": r"printf 'a\033]0;owned\007b\001c\n'"}), text("ok"))
    result = cli("run", "title")
    assert result.code == 0, result.err
    assert "    │ ab␁c" in result.out.splitlines()
    assert not CONTROL.search(result.out)


def test_a_command_a_rule_denies_shows_its_line_and_event(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """docs/cli.md promises a `denied` badge: in a pipe and as a --json command_end."""
    openai_server.add(tool_call("bash", {"command": "rm -rf stuff"}), text("left it"))
    piped = cli("run", "tidy", "--rule", "deny:rm *")
    assert piped.code == 0, piped.err
    assert re.search(r"^  \[denied\] +\d\.\d\ds  \$ rm -rf stuff$", piped.out, re.M), piped.out
    openai_server.add(tool_call("bash", {"command": "rm -rf stuff"}), text("left it"))
    as_json = cli("run", "tidy", "--rule", "deny:rm *", "--json")
    ends = as_json.of("command_end")
    assert [(e["command"], e["outcome"], e["spawn_error"]) for e in ends] == [("rm -rf stuff", "spawn_error", "denied")]


def test_a_command_a_person_rejects_shows_its_line_and_event(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}))
    assert cli("run", "mark", "--thread", "r1", "--rule", "ask:echo *").code == 3
    openai_server.add(text("did not mark"))
    piped = cli("resume", "r1", "--rule", "ask:echo *", "--answer", "reject")
    assert piped.code == 0, piped.err
    assert re.search(r"^  \[denied\] +\d\.\d\ds  \$ echo hi > mark$", piped.out, re.M), piped.out

    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}))
    assert cli("run", "mark", "--thread", "r2", "--rule", "ask:echo *").code == 3
    openai_server.add(text("did not mark"))
    as_json = cli("resume", "r2", "--rule", "ask:echo *", "--answer", "reject", "--json")
    assert [e["spawn_error"] for e in as_json.of("command_end")] == ["denied"]
    assert not (cli.workdir / "mark").exists()
