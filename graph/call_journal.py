"""A command journal as the executor sees it: its contract (the calls' and the jobs'),
each call's context, and what a resume reports for a command that started and never finished.

The journals themselves, and the rows they keep (`JournalEntry`, `JobRow`:
store/journal_rows.py), live in `store/` (SQL in the session's database, or a LangGraph store
under the server); this is what they have in common with the code that runs the calls.

What a command printed before its run was cancelled (Ctrl-C, SIGTERM) is kept for the resume
(`PartialOutput`, `save_partial`, `load_partial`). A cancelled command has no result: its
journal row stays open, and the resume reports it `interrupted` (`interrupted_result`). So that
the report says how long it ran and what it printed, the executor records, while it runs, the
start and the end of each stream's live output (already redacted and made visible, as shown
live), and when the run is cancelled writes them with the time it stopped to a small file next
to the spill files, named by the call's journal marker. The resume reads it back. Both ends are
bounded (`KEEP` characters a stream), and a file that is missing, too big or unreadable is
simply not used: the report then says what it said before (no duration, no output).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bashgraph.graph.store.journal_rows import JournalEntry
from bashgraph.tools import CommandResult, SpawnErrorKind, spawn_failure
from bashgraph.tools.runner import OutputCallback, sweep

#: Set in each journaled command's environment to its journal row's marker; every process the
#: command starts inherits it, so a later resume can find them after this process died.
CALL_MARKER_VAR = "BASHGRAPH_CALL_ID"


class Journal(Protocol):
    """Durable record of commands, so a resume never runs one twice (see graph/store/journal.py)."""

    def lookup(self, thread_id: str, call_id: str, attempt: int) -> JournalEntry | None: ...

    def start(self, thread_id: str, call_id: str, attempt: int, command: str,
              marker: str | None = None) -> None: ...

    def finish(self, thread_id: str, call_id: str, attempt: int, result: CommandResult) -> None: ...


@dataclass(frozen=True)
class CallContext:
    """Where a call runs: thread, the model reply that asked for it, and the attempt number.

    Some OpenAI-compatible servers reuse tool-call ids (`call_0` in every reply), so a call is
    known by its reply's message id *and* its tool-call id.
    """

    thread_id: str | None
    message_id: str = ""
    attempt: int = 0
    journal: Journal | None = None
    """Where this call's row goes: the session's journal, or one in the run's LangGraph store."""

    def key(self, call_id: str) -> str:
        return f"{self.message_id}/{call_id}"


@dataclass(frozen=True)
class Swept:
    """What the sweep of a cut-off call found of it still running."""

    checked: bool
    found: int = 0
    alive: int = 0
    reason: str = ""
    """Why it was not checked."""

    def text(self) -> str:
        if not self.checked:
            return f"; whether it still runs was not checked: {self.reason}"
        if self.alive:
            return (f"; {self.alive} of its processes could not be stopped and may still run "
                    "(uninterruptible)")
        if self.found:
            return f"; {self.found} of its processes were still running and were stopped"
        return ""


