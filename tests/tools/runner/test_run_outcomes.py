"""run_command with real bash: how each kind of ending is classified."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bashgraph.tools import CommandResult, Outcome, SpawnErrorKind, run_command
from bashgraph.tools.failures import KINDS, UNLISTED_ERRNO_KIND
from bashgraph.tools.runner.classify import SpawnTarget, sandbox_spawn_error, spawn_error_result

#: Every errno the taxonomy files under a kind, with that kind.
FILED_ERRNOS = [(kind, code) for kind, entry in KINDS.items() for code in sorted(entry.errnos)]


def test_echo_is_ok_with_its_stdout() -> None:
    """`echo hi` ends ok with exit code 0 and exactly its output."""
    result = run_command("echo hi")
    assert result.outcome is Outcome.OK
    assert (result.exit_code, result.stdout, result.stderr) == (0, "hi\n", "")
    assert (result.stdout_bytes, result.stderr_bytes, result.truncated) == (3, 0, False)


def test_exit_3_is_an_exit_error() -> None:
    """`exit 3` is an exit error carrying the code, not a success nor a timeout."""
    result = run_command("exit 3")
    assert result.outcome is Outcome.EXIT_ERROR
    assert (result.exit_code, result.hint, result.spawn_error) == (3, None, None)


def test_exit_error_keeps_both_streams_apart() -> None:
    """stdout and stderr of a failing command are both kept, each in its own field."""
    result = run_command("echo hello; echo warn >&2; exit 3")
    assert result.outcome is Outcome.EXIT_ERROR
    assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "warn\n", 3)


def test_missing_shell_is_a_spawn_error_not_found() -> None:
    """A shell that does not exist is spawn_error/not_found with ENOENT, never an exception."""
    result = run_command("echo hi", shell="/nonexistent/bash")
    assert result.outcome is Outcome.SPAWN_ERROR
    assert result.spawn_error is SpawnErrorKind.NOT_FOUND
    assert result.errno == errno.ENOENT
    assert result.detail == "shell not found: /nonexistent/bash (No such file or directory)"
    assert result.exit_code is None


def test_exit_0_with_stderr_is_ok() -> None:
    """Warnings on stderr do not make a successful command fail."""
    result = run_command("echo done; echo 'warning: x' >&2")
    assert result.outcome is Outcome.OK
    assert (result.stdout, result.stderr) == ("done\n", "warning: x\n")


def test_missing_working_directory_names_the_directory(tmp_path: Path) -> None:
    """A cwd that does not exist is spawn_error/not_found naming that directory."""
    missing = tmp_path / "nope"
    result = run_command("echo hi", cwd=missing)
    assert (result.outcome, result.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.NOT_FOUND)
    assert result.errno == errno.ENOENT
    assert result.detail == f"working directory not found: {missing} (No such file or directory)"
    assert result.stdout == result.stderr == ""


def test_working_directory_that_is_a_file_is_not_found(tmp_path: Path) -> None:
    """A cwd that is a regular file is spawn_error/not_found with ENOTDIR."""
    afile = tmp_path / "file"
    afile.write_text("x")
    result = run_command("echo hi", cwd=afile)
    assert (result.spawn_error, result.errno) == (SpawnErrorKind.NOT_FOUND, errno.ENOTDIR)
    assert str(afile) in (result.detail or "")


def test_non_executable_shell_is_permission_denied(tmp_path: Path) -> None:
    """A shell file without the execute bit is spawn_error/permission_denied with EACCES."""
    shell = tmp_path / "myshell"
    shell.write_text("#!/bin/sh\necho never\n")
    shell.chmod(stat.S_IRUSR | stat.S_IWUSR)
    result = run_command("echo hi", shell=str(shell))
    assert result.spawn_error is SpawnErrorKind.PERMISSION_DENIED
    assert result.errno == errno.EACCES
    assert result.detail == f"shell not executable: {shell} (Permission denied)"


def test_127_is_an_exit_error_with_a_hint() -> None:
    """A command that does not exist is exit code 127 with the hint 'command not found'."""
    result = run_command("no_such_command_xyz")
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 127)
    assert result.hint == "command not found"
    assert result.stderr == "bashgraph: line 1: no_such_command_xyz: command not found\n"


def test_126_is_an_exit_error_with_a_hint(tmp_path: Path) -> None:
    """A file that is not executable gives exit code 126 and the 'not executable' hint."""
    script = tmp_path / "script.sh"
    script.write_text("echo never\n")
    result = run_command(str(script))
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 126)
    assert result.hint == "found but not executable (permission denied or not a program)"


def test_shell_killed_by_a_signal_we_did_not_send_is_signal() -> None:
    """A shell that dies of SIGKILL (as under the OOM killer) is spawn_error/signal."""
    result = run_command("echo before; kill -KILL $$")
    assert (result.outcome, result.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.SIGNAL)
    assert result.signal == 9
    assert result.detail == "the shell was killed by SIGKILL"
    assert result.stdout == "before\n"
    assert result.transient


def test_child_killed_by_a_signal_is_an_exit_error_with_hint() -> None:
    """A process inside the command killed by a signal shows as exit 128+n with a hint."""
    result = run_command("sh -c 'kill -TERM $$'")
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 143)
    assert result.hint == "a process inside the command was killed by SIGTERM"


def test_final_cwd_follows_cd(tmp_path: Path) -> None:
    """The shell's last directory is reported, including after `exit` inside the command."""
    (tmp_path / "sub").mkdir()
    result = run_command("cd sub && exit 4", cwd=tmp_path)
    assert result.cwd == str(tmp_path)
    assert result.final_cwd == str(tmp_path / "sub")
    assert result.exit_code == 4


