"""run_command / arun_command with a bubblewrap sandbox: contained, told apart, on time."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bashgraph.tools import CommandResult, Outcome, SpawnErrorKind, arun_command, run_command
from bashgraph.tools.safety.sandbox import BwrapSandbox, sandbox_available
from tests.tools.runner.proctools import gone_within, marked_processes

UNAVAILABLE = sandbox_available()
if UNAVAILABLE and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandbox tests: {UNAVAILABLE}")
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no sandbox: {UNAVAILABLE}")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[BwrapSandbox]:
    """A sandbox for tmp_path/work (no hidden paths: this test is not about them)."""
    work = tmp_path / "work"
    work.mkdir()
    with BwrapSandbox(str(work), hidden_paths=()) as sandbox:
        yield sandbox


def run_in(box: BwrapSandbox, command: str, **kwargs: Any) -> CommandResult:
    return run_command(command, cwd=box.workdir, sandbox=box, **kwargs)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_command_runs_and_reports_like_without_the_sandbox(box: BwrapSandbox) -> None:
    """stdout, stderr, exit code and cwd are the command's own."""
    result = run_in(box, "echo out; echo err >&2; exit 3")
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 3)
    assert (result.stdout, result.stderr, result.cwd) == ("out\n", "err\n", box.workdir)


def test_writing_outside_the_workdir_is_an_exit_error_with_evidence(box: BwrapSandbox) -> None:
    """The read-only root refuses the write; the model sees the OS's message.

    (/var/tmp, not /tmp: the sandbox's /tmp is a private, writable tmpfs.)"""
    outside = Path(f"/var/tmp/bashgraph-probe-{uuid.uuid4().hex}")
    try:
        result = run_in(box, f"echo x > {outside}")
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 1)
    assert "Read-only file system" in result.stderr
    assert run_in(box, "echo x > inside.txt").ok
    assert Path(box.workdir, "inside.txt").read_text() == "x\n"


def test_the_network_is_cut(box: BwrapSandbox) -> None:
    """A port listening on the host's 127.0.0.1 cannot be reached from inside."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        result = run_in(box, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    assert result.outcome is Outcome.EXIT_ERROR
    assert "connected" not in result.stdout
    assert "Connection refused" in result.stderr or "unreachable" in result.stderr


def test_a_setsid_escape_dies_with_the_command(box: BwrapSandbox) -> None:
    """A `setsid` background process is gone once the call returns."""
    result = run_in(box, "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $BASHGRAPH_RUN_ID")
    marker = result.stdout.strip().rsplit(":", 1)[-1]
    assert result.ok
    assert len(marker) == 32
    deadline = time.monotonic() + 2
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not marked_processes(marker)


def test_final_cwd_follows_cd_inside_the_sandbox(box: BwrapSandbox) -> None:
    """The cwd channel reaches the runner from inside (as /dev/fd/4), in both forms."""
    Path(box.workdir, "sub").mkdir()
    result = run_in(box, "cd sub && pwd")
    assert (result.stdout, result.final_cwd) == (f"{box.workdir}/sub\n", f"{box.workdir}/sub")
    moved = asyncio.run(arun_command("cd sub", cwd=box.workdir, sandbox=box))
    assert moved.final_cwd == f"{box.workdir}/sub"
    assert run_in(box, "true").final_cwd == box.workdir  # untracked: the start directory


def test_a_signal_inside_the_sandbox_is_an_exit_error(box: BwrapSandbox) -> None:
    """The sandbox reports a command killed by SIGKILL as 128+9, like a shell does."""
    result = run_in(box, "kill -KILL $$")
    assert (result.outcome, result.exit_code) == (Outcome.EXIT_ERROR, 137)
    assert result.hint is not None
    assert "SIGKILL" in result.hint


@pytest.mark.parametrize("form", ["sync", "async"])
def test_a_timeout_returns_on_time_and_leaves_nothing(box: BwrapSandbox, form: str) -> None:
    """SIGTERM/SIGKILL to bwrap's group ends the whole sandbox, TERM-ignoring commands too."""
    command = "trap '' TERM; sleep 30 & setsid sleep 30 & echo $BASHGRAPH_RUN_ID; sleep 30"
    started = time.monotonic()
    if form == "sync":
        result = run_in(box, command, timeout=0.5, grace=0.3)
    else:
        result = asyncio.run(arun_command(command, cwd=box.workdir, sandbox=box, timeout=0.5,
                                          grace=0.3))
    assert time.monotonic() - started < 0.5 + 0.3 + 1.5
    assert result.spawn_error is SpawnErrorKind.TIMEOUT
    marker = result.stdout.strip().rsplit(":", 1)[-1]
    assert marker
    assert all(gone_within(pid, 1) for pid in marked_processes(marker))


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("missing_workdir", "bwrap: Can't find source path"),
        ("cgroup_unusable", "bashgraph-sandbox: cannot apply the task limit"),
        ("no_bwrap", "cannot start the sandbox (/nonexistent/bwrap): No such file or directory"),
    ],
)
def test_a_sandbox_that_cannot_start_is_a_sandbox_spawn_error(
    tmp_path: Path, breakage: str, expected: str
) -> None:
    """The command never ran: spawn_error/sandbox with bwrap's (or our) own message."""
    options: dict[str, Any] = {"hidden_paths": ()}
    workdir = tmp_path / "gone" if breakage == "missing_workdir" else tmp_path
    if breakage == "cgroup_unusable":
        options["cgroup_parent"] = "/proc"
    if breakage == "no_bwrap":
        options |= {"bwrap": "/nonexistent/bwrap", "cgroup_parent": None}
    before = open_fds()
    with BwrapSandbox(str(workdir), **options) as sandbox:
        result = run_command("echo ran", cwd=tmp_path, sandbox=sandbox)
        async_result = asyncio.run(arun_command("echo ran", cwd=tmp_path, sandbox=sandbox))
    for each in (result, async_result):
        assert (each.outcome, each.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.SANDBOX)
        assert each.detail is not None
        assert each.detail.startswith(expected), each.detail
        assert each.stdout == ""
    assert open_fds() == before  # the status pipe and the channel are closed


def test_no_descriptor_is_left_open_after_runs(box: BwrapSandbox) -> None:
    """Status pipe, cwd channel and output pipes are all closed after ok and failed runs."""
    run_in(box, "true")
    before = open_fds()
    for command in ("cd / && true", "exit 2", "echo x > /etc/nope"):
        run_in(box, command)
    run_in(box, "sleep 5", timeout=0.2, grace=0.1)
    assert open_fds() == before