def interrupted_result(entry: JournalEntry, swept: Swept, cwd: str | None,
                       partial: Partial | None = None) -> CommandResult:
    """`interrupted` for a call that started in `cwd` and never finished, once the sweep is
    done. `cwd` is kept on the result: a person's "retry" runs the call there again. `partial`:
    what a cancelled run recorded (`save_partial`): how long it ran, what it printed."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started_at))
    ran, output = "", dict[str, Any]()
    if partial is not None:
        seconds = max(partial.ended_at - entry.started_at, 0.0)
        ran = f" and ran {seconds:.1f}s"
        output = {"duration_s": round(seconds, 6), "stdout": partial.stdout, "stderr": partial.stderr}
    return spawn_failure(
        SpawnErrorKind.INTERRUPTED, entry.command,
        f"started at {started}{ran} but the run stopped before it finished; it may have had "
        f"side effects, so it was not run again{swept.text()}", cwd=cwd, **output,
    )


def unrecorded_result(command: str, cwd: str | None) -> CommandResult:
    """`interrupted` for a call with no answer and no journal to say whether it started: it may
    have run, so it is not run again (fail closed)."""
    return spawn_failure(
        SpawnErrorKind.INTERRUPTED, command,
        "the run stopped before this call was answered, and no command journal records whether "
        "it started: it may have run and had side effects, so it was not run again", cwd=cwd,
    )


def not_run_result(command: str, why: str, cwd: str | None) -> CommandResult:
    """`not_run` for a call the journal shows never started: `why` says what came instead."""
    return spawn_failure(SpawnErrorKind.NOT_RUN, command, f"it was not run: {why}", cwd=cwd)


def sweep_cut_off(entry: JournalEntry, grace: float) -> Swept:
    """Stop what still runs of a cut-off call (blocking: up to grace + 5 s)."""
    if entry.marker is None:
        return Swept(checked=False, reason="it was journaled without a run marker")
    if entry.host != socket.gethostname():
        return Swept(checked=False, reason=f"it started on host {entry.host}, not this one")
    found, alive = sweep(entry.marker, grace=grace)
    return Swept(checked=True, found=found, alive=alive)


#: Characters kept of each end of a stream.
KEEP = 4_000
CUT = "\n[... output cut ...]\n"
#: A record bigger than this is not read (it was not written by `save_partial`), which writes JSON
#: escapes: a character outside the Basic Multilingual Plane (an emoji) takes 12 bytes, so two
#: streams of `2 * KEEP` such characters, and the rest of the record, fit.
MAX_RECORD_BYTES = 2 * (2 * KEEP + len(CUT)) * len(json.dumps("\U0001f600")) + 1024


@dataclass(frozen=True)
class Partial:
    """A cancelled run, as recorded: when it stopped, and what it printed (head and tail)."""

    ended_at: float
    stdout: str = ""
    stderr: str = ""


class PartialOutput:
    """The live output of one run so far: each stream's first and last `KEEP` characters."""

    def __init__(self) -> None:
        self._head: dict[str, str] = {}
        self._tail: dict[str, str] = {}
        self._cut: set[str] = set()

    def add(self, stream: str, text: str) -> None:
        head = self._head.get(stream, "")
        if len(head) < KEEP:
            room = KEEP - len(head)
            self._head[stream], text = head + text[:room], text[room:]
        if text:
            tail = self._tail.get(stream, "") + text
            if len(tail) > KEEP:
                self._cut.add(stream)
            self._tail[stream] = tail[-KEEP:]

    def text(self, stream: str) -> str:
        between = CUT if stream in self._cut else ""
        return self._head.get(stream, "") + between + self._tail.get(stream, "")

    def stopped_now(self) -> Partial:
        return Partial(time.time(), self.text("stdout"), self.text("stderr"))


def recording(seen: PartialOutput | None, callback: OutputCallback | None) -> OutputCallback | None:
    """`callback`, with each piece of live output also kept by `seen` (when given)."""
    if seen is None:
        return callback

    def both(stream: str, text: str) -> None:
        seen.add(stream, text)
        if callback is not None:
            callback(stream, text)

    return both


def record_path(spill_dir: str | os.PathLike[str], marker: str) -> Path:
    return Path(spill_dir) / f"interrupted-{marker}.json"


def save_partial(path: Path, partial: Partial) -> None:
    """Write the record (blocking; mode 0600, in the spill directory, made 0700 if missing).
    A failure to write loses only the report's details."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = json.dumps({"ended_at": partial.ended_at, "stdout": partial.stdout, "stderr": partial.stderr})
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(data)


def load_partial(path: Path) -> Partial | None:
    """The record at `path`, or None when there is none that can be read (blocking)."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_RECORD_BYTES + 1)
        if len(raw) > MAX_RECORD_BYTES:
            return None
        values = json.loads(raw)
        return Partial(float(values["ended_at"]), str(values.get("stdout") or "")[:2 * KEEP + len(CUT)],
                       str(values.get("stderr") or "")[:2 * KEEP + len(CUT)])
    except (OSError, ValueError, TypeError, KeyError):
        return None
