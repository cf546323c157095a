"""The bubblewrap sandbox, with real bwrap: what it contains and how its failures are told apart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bashgraph.tools.results import CommandResult, SpawnErrorKind
from bashgraph.tools.safety.sandbox import (
    BwrapSandbox,
    classify_sandbox_exit,
    default_hidden_paths,
    read_status_fd,
    sandbox_available,
)

UNAVAILABLE = sandbox_available()
if UNAVAILABLE and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandbox tests: {UNAVAILABLE}")
needs_bwrap = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no sandbox: {UNAVAILABLE}")


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    status: str


def run_in(sandbox: BwrapSandbox, script: str, cwd: str | None = None) -> Ran:
    """Run `bash -c script` the way run_command will: wrapped argv, status pipe via pass_fds."""
    read_end, write_end = os.pipe()
    argv = sandbox.wrap(["bash", "-c", script], cwd or sandbox.workdir, write_end)
    try:
        done = subprocess.run(argv, pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30, check=False)
    finally:
        os.close(write_end)
    return Ran(done.returncode, done.stdout, done.stderr, read_status_fd(read_end))


def start(wrap: Callable[[int], list[str]], command: str = "") -> tuple[str, CommandResult | None]:
    """Run the argv `wrap(status_fd)` builds; its stdout, and `classify_sandbox_exit`'s verdict."""
    read_end, write_end = os.pipe()
    argv = wrap(write_end)
    done = subprocess.run(argv, pass_fds=(write_end,), capture_output=True, text=True, timeout=30, check=False)
    os.close(write_end)
    return done.stdout, classify_sandbox_exit(read_status_fd(read_end), done.returncode, done.stderr, command=command)


def processes_with_arg(marker: str) -> list[int]:
    """Host pids whose command line has `marker` as one argument."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in args:
                found.append(int(entry))
    return found


def wait_until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.02)
    return False


def refusals(cgroup: Path) -> int:
    """How many forks the cgroup's pids.max has refused (`max N` in pids.events)."""
    try:
        lines = (cgroup / "pids.events").read_text().splitlines()
    except FileNotFoundError:
        return 0
    return sum(int(line.split()[1]) for line in lines if line.split()[0] == "max")


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[BwrapSandbox]:
    with BwrapSandbox(str(tmp_path), hidden_paths=()) as box:
        yield box


@needs_bwrap
def test_sandbox_is_available_here() -> None:
    """This machine (and CI) can create the sandbox."""
    assert sandbox_available() is None


