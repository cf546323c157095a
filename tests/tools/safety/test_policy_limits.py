"""The longest command, tied to Linux's limit; the rules stay total and bounded on any text up to it."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from bashgraph.graph.approval import ApprovalNode
from bashgraph.graph.checks import Checker
from bashgraph.graph.config import AgentConfig
from bashgraph.graph.routing import next_after_agent
from bashgraph.tools import checkable_command, validate_bash_args
from bashgraph.tools.results import CommandResult, Outcome
from bashgraph.tools.runner.process import run_command
from bashgraph.tools.safety.policy import DEFAULT_ASK, Policy, Verdict
from bashgraph.tools.safety.shellsplit import TooComplexError, split_command
from bashgraph.tools.text import MAX_ARG_STRLEN, MAX_COMMAND_BYTES


def test_linux_refuses_an_argument_of_max_arg_strlen() -> None:
    """The limit is real: `bash -c` of a script of MAX_ARG_STRLEN bytes cannot even start."""
    with pytest.raises(OSError, match="Argument list too long") as refused:
        subprocess.run(["bash", "-c", ":" + " " * (MAX_ARG_STRLEN - 1)], check=False)
    assert refused.value.errno == errno.E2BIG
    subprocess.run(["bash", "-c", ":" + " " * (MAX_ARG_STRLEN - 2)], check=True)


def test_the_longest_allowed_command_runs_with_the_full_preamble(tmp_path: Path) -> None:
    """A command of exactly MAX_COMMAND_BYTES runs, with the `cd` and cwd-tracking preamble."""
    head = "cd . && echo ok"
    multibyte = "é" * 1000  # two bytes each: the limit counts bytes, not characters
    filler = " #" + multibyte + "x" * (MAX_COMMAND_BYTES - len(head) - 2 - 2000)
    command = head + filler
    assert len(command.encode()) == MAX_COMMAND_BYTES
    assert isinstance(validate_bash_args({"command": command}), type(validate_bash_args({"command": "ls"})))
    here = os.getcwd()
    result = run_command(command, cwd=tmp_path if str(tmp_path) != here else "/")
    assert (result.outcome, result.stdout) == (Outcome.OK, "ok\n")


def test_one_byte_more_is_an_args_error() -> None:
    """MAX_COMMAND_BYTES + 1 is refused up front with a one-line reason naming the limit."""
    result = validate_bash_args({"command": "é" * (MAX_COMMAND_BYTES // 2) + "x"})
    assert isinstance(result, CommandResult)
    assert result.outcome == Outcome.ARGS_ERROR
    assert f"the limit is {MAX_COMMAND_BYTES}" in (result.detail or "")
    assert checkable_command({"command": "x" * (MAX_COMMAND_BYTES + 1)}) is None
    assert checkable_command({"command": "x" * MAX_COMMAND_BYTES}) is not None


def test_policy_denies_an_overlong_command_without_reading_it() -> None:
    """Called directly, `decide` refuses what could never run, in microseconds."""
    decision = Policy(DEFAULT_ASK, workdir="/w").decide("echo " + "a" * MAX_COMMAND_BYTES)
    assert decision.action == "deny"
    assert "Linux refuses" in decision.reason


class _Untouchable(Policy):
    """A policy that must not be asked: the graph checks the arguments first."""

    def decide(self, command: str, cwd: str | None = None) -> Verdict:
        raise AssertionError(f"the rules read a command of {len(command)} characters")


def _reply(command: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "bash", "args": {"command": command}, "id": "c1"}])


@pytest.mark.parametrize("command", ["x" * (MAX_COMMAND_BYTES + 1), "", "a\0b", 42])
def test_graph_reads_only_valid_commands(command: Any) -> None:
    """`next_after_agent` and the approve node skip invalid calls; `tools` answers them."""
    checker = Checker(_Untouchable([], workdir="/w"))
    state: Any = {"messages": [_reply(command)], "policy_checks": checker.check_calls(_reply(command).tool_calls, None)}
    assert next_after_agent(state, checker) == "approve"
    node = ApprovalNode(AgentConfig(workdir="/w"), checker)
    assert node(state) == {}  # nothing asked, nothing refused: left to `tools`


def test_too_deep_nesting_is_asked_not_parsed() -> None:
    """Substitutions nested past MAX_NESTING are a TooComplexError; the policy asks."""
    command = "echo " + "$(" * 100 + "x" + ")" * 100
    with pytest.raises(TooComplexError):
        split_command(command)
    decision = Policy(DEFAULT_ASK, workdir="/w").decide(command)
    assert decision.action == "ask"
    assert decision.reason.startswith("too complex to check")


def test_a_here_document_read_by_many_shells_is_checked_once_and_still_checked() -> None:
    """15 `-exec sh` read the one here-document: nested, each level parsed it 15 times over
    (depth 5 took 50 s). Read once per level, the command inside is still found."""
    body = "rm -rf ~"
    for depth in range(4):
        body = "find . " + "-exec sh \\; " * 15 + f"<<'E{depth}'\n{body}\nE{depth}"
    parts = [part for part in split_command(body) if part.words[:1] == ("rm",)]
    assert len(parts) == 1
    decision = Policy(DEFAULT_ASK, workdir="/w/p", home="/h").decide(body)
    assert (decision.action, decision.part) == ("ask", "rm -rf ~")


def test_many_braces_on_a_long_find_path_are_asked_not_expanded() -> None:
    """Each `{}` stands for every start path: 25,000 of them on a 50 KB path would be 1.25 GB
    of text. The budget counts characters: the policy asks instead of building it."""
    command = "find " + "a" * 50_000 + " -exec echo " + "{}" * 25_000 + " +"
    decision = Policy(DEFAULT_ASK, workdir="/w/p", home="/h").decide(command)
    assert decision.action == "ask"
    assert decision.reason.startswith("too complex to check")
    small = Policy(DEFAULT_ASK, workdir="/w/p", home="/h").decide("find /etc a b -exec rm -rf {} {} +")
    assert small.action == "ask"
    assert "too complex" not in small.reason


#: Pieces of shell that exercise every branch of the parser, including unbalanced ones.
FRAGMENTS = st.sampled_from([
    "echo ", "rm -rf ", "../x ", "bash ", "sh -c ", "eval ", "source ", ". ", "python3 - ",
    "sudo ", "env -S ", "timeout 5 ", "xargs ", "find . -exec ", "{} + ", "\\; ", "git push -f ",
    "| ", "|& ", "; ", "&& ", "|| ", "& ", "\n", "(", ")", "{ ", "} ", "((", "))", "$((", "$[",
    "]", "$(", "`", "'", '"', "${", "}", "<<", "<<-", "<<<", "<(", ">(", "<", ">", "2>", "&>",
    "EOF", "\nEOF\n", "#", "\\", "$'\\x72'", "*", "..", "~", "cd / ", "f() ", ":|:", "coproc ",
    "time -p ", "a=1 ", "1<<2", "é", "\t",
])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(FRAGMENTS, min_size=1, max_size=40),
       repeat=st.integers(min_value=1, max_value=MAX_COMMAND_BYTES))
def test_any_shell_like_text_up_to_the_limit_is_decided_quickly(pieces: list[str],
                                                                repeat: int) -> None:
    """Random shell-like text, repeated up to the limit: a decision, never an exception, and
    in bounded time (generous: a quadratic step would take minutes at this size)."""
    unit = "".join(pieces)
    command = unit * max(1, min(repeat, MAX_COMMAND_BYTES // len(unit.encode())))
    start = time.process_time()
    decision = Policy(DEFAULT_ASK, workdir="/w/p", home="/h").decide(command)
    assert decision.action in ("allow", "ask")
    assert time.process_time() - start < 10.0
