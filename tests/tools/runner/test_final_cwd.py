"""final_cwd: where the shell ended, through every way a command can change directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bashgraph.tools import run_command
from bashgraph.tools.runner.launch import may_change_directory


@pytest.mark.parametrize(
    "command",
    [
        "cd /",
        "eval 'cd /'",
        "c=cd; $c /",
        "`echo cd` /",
        ". ./mover.sh",
        "source ./mover.sh",
        "pushd / >/dev/null",
        "go() { cd /; }; go",
        "c''d /",
        "c\\d /",
        '"c"d /',
        "c\\\nd /",
    ],
)
def test_every_way_of_moving_is_reported(tmp_path: Path, command: str) -> None:
    """cd, eval, expansions, sourcing and pushd all leave final_cwd at the new directory."""
    (tmp_path / "mover.sh").write_text("cd /\n")
    result = run_command(command, cwd=tmp_path)
    assert (result.exit_code, result.final_cwd) == (0, "/")


def test_a_directory_name_with_a_line_break_is_reported_whole(tmp_path: Path) -> None:
    """Any byte but NUL can be in a directory name: the last line of it is not the directory."""
    (tmp_path / "x\n" / "etc").mkdir(parents=True)
    result = run_command("cd $'x\\n/etc'", cwd=tmp_path)
    assert result.final_cwd == f"{tmp_path}/x\n/etc"


@pytest.mark.parametrize("command", ["trap 'true' EXIT; cd sub", "cd sub && exec true"])
def test_an_own_exit_trap_or_an_exec_reports_no_directory(tmp_path: Path, command: str) -> None:
    """The documented limit: the trap that reports $PWD is replaced or gone, so nothing is
    claimed (and the next command starts where this one started)."""
    (tmp_path / "sub").mkdir()
    result = run_command(command, cwd=tmp_path)
    assert (result.exit_code, result.final_cwd) == (0, None)


def test_dash_chdir_is_reported(tmp_path: Path) -> None:
    """dash's `chdir` synonym for cd is caught too."""
    assert run_command("chdir /", shell="sh", cwd=tmp_path).final_cwd == "/"


def test_startup_file_that_moves_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BASH_ENV file that moves the shell (with no cd of ours after it) is seen."""
    mover = tmp_path / "mover.sh"
    mover.write_text("cd /\n")
    monkeypatch.chdir(tmp_path)  # the shell starts here: no cd of ours to undo the move
    result = run_command("true", env={"BASH_ENV": str(mover)})
    assert result.final_cwd == "/"


def test_exported_function_that_moves_is_reported(tmp_path: Path) -> None:
    """An exported bash function named like a program can move the shell; it is seen."""
    result = run_command("elsewhere", cwd=tmp_path, env={"BASH_FUNC_elsewhere%%": "() { cd /; }"})
    assert result.final_cwd == "/"


def test_command_that_cannot_move_runs_without_an_extra_shell(tmp_path: Path) -> None:
    """A command with no way to change directory is exec'd by the shell: no waiting bash."""
    result = run_command(f"{sys.executable} -c 'import os; print(os.getppid())'", cwd=tmp_path)
    assert result.stdout == f"{os.getpid()}\n"
    assert result.final_cwd == result.cwd == str(tmp_path)


@pytest.mark.parametrize(
    ("command", "moves"),
    [
        ("ls -la", False),
        ("python -m pytest -q tests/", False),
        ("cat a.txt | grep -v x > out.log", False),
        ("git status && git diff", False),
        ("cd build && make", True),
        ("make -C sub", False),
        ("echo $HOME", True),
        ("find . -name '*.py'", True),
        ("sh ./x.sh", False),
        ("abcd", True),
    ],
)
def test_which_commands_are_tracked(command: str, moves: bool) -> None:
    """The rule errs towards tracking: any trace of cd, eval, source, `.` or `$` counts."""
    assert may_change_directory(command, "bash", {}) is moves


def test_other_shells_are_always_tracked() -> None:
    """zsh reads startup files on every run: its commands are always tracked."""
    assert may_change_directory("ls", "/usr/bin/zsh", {})
