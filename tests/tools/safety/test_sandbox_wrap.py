"""The sandbox wrapper without running bubblewrap: the argv it builds, start-failure classification."""

from __future__ import annotations

from pathlib import Path

from bashgraph.tools.results import Outcome, SpawnErrorKind
from bashgraph.tools.safety.sandbox import (
    BwrapSandbox,
    classify_sandbox_exit,
    default_hidden_paths,
    sandbox_available,
)


def test_wrap_builds_the_documented_isolation(tmp_path: Path) -> None:
    """The argv binds / read-only, the workdir writable, drops caps and reports on the fd."""
    argv = BwrapSandbox(str(tmp_path), hidden_paths=(), cgroup_parent=None).wrap(
        ["bash", "-c", "true"], str(tmp_path), 7)
    assert argv[0] == "bwrap"
    assert argv[-4:] == ["--", "bash", "-c", "true"]
    text = " ".join(argv)
    for piece in ("--ro-bind / /", "--dev /dev", "--proc /proc", "--tmpfs /tmp",
                  f"--bind {tmp_path} {tmp_path}", "--unshare-pid", "--unshare-net",
                  "--die-with-parent", "--new-session", "--cap-drop ALL", "--json-status-fd 7",
                  f"--chdir {tmp_path}"):
        assert piece in text


def test_wrap_keeps_the_network_when_allowed(tmp_path: Path) -> None:
    """allow_network=True leaves the network namespace shared."""
    argv = BwrapSandbox(str(tmp_path), allow_network=True, hidden_paths=(),
                        cgroup_parent=None).wrap(["true"], str(tmp_path), 3)
    assert "--unshare-net" not in argv


def test_wrap_hides_dirs_with_tmpfs_files_with_dev_null_and_skips_missing(tmp_path: Path) -> None:
    """Existing hidden dirs get a tmpfs, files /dev/null, missing paths nothing."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    box = BwrapSandbox(str(tmp_path / "dir"), cgroup_parent=None, hidden_paths=(
        str(tmp_path / "file"), str(tmp_path / "missing")))
    argv = box.wrap(["true"], str(tmp_path), 3)
    assert " ".join(argv).count(f"--ro-bind /dev/null {tmp_path / 'file'}") == 1
    assert str(tmp_path / "missing") not in argv


def test_default_hidden_paths_cover_credentials_and_the_state_dir() -> None:
    """~/.ssh, ~/.aws, ~/.config, ~/.netrc and $XDG_STATE_HOME/bashgraph are hidden."""
    paths = default_hidden_paths({"HOME": "/h", "XDG_STATE_HOME": "/s"})
    for expected in ("/h/.ssh", "/h/.aws", "/h/.config", "/h/.netrc", "/h/.gnupg", "/s/bashgraph"):
        assert expected in paths
    assert "/h/.local/state/bashgraph" in default_hidden_paths({"HOME": "/h"})


def test_classify_returns_none_when_the_command_ran() -> None:
    """An exit-code document means bwrap's status is the command's own."""
    status = '{ "child-pid": 12 }\n{ "exit-code": 1 }\n'
    assert classify_sandbox_exit(status, 1, "ls: cannot access") is None


def test_classify_returns_none_when_bwrap_was_killed() -> None:
    """A negative status (a timeout kill) is left to the caller's own classification."""
    assert classify_sandbox_exit("", -9, "") is None


def test_classify_reports_a_sandbox_that_never_started_with_bwraps_message() -> None:
    """No exit-code document and a positive status is spawn_error/sandbox with bwrap's line."""
    result = classify_sandbox_exit('{ "child-pid": 5 }', 1, "bwrap: Can't mount proc\n",
                                   command="ls", cwd="/w")
    assert result is not None
    assert (result.outcome, result.spawn_error) == (Outcome.SPAWN_ERROR, SpawnErrorKind.SANDBOX)
    assert (result.detail, result.command, result.cwd) == ("bwrap: Can't mount proc", "ls", "/w")


def test_classify_tolerates_an_unreadable_status_and_no_message() -> None:
    """Garbage status text and empty stderr still give a sandbox failure with a reason."""
    result = classify_sandbox_exit("{not json", 1, "")
    assert result is not None
    assert result.spawn_error is SpawnErrorKind.SANDBOX
    assert result.detail == "the sandbox exited with status 1 before the command started"


def test_sandbox_available_names_a_missing_bwrap() -> None:
    """A bwrap that is not on PATH is reported, not raised."""
    reason = sandbox_available("bwrap-does-not-exist-here")
    assert reason is not None
    assert "not found" in reason
