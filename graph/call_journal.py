"""A command journal as the executor sees it: its contract, each call's context, and what a
resume reports for a command that started and never finished.

The journals themselves, and the rows they keep (`JournalEntry`: store/journal_rows.py), live
in `store/` (SQL in the session's database, or a LangGraph store under the server); this is what
they have in common with the code that runs the calls.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any, Protocol

from bashgraph.graph.partial_output import Partial
from bashgraph.graph.store.journal_rows import JournalEntry
from bashgraph.tools.results import CommandResult, SpawnErrorKind, spawn_failure
from bashgraph.tools.runner.reaper import sweep

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
    what a cancelled run recorded (graph/partial_output.py): how long it ran, what it printed."""
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
