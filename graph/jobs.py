"""Background jobs in the graph: each run's job table, the job tools, and stopping them all.

Every job belongs to the run (the thread) whose `bash` call started it. `RunJobs` holds one
`JobTable` per thread and:

* starts a job (`bash` with `background: true`) on one long-lived thread of its own, after the
  journal recorded it (so a job never runs unrecorded; the sandbox's `--die-with-parent` then
  follows that thread, which lives as long as the process);
* answers `bash_output` and `bash_kill`;
* stops every job of a run when the run ends: done, failed (step limit included), aborted, an
  environment fault — the nodes that set a final status call `end_run` — and when the process
  stops serving it: Ctrl-C (the session closes, `close` stops everything), a crash of the run,
  the interpreter's exit;
* on the first call of a thread after this process took its lock (a session calls `forget`),
  `recover` sweeps the jobs of a worker that died (a crash, `kill -9`): every process carrying
  such a job's marker is stopped and the job is recorded as interrupted. Asked about later,
  it reads as `spawn_error/interrupted`; it is never started again.

A thread paused for a person keeps its jobs while the process that paused it lives (the CLI,
asking on the terminal). When that process exits, they are stopped with it; a later resume finds
them recorded as stopped and answers `spawn_error/interrupted` about them. While it lives and
another process resumes the thread, a job is never reported stopped while it runs: `bash_output`
answers that the job runs in that process (an args error: its output is not readable here), and
`bash_kill` stops it for real by its marker and records so.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bashgraph.graph.store.journal_rows import FORK_SOURCE, JobJournal, JobRow
from bashgraph.tools import (
    KILL_TOOL_NAME,
    CommandResult,
    Outcome,
    SpawnErrorKind,
    args_error,
    clip,
    spawn_failure,
    unknown_job,
)
from bashgraph.tools.jobs import Job, JobRequest, JobTable, started_result, sweep_marker

#: Why a job was stopped, as its journal row and the model read it.
RUN_ENDED = "the run ended"
WORKER_GONE = "the worker process that ran it stopped"
#: Live tail of a job's output shown per read (the model's result has the capped whole).
EVENT_TAIL_CHARS = 2048
_T = TypeVar("_T")


class RunJobs:
    """The background jobs of every run one Executor serves, keyed by thread.

    Executors sharing a journal share their jobs (`for_journal`): a graph rebuilt for the same
    session (the CLI rebuilds it to ask a person) sees the jobs the first one started.
    """

    @classmethod
    def for_journal(cls, limit: int, grace: float, journal: object | None) -> RunJobs:
        with _SHARED_LOCK:
            jobs = getattr(journal, _SHARED_ATTRIBUTE, None)
            if not isinstance(jobs, cls):
                jobs = cls(limit, grace, journal)
                # Kept on the journal, so both live exactly as long; a journal that takes no
                # attributes simply shares nothing.
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(journal, _SHARED_ATTRIBUTE, jobs)
            return jobs

    def __init__(self, limit: int, grace: float, journal: object | None) -> None:
        self.limit = limit
        self.grace = grace
        self.journal = journal if isinstance(journal, JobJournal) else None
        self._tables: dict[str, JobTable] = {}
        self._recovered: set[str] = set()
        self._numbers: dict[str, int] = {}  # the last job number given per thread
        self._lock = threading.Lock()
        self._ended_jobs: weakref.WeakSet[Job] = weakref.WeakSet()  # end already recorded
        # Without a `close()`: stopped when nothing uses them any more, or at the interpreter's exit.
        weakref.finalize(self, _stop_tables, self._tables)

    def _table(self, thread: str) -> JobTable:
        with self._lock:
            table = self._tables.get(thread)
            if table is None:
                table = self._tables[thread] = JobTable(self.limit, self.grace)
            return table

    # -- start ------------------------------------------------------------------------------
    def start(self, request: JobRequest, thread: str | None, call_id: str) -> Answer:
        """Start a job for `thread` (blocking: runs on the spawner thread); the call's answer."""
        job_id = self._next_id(thread)

        def record(marker: str) -> None:
            if self.journal is not None and thread is not None:
                row = JobRow(job_id, request.command, marker, owner_token(), None)
                self.journal.job_started(thread, row)

        started = _SPAWNER.call(lambda: self._table(thread or "").start(request, job_id, record))
        if isinstance(started, CommandResult):
            return Answer(started)
        event = {"event": "job_start", "call_id": call_id, "job_id": job_id,
                 "command": request.command, "pid": started.pid}
        return Answer(started_result(started), [event])

    def _next_id(self, thread: str | None) -> str:
        """`job-N`: numbered per thread, on from the jobs the journal already holds."""
        key = thread or ""
        with self._lock:
            if key not in self._numbers:
                known = self.journal.job_rows(key) if self.journal is not None and thread else []
                # On from the highest: a refused start leaves a gap, so counting rows would
                # give an id that is taken.
                self._numbers[key] = max((_job_number(row.job_id) for row in known), default=0)
            self._numbers[key] += 1
            return f"job-{self._numbers[key]}"

    # -- bash_output / bash_kill --------------------------------------------------------------
    def answer(self, tool: str, job_id: str, thread: str | None, max_chars: int) -> Answer:
        """The answer to `bash_output` or `bash_kill` about `job_id` (blocking)."""
        self.recover(thread)
        table = self._table(thread or "")
        job = table.get(job_id)
        if job is None:
            row = self._row(thread, job_id)
            holder = _holder(row)
            if row is not None and holder is not None:
                return self._held_elsewhere(tool, thread, row, holder)
            return Answer(self._unknown(job_id, thread, table.ids()))
        if tool == KILL_TOOL_NAME:
            # Also after the shell exited: what it started in the background may still run.
            job.stop(self.grace, "bash_kill")
        result = job.read(max_chars)
        events = _output_events(job, result)
        if not job.running:
            events += self._ended(thread, job, job.state())
        return Answer(result, events)

    def _unknown(self, job_id: str, thread: str | None, known: list[str]) -> CommandResult:
        row = self._row(thread, job_id)
        if row is None:
            return unknown_job(job_id, known)
        if row.ended and row.ended.startswith(FORK_SOURCE):
            source = row.ended.removeprefix(FORK_SOURCE).strip()
            return args_error(f"job {job_id!r} was started by thread {source}, which this thread was "
                              "forked from (directly or through other forks); a fork does not own "
                              "its source's jobs (start the command again here if it is needed)")
        if row.ended and row.ended.startswith(RUN_ENDED):
            return args_error(f"job {job_id!r} belonged to an earlier run of this thread and was "
                              "stopped when that run ended")
        return spawn_failure(
            SpawnErrorKind.INTERRUPTED, row.command,
            f"job {job_id} is gone: {row.ended or WORKER_GONE}; it was stopped and is not "
            "started again")

    def _held_elsewhere(self, tool: str, thread: str | None, row: JobRow, holder: int) -> Answer:
        """A job that another live process started and still holds (it paused the thread, this
        one resumed it): `bash_output` says it runs there; `bash_kill` stops it for real, by
        its marker, which only its processes carry."""
        where = f"process {holder}, which started it and still holds it"
        if tool != KILL_TOOL_NAME:
            held = {"event": "job_held", "job_id": row.job_id, "pid": holder,
                    "state": f"still running in {where}"}  # for the person watching
            return Answer(args_error(
                f"job {row.job_id} is still running in {where}: this process cannot read its "
                "output; bash_kill stops it", row.command), [held])
        count = sweep_marker(row.marker, self.grace)
        if self.journal is not None and thread is not None:
            self.journal.job_ended(thread, row.job_id, f"stopped by bash_kill in process "
                                                       f"{os.getpid()}; it ran in {where}")
        state = "stopped (bash_kill)"
        result = CommandResult(
            outcome=Outcome.OK, command=row.command, stdout=f"[job {row.job_id}: {state}]\n",
            detail=f"job {row.job_id} {state}: it ran in {where}; {count} of its processes "
                   "were stopped; its output stays with that process")
        return Answer(result, [{"event": "job_end", "job_id": row.job_id, "state": state,
                                "exit_code": None, "signal": None}])

    def _row(self, thread: str | None, job_id: str) -> JobRow | None:
        if self.journal is None or thread is None:
            return None
        return next((row for row in self.journal.job_rows(thread) if row.job_id == job_id), None)

    # -- ending -----------------------------------------------------------------------------
    def live(self, thread: str) -> list[str]:
        """The jobs still running in `thread`, one line each (what a compaction summary names)."""
        with self._lock:
            table = self._tables.get(thread)
        jobs = table.running() if table is not None else []
        return [f"{job.job_id} (pid {job.pid}) `{clip(job.command, 200)}`" for job in jobs]

    def end_run(self, thread: str | None, why: str = RUN_ENDED) -> list[dict[str, Any]]:
        """Stop every job of `thread`'s run (blocking: up to the grace period per job); the
        `job_end` events of the jobs whose end was not reported yet."""
        with self._lock:
            table = self._tables.pop(thread or "", None)
        events: list[dict[str, Any]] = []
        for job in table.stop_all(why) if table is not None else []:
            # "the run ended" for a job it stopped; "the run ended; exited 0" for one that was over.
            events += self._ended(thread, job, why if job.stopped_by == why else f"{why}; {job.state()}")
        return events

    def close(self, why: str = WORKER_GONE) -> None:
        """Stop the jobs of every run (the session ends, the process exits)."""
        with self._lock:
            threads = list(self._tables)
        for thread in threads:
            self.end_run(thread or None, why=why)

    def forget(self, thread: str) -> None:
        """This process takes `thread` again (its lock): another worker may have run it since,
        started jobs (so the next number is read from the journal again) and died leaving them
        (so the sweep runs again). This process's own jobs of the thread are kept."""
        with self._lock:
            self._numbers.pop(thread, None)
            self._recovered.discard(thread)

    def needs_recovery(self, thread: str | None) -> bool:
        return thread is not None and self.journal is not None and thread not in self._recovered

    def recover(self, thread: str | None) -> None:
        """Once per hold of the thread: stop the jobs a dead worker left, record them as interrupted."""
        if not self.needs_recovery(thread):
            return
        assert thread is not None
        assert self.journal is not None
        self._recovered.add(thread)
        for row in self.journal.job_rows(thread):
            if row.ended is None and not owner_alive(row.owner):
                sweep_marker(row.marker, self.grace)
                self.journal.job_ended(thread, row.job_id, WORKER_GONE)

    def _ended(self, thread: str | None, job: Job, why: str) -> list[dict[str, Any]]:
        """Record a job's end once (journal row and `job_end` event)."""
        with self._lock:
            if job in self._ended_jobs:
                return []
            self._ended_jobs.add(job)
        if self.journal is not None and thread is not None:
            self.journal.job_ended(thread, job.job_id, why)
        code = job.returncode
        return [{"event": "job_end", "job_id": job.job_id, "state": job.state(),
                 "exit_code": code if code is not None and code >= 0 else None,
                 "signal": -code if code is not None and code < 0 else None}]