def test_final_cwd_is_the_start_directory_without_cd(tmp_path: Path) -> None:
    """Without `cd` the final directory is where the command started."""
    result = run_command("true", cwd=tmp_path)
    assert result.final_cwd == result.cwd == str(tmp_path)


def test_symlinked_start_directory_is_kept_as_given(tmp_path: Path) -> None:
    """A cwd reached through a symlink is reported as given, not resolved (no false move)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    result = run_command("pwd", cwd=tmp_path / "link")
    assert result.stdout == f"{tmp_path / 'link'}\n"
    assert result.final_cwd == result.cwd == str(tmp_path / "link")


def test_relative_cwd_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative cwd is taken from the caller's directory and reported absolute."""
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run_command("pwd", cwd="sub")
    assert result.cwd == result.final_cwd == str(tmp_path / "sub")


def test_final_cwd_is_none_when_the_shell_was_killed() -> None:
    """A killed shell reports no final directory."""
    assert run_command("cd / && kill -KILL $$").final_cwd is None


def test_command_sees_no_positional_parameters_and_empty_stdin() -> None:
    """The wrapper leaves no stray `$@`, `$0` is bashgraph, and stdin reads as empty."""
    result = run_command('echo "$#:$0:$*"; cat; echo end')
    assert result.stdout == "0:bashgraph:\nend\n"


def test_a_posix_shell_runs_the_wrapper(tmp_path: Path) -> None:
    """dash (`sh`) runs commands and reports the final directory too."""
    result = run_command("cd / && echo $0; exit 2", shell="sh", cwd=tmp_path)
    assert (result.stdout, result.exit_code, result.final_cwd) == ("bashgraph\n", 2, "/")


def test_syntax_error_is_exit_code_2() -> None:
    """A command bash cannot parse is an exit error (the shell ran and said why)."""
    result = run_command("if then")
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 2)
    assert "syntax error" in result.stderr


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"command": "echo \0"}, "'command' contains NUL bytes"),
        ({"command": "true", "timeout": 0}, "'timeout' must be a positive number of seconds, got 0"),
        ({"command": "true", "grace": -1.0}, "'grace' must be a finite number of seconds >= 0"),
        ({"command": "true", "env": {"A": "x\0y"}}, "cannot pass the environment to the shell"),
    ],
)
def test_invalid_arguments_are_args_errors(kwargs: dict[str, object], problem: str) -> None:
    """Arguments that cannot be run come back as args_error, never as an exception."""
    command = kwargs.pop("command")
    result = run_command(command, **kwargs)  # type: ignore[arg-type]
    assert result.outcome is Outcome.ARGS_ERROR
    assert (result.detail or "").startswith(problem)


