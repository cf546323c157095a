"""Every prompt and answer line is in words: no Python dict, no empty `()` default."""

from __future__ import annotations

import os
import signal

from tests.graph.cli.conftest import Cli
from tests.graph.cli.test_terminal import terminal
from tests.support.openai_server import FakeOpenAIServer, text, tool_call

ASK = ("--rule", "ask:echo *")


def paused(cli: Cli, server: FakeOpenAIServer, thread: str) -> None:
    server.add(tool_call("bash", {"command": "echo hi > mark"}))
    assert cli("run", "mark", "--thread", thread, *ASK).code == 3


def test_answers_are_said_in_words(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    paused(cli, openai_server, "w1")
    openai_server.add(text("listed"))
    edited = cli("resume", "w1", *ASK, "--answer", '{"action": "edit", "command": "ls -la"}')
    assert edited.code == 0, edited.err
    assert "answer given: edit: run `ls -la` instead" in edited.out.splitlines()
    paused(cli, openai_server, "w2")
    openai_server.add(text("left it"))
    rejected = cli("resume", "w2", *ASK, "--answer", '{"action": "reject", "message": "not now"}')
    assert "answer given: reject, telling the model: not now" in rejected.out.splitlines()
    for result in (edited, rejected):
        assert "{'" not in result.out


def test_an_unreadable_answer_is_quoted_as_written(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    paused(cli, openai_server, "w3")
    again = cli("resume", "w3", *ASK, "--answer", '{"action": "maybe"}')
    assert again.code == 3, again.err
    assert ('Your last answer was not understood: unreadable approval answer {"action": "maybe"}: '
            "the action must be approve, reject or edit") in again.out.splitlines()


def test_the_reject_prompt_has_no_empty_default(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    openai_server.add(tool_call("bash", {"command": "echo hi > mark"}), text("left it"))
    with terminal() as (screen, tty):
        running = cli.start("run", "mark", "--thread", "w4", *ASK, tty=tty)
        screen.read_until("answer (reject):", running)
        screen.type("reject")
        screen.read_until("message for the model", running)
        screen.read_until(":", running)
        screen.type("use the other folder")
        result = screen.wait(running)
        if result.code is None:
            os.kill(running.pid, signal.SIGKILL)
    assert result.code == 0, screen.screen
    assert "message for the model (Enter: none):" in screen.screen
    assert "()" not in screen.screen
    assert "answer given: reject, telling the model: use the other folder" in screen.screen
