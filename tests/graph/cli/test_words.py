"""What the CLI says reads as plain English, and a question says each thing once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bashgraph.graph.cli import questions
from bashgraph.graph.cli.progress import BADGE_WIDTH, DURATION_WIDTH, badge, duration, status_line, step_line
from bashgraph.graph.cli.status import EXIT_FOR_STATUS
from bashgraph.tools.results import SpawnErrorKind
from tests.graph.cli.conftest import Cli
from tests.support.openai_server import FakeOpenAIServer, ToolCall, text, tool_call, tool_calls

OUTCOMES: list[dict[str, Any]] = [
    {"outcome": "ok", "exit_code": 0}, {"outcome": "exit_error", "exit_code": 127},
    {"outcome": "args_error"},
    *({"outcome": "spawn_error", "spawn_error": kind.value} for kind in SpawnErrorKind),
]
#: Machine words that must not reach a person: snake_case identifiers.
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


@pytest.mark.parametrize("event", OUTCOMES, ids=lambda e: e.get("spawn_error") or e["outcome"])
def test_every_badge_is_words_that_fit_the_badge_column(event: dict[str, Any]) -> None:
    words = badge(event)
    assert len(words) <= BADGE_WIDTH
    assert not SNAKE.search(words), words
    assert "spawn error" not in words


@pytest.mark.parametrize("seconds", [0.004, 9.999, 12.34, 59.9, 61, 3599, 3600 * 5 + 62, 3600 * 99])
def test_every_duration_fits_the_duration_column(seconds: float) -> None:
    assert 0 < len(duration({"duration_s": seconds})) <= DURATION_WIDTH


@pytest.mark.parametrize("status", sorted(EXIT_FOR_STATUS))
def test_status_lines_are_words(status: str) -> None:
    line = status_line(status, None)
    assert not SNAKE.search(line), line


def test_a_reason_that_names_its_status_is_not_preceded_by_it_again() -> None:
    line = status_line("environment_fault", "environment fault: `sleep 5`: timeout")
    assert line == "status: environment fault: `sleep 5`: timeout"
    assert status_line("failed", "step limit reached (1)") == "status: failed: step limit reached (1)"
    assert status_line("paused", "approval needed for `ls`") == "status: paused, waiting for an answer"


STEPS = [
    {"node": "route", "next": "retry"},
    {"node": "replan"},
    {"node": "escalate", "next": "retry"},
    {"node": "escalate", "next": "agent"},
]


@pytest.mark.parametrize("event", STEPS, ids=lambda e: f"{e['node']}-{e.get('next')}")
def test_step_lines_are_sentences(event: dict[str, Any]) -> None:
    line = step_line({"status": None, "reason": None, **event}, "3 failed commands in a row")
    assert line is not None
    assert line[0].isupper()
    assert line.endswith(".")
    assert not SNAKE.search(line), line
    assert "escalation" not in line


def test_an_escalation_that_ends_the_run_leaves_the_words_to_the_status_line() -> None:
    event = {"node": "escalate", "status": "environment_fault", "reason": "environment fault: x", "next": None}
    assert step_line(event, None) is None
    assert step_line({"node": "retry", "attempt": 1}, None) is None  # said when route decided it


FAULT = {
    "kind": "environment_error", "summary": "`make build`: timeout (timeout after 30s — process group killed)",
    "choices": ["retry", "skip", "abort"],
    "faults": [{"command": "make build", "kind": "timeout", "detail": "timeout after 30s — process group killed",
                "stdout_tail": "".join(f"out {n}\n" for n in range(1, 6)),
                "stderr_tail": "".join(f"err {n}\n" for n in range(1, 6))}],
}
APPROVAL = {"kind": "approval", "choices": ["approve", "reject", "edit"],
            "requests": [{"command": "git push origin main", "reason": "matches the ask rule 'git push *'",
                          "rule": "git push *"}]}


def test_an_environment_question_says_each_thing_once() -> None:
    lines = questions.lines(FAULT, interactive=True)
    shown = "\n".join(lines)
    assert shown.count("make build") == 1
    assert shown.count("timeout after 30s") == 1
    assert lines[0] == "`make build` could not run to its end: timeout after 30s — process group killed"
    stderr, stdout = lines.index("  stderr, last lines:"), lines.index("  stdout, last lines:")
    assert lines[stderr + 1:stderr + 4] == ["    err 3", "    err 4", "    err 5"]
    assert lines[stdout + 1:stdout + 4] == ["    out 3", "    out 4", "    out 5"]
    assert "err 2" not in shown
    for choice in ("retry", "skip", "abort"):
        assert sum(line.lstrip().startswith(choice + " ") for line in lines) == 1
    assert lines[-1] == "Enter alone answers retry."
    assert "question:" not in shown


def test_without_a_terminal_a_question_names_no_default() -> None:
    assert "Enter" not in "\n".join(questions.lines(FAULT))


def test_an_approval_names_the_command_and_its_rule_once() -> None:
    lines = questions.lines(APPROVAL, interactive=True)
    shown = "\n".join(lines)
    assert lines[0] == "Approval needed to run `git push origin main`"
    assert shown.count("git push *") == 1
    assert lines[-1] == "Enter alone answers reject."


def test_a_plain_run_speaks_in_words(cli: Cli, openai_server: FakeOpenAIServer) -> None:
    """Every line a piped run prints, outside the commands it quotes, is free of machine words."""
    openai_server.add(
        tool_calls(ToolCall("bash", {"command": "echo hi"}), ToolCall("bash", {"command": "exit 3"})),
        tool_call("bash", {"command": "sleep 5", "timeout": 0.2}),
    )
    paused = cli("run", "do things", "--thread", "words")
    openai_server.add(text("done"))
    resumed = cli("resume", "words", "--answer", "retry")
    skipped = cli("resume", "words", "--answer", "skip")
    assert (paused.code, resumed.code, skipped.code) == (3, 3, 0), resumed.out
    for line in (paused.out + resumed.out + skipped.out).splitlines():
        if line.startswith(("continue with: ", "answer with: ", "$ ")):
            continue  # commands to copy, and the commands that ran
        prose = re.sub(r"`[^`]*`", "", line.split("  $ ")[0])
        assert not SNAKE.search(prose), line
    assert "Running the command again, as answered." in resumed.out
    assert "The model is told what happened, and the run goes on." in skipped.out