@needs_bwrap
def test_writes_inside_the_workdir_succeed(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    """A file written in the workdir is there on the host afterwards."""
    ran = run_in(sandbox, "echo hello > out.txt && mkdir -p sub && echo ok")
    assert (ran.returncode, ran.stdout) == (0, "ok\n")
    assert (tmp_path / "out.txt").read_text() == "hello\n"
    assert classify_sandbox_exit(ran.status, ran.returncode, ran.stderr) is None


@needs_bwrap
def test_writes_outside_the_workdir_fail_as_an_ordinary_exit(sandbox: BwrapSandbox) -> None:
    """Writing to /etc fails with the OS's evidence; it is the command's exit, not a spawn error."""
    probe = f"/etc/bashgraph-probe-{uuid.uuid4().hex}"
    ran = run_in(sandbox, f"echo x > {probe}")
    assert ran.returncode == 1
    assert "Read-only file system" in ran.stderr
    assert not os.path.exists(probe)
    assert classify_sandbox_exit(ran.status, ran.returncode, ran.stderr) is None


@needs_bwrap
def test_root_cannot_remount_the_root_writable(sandbox: BwrapSandbox) -> None:
    """Capabilities are dropped: `mount -o remount,rw /` fails, so /var/tmp stays untouched."""
    probe = f"/var/tmp/bashgraph-probe-{uuid.uuid4().hex}"
    ran = run_in(sandbox, f"mount -o remount,rw / ; touch {probe}")
    assert ran.returncode != 0
    assert not os.path.exists(probe)


@needs_bwrap
def test_tmp_is_private(sandbox: BwrapSandbox) -> None:
    """A file written to /tmp inside does not appear in the host's /tmp."""
    probe = f"/tmp/bashgraph-probe-{uuid.uuid4().hex}"
    ran = run_in(sandbox, f"echo x > {probe} && cat {probe}")
    assert (ran.returncode, ran.stdout) == (0, "x\n")
    assert not os.path.exists(probe)


@needs_bwrap
@pytest.mark.parametrize("allow_network", [False, True])
def test_network_is_unreachable_unless_allowed(tmp_path: Path, allow_network: bool) -> None:
    """A port listening on the host's 127.0.0.1 cannot be reached from inside (unless allowed)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with BwrapSandbox(str(tmp_path), allow_network=allow_network, hidden_paths=()) as box:
            ran = run_in(box, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    if allow_network:
        assert (ran.returncode, ran.stdout) == (0, "connected\n")
    else:
        assert ran.returncode != 0
        assert "connected" not in ran.stdout
        assert "Connection refused" in ran.stderr or "unreachable" in ran.stderr


@needs_bwrap
def test_other_processes_are_invisible(sandbox: BwrapSandbox) -> None:
    """/proc inside lists only the sandbox's few processes, not the host's."""
    ran = run_in(sandbox, "ls /proc | grep -E '^[0-9]+$'")
    pids = {int(line) for line in ran.stdout.split()}
    assert pids
    assert max(pids) < 10
    assert len(pids) <= 4
    assert str(os.getpid()) not in ran.stdout.split()


@needs_bwrap
def test_secrets_under_credential_paths_cannot_be_read(tmp_path: Path) -> None:
    """A key under a fake HOME's ~/.ssh (inside the workdir!) and ~/.netrc read as nothing."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SSH-SECRET-MATERIAL")
    (home / ".netrc").write_text("machine x password NETRC-SECRET")
    script = f"cat {home}/.ssh/id_ed25519 {home}/.netrc; ls -A {home}/.ssh"
    hidden = default_hidden_paths({"HOME": str(home)})
    with BwrapSandbox(str(tmp_path), hidden_paths=hidden) as box:
        ran = run_in(box, script)
    assert "SECRET" not in ran.stdout
    assert "No such file or directory" in ran.stderr
    with BwrapSandbox(str(tmp_path), hidden_paths=()) as box:
        assert "SSH-SECRET-MATERIAL" in run_in(box, script).stdout  # the control: it is there


@needs_bwrap
def test_a_hidden_dir_around_the_workdir_does_not_cover_it(tmp_path: Path) -> None:
    """Hiding a parent of the workdir hides its siblings but keeps the workdir writable."""
    work = tmp_path / "outer" / "work"
    work.mkdir(parents=True)
    (tmp_path / "outer" / "secret.txt").write_text("OUTER-SECRET")
    with BwrapSandbox(str(work), hidden_paths=(str(tmp_path / "outer"),)) as box:
        ran = run_in(box, f"cat {tmp_path}/outer/secret.txt; echo kept > kept.txt")
    assert "OUTER-SECRET" not in ran.stdout
    assert (work / "kept.txt").read_text() == "kept\n"


@needs_bwrap
def test_a_setsid_escape_dies_with_the_sandbox(sandbox: BwrapSandbox) -> None:
    """A `setsid` background process does not outlive the command."""
    marker = f"{time.time_ns() % 10**6 + 1000}.5"
    # Wait inside until the escapee has become `sleep`, so the check below cannot be too early.
    ran = run_in(sandbox, f"setsid sleep {marker} </dev/null >/dev/null 2>&1 & "
                          f"until grep -q {marker} /proc/$!/cmdline; do sleep 0.01; done; "
                          "echo started")
    assert ran.stdout == "started\n"
    assert wait_until(lambda: not processes_with_arg(marker), timeout=2.0)


@needs_bwrap
def test_killing_bwraps_process_group_ends_the_command(sandbox: BwrapSandbox) -> None:
    """The timeout path: SIGKILL to bwrap's group kills the command in its new session."""
    marker = f"{time.time_ns() % 10**6 + 2000}.5"
    read_end, write_end = os.pipe()
    argv = sandbox.wrap(["bash", "-c", f"sleep {marker}; echo late"], sandbox.workdir, write_end)
    proc = subprocess.Popen(argv, pass_fds=(write_end,), start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    os.close(write_end)
    try:
        assert wait_until(lambda: processes_with_arg(marker), timeout=5.0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        assert wait_until(lambda: not processes_with_arg(marker), timeout=2.0)
    finally:
        for pid in processes_with_arg(marker):
            os.kill(pid, signal.SIGKILL)
        assert proc.stdout is not None
        proc.stdout.close()
    assert classify_sandbox_exit(read_status_fd(read_end), proc.returncode, "") is None


@needs_bwrap
def test_task_limit_stops_forks_past_the_limit(tmp_path: Path) -> None:
    """With max_tasks=16 the 16th-or-so fork fails with EAGAIN instead of succeeding."""
    box = BwrapSandbox(str(tmp_path), hidden_paths=(), max_tasks=16)
    if not box.limits_tasks:
        pytest.skip("no writable pids cgroup here: the task limit is a documented gap")
    forker = (
        "import os, time\nn = 0\ntry:\n    for _ in range(64):\n        if os.fork() == 0:\n"
        "            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as e:\n"
        '    print("refused", e.errno)\nprint(n)\n')
    # The interpreter itself, not a venv's link to it: the sandbox has a private /tmp, where a
    # venv may live (the forker needs nothing from the venv).
    python = os.path.realpath(sys.executable)
    with box:
        ran = run_in(box, f"{python} -c '{forker}'")
    lines = ran.stdout.split()
    assert lines[:2] == ["refused", "11"]  # EAGAIN
    assert 5 < int(lines[-1]) < 16


@needs_bwrap
def test_a_fork_bomb_is_bounded_and_cleaned_up(tmp_path: Path) -> None:
    """`:(){ :|:& };:` never holds more than max_tasks pids, and dies with bwrap's group."""
    box = BwrapSandbox(str(tmp_path), hidden_paths=(), max_tasks=32)
    if box.cgroup is None:
        pytest.skip("no writable pids cgroup here: the task limit is a documented gap")
    cgroup = Path(box.cgroup)
    read_end, write_end = os.pipe()
    argv = box.wrap(["bash", "-c", ":(){ :|:& };: ; sleep 10"], str(tmp_path), write_end)
    proc = subprocess.Popen(argv, pass_fds=(write_end,), start_new_session=True,
                            stdin=subprocess.DEVNULL)
    os.close(write_end)  # the read end stays open: bwrap dies of SIGPIPE writing to a closed pipe
    try:
        assert wait_until(lambda: refusals(cgroup) > 0, timeout=5.0)
        assert int((cgroup / "pids.current").read_text()) <= 32
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        os.close(read_end)
    assert wait_until(lambda: int((cgroup / "pids.current").read_text()) == 0, timeout=3.0)
    box.close()
    assert not cgroup.exists()


@needs_bwrap
@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("missing_workdir", "bwrap: Can't find source path"),
        ("unknown_option", "bwrap: Unknown option --no-such-option"),
        ("cgroup_unusable", "bashgraph-sandbox: cannot apply the task limit"),
    ],
)
def test_a_sandbox_that_cannot_start_is_a_sandbox_spawn_error(
    tmp_path: Path, breakage: str, expected: str
) -> None:
    """bwrap's refusal to start is spawn_error/sandbox carrying bwrap's own message."""
    workdir = tmp_path / "gone" if breakage == "missing_workdir" else tmp_path
    parent = "/proc" if breakage == "cgroup_unusable" else None
    with BwrapSandbox(str(workdir), hidden_paths=(), cgroup_parent=parent) as box:

        def broken(status_fd: int) -> list[str]:
            argv = box.wrap(["bash", "-c", "echo ran"], str(tmp_path), status_fd)
            if breakage == "unknown_option":
                argv.insert(argv.index("bwrap") + 1, "--no-such-option")
            return argv

        stdout, result = start(broken, "echo ran")
    assert stdout == ""
    assert result is not None
    assert result.spawn_error is SpawnErrorKind.SANDBOX
    assert result.detail is not None
    assert result.detail.startswith(expected)


@needs_bwrap
def test_a_program_missing_inside_the_sandbox_is_not_found(sandbox: BwrapSandbox) -> None:
    """bwrap's execvp ENOENT is spawn_error/not_found, like a missing shell outside."""
    _, result = start(lambda fd: sandbox.wrap(["/no/such/shell", "-c", "true"], sandbox.workdir, fd))
    assert result is not None
    assert result.spawn_error is SpawnErrorKind.NOT_FOUND
    assert result.detail == "bwrap: execvp /no/such/shell: No such file or directory"


@needs_bwrap
def test_a_missing_start_directory_is_not_found(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    """bwrap's failed --chdir is spawn_error/not_found, as a missing cwd is without a sandbox."""
    _, result = start(lambda fd: sandbox.wrap(["bash", "-c", "true"], str(tmp_path / "gone"), fd))
    assert result is not None
    assert result.spawn_error is SpawnErrorKind.NOT_FOUND
    assert result.detail == f"bwrap: Can't chdir to {tmp_path / 'gone'}: No such file or directory"


@needs_bwrap
def test_close_removes_the_task_cgroup(tmp_path: Path) -> None:
    """After a command ran, closing the sandbox removes its cgroup directory."""
    box = BwrapSandbox(str(tmp_path), hidden_paths=())
    if box.cgroup is None:
        pytest.skip("no writable pids cgroup here")
    run_in(box, "true")
    assert os.path.isdir(box.cgroup)
    box.close()
    assert not os.path.exists(box.cgroup)
