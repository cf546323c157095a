"""The exact text the model reads for every outcome (render_for_model over real results)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashgraph.tools import CommandResult, SpawnErrorKind, render_for_model, run_command
from bashgraph.tools.results import args_error, spawn_failure
from bashgraph.tools.runner.classify import SpawnTarget, spawn_error_result


def test_ok_shows_stdout_as_it_is() -> None:
    """ok: the output alone, without its final newline."""
    assert render_for_model(run_command("echo hi")) == "hi"


def test_ok_without_output_says_so() -> None:
    """ok with nothing printed: an explicit '(no output)'."""
    assert render_for_model(run_command("true")) == "(no output)"


def test_ok_with_stderr_tags_it() -> None:
    """ok with warnings: stdout, then the warnings tagged [stderr]."""
    assert render_for_model(run_command("echo hi; echo warn >&2")) == "hi\n[stderr] warn"


def test_exit_error_without_hint() -> None:
    """exit_error: the code on top, then each stream tagged."""
    rendered = render_for_model(run_command("echo out; echo err >&2; exit 3"))
    assert rendered == "[exit code 3]\n[stdout] out\n[stderr] err"


def test_exit_error_without_output() -> None:
    """exit_error with nothing printed still says there was no output."""
    assert render_for_model(run_command("exit 3")) == "[exit code 3]\n(no output)"


def test_exit_error_with_hint() -> None:
    """exit 127: the hint follows the code."""
    rendered = render_for_model(run_command("no_such_command_xyz"))
    assert rendered == (
        "[exit code 127] command not found\n"
        "[stderr] bashgraph: line 1: no_such_command_xyz: command not found"
    )


def test_spawn_error_not_found() -> None:
    """A missing shell: kind and cause in one line, nothing else."""
    rendered = render_for_model(run_command("echo hi", shell="/nonexistent/bash"))
    assert rendered == (
        "[spawn error: not_found — shell not found: /nonexistent/bash (No such file or directory)]"
    )


def test_spawn_error_missing_cwd(tmp_path: Path) -> None:
    """A missing working directory is named in the text."""
    missing = tmp_path / "gone"
    rendered = render_for_model(run_command("echo hi", cwd=missing))
    assert rendered == (
        f"[spawn error: not_found — working directory not found: {missing} "
        "(No such file or directory)]"
    )


def test_spawn_error_permission_denied(tmp_path: Path) -> None:
    """A shell without the execute bit."""
    shell = tmp_path / "sh"
    shell.write_text("#!/bin/sh\n")
    shell.chmod(stat.S_IRUSR)
    rendered = render_for_model(run_command("true", shell=str(shell)))
    assert rendered == f"[spawn error: permission_denied — shell not executable: {shell} " \
        "(Permission denied)]"


def test_spawn_error_timeout_keeps_partial_output() -> None:
    """A timeout says what was killed and shows what had been printed."""
    rendered = render_for_model(run_command("echo partial; sleep 30", timeout=0.3, grace=0.2))
    assert rendered == (
        "[spawn error: timeout after 0.3s — process group killed]\n[stdout] partial"
    )


def test_spawn_error_signal() -> None:
    """A shell killed by a signal we did not send."""
    rendered = render_for_model(run_command("kill -KILL $$"))
    assert rendered == "[spawn error: signal — the shell was killed by SIGKILL]"


def test_spawn_error_resource() -> None:
    """No resources to start the shell (EAGAIN from fork)."""
    result = spawn_error_result(OSError(errno.EAGAIN, os.strerror(errno.EAGAIN)),
                                SpawnTarget("true", "bash", None, "/"))
    assert render_for_model(result) == (
        "[spawn error: resource — cannot start the shell now: Resource temporarily unavailable]"
    )


@pytest.mark.parametrize("kind", list(SpawnErrorKind))
def test_every_spawn_error_kind_renders_the_same_way(kind: SpawnErrorKind) -> None:
    """Whatever layer reports it (runner, sandbox, graph, approval), a kind reads `[spawn error:
    KIND — detail]`, with partial output kept under it."""
    result = spawn_failure(kind, "rm -rf /", "the detail", stderr="partial\n")
    assert render_for_model(result) == f"[spawn error: {kind.value} — the detail]\n[stderr] partial"


def test_args_error() -> None:
    """Invalid arguments: the problem in one line, nothing ran."""
    assert render_for_model(args_error("'command' is required")) == (
        "[args error] 'command' is required"
    )


@pytest.fixture
def fixed_length_dir() -> Iterator[str]:
    """A spill directory whose path always has the same length (the marker quotes it)."""
    path = tempfile.mkdtemp(prefix="bg-", dir="/tmp")
    yield path
    shutil.rmtree(path)


def test_truncated_output_shows_head_marker_and_tail(fixed_length_dir: str) -> None:
    """Over the cap: head, the marker with the byte count and file, then the tail."""
    result = run_command("seq 1 2000", max_output_chars=120, spill_dir=fixed_length_dir)
    assert render_for_model(result) == (
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n"
        f"[... 8,838 bytes omitted; full output: {result.stdout_file}] ...\n"
        "1996\n1997\n1998\n1999\n2000"
    )


def test_cwd_change_is_shown(tmp_path: Path) -> None:
    """A command that moved the shell elsewhere ends with a [cwd] line."""
    rendered = render_for_model(run_command("cd / && echo moved", cwd=tmp_path))
    assert rendered == "moved\n[cwd] /"


def test_the_cwd_line_shows_escapes_and_line_breaks_as_symbols(tmp_path: Path) -> None:
    """A directory name is the command's text: it reaches the model made safe, on one line."""
    (tmp_path / "\x1b]0;pwned\x07\x1b[2J\nnext").mkdir()
    rendered = render_for_model(run_command("cd ./*", cwd=tmp_path))
    cwd_line = rendered.rpartition("[cwd] ")[2]
    assert "\x1b" not in cwd_line
    assert "\x07" not in cwd_line
    assert "\n" not in cwd_line
    assert cwd_line.startswith(str(tmp_path))


def test_render_never_exceeds_max_chars() -> None:
    """With max_chars the whole text, header included, stays within the bound."""
    result = run_command("seq 1 5000; seq 1 5000 >&2; exit 1")
    rendered = render_for_model(result, 500)
    assert len(rendered) <= 500
    assert rendered.startswith("[exit code 1]\n[stdout] 1\n2\n")
    assert rendered.endswith("4999\n5000")


def test_result_json_round_trip_of_every_field() -> None:
    """A result with every field set survives to_dict/from_dict."""
    result = CommandResult.from_dict(
        spawn_failure(SpawnErrorKind.TIMEOUT, "sleep 9", "timeout after 1s — process group killed",
                      cwd="/", stdout="a", stderr="b", stdout_bytes=1, stderr_bytes=1,
                      truncated=True, duration_s=1.5, stdout_file="/f", stderr_file="/g",
                      errno=None, signal=None, final_cwd=None).to_dict()
    )
    assert result.spawn_error is SpawnErrorKind.TIMEOUT
    assert (result.stdout_file, result.stderr_file, result.truncated) == ("/f", "/g", True)
