"""How a command ended, decided from plain facts (no process is touched here).

`spawn_error_result` turns the `OSError` of a failed spawn into a `CommandResult`,
`start_dir_error` the preamble's report that it could not enter the working directory, and
`classify` what a finished (or killed) run left behind. Both the sync and the async runner call
these, so the two can never disagree.
"""

from __future__ import annotations

import errno as _errno
import os
import stat
from typing import Any, NamedTuple

from bashgraph.tools.failures import KINDS, UNLISTED_ERRNO_KIND, kind_of_errno
from bashgraph.tools.results import (
    CommandResult,
    Outcome,
    SpawnErrorKind,
    args_error,
    exit_hint,
    signal_name,
    spawn_failure,
)
from bashgraph.tools.runner.capture import Captured


class SpawnTarget(NamedTuple):
    """What a spawn tried to use, to name the culprit when it fails."""

    command: str
    shell: str
    cwd: str | None  # as the caller gave it
    start_dir: str | None  # the same directory, absolute and resolved


#: `detail` when background processes still held the output after the shell exited: by
#: whether any of them were found (one that left the session and dropped the marker is not).
LEFTOVERS = {
    True: "background processes still held the output after the shell exited and were killed",
    False: "background processes still held the output after the shell exited; none could be "
           "found to stop (they left the command's session and its marker): they may still be "
           "running, and the output ends where the command's did",
}


def spawn_error_result(exc: OSError, target: SpawnTarget) -> CommandResult:
    """The result for a shell that could not be started at all."""
    code = exc.errno or 0
    if code == _errno.E2BIG:
        return args_error(
            "the command is too long to pass to the shell (E2BIG); shorten it or use a script file",
            target.command,
        )
    kind, detail = _describe(code, exc.strerror or str(exc), target, about_cwd=False)
    return spawn_failure(kind, target.command, detail, cwd=target.start_dir, errno=code or None)


def sandbox_spawn_error(exc: OSError, target: SpawnTarget, program: str) -> CommandResult:
    """The result for a sandbox wrapper (`bwrap`) that could not be started at all."""
    code = exc.errno or 0
    reason = exc.strerror or str(exc)
    if code == _errno.E2BIG:
        return spawn_error_result(exc, target)
    kind = kind_of_errno(code)
    if kind is not None and KINDS[kind].transient:  # the system was short of something: not bwrap's fault
        detail = f"cannot start the sandbox now: {reason}"
    else:
        kind, detail = SpawnErrorKind.SANDBOX, f"cannot start the sandbox ({program}): {reason}"
    return spawn_failure(kind, target.command, detail, cwd=target.start_dir, errno=code or None)


def _describe(
    code: int, reason: str, target: SpawnTarget, about_cwd: bool
) -> tuple[SpawnErrorKind, str]:
    """The kind `code` is filed under (failures.KINDS), and a line naming the culprit."""
    kind = kind_of_errno(code)
    if kind is None:
        return UNLISTED_ERRNO_KIND, f"cannot start the shell: {reason}"
    if kind is SpawnErrorKind.NOT_FOUND:
        if about_cwd:
            return kind, f"working directory not found: {target.cwd} ({reason})"
        return kind, f"shell not found: {target.shell} ({reason})"
    if kind is SpawnErrorKind.PERMISSION_DENIED:
        if about_cwd:
            return kind, f"working directory not accessible: {target.cwd} ({reason})"
        return kind, f"shell not executable: {target.shell} ({reason})"
    now = " now" if KINDS[kind].transient else ""
    return kind, f"cannot start the shell{now}: {reason}"


def start_dir_error(target: SpawnTarget) -> CommandResult:
    """The result for a shell that started but could not enter the working directory."""
    try:
        mode = os.stat(target.cwd or "").st_mode
    except OSError as exc:
        code = exc.errno or _errno.ENOENT
    else:
        code = _errno.EACCES if stat.S_ISDIR(mode) else _errno.ENOTDIR
    kind, detail = _describe(code, os.strerror(code), target, about_cwd=True)
    return spawn_failure(kind, target.command, detail, cwd=target.start_dir, errno=code)


class RunFacts(NamedTuple):
    """Everything a run left behind, as plain values."""

    target: SpawnTarget
    returncode: int | None  # Popen convention: negative = killed by that signal
    stdout: Captured
    stderr: Captured
    duration_s: float
    timeout: float
    timed_out: bool
    escalated: bool  # SIGTERM was not enough: SIGKILL after the grace period
    grace: float
    outsiders: int  # processes killed that had left the command's session and group
    # After the shell exited, background processes still held the output: how many were found
    # and killed (0: none could be found); None when nothing held it.
    leftovers: int | None
    final_cwd: str | None


def classify(facts: RunFacts) -> CommandResult:
    """The CommandResult for a run that started: ok, exit_error, timeout or signal."""
    common = _common(facts)
    if facts.timed_out:
        return spawn_failure(SpawnErrorKind.TIMEOUT, facts.target.command, _timeout_detail(facts),
                             **common)
    code = facts.returncode
    if code is None or code < 0:
        number = -code if code is not None else None
        what = signal_name(number) if number is not None else "an unknown cause"
        return spawn_failure(SpawnErrorKind.SIGNAL, facts.target.command,
                             f"the shell was killed by {what}", signal=number, **common)
    leftovers = None if facts.leftovers is None else LEFTOVERS[bool(facts.leftovers)]
    return CommandResult(
        outcome=Outcome.OK if code == 0 else Outcome.EXIT_ERROR,
        command=facts.target.command,
        exit_code=code,
        hint=exit_hint(code) if code else None,
        detail=leftovers,
        final_cwd=facts.final_cwd,
        **common,
    )


def _common(facts: RunFacts) -> dict[str, Any]:
    out, err = facts.stdout, facts.stderr
    return {
        "cwd": facts.target.start_dir,
        "stdout": out.text,
        "stderr": err.text,
        "stdout_bytes": out.total_bytes,
        "stderr_bytes": err.total_bytes,
        "truncated": out.truncated or err.truncated,
        "duration_s": round(facts.duration_s, 6),
        "stdout_file": out.spill_path,
        "stderr_file": err.spill_path,
    }


def _timeout_detail(facts: RunFacts) -> str:
    detail = f"timeout after {facts.timeout:g}s — process group killed"
    if facts.escalated:
        detail += f" with SIGKILL after {facts.grace:g}s grace"
    if facts.outsiders:
        plural = "es" if facts.outsiders > 1 else ""
        detail += f", and {facts.outsiders} escaped process{plural}"
    return detail
