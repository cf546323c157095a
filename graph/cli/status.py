"""How a `bashgraph run` / `resume` ended: the exit status, and the command that continues it.

Exit statuses (documented in docs/cli.md):

    0 done · 1 failed (failed, aborted, model error, thread busy) · 2 usage (bad arguments,
    bad settings, unusable database) · 3 paused, waiting for a person · 4 environment fault ·
    129 stopped by SIGHUP · 130 interrupted by Ctrl-C · 143 stopped by SIGTERM (128 + the signal,
    as a shell reports a process killed by it; the thread is resumable after each of the three)
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from bashgraph.tools.safety import one_line


class ExitStatus(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    PAUSED = 3
    ENVIRONMENT = 4
    HANGUP = 129
    INTERRUPTED = 130
    PIPE_CLOSED = 141
    TERMINATED = 143


#: The exit status of each way a run can stop. Thread statuses (graph/state.py) plus the
#: stops that happen outside the graph.
EXIT_FOR_STATUS: dict[str, ExitStatus] = {
    "done": ExitStatus.OK,
    "failed": ExitStatus.FAILED,
    "aborted": ExitStatus.FAILED,
    "model_error": ExitStatus.FAILED,
    "busy": ExitStatus.FAILED,
    "running": ExitStatus.FAILED,  # the stream ended without a final status: not a success
    "config_error": ExitStatus.USAGE,
    "store_error": ExitStatus.USAGE,
    "paused": ExitStatus.PAUSED,
    "environment_fault": ExitStatus.ENVIRONMENT,
    "interrupted": ExitStatus.INTERRUPTED,
    "terminated": ExitStatus.TERMINATED,
    "hangup": ExitStatus.HANGUP,
    "pipe_closed": ExitStatus.PIPE_CLOSED,
}

#: Stops that are errors of the invocation or its surroundings, not of the task: people see
#: them on stderr as `bashgraph: error: ...`.
ERROR_STATUSES: frozenset[str] = frozenset({"busy", "config_error", "store_error"})

#: Stops after which `bashgraph resume THREAD` has something to continue.
RESUMABLE: frozenset[str] = frozenset(
    {"paused", "model_error", "interrupted", "terminated", "hangup", "environment_fault", "running"}
)


@dataclass(frozen=True)
class Stop:
    """Where a run or resume stopped and why."""

    status: str
    """A thread status ("done", "failed", ...) or "paused", "interrupted", "model_error", ..."""
    reason: str | None = None
    """One line for people (the thread's `reason`, or the error)."""
    pending: list[dict[str, Any]] = field(default_factory=list)
    """Values of the interrupts waiting for an answer (when paused)."""
    pending_ids: list[str] = field(default_factory=list)
    """Their interrupt ids: an answer is sent for the question shown, never for a newer one."""

    @property
    def exit_status(self) -> ExitStatus:
        return EXIT_FOR_STATUS.get(self.status, ExitStatus.FAILED)

    @property
    def resumable(self) -> bool:
        return self.status in RESUMABLE


@dataclass(frozen=True)
class ResumeHint:
    """How to print the `bashgraph resume` command that continues a thread."""

    options: tuple[str, ...] = ()
    """Options to repeat: the database, and every setting that shapes the graph (a resumed
    node runs again with the resuming process's settings: approval rules must be the same)."""

    def command(self, thread_id: str, then: str = "") -> str:
        """`bashgraph resume THREAD [options] [then]`, shell-quoted so that it prints as it runs
        (`then`: more of the command line, already quoted). A thread id that starts with `-`
        comes last, after `--`: argparse would read it as an option."""
        options = " ".join(shell_word(word) for word in _option_words(self.options))
        line = " ".join(part for part in ("bashgraph resume", options, then) if part)
        if thread_id.startswith("-"):
            return f"{line} -- {shell_word(thread_id)}"
        return " ".join(part for part in ("bashgraph resume", shell_word(thread_id), options, then) if part)

    def merged(self, stored: Sequence[str]) -> ResumeHint:
        """These options, then each option the thread's last run was given (`stored`, from its
        checkpoints) that these do not give: a resume typed without `--approval always` still
        prints it, so the next resume runs the thread as it was started."""
        given = _by_flag(self.options)
        # Not --db: the thread was found in this command's database, wherever the last run's was.
        kept = [word for flag, words in _by_flag(stored).items() if flag not in given and flag != "--db"
                for word in words]
        return ResumeHint((*self.options, *kept))


def _option_words(options: Sequence[str]) -> list[str]:
    """The options as words of a command line: a value that starts with `-` (`--model -x`) is
    joined to its flag (`--model=-x`), since argparse reads a separate `-x` as an option."""
    words: list[str] = []
    index = 0
    while index < len(options):
        flag = options[index]
        if flag in SWITCHES or index + 1 >= len(options):
            words.append(flag)
            index += 1
            continue
        value = options[index + 1]
        words += [f"{flag}={value}"] if value.startswith("-") else [flag, value]
        index += 2
    return words


def shell_word(word: str) -> str:
    """`word` quoted for bash. A word holding a character the terminal would show as another
    (a line feed as `⏎`, a control as its symbol; a tab becomes spaces when copied) is written
    in ANSI-C quotes, `$'a\\nb'`, with that character escaped: what a person copies from the
    screen is the word the command was given, not its picture."""
    if not any(_needs_escape(char) for char in word):
        return shlex.quote(word)
    return "$'" + "".join(_escaped(char) for char in word) + "'"


def _needs_escape(char: str) -> bool:
    return char == "\t" or one_line(char) != char


def _escaped(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if not _needs_escape(char):
        return char
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


#: Options of a resume command that take no value (every one: a switch read as taking a
#: value would carry the next flag with it, and a stored old value would override a new one).
SWITCHES = frozenset({"--sandbox", "--allow-network", "--keep-think"})
#: What `stored_options` accepts: more words than any command line of ours has is not ours.
MAX_STORED_WORDS = 200


def _by_flag(words: Sequence[str]) -> dict[str, list[str]]:
    """Option words grouped by flag, in order (a repeated flag, `--rule`, keeps every value)."""
    groups: dict[str, list[str]] = {}
    index = 0
    while index < len(words):
        flag = words[index]
        width = 1 if flag in SWITCHES else 2
        groups.setdefault(flag, []).extend(words[index:index + width])
        index += width
    return groups


def stored_options(metadata: Any) -> tuple[str, ...]:
    """The options a thread's last run was given, from its checkpoint's metadata (empty when
    there are none, or they are not a list of strings as `run` writes them)."""
    raw = metadata.get(OPTIONS_KEY) if isinstance(metadata, dict) else None
    try:
        words = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return ()
    if not isinstance(words, list) or len(words) > MAX_STORED_WORDS or not all(isinstance(w, str) for w in words):
        return ()
    return tuple(words)


#: The checkpoint metadata key under which a run stores its resume options.
OPTIONS_KEY = "bashgraph_options"


def options_to_store(options: Sequence[str]) -> list[str]:
    """The resume options a run keeps in its checkpoints: all but `--db` and its value. A
    PostgreSQL URL may hold a password, and a resume finds the thread in its own database."""
    words: list[str] = []
    index = 0
    while index < len(options):
        if options[index] == "--db":
            index += 2
            continue
        words.append(options[index])
        index += 1
    return words


def absolute(path: str) -> str:
    """A database made absolute, so a printed command works from anywhere (PostgreSQL URLs
    unchanged; a relative `sqlite:///file` becomes the absolute file path)."""
    from bashgraph.graph.store import locate  # (sqlite3 and friends: not for `--help`)

    location = locate(path)
    if location.kind == "sqlite":
        return os.path.abspath(os.path.expanduser(location.target))
    return path