def _job_number(job_id: str) -> int:
    """N of `job-N`; 0 for an id of any other shape."""
    number = job_id.removeprefix("job-")
    return int(number) if number.isdigit() else 0


def _stop_tables(tables: dict[str, JobTable]) -> None:
    for table in list(tables.values()):
        table.stop_all(WORKER_GONE)


@dataclass
class Answer:
    """A job call's result, and the stream events it produced (emitted by the caller's thread)."""

    result: CommandResult
    events: list[dict[str, Any]] = field(default_factory=list)


def _output_events(job: Job, result: CommandResult) -> list[dict[str, Any]]:
    """The tail of what a read returned, per stream, for live display."""
    events = []
    for stream, text in (("stdout", result.stdout.partition("\n")[2]), ("stderr", result.stderr)):
        if text.strip():
            events.append({"event": "job_output", "job_id": job.job_id, "stream": stream,
                           "text": text[-EVENT_TAIL_CHARS:]})
    return events


# ----------------------------------------------------------------------------- owners


def owner_token() -> str:
    """This process, named so a later process can tell whether it still runs: boot, pid, start."""
    return f"{_boot_id()}:{os.getpid()}:{_start_time(os.getpid())}"


def _holder(row: JobRow | None) -> int | None:
    """The pid of the live process other than this one that holds a running job, else None."""
    if row is None or row.ended is not None or row.owner == owner_token() or not owner_alive(row.owner):
        return None
    return int(row.owner.split(":")[1])


def owner_alive(token: str) -> bool:
    """True when the process `owner_token` named still runs (same boot, same pid and start)."""
    boot, _, rest = token.partition(":")
    pid, _, start = rest.partition(":")
    if boot != _boot_id() or not pid.isdigit():
        return False
    return _start_time(int(pid)) == start and start != ""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return ""
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


# ----------------------------------------------------------------------------- spawner


class _Spawner:
    """One daemon thread that starts every job: it lives as long as the process, so a sandboxed
    job (bubblewrap's `--die-with-parent` follows the spawning thread) dies with the process,
    never with a short-lived worker thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, func: Callable[[], _T]) -> _T:
        if threading.current_thread() is self._thread:
            return func()
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="bashgraph-jobs",
                                                daemon=True)
                self._thread.start()
        self._queue.put((func, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            func, future = self._queue.get()
            try:
                future.set_result(func())
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _Spawner()
_SHARED_ATTRIBUTE = "_bashgraph_run_jobs"
_SHARED_LOCK = threading.Lock()
