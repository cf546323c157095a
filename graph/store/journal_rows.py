"""What a journal keeps: a call's entry (`JournalEntry`), a background job's row (`JobRow`), the
job rows' contract (`JobJournal`), and a fork's share of its source's job ids.

The journals that keep them live here in the store (SQL: journal.py; a LangGraph store:
store_journal.py); the graph core reads and writes them through these types and the `Journal`
protocol of graph/call_journal.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bashgraph.tools import CommandResult

#: How a fork's journal records the jobs of the thread it was forked from (`note_source_jobs`).
FORK_SOURCE = "started by the thread this one was forked from:"


@dataclass(frozen=True)
class JournalEntry:
    """What the journal knows of one call: when it started and, if it finished, its result."""

    command: str
    started_at: float
    result: CommandResult | None = None
    marker: str | None = None
    """The value of `CALL_MARKER_VAR` in the command's environment (None in old rows)."""
    host: str | None = None
    """The host it started on: only there can its leftover processes be found."""


@dataclass(frozen=True)
class JobRow:
    """A job as the journal knows it."""

    job_id: str
    command: str
    marker: str
    owner: str
    ended: str | None  # why it ended (None: never recorded as ended)


@runtime_checkable
class JobJournal(Protocol):
    """The journal's job rows (graph/store/journal.py); a journal without them records no jobs."""

    def job_started(self, thread_id: str, row: JobRow) -> None: ...

    def job_ended(self, thread_id: str, job_id: str, why: str) -> None: ...

    def job_rows(self, thread_id: str) -> list[JobRow]: ...


def note_source_jobs(journal: object, source: str, fork: str) -> None:
    """Give a new fork the job ids of its source as ended jobs it does not own: its own jobs are
    numbered on from them (one id never names two jobs in one conversation), and asking for one
    of them is an args error that says whose it is. Written in one transaction, already ended,
    with a marker no process carries: nothing is ever swept for them."""
    if not isinstance(journal, JobJournal) or not hasattr(journal, "jobs_inherited"):
        return
    inherited = [
        # A fork of a fork: a job the source had from its own source keeps naming that one.
        JobRow(row.job_id, row.command, f"fork-{uuid.uuid4().hex}", "",
               row.ended if row.ended and row.ended.startswith(FORK_SOURCE) else f"{FORK_SOURCE} {source}")
        for row in journal.job_rows(source)
    ]
    if inherited:
        journal.jobs_inherited(fork, inherited)