def test_command_too_long_for_exec_is_an_args_error() -> None:
    """A command over the kernel's single-argument limit (E2BIG) asks to be shortened."""
    result = run_command("echo " + "x" * 200_000)
    assert result.outcome is Outcome.ARGS_ERROR
    assert "E2BIG" in (result.detail or "")


@pytest.mark.parametrize(("kind", "code"), FILED_ERRNOS, ids=lambda v: errno.errorcode.get(v, str(v)))
def test_a_failed_spawn_is_the_kind_its_errno_is_filed_under(kind: SpawnErrorKind, code: int) -> None:
    """The classifier reads the errnos from the taxonomy; a transient kind (the system short of
    something for a moment) says the shell cannot start *now*, and is worth retrying."""
    target = SpawnTarget("true", "bash", None, "/")
    result = spawn_error_result(OSError(code, os.strerror(code)), target)
    assert (result.spawn_error, result.errno, result.transient) == (kind, code, KINDS[kind].transient)
    if KINDS[kind].transient:
        assert result.detail == f"cannot start the shell now: {os.strerror(code)}"


def test_a_failed_spawn_with_an_unlisted_errno_is_the_fallback_kind() -> None:
    target = SpawnTarget("true", "bash", None, "/")
    result = spawn_error_result(OSError(errno.EIO, os.strerror(errno.EIO)), target)
    assert (result.spawn_error, result.errno) == (UNLISTED_ERRNO_KIND, errno.EIO)
    assert result.detail == f"cannot start the shell: {os.strerror(errno.EIO)}"


@pytest.mark.parametrize(("kind", "code"), FILED_ERRNOS, ids=lambda v: errno.errorcode.get(v, str(v)))
def test_a_sandbox_that_cannot_be_spawned_keeps_only_transient_kinds(kind: SpawnErrorKind, code: int) -> None:
    """bwrap short of resources is the transient kind (retried); any other failure to start it is
    `sandbox`: a missing or locked bwrap is not the command's shell missing."""
    target = SpawnTarget("true", "bash", None, "/")
    result = sandbox_spawn_error(OSError(code, os.strerror(code)), target, "bwrap")
    if KINDS[kind].transient:
        assert (result.spawn_error, result.detail) == (kind, f"cannot start the sandbox now: {os.strerror(code)}")
    else:
        assert (result.spawn_error, result.detail) == (
            SpawnErrorKind.SANDBOX, f"cannot start the sandbox (bwrap): {os.strerror(code)}")
    assert result.errno == code


def test_no_descriptors_left_is_a_resource_error_not_an_exception() -> None:
    """With the descriptor limit reached, both forms answer spawn_error/resource (EMFILE)."""
    script = (
        "import asyncio, os, resource\n"
        "from bashgraph.tools import arun_command, run_command\n"
        "loop = asyncio.new_event_loop()\n"
        "highest = max(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (highest, highest + 64))\n"
        "sync = run_command('echo hi')\n"
        "async_ = loop.run_until_complete(arun_command('echo hi'))\n"
        "print(sync.spawn_error, sync.errno, async_.spawn_error, async_.errno)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, timeout=60)
    expected = ["resource", str(errno.EMFILE), "resource", str(errno.EMFILE)]
    assert done.stdout.split() == expected, done.stderr[-2000:]


def test_result_round_trips_through_json(tmp_path: Path) -> None:
    """A real result survives to_dict -> JSON -> from_dict unchanged."""
    result = run_command("echo out; echo err >&2; cd /; exit 5", cwd=tmp_path)
    restored = CommandResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert restored == result
    assert restored.outcome is Outcome.EXIT_ERROR
