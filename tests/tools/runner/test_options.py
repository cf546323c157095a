"""RunOptions: one declaration of how commands run, taken whole or field by field by both forms."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import os
from pathlib import Path
from typing import Any

import pytest

from bashgraph.tools import (
    DEFAULT_TIMEOUT,
    CommandResult,
    Outcome,
    RunOptionFields,
    RunOptions,
    arun_command,
    run_command,
)
from bashgraph.tools.runner.process import plan_command
from bashgraph.tools.runner.spawn import Plan


def both(command: str, **kwargs: Any) -> tuple[CommandResult, CommandResult]:
    """The same call through `run_command` and through `arun_command`."""
    return run_command(command, **kwargs), asyncio.run(arun_command(command, **kwargs))


def test_every_field_is_a_keyword_of_both_forms() -> None:
    """The keywords are RunOptions' fields, and the two forms take exactly the same arguments."""
    fields = {field.name for field in dataclasses.fields(RunOptions)}
    assert set(RunOptionFields.__annotations__) == fields
    assert inspect.signature(run_command) == inspect.signature(arun_command)


def test_options_given_whole_act_like_the_keywords(tmp_path: Path) -> None:
    """`options=RunOptions(...)` and the same fields as keywords run the command alike."""
    command = 'echo "$CHOSEN"; seq 1 200'
    options = RunOptions(env={"CHOSEN": "yes"}, max_output_chars=40, spill_dir=tmp_path)
    whole = both(command, options=options)
    keywords = both(command, env={"CHOSEN": "yes"}, max_output_chars=40, spill_dir=tmp_path)
    for result in (*whole, *keywords):
        assert result.stdout.startswith("yes\n")
        assert result.truncated
        assert Path(result.stdout_file or "").parent == tmp_path


def test_a_keyword_replaces_its_field_for_one_call() -> None:
    """`timeout=` beside `options=` wins for that call; the options themselves are unchanged."""
    options = RunOptions(timeout=0.2, grace=0.0)
    for longer in both("sleep 0.5", options=options, timeout=10):
        assert longer.outcome is Outcome.OK
    for short in both("sleep 5", options=options):
        assert short.spawn_error == "timeout"
    assert options.timeout == 0.2


def test_bad_options_are_the_commands_args_error_not_an_exception() -> None:
    """Building options checks nothing; running with a bad one answers args_error, both forms."""
    options = RunOptions(timeout=0, max_output_chars=-1)
    for result in both("true", options=options):
        assert result.outcome is Outcome.ARGS_ERROR
        assert "'timeout' must be a positive number" in (result.detail or "")


def test_shared_options_keep_an_iterator_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pass_env` given as an iterator is read once, so every run with the options keeps it."""
    monkeypatch.setenv("OPTIONS_TEST_TOKEN", "kept")
    options = RunOptions(pass_env=iter(["OPTIONS_TEST_TOKEN"]))
    for _ in range(2):
        for result in both('echo "${OPTIONS_TEST_TOKEN-scrubbed}"', options=options):
            assert result.stdout == "kept\n"


def test_process_cwd_from_the_options_is_where_the_shell_starts(tmp_path: Path) -> None:
    """`process_cwd` is trusted as this process's directory: a relative cwd is taken from it."""
    (tmp_path / "sub").mkdir()
    options = RunOptions(process_cwd=str(tmp_path))
    assert os.getcwd() != str(tmp_path)  # so "sub" could only be found through process_cwd
    for result in both("pwd", cwd="sub", options=options):
        assert result.stdout == f"{tmp_path / 'sub'}\n"


def test_no_timeout_means_the_default_and_infinity_means_none() -> None:
    """`timeout=None` plans the default limit; `math.inf` plans none, and the command runs."""
    default, unlimited = (plan_command("true", None, RunOptions(timeout=t)) for t in (None, math.inf))
    assert isinstance(default, Plan)
    assert isinstance(unlimited, Plan)
    assert (default.timeout, unlimited.timeout) == (DEFAULT_TIMEOUT, math.inf)
    for result in both("sleep 0.1; echo done", timeout=math.inf):
        assert (result.outcome, result.stdout) == (Outcome.OK, "done\n")
